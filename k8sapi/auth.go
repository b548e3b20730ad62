package k8sapi

import (
	"context"
	"crypto/tls"
	"net/http"
)

// credentials authenticates requests. Implementations are safe for
// concurrent use and never put a secret in an error string.
type credentials interface {
	// authorize sets the request's Authorization header, if any. req is a
	// clone the caller owns.
	authorize(ctx context.Context, req *http.Request) error
	// refresh is called after a 401. It makes the next authorize re-read
	// the token file or rerun the exec plugin, and reports whether that
	// could change anything, so that one retry is worthwhile.
	refresh() bool
}

// newCredentials returns the credentials c describes. STUB: replaced by the
// real implementation.
func newCredentials(c *Config) (credentials, error) { return noCredentials{}, nil }

// newTLSConfig builds the client TLS configuration: TLS 1.2 or later, the
// configured CA (system roots when none), ServerName, Insecure, and a client
// certificate from CertData/KeyData or from the exec plugin via creds.
// STUB: replaced by the real implementation.
func newTLSConfig(c *Config, creds credentials) (*tls.Config, error) {
	return &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName, InsecureSkipVerify: c.Insecure}, nil
}

type noCredentials struct{}

func (noCredentials) authorize(context.Context, *http.Request) error { return nil }
func (noCredentials) refresh() bool                                   { return false }
