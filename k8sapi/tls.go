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

// withClientCerts returns base, or a certTransport over it when the client
// certificate may change over time, with creds extended to reload it after
// a 401. Files, which c.check found in pairs, are read now, so that a bad
// pair fails early. Over plain http:// no certificate is ever sent, and
// none is read.
func withClientCerts(c *Config, creds credentials, base *http.Transport) (http.RoundTripper, credentials, error) {
	src, _ := creds.(certSource) // an exec plugin's, or nil
	switch {
	case plainHTTP(c.Host):
		return base, creds, nil
	case c.CertFile != "":
		f := &certFiles{credentials: creds}
		f.cert.now = time.Now
		f.cert.read = func() (*tls.Certificate, error) {
			return readKeyPair(c.CertFile, c.KeyFile)
		}
		if _, err := f.cert.get(); err != nil {
			return nil, nil, err
		}
		return &certTransport{certs: f, base: base}, f, nil
	case len(c.CertData) > 0 || src == nil:
		return base, creds, nil
	}
	return &certTransport{certs: src, base: base}, creds, nil
}

// certFiles extends credentials with a client certificate and key read
// from files (see fileValue), so that a 401 also makes the files be read
// again.
type certFiles struct {
	credentials
	cert fileValue[*tls.Certificate]
}

func (f *certFiles) clientCertificate(context.Context) (*tls.Certificate, error) {
	return f.cert.get()
}

func (f *certFiles) refresh() bool {
	f.credentials.refresh()
	return f.cert.refresh()
}

// readKeyPair reads and parses a certificate and key file, each of at
// most maxPEMFileSize bytes. Its errors name the files, never their
// content.
func readKeyPair(certPath, keyPath string) (*tls.Certificate, error) {
	var pems [2][]byte
	for i, path := range []string{certPath, keyPath} {
		b, err := readFileLimit(path, maxPEMFileSize)
		if err != nil {
			return nil, fmt.Errorf("k8sapi: TLS: client certificate: %s: %w", path, pathCause(err))
		}
		pems[i] = b
	}
	cert, err := tls.X509KeyPair(pems[0], pems[1])
	if err != nil {
		return nil, fmt.Errorf("k8sapi: TLS: client certificate: %s and %s: %w", certPath, keyPath, err)
	}
	return &cert, nil
}

// newTLSConfig builds the client TLS configuration of c, which c.check
// accepted: TLS 1.2 or later, the configured CA (system roots when none),
// ServerName, Insecure, and a client certificate from CertData/KeyData.
// Errors never include key material.
func newTLSConfig(c *Config) (*tls.Config, error) {
	tc := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         c.ServerName,
		InsecureSkipVerify: c.Insecure,
	}
	if len(c.CAData) > 0 {
		pool, err := certPool(c.CAData)
		if err != nil {
			return nil, fmt.Errorf("k8sapi: TLS: %w", err)
		}
		tc.RootCAs = pool
	}
	// Certificates from files or an exec plugin are set per transport:
	// see certTransport.
	if c.CertFile == "" && len(c.CertData) > 0 {
		cert, err := tls.X509KeyPair(c.CertData, c.KeyData)
		if err != nil {
			return nil, fmt.Errorf("k8sapi: TLS: client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
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
