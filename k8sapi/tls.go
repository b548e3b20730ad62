package k8sapi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// certSource supplies the current client certificate, one with no
// Certificate for none; the exec credentials and certFiles implement it.
type certSource interface {
	clientCertificate(ctx context.Context) (*tls.Certificate, error)
}

// withClientCerts returns base, which presents a client certificate given
// as data alone, or a certTransport over it when the Config names a
// certificate or key file or an exec plugin may return a certificate, with
// creds extended to reload the files after a 401. A certificate
// of the Config, which c.check found whole, is read now, so that a bad one
// fails early. Over plain http:// no certificate is ever sent, and none
// is read.
func withClientCerts(c *Config, creds credentials, base *http.Transport) (http.RoundTripper, credentials, error) {
	src, _ := creds.(certSource) // an exec plugin's, or nil
	switch {
	case plainHTTP(c.Host):
		return base, creds, nil
	case c.CertFile != "" || len(c.CertData) > 0:
		f := &certFiles{credentials: creds}
		f.cert.now = time.Now
		f.cert.read = func() (*tls.Certificate, error) {
			return readKeyPair(c)
		}
		cert, err := f.cert.get()
		if err != nil {
			return nil, nil, err
		}
		if len(c.CertData) > 0 && len(c.KeyData) > 0 {
			// No file to read again: the TLS config presents it, with no
			// work per request.
			base.TLSClientConfig.Certificates = []tls.Certificate{*cert}
			return base, creds, nil
		}
		return &certTransport{certs: f, base: base}, f, nil
	case src == nil:
		return base, creds, nil
	}
	return &certTransport{certs: src, base: base}, creds, nil
}

// certFiles extends credentials with the Config's client certificate and
// key, from files or data (see fileValue), so that a 401 also makes the
// files be read again.
type certFiles struct {
	credentials
	cert fileValue[*tls.Certificate]
}

func (f *certFiles) clientCertificate(context.Context) (*tls.Certificate, error) {
	return f.cert.get()
}

func (f *certFiles) refresh() bool {
	creds := f.credentials.refresh()
	return f.cert.refresh() || creds
}

// readKeyPair parses c's client certificate and key, each from its data
// or else its file, of at most maxPEMFileSize bytes. Its errors name the
// files, or the data fields, never their content.
func readKeyPair(c *Config) (*tls.Certificate, error) {
	pems := [2][]byte{c.CertData, c.KeyData}
	names := [2]string{"CertData", "KeyData"}
	for i, path := range []string{c.CertFile, c.KeyFile} {
		if len(pems[i]) > 0 {
			continue
		}
		names[i] = [2]string{"certificate", "key"}[i] + " file " + path
		b, err := readFileLimit(path, maxPEMFileSize)
		if err != nil {
			return nil, fmt.Errorf("k8sapi: TLS: client certificate: %s: %w", names[i], pathCause(err))
		}
		pems[i] = b
	}
	cert, err := tls.X509KeyPair(pems[0], pems[1])
	if err != nil {
		return nil, fmt.Errorf("k8sapi: TLS: client certificate: %s and %s: %w", names[0], names[1], err)
	}
	return &cert, nil
}

// certPool builds a pool holding only the certificates in pemData. Its
// errors lack the package prefix, for the caller to add.
func certPool(pemData []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	n := 0
	for block, rest := pem.Decode(pemData); block != nil; block, rest = pem.Decode(rest) {
		if block.Type != "CERTIFICATE" {
			continue
		}
		n++
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("CA certificate %d: %w", n, err)
		}
		pool.AddCert(cert)
	}
	if n == 0 {
		return nil, errors.New("the CA data holds no PEM certificate")
	}
	return pool, nil
}
