package k8sapi

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// recordedRequest is what a test server saw of one request.
type recordedRequest struct {
	Method, Path, RawQuery string
	ContentType, Accept    string
	UserAgent, Auth        string
	Proto                  string
	Body                   []byte
}

// apiServer is an httptest TLS server speaking HTTP/2 that records every
// request and answers with the test's handler.
type apiServer struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []recordedRequest
}

func newAPIServer(t *testing.T, h http.HandlerFunc) *apiServer {
	t.Helper()
	s := &apiServer{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.reqs = append(s.reqs, recordedRequest{
			Method: r.Method, Path: r.URL.EscapedPath(), RawQuery: r.URL.RawQuery,
			ContentType: r.Header.Get("Content-Type"), Accept: r.Header.Get("Accept"),
			UserAgent: r.UserAgent(), Auth: r.Header.Get("Authorization"), Proto: r.Proto, Body: body,
		})
		s.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		h(w, r)
	}))
	s.EnableHTTP2 = true
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

func (s *apiServer) requests() []recordedRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]recordedRequest(nil), s.reqs...)
}

// caPEM returns the server's certificate as PEM, for Config.CAData.
func (s *apiServer) caPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
}

// recordingSleep stands in for the client's sleep: it records the waits
// asked for and returns at once (with ctx's error if it has ended).
type recordingSleep struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (r *recordingSleep) sleep(ctx context.Context, d time.Duration) error {
	r.mu.Lock()
	r.waits = append(r.waits, d)
	r.mu.Unlock()
	return ctx.Err()
}

func (r *recordingSleep) recorded() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Duration(nil), r.waits...)
}

// countingCredentials is a credentials implementation for tests: it sends
// "Bearer <token>-<generation>" and counts refresh calls; each refresh
// starts a new generation and returns refreshHelps.
type countingCredentials struct {
	token        string
	refreshHelps bool
	generation   atomic.Int32
	refreshes    atomic.Int32
}

func (c *countingCredentials) authorize(_ context.Context, req *http.Request) error {
	req.Header.Set("Authorization", "Bearer "+c.token+"-"+string(rune('0'+c.generation.Load())))
	return nil
}

func (c *countingCredentials) refresh() bool {
	c.refreshes.Add(1)
	c.generation.Add(1)
	return c.refreshHelps
}

// newTestClient returns a client for srv over the package's own transport
// (TLS 1.2+, HTTP/2 with pings), trusting srv's certificate, with sleeps
// recorded instead of slept. mutate, if not nil, adjusts the Config first.
func newTestClient(t *testing.T, srv *apiServer, mutate func(*Config)) (*Client, *recordingSleep) {
	t.Helper()
	cfg := &Config{Host: srv.URL}
	if mutate != nil {
		mutate(cfg)
	}
	if cfg.Transport == nil {
		pool := x509.NewCertPool()
		pool.AddCert(srv.Certificate())
		tr, err := newTransport(cfg)
		if err != nil {
			t.Fatal(err)
		}
		tr.TLSClientConfig.RootCAs = pool
		t.Cleanup(tr.CloseIdleConnections)
		cfg.Transport = tr
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rs := &recordingSleep{}
	c.sleep = rs.sleep
	c.jitter = func() float64 { return 0.5 }
	return c, rs
}

// testdata returns the contents of a file in testdata/.
func testdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// serveFile answers with a testdata file and a status code.
func serveFile(t *testing.T, code int, name string) http.HandlerFunc {
	body := testdata(t, name)
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		w.Write(body)
	}
}

func TestNewConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  *Config
		want string
	}{
		{"nil", nil, "nil Config"},
		{"empty host", &Config{}, "Host is empty"},
		{"bad scheme", &Config{Host: "ftp://x"}, "scheme"},
		{"no host", &Config{Host: "https://"}, "no host name"},
		{"credentials in host", &Config{Host: "https://admin:s3cret@x"}, "credentials"},
		{"query", &Config{Host: "https://x/?a=b"}, "query"},
		{"bad proxy", &Config{Host: "https://x", ProxyURL: "http://user:s3cret@%zz"}, "ProxyURL"},
		{"proxy scheme", &Config{Host: "https://x", ProxyURL: "ftp://user:s3cret@proxy"}, "ProxyURL scheme"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New: got %v, want error containing %q", err, tt.want)
			}
			if !strings.HasPrefix(err.Error(), "k8sapi: ") || strings.Contains(err.Error(), "s3cret") {
				t.Errorf("bad error string %q", err)
			}
		})
	}
}

func TestNewDefaults(t *testing.T) {
	c, err := New(&Config{Host: "10.0.0.1:6443/prefix/", Transport: http.DefaultTransport})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.Host(), "https://10.0.0.1:6443/prefix"; got != want {
		t.Errorf("Host() = %q, want %q", got, want)
	}
	if got := c.Namespace(); got != "default" {
		t.Errorf("Namespace() = %q, want default", got)
	}
	if got := c.userAgent; got != filepath.Base(os.Args[0])+"/devel ("+runtime.GOOS+"/"+runtime.GOARCH+")" {
		t.Errorf("user agent %q", got)
	}
	if c.maxRetries != 5 || c.limiter != nil {
		t.Errorf("maxRetries %d limiter %v, want 5 and none", c.maxRetries, c.limiter)
	}
	c, err = New(&Config{Host: "https://x", Namespace: "shop", UserAgent: "ua/1", MaxRetries: -1, QPS: 5, Transport: http.DefaultTransport})
	if err != nil {
		t.Fatal(err)
	}
	if c.Namespace() != "shop" || c.userAgent != "ua/1" || c.maxRetries != 0 || c.limiter == nil {
		t.Errorf("config not applied: %+v", c)
	}
}

func TestTransportSettings(t *testing.T) {
	tr, err := newTransport(&Config{ProxyURL: "http://proxy.example:3128"})
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Protocols.HTTP1() || !tr.Protocols.HTTP2() {
		t.Errorf("protocols %v, want HTTP1 and HTTP2", tr.Protocols)
	}
	if tr.HTTP2 == nil || tr.HTTP2.SendPingTimeout != 15*time.Second || tr.HTTP2.PingTimeout != 15*time.Second {
		t.Errorf("HTTP2 config %+v, want 15s pings", tr.HTTP2)
	}
	req, _ := http.NewRequest("GET", "https://api.example:6443/api", nil)
	if u, err := tr.Proxy(req); err != nil || u.String() != "http://proxy.example:3128" {
		t.Errorf("proxy = %v, %v", u, err)
	}
	t.Setenv("HTTPS_PROXY", "http://env-proxy:1")
	tr, _ = newTransport(&Config{PingTimeout: time.Second})
	if tr.Proxy != nil {
		t.Error("proxy taken from the environment")
	}
	if tr.HTTP2.SendPingTimeout != time.Second {
		t.Errorf("PingTimeout not applied: %+v", tr.HTTP2)
	}
	if tr.ResponseHeaderTimeout == 0 || tr.TLSHandshakeTimeout == 0 {
		t.Error("missing header or handshake timeout")
	}
}

// TestNewWithCAData builds the client the way a kubeconfig does, from the
// CA, server and token alone, and checks it speaks HTTP/2 and sends the
// token and the user agent.
func TestNewWithCAData(t *testing.T) {
	srv := newAPIServer(t, serveFile(t, 200, "deployment.json"))
	c, err := New(&Config{Host: srv.URL, CAData: srv.caPEM(), BearerToken: "t0ken", UserAgent: "test/1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := For[Deployment](c, Deployments).Get(t.Context(), "shop", "web", GetOptions{}); err != nil {
		t.Fatal(err)
	}
	r := srv.requests()[0]
	if r.Proto != "HTTP/2.0" || r.Auth != "Bearer t0ken" || r.UserAgent != "test/1" {
		t.Errorf("got proto %q auth %q user agent %q", r.Proto, r.Auth, r.UserAgent)
	}
}

func TestRequestErrorClassified(t *testing.T) {
	srv := newAPIServer(t, serveFile(t, 200, "deployment.json"))
	c, rs := newTestClient(t, srv, nil)
	srv.Close() // nothing listens any more
	_, err := For[Deployment](c, Deployments).Get(t.Context(), "shop", "web", GetOptions{})
	var re *RequestError
	if !errors.As(err, &re) || re.Op != "get" || re.Name != "web" {
		t.Fatalf("got %v, want *RequestError for get", err)
	}
	if n := len(rs.recorded()); n != 5 {
		t.Errorf("%d backoff waits, want 5 (one per retry)", n)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = For[Deployment](c, Deployments).Get(ctx, "shop", "web", GetOptions{})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("canceled context: got %v", err)
	}
}

func TestReadBody(t *testing.T) {
	tests := []struct {
		n, size, limit int64
		tooLarge       bool
	}{
		{0, -1, 10, false}, {0, 0, 10, false}, {10, -1, 10, false}, {10, 10, 10, false}, {11, -1, 10, true},
		{11, 5, 10, true}, {3, 11, 10, true}, {200 << 10, -1, 1 << 20, false}, {1<<20 + 1, -1, 1 << 20, true},
	}
	op := &operation{verb: "get"}
	for _, tt := range tests {
		resp := &http.Response{ContentLength: tt.size, Body: io.NopCloser(io.LimitReader(junkReader{}, tt.n))}
		b, err := readBody(op, resp, tt.limit)
		var de *DecodeError
		if tt.tooLarge != (errors.As(err, &de) && errors.Is(err, ErrBodyTooLarge)) || (!tt.tooLarge && (err != nil || int64(len(b)) != tt.n)) {
			t.Errorf("readBody(%d bytes, Content-Length %d, limit %d) = %d bytes, %v", tt.n, tt.size, tt.limit, len(b), err)
		}
	}
}
