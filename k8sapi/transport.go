package k8sapi

import (
	"bytes"
	"cmp"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// Transport timeouts. None of them bounds a whole request, so a watch may
// stay open for as long as the server keeps it; a connection that goes
// silent is found by HTTP/2 pings (Config.PingTimeout) or, on HTTP/1.1,
// by TCP keep-alive probes.
const (
	dialTimeout           = 30 * time.Second
	tlsHandshakeTimeout   = 10 * time.Second
	responseHeaderTimeout = 90 * time.Second // above the server's 60s request timeout
	idleConnTimeout       = 90 * time.Second
	defaultPingTimeout    = 15 * time.Second
)

// newTransport builds the base transport from c, which c.check accepted:
// TLS 1.2 or later, the configured CA (system roots when none), ServerName
// and Insecure; HTTP/2 with health-check pings; a proxy only if c.ProxyURL
// says so. It fails only when the CA data holds no valid certificate. A
// client certificate is set per transport: see withClientCerts.
func newTransport(c *Config) (*http.Transport, error) {
	tlsConfig := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         c.ServerName,
		InsecureSkipVerify: c.Insecure,
	}
	if len(c.CAData) > 0 {
		pool, err := certPool(c.CAData)
		if err != nil {
			return nil, fmt.Errorf("k8sapi: TLS: %w", err)
		}
		tlsConfig.RootCAs = pool
	}
	var proxy func(*http.Request) (*url.URL, error)
	if u, err := parseProxyURL(c.ProxyURL); err == nil {
		proxy = http.ProxyURL(u) // c.check refused a ProxyURL set but bad
	}
	ping := cmp.Or(max(c.PingTimeout, 0), defaultPingTimeout)
	dialer := &net.Dialer{
		Timeout: dialTimeout,
		KeepAliveConfig: net.KeepAliveConfig{
			Enable:   true,
			Idle:     ping,
			Interval: ping / 3,
			Count:    3,
		},
	}
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetHTTP2(true)
	return &http.Transport{
		Proxy:                 proxy,
		DialContext:           dialer.DialContext,
		TLSClientConfig:       tlsConfig,
		TLSHandshakeTimeout:   tlsHandshakeTimeout,
		ResponseHeaderTimeout: responseHeaderTimeout,
		IdleConnTimeout:       idleConnTimeout,
		MaxIdleConnsPerHost:   25,
		Protocols:             &protocols,
		HTTP2: &http.HTTP2Config{
			SendPingTimeout: ping,
			PingTimeout:     ping,
		},
	}, nil
}

// certTransport carries each request on an http.Transport whose
// connections all present the current client certificate. When the
// certificate changes (an exec plugin returned a new one, or the files
// changed), it starts a new transport, so that later requests go over new
// connections, and closes the old one's idle connections; a request in
// flight on an old connection, such as a watch, ends there, and the
// connection closes once idle (idleConnTimeout). Without this, HTTP/2
// would carry every later request over the connection that presented the
// old certificate, each one refused with a 401. Safe for concurrent use.
type certTransport struct {
	certs certSource
	base  *http.Transport // cloned for each certificate

	mu   sync.Mutex
	cur  *http.Transport // nil before the first request
	leaf []byte          // DER of the certificate cur presents; nil for none
}

func (t *certTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	cert, err := t.certs.clientCertificate(req.Context())
	if err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	return t.transportFor(cert).RoundTrip(req)
}

// transportFor returns the transport that presents cert, starting it if
// cert is not the one the current transport presents.
func (t *certTransport) transportFor(cert *tls.Certificate) *http.Transport {
	var leaf []byte
	if len(cert.Certificate) > 0 {
		leaf = cert.Certificate[0]
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cur != nil && bytes.Equal(leaf, t.leaf) {
		return t.cur
	}
	if t.cur != nil {
		t.cur.CloseIdleConnections()
	}
	t.cur, t.leaf = t.base.Clone(), leaf
	t.cur.TLSClientConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		return cert, nil
	}
	return t.cur
}
