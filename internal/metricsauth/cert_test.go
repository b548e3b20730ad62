package metricsauth

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writePair writes a fresh self-signed pair for host into dir.
func writePair(t *testing.T, dir, host string, mtime time.Time) *x509.Certificate {
	t.Helper()
	cert, err := selfSigned([]string{host}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	key, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	crtPath, keyPath := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	os.WriteFile(crtPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), 0o600)
	os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}), 0o600)
	for _, p := range []string{crtPath, keyPath} {
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	leaf, _ := x509.ParseCertificate(cert.Certificate[0])
	return leaf
}

func served(t *testing.T, c *Certificates) *x509.Certificate {
	t.Helper()
	cert, err := c.TLSConfig().GetCertificate(&tls.ClientHelloInfo{})
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf
}

func TestSelfSignedCertificate(t *testing.T) {
	c, err := NewCertificates("", "widget-operator-7d9f", "10.1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	leaf := served(t, c)
	for _, host := range []string{"widget-operator-7d9f", "localhost", "10.1.2.3", "127.0.0.1"} {
		if err := leaf.VerifyHostname(host); err != nil {
			t.Errorf("not valid for %s: %v", host, err)
		}
	}
	if d := time.Until(leaf.NotAfter); d < 364*24*time.Hour {
		t.Errorf("valid for %v only", d)
	}
	if cfg := c.TLSConfig(); cfg.MinVersion != tls.VersionTLS12 || len(cfg.NextProtos) != 1 || cfg.NextProtos[0] != "http/1.1" {
		t.Errorf("TLS config: min version %x, protocols %v", cfg.MinVersion, cfg.NextProtos)
	}
}

func TestCertificatesFromFolderAreReloaded(t *testing.T) {
	dir := t.TempDir()
	first := writePair(t, dir, "first.example", time.Now().Add(-time.Hour))
	c, err := NewCertificates(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := served(t, c); !got.Equal(first) {
		t.Fatal("not the folder's certificate")
	}
	second := writePair(t, dir, "second.example", time.Now())
	if got := served(t, c); !got.Equal(first) {
		t.Fatal("the folder was read again before the recheck period")
	}
	c.mu.Lock()
	c.checked = time.Now().Add(-recheck) // as if a minute had passed
	c.mu.Unlock()
	if got := served(t, c); !got.Equal(second) {
		t.Fatal("the new certificate was not picked up")
	}
	// A broken pair leaves the last good one in place.
	os.WriteFile(filepath.Join(dir, "tls.key"), []byte("garbage"), 0o600)
	c.mu.Lock()
	c.checked = time.Now().Add(-recheck)
	c.mu.Unlock()
	if got := served(t, c); !got.Equal(second) {
		t.Fatal("a broken pair replaced the certificate")
	}
}

func TestCertificateErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := NewCertificates(dir); err == nil || !strings.HasPrefix(err.Error(), "metricsauth: ") {
		t.Errorf("empty folder: %v", err)
	}
	writePair(t, dir, "x", time.Now())
	big := filepath.Join(dir, "tls.crt")
	if err := os.WriteFile(big, make([]byte, maxPEMSize+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := NewCertificates(dir); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("oversized tls.crt: %v", err)
	}
}
