package metricsauth

import (
	"cmp"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// maxPEMSize bounds the certificate and key files read.
const maxPEMSize = 1 << 20

// recheck is how often the files of a certificate folder are read again
// for a new certificate. A self-signed certificate is valid for
// selfSignedLife and made again every selfSignedRenew, so that the one
// served always has six days left.
const (
	recheck         = time.Minute
	selfSignedLife  = 7 * 24 * time.Hour
	selfSignedRenew = 24 * time.Hour
)

// Certificates holds an endpoint's serving certificate: tls.crt and tls.key
// from a folder (as a kubernetes.io/tls Secret mounts them), read again
// every minute so that a renewed pair is served, or a self-signed one made
// at start and again every day. It is safe for concurrent use.
type Certificates struct {
	load  func(now time.Time) (*tls.Certificate, error)
	every time.Duration // how long a loaded certificate is served
	log   *slog.Logger

	mu     sync.Mutex
	cert   *tls.Certificate
	due    time.Time // when to load again
	failed string    // the last load error logged, "" since a success
}

// NewCertificates loads tls.crt and tls.key from dir, or, when dir is
// empty, makes a self-signed ECDSA P-256 certificate valid for a week for
// hosts (DNS names or IP addresses), localhost and the loopback addresses.
// A later load that fails is logged to log, once until one succeeds or
// fails otherwise, and the last good certificate stays; nil means no log.
func NewCertificates(dir string, log *slog.Logger, hosts ...string) (*Certificates, error) {
	c := &Certificates{load: func(time.Time) (*tls.Certificate, error) { return loadPair(dir) }, every: recheck,
		log: cmp.Or(log, slog.New(slog.DiscardHandler))}
	if dir == "" {
		c.load = func(now time.Time) (*tls.Certificate, error) { return selfSigned(hosts, now) }
		c.every = selfSignedRenew
	}
	now := time.Now()
	cert, err := c.load(now)
	if err != nil {
		return nil, err
	}
	c.cert, c.due = cert, now.Add(c.every)
	return c, nil
}

// TLSConfig returns a server configuration that serves the certificate,
// TLS 1.2 or later, HTTP/1.1 only.
func (c *Certificates) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		NextProtos:     []string{"http/1.1"},
		GetCertificate: c.get,
	}
}

// get returns the certificate, first loading it again if it is due. A
// load that fails leaves the current certificate in place.
func (c *Certificates) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now := time.Now(); !now.Before(c.due) {
		c.due = now.Add(c.every)
		cert, err := c.load(now)
		if err == nil {
			c.cert, c.failed = cert, ""
		} else if err.Error() != c.failed {
			c.failed = err.Error()
			c.log.Warn("metricsauth: loading the serving certificate failed; serving the last good one", "err", err)
		}
	}
	return c.cert, nil
}

func loadPair(dir string) (*tls.Certificate, error) {
	crt, err := readFile(filepath.Join(dir, "tls.crt"))
	if err != nil {
		return nil, fmt.Errorf("metricsauth: certificate: %w", err)
	}
	key, err := readFile(filepath.Join(dir, "tls.key"))
	if err != nil {
		return nil, fmt.Errorf("metricsauth: certificate: %w", err)
	}
	cert, err := tls.X509KeyPair(crt, key)
	if err != nil {
		return nil, fmt.Errorf("metricsauth: certificate in %s: %w", dir, err)
	}
	return &cert, nil
}

// readFile reads at most maxPEMSize bytes; a larger file is an error.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxPEMSize+1))
	if err == nil && len(b) > maxPEMSize {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxPEMSize)
	}
	return b, err
}

func selfSigned(hosts []string, now time.Time) (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("metricsauth: self-signed certificate: %w", err)
	}
	// A nil SerialNumber makes CreateCertificate choose a random one.
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "widget-operator metrics"},
		NotBefore:   now.Add(-time.Hour),
		NotAfter:    now.Add(selfSignedLife),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("metricsauth: self-signed certificate: %w", err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
