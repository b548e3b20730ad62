package k8sapi

import (
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/url"
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

// newTransport builds the base transport from c: TLS from tlsConfig,
// HTTP/2 with health-check pings, a proxy only if c.ProxyURL says so.
func newTransport(c *Config, tlsConfig *tls.Config) (*http.Transport, error) {
	var proxy func(*http.Request) (*url.URL, error)
	if c.ProxyURL != "" {
		u, err := parseProxyURL(c.ProxyURL)
		if err != nil {
			return nil, errors.New("k8sapi: config: ProxyURL " + err.Error())
		}
		proxy = http.ProxyURL(u)
	}
	ping := c.PingTimeout
	if ping <= 0 {
		ping = defaultPingTimeout
	}
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
