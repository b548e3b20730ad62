package k8sapi

import (
	"crypto/tls"
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// certPEMOf returns the PEM of a test server's certificate.
func certPEMOf(srv *httptest.Server) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

func TestTLSConfig(t *testing.T) {
	certPEM, keyPEM := selfSignedPair(t, "client")
	tc, err := newTLSConfig(&Config{ServerName: "api.internal", CAData: certPEM, CertData: certPEM, KeyData: keyPEM})
	if err != nil {
		t.Fatal(err)
	}
	if tc.MinVersion != tls.VersionTLS12 || tc.ServerName != "api.internal" || tc.InsecureSkipVerify || tc.RootCAs == nil || len(tc.Certificates) != 1 || tc.GetClientCertificate != nil {
		t.Errorf("got %+v", tc)
	}
	// No CA: the system roots (nil pool).
	tc, err = newTLSConfig(&Config{Insecure: true})
	if err != nil || tc.RootCAs != nil || !tc.InsecureSkipVerify {
		t.Errorf("insecure: %+v, %v", tc, err)
	}
}

func TestTLSConfigErrors(t *testing.T) {
	certPEM, keyPEM := selfSignedPair(t, "client")
	_, otherKey := selfSignedPair(t, "other")
	tests := []struct {
		name string
		cfg  Config
		msg  string
	}{
		{"insecure with CA", Config{Insecure: true, CAData: certPEM}, "Insecure and CAData"},
		{"CA junk", Config{CAData: []byte("junk")}, "no PEM certificate"},
		{"CA bad DER", Config{CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1, 2, 3}})}, "CA certificate 1"},
		{"cert without key", Config{CertData: certPEM}, "needs both"},
		{"key without cert", Config{KeyData: keyPEM}, "needs both"},
		{"mismatched key", Config{CertData: certPEM, KeyData: otherKey}, "private key does not match public key"},
		{"key not PEM", Config{CertData: certPEM, KeyData: []byte("junk")}, "failed to find any PEM data in key input"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := newTLSConfig(&tt.cfg)
			if err == nil || !strings.HasPrefix(err.Error(), "k8sapi: TLS: ") || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %v, want %q", err, tt.msg)
			}
		})
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
