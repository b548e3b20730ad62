package k8sapi

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
)

// certPEMOf returns the PEM of a test server's certificate.
func certPEMOf(srv *httptest.Server) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

// newTLSConfig returns the TLS configuration newTransport builds from c.
func newTLSConfig(c *Config) (*tls.Config, error) {
	tr, err := newTransport(c)
	if err != nil {
		return nil, err
	}
	return tr.TLSClientConfig, nil
}

func TestTLSConfig(t *testing.T) {
	certPEM, keyPEM := selfSignedPair(t, "client")
	tc, err := newTLSConfig(&Config{ServerName: "api.internal", CAData: certPEM, CertData: certPEM, KeyData: keyPEM})
	if err != nil {
		t.Fatal(err)
	}
	// The client certificate is set per transport: see certTransport.
	if tc.MinVersion != tls.VersionTLS12 || tc.ServerName != "api.internal" || tc.InsecureSkipVerify || tc.RootCAs == nil || len(tc.Certificates) != 0 || tc.GetClientCertificate != nil {
		t.Errorf("got %+v", tc)
	}
	// No CA: the system roots (nil pool).
	tc, err = newTLSConfig(&Config{Insecure: true})
	if err != nil || tc.RootCAs != nil || !tc.InsecureSkipVerify {
		t.Errorf("insecure: %+v, %v", tc, err)
	}
}

func TestTLSConfigErrors(t *testing.T) {
	certPEM, _ := selfSignedPair(t, "client")
	_, otherKey := selfSignedPair(t, "other")
	tests := []struct {
		name string
		cfg  Config
		msg  string
	}{
		{"CA junk", Config{CAData: []byte("junk")}, "no PEM certificate"},
		{"CA bad DER", Config{CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1, 2, 3}})}, "CA certificate 1"},
		{"mismatched key", Config{CertData: certPEM, KeyData: otherKey}, "client certificate: CertData and KeyData: tls: private key does not match public key"},
		{"key not PEM", Config{CertData: certPEM, KeyData: []byte("junk")}, "failed to find any PEM data in key input"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Host = "https://h"
			_, err := New(&tt.cfg)
			if err == nil || !strings.HasPrefix(err.Error(), "k8sapi: TLS: ") || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %v, want %q", err, tt.msg)
			}
		})
	}
}

// TestConfigCheckTLS: New refuses contradictory TLS settings and half a
// client certificate, with the text a kubeconfig's error shares.
func TestConfigCheckTLS(t *testing.T) {
	certPEM, keyPEM := selfSignedPair(t, "client")
	const pair = "k8sapi: config: a client certificate needs both a certificate and a key: CertFile or CertData, and KeyFile or KeyData (client-certificate and client-key, or their -data)"
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"insecure with CA", Config{Insecure: true, CAData: certPEM}, "k8sapi: config: Insecure and CAData or CAFile cannot both be set (insecure-skip-tls-verify and certificate-authority)"},
		{"cert without key", Config{CertData: certPEM}, pair},
		{"key without cert", Config{KeyData: keyPEM}, pair},
		{"cert file without key file", Config{CertFile: "c.pem"}, pair},
		{"key file without cert file", Config{KeyFile: "k.pem"}, pair},
	}
	for _, tt := range tests {
		tt.cfg.Host = "https://h"
		if _, err := New(&tt.cfg); err == nil || err.Error() != tt.want {
			t.Errorf("%s: error %v, want %q", tt.name, err, tt.want)
		}
	}
}

// TestTLSVerifiesAgainstCAOnly checks that a CA pool holds only the given
// CA: a server with another certificate is rejected.
func TestTLSVerifiesAgainstCAOnly(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the rejected handshake
	srv.StartTLS()
	defer srv.Close()
	get := func(ca []byte) error {
		tc, err := newTLSConfig(&Config{CAData: ca})
		if err != nil {
			t.Fatal(err)
		}
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}}
		defer c.CloseIdleConnections()
		resp, err := c.Get(srv.URL)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get(certPEMOf(srv)); err != nil {
		t.Errorf("with the server's CA: %v", err)
	}
	other, _ := selfSignedPair(t, "other-ca")
	if err := get(other); err == nil {
		t.Error("a server outside the CA was accepted")
	}
}

// TestClientCertHalves: the certificate and the key each come from its
// data or else its file, in any mix, and the pair is presented to the
// server. After a 401 the request is sent once more only when a file may
// have changed: data alone does not.
func TestClientCertHalves(t *testing.T) {
	certPEM, keyPEM := selfSignedPair(t, "a")
	otherCert, otherKey := selfSignedPair(t, "b")
	dir := writeFiles(t, t.TempDir(), map[string]string{
		"c.pem": string(certPEM), "k.pem": string(keyPEM),
		"other-c.pem": string(otherCert), "other-k.pem": string(otherKey),
	})
	certFile, keyFile := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	srv := newCertServer(t, "a")
	for _, tt := range []struct {
		name    string
		cfg     Config
		refused int64 // 2 when the request is sent again after a 401
	}{
		{"data and data", Config{CertData: certPEM, KeyData: keyPEM}, 1},
		{"file and data", Config{CertFile: certFile, KeyData: keyPEM}, 2},
		{"data and file", Config{CertData: certPEM, KeyFile: keyFile}, 2},
		{"file and file", Config{CertFile: certFile, KeyFile: keyFile}, 2},
		{"data over file", Config{CertData: certPEM, KeyData: keyPEM,
			CertFile: filepath.Join(dir, "other-c.pem"), KeyFile: filepath.Join(dir, "other-k.pem")}, 1},
	} {
		tt.cfg.Host, tt.cfg.CAData = srv.URL, certPEMOf(srv.Server)
		c, err := New(&tt.cfg)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		srv.allow("a")
		if cn := presented(t, c); cn != "a" {
			t.Errorf("%s: presented %q, want a", tt.name, cn)
		}
		srv.allow("")
		refused := srv.refused.Load()
		if _, err := For[Deployment](c, Deployments).Get(context.Background(), "ns", "x", GetOptions{}); !IsUnauthorized(err) {
			t.Errorf("%s: %v, want 401", tt.name, err)
		}
		if n := srv.refused.Load() - refused; n != tt.refused {
			t.Errorf("%s: %d requests refused, want %d", tt.name, n, tt.refused)
		}
	}
}
