// Package certs provides the serving certificate of the manager's HTTPS
// endpoints, /metrics and the webhook server (manager/webhook): tls.crt
// and tls.key from a folder, read again as they change, or a self-signed
// one.
package certs

import (
	"cmp"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
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

// New loads tls.crt and tls.key from dir, or, when dir is
// empty, makes a self-signed Ed25519 certificate valid for a week for
// hosts (DNS names or IP addresses), localhost and the loopback addresses.
// A later load that fails is logged to log, once until one succeeds or
// fails otherwise, and the last good certificate stays; nil means no log.
func New(dir string, log *slog.Logger, subject string, hosts ...string) (*Certificates, error) {
	c := &Certificates{load: func(time.Time) (*tls.Certificate, error) { return loadPair(dir) }, every: recheck, log: log}
	if dir == "" {
		c.load, c.every = func(now time.Time) (*tls.Certificate, error) { return selfSigned(subject, hosts, now) }, selfSignedRenew
	}
	if err := c.reload(time.Now()); err != nil {
		return nil, err
	}
	return c, nil
}

// reload loads the certificate again, due again after c.every. One that
// fails to load leaves the current certificate in place.
func (c *Certificates) reload(now time.Time) error {
	c.due = now.Add(c.every)
	cert, err := c.load(now)
	if err == nil {
		c.cert, c.failed = cert, ""
	}
	return err
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

// get returns the certificate, first loading it again if it is due.
func (c *Certificates) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now := time.Now(); !now.Before(c.due) {
		if err := c.reload(now); err != nil && err.Error() != c.failed && c.log != nil {
			c.failed = err.Error()
			c.log.Warn("certs: loading the serving certificate failed; serving the last good one", "err", err)
		}
	}
	return c.cert, nil
}

func loadPair(dir string) (*tls.Certificate, error) {
	crt, err := readFile(filepath.Join(dir, "tls.crt"))
	if err != nil {
		return nil, fmt.Errorf("certs: certificate: %w", err)
	}
	key, err := readFile(filepath.Join(dir, "tls.key"))
	if err != nil {
		return nil, fmt.Errorf("certs: certificate: %w", err)
	}
	cert, err := tls.X509KeyPair(crt, key)
	if err != nil {
		return nil, fmt.Errorf("certs: certificate in %s: %w", dir, err)
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

// selfSigned makes a certificate for hosts (DNS names or IP addresses),
// localhost and the loopback addresses, valid from an hour before now for
// selfSignedLife and signed by its own new Ed25519 key. Its DER is written
// here, and read back by the parser TLS clients use: x509.CreateCertificate
// would add 56 KiB to the binary.
func selfSigned(subject string, hosts []string, now time.Time) (*tls.Certificate, error) {
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	serial := make([]byte, 16)
	rand.Read(serial)
	serial[0] = serial[0]&0x3f | 0x40 // positive, and its first byte not 0
	sans := slices.Concat(der(0x82, []byte("localhost")), der(0x87, []byte{127, 0, 0, 1}), der(0x87, net.IPv6loopback))
	for _, h := range hosts {
		if ip, perr := netip.ParseAddr(h); perr == nil {
			sans = append(sans, der(0x87, ip.AsSlice())...)
		} else if h != "" {
			sans = append(sans, der(0x82, []byte(h))...)
		}
	}
	oid := func(b ...byte) []byte { return der(0x06, b) }
	alg := der(0x30, oid(0x2b, 0x65, 0x70)) // Ed25519
	name := der(0x30, der(0x31, der(0x30, oid(0x55, 4, 3), der(0x0c, []byte(subject)))))
	utc := func(t time.Time) []byte { return der(0x17, []byte(t.UTC().Format("060102150405Z"))) }
	exts := der(0xa3, der(0x30,
		der(0x30, oid(0x55, 29, 15), der(0x01, []byte{0xff}), der(0x04, der(0x03, []byte{7, 0x80}))), // key usage: digital signature
		der(0x30, oid(0x55, 29, 37), der(0x04, der(0x30, oid(0x2b, 6, 1, 5, 5, 7, 3, 1)))),           // extended: server auth
		der(0x30, oid(0x55, 29, 17), der(0x04, der(0x30, sans)))))
	tbs := der(0x30, der(0xa0, der(0x02, []byte{2})), der(0x02, serial), alg, name,
		der(0x30, utc(now.Add(-time.Hour)), utc(now.Add(selfSignedLife))), name, der(0x30, alg, der(0x03, []byte{0}, pub)), exts)
	cert := der(0x30, tbs, alg, der(0x03, []byte{0}, ed25519.Sign(key, tbs)))
	leaf, perr := x509.ParseCertificate(cert)
	if err = cmp.Or(err, perr); err != nil {
		return nil, fmt.Errorf("certs: self-signed certificate: %w", err)
	}
	return &tls.Certificate{Certificate: [][]byte{cert}, PrivateKey: key, Leaf: leaf}, nil
}

// der returns the DER element of tag whose contents are parts, one after
// another, of less than 64 KiB in all.
func der(tag byte, parts ...[]byte) []byte {
	b := slices.Concat(parts...)
	switch n := len(b); {
	case n < 0x80:
		return append([]byte{tag, byte(n)}, b...)
	case n < 0x100:
		return append([]byte{tag, 0x81, byte(n)}, b...)
	default:
		return append([]byte{tag, 0x82, byte(n >> 8), byte(n)}, b...)
	}
}
