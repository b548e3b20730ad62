package certs

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/asn1"
	"encoding/pem"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// writePair writes a fresh self-signed pair for host into dir.
func writePair(t *testing.T, dir, host string, mtime time.Time) *x509.Certificate {
	t.Helper()
	cert, err := selfSigned("widget-operator metrics", []string{host}, time.Now())
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
	c, err := New("", nil, "widget-operator metrics", "widget-operator-7d9f", "10.1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	leaf := served(t, c)
	for _, host := range []string{"widget-operator-7d9f", "localhost", "10.1.2.3", "127.0.0.1"} {
		if err := leaf.VerifyHostname(host); err != nil {
			t.Errorf("not valid for %s: %v", host, err)
		}
	}
	if d := time.Until(leaf.NotAfter); d < selfSignedLife-time.Minute || d > selfSignedLife {
		t.Errorf("valid for %v, want %v", d, selfSignedLife)
	}
	if err := leaf.CheckSignature(leaf.SignatureAlgorithm, leaf.RawTBSCertificate, leaf.Signature); err != nil {
		t.Errorf("signature: %v", err)
	}
	if leaf.KeyUsage != x509.KeyUsageDigitalSignature || len(leaf.ExtKeyUsage) != 1 || leaf.ExtKeyUsage[0] != x509.ExtKeyUsageServerAuth ||
		leaf.Subject.CommonName != "widget-operator metrics" || leaf.SerialNumber.Sign() <= 0 {
		t.Errorf("key usage %v, extended %v, subject %v, serial %v", leaf.KeyUsage, leaf.ExtKeyUsage, leaf.Subject, leaf.SerialNumber)
	}
	if cfg := c.TLSConfig(); cfg.MinVersion != tls.VersionTLS12 || len(cfg.NextProtos) != 1 || cfg.NextProtos[0] != "http/1.1" {
		t.Errorf("TLS config: min version %x, protocols %v", cfg.MinVersion, cfg.NextProtos)
	}
	// A client that trusts the certificate completes a handshake with it.
	roots := x509.NewCertPool()
	roots.AddCert(leaf)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", c.TLSConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if sc, err := ln.Accept(); err == nil {
			sc.(*tls.Conn).Handshake()
			sc.Close()
		}
	}()
	cc, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: roots, ServerName: "widget-operator-7d9f"})
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	cc.Close()
}

// TestDERLengths checks der's three length forms at their edges against
// encoding/asn1, which refuses a length not in its shortest form.
func TestDERLengths(t *testing.T) {
	for _, n := range []int{0, 127, 128, 255, 256, 65535} {
		var got []byte
		if rest, err := asn1.Unmarshal(der(0x04, make([]byte, n)), &got); err != nil || len(rest) != 0 || len(got) != n {
			t.Errorf("%d bytes: %d decoded, %d left, %v", n, len(got), len(rest), err)
		}
	}
}

// TestSelfSignedCertificateIsRenewed serves the self-signed certificate
// through a month of the fake clock, with handshakes a day and an hour
// apart: each is a new certificate with six days left, or more.
func TestSelfSignedCertificateIsRenewed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, err := New("", nil, "widget-operator metrics")
		if err != nil {
			t.Fatal(err)
		}
		first := served(t, c)
		time.Sleep(selfSignedRenew - time.Second)
		if !served(t, c).Equal(first) {
			t.Fatal("made again before a day had passed")
		}
		last := first
		for range 30 {
			time.Sleep(selfSignedRenew + time.Hour)
			leaf := served(t, c)
			if left := time.Until(leaf.NotAfter); left < selfSignedLife-selfSignedRenew {
				t.Fatalf("served with %v left", left)
			}
			if leaf.Equal(last) {
				t.Fatal("not made again after a day")
			}
			last = leaf
		}
	})
}

func TestCertificatesFromFolderAreReloaded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		first := writePair(t, dir, "first.example", time.Now().Add(-time.Hour))
		var logs strings.Builder
		c, err := New(dir, slog.New(slog.NewTextHandler(&logs, nil)), "widget-operator metrics")
		if err != nil {
			t.Fatal(err)
		}
		if got := served(t, c); !got.Equal(first) {
			t.Fatal("not the folder's certificate")
		}
		second := writePair(t, dir, "second.example", time.Now())
		time.Sleep(recheck - time.Second)
		if got := served(t, c); !got.Equal(first) {
			t.Fatal("the folder was read again before the recheck period")
		}
		time.Sleep(time.Second)
		if got := served(t, c); !got.Equal(second) {
			t.Fatal("the new certificate was not picked up")
		}
		// A broken pair leaves the last good one in place, and is logged
		// once, however many handshakes and rechecks see it.
		os.WriteFile(filepath.Join(dir, "tls.key"), []byte("garbage"), 0o600)
		for range 3 {
			time.Sleep(recheck)
			if got := served(t, c); !got.Equal(second) {
				t.Fatal("a broken pair replaced the certificate")
			}
			served(t, c)
		}
		if n := strings.Count(logs.String(), "level=WARN"); n != 1 || !strings.Contains(logs.String(), dir) {
			t.Fatalf("%d warnings for one broken pair:\n%s", n, logs.String())
		}
		// After a good pair, a broken one is news again.
		third := writePair(t, dir, "third.example", time.Now())
		time.Sleep(recheck)
		if got := served(t, c); !got.Equal(third) {
			t.Fatal("the repaired pair was not picked up")
		}
		os.WriteFile(filepath.Join(dir, "tls.key"), []byte("garbage"), 0o600)
		time.Sleep(recheck)
		served(t, c)
		if n := strings.Count(logs.String(), "level=WARN"); n != 2 {
			t.Fatalf("%d warnings, want 2:\n%s", n, logs.String())
		}
	})
}

func TestCertificateErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := New(dir, nil, "widget-operator metrics"); err == nil || !strings.HasPrefix(err.Error(), "certs: ") {
		t.Errorf("empty folder: %v", err)
	}
	writePair(t, dir, "x", time.Now())
	big := filepath.Join(dir, "tls.crt")
	if err := os.WriteFile(big, make([]byte, maxPEMSize+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(dir, nil, "widget-operator metrics"); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("oversized tls.crt: %v", err)
	}
}
