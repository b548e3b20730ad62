package k8sapi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
)

// certSource supplies a client certificate at handshake time; the exec
// credentials implement it.
type certSource interface {
	clientCertificate(ctx context.Context) (*tls.Certificate, error)
}

// newTLSConfig builds the client TLS configuration: TLS 1.2 or later, the
// configured CA (system roots when none), ServerName, Insecure, and a client
// certificate from CertData/KeyData or, failing that, from the exec plugin
// via creds. Errors never include key material.
func newTLSConfig(c *Config, creds credentials) (*tls.Config, error) {
	tc := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         c.ServerName,
		InsecureSkipVerify: c.Insecure,
	}
	if len(c.CAData) > 0 {
		if c.Insecure {
			return nil, errors.New("k8sapi: TLS: Insecure and CAData cannot both be set")
		}
		pool, err := certPool(c.CAData)
		if err != nil {
			return nil, err
		}
		tc.RootCAs = pool
	}
	switch {
	case len(c.CertData) > 0 || len(c.KeyData) > 0:
		if len(c.CertData) == 0 || len(c.KeyData) == 0 {
			return nil, errors.New("k8sapi: TLS: a client certificate needs both CertData and KeyData")
		}
		cert, err := keyPair(c.CertData, c.KeyData)
		if err != nil {
			return nil, fmt.Errorf("k8sapi: TLS: client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	default:
		if src, ok := creds.(certSource); ok {
			tc.GetClientCertificate = func(cri *tls.CertificateRequestInfo) (*tls.Certificate, error) {
				return src.clientCertificate(cri.Context())
			}
		}
	}
	return tc, nil
}

// certPool builds a pool holding only the certificates in pemData.
func certPool(pemData []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	n := 0
	for rest := pemData; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		n++
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("k8sapi: TLS: CA certificate %d: %w", n, err)
		}
		pool.AddCert(cert)
	}
	if n == 0 {
		return nil, errors.New("k8sapi: TLS: the CA data holds no PEM certificate")
	}
	return pool, nil
}

// keyPair parses a PEM certificate and key. Its errors come from
// crypto/tls, whose messages never quote the key.
func keyPair(certPEM, keyPEM []byte) (tls.Certificate, error) {
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, err
	}
	return cert, nil
}
