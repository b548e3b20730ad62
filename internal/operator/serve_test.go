package operator

import (
	"bufio"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zerodep-k8s/widget-operator/internal/metrics"
	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/reconcile"
)

// pipeListener is a fake listener whose connections are in-memory pipes,
// so that the server's deadlines run on synctest's clock.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return &net.TCPAddr{} }

// dial returns the client end of a new connection.
func (l *pipeListener) dial() net.Conn {
	client, server := net.Pipe()
	l.conns <- server
	return client
}

// startTestServer serves h with the endpoints' limits on a pipeListener.
func startTestServer(t *testing.T, h http.Handler) *pipeListener {
	ln := newPipeListener()
	srv := newServer(h, slog.New(slog.DiscardHandler))
	go srv.Serve(ln)
	t.Cleanup(func() {
		srv.Close()
		// On the bubble's clock: lets a connection that is closing
		// finish its lingering close (net/http waits 500ms).
		time.Sleep(time.Second)
	})
	return ln
}

// closedAfter reads from c until the server closes it and returns how
// long that took.
func closedAfter(c net.Conn) time.Duration {
	start := time.Now()
	io.Copy(io.Discard, c)
	return time.Since(start)
}

func okHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
}

func TestServerClosesSilentConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ln := startTestServer(t, okHandler())
		c := ln.dial()
		defer c.Close()
		if took := closedAfter(c); took != readHeaderTimeout {
			t.Errorf("a connection that sends nothing was closed after %v, want %v", took, readHeaderTimeout)
		}
	})
}

func TestServerClosesIdleKeepAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ln := startTestServer(t, okHandler())
		c := ln.dial()
		defer c.Close()
		io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: op\r\n\r\n")
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		start := time.Now()
		io.Copy(io.Discard, br)
		if took := time.Since(start); took != idleTimeout {
			t.Errorf("an idle keep-alive connection was closed after %v, want %v", took, idleTimeout)
		}
	})
}

func TestServerClosesTrickledBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A handler that reads the body, as the worst case; the
		// endpoints' own handlers do not read one.
		ln := startTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
		}))
		c := ln.dial()
		defer c.Close()
		start := time.Now()
		closed := make(chan time.Duration)
		go func() { closed <- closedAfter(c) }()
		io.WriteString(c, "POST /metrics HTTP/1.1\r\nHost: op\r\nContent-Length: 1000000\r\n\r\n")
		// One byte a second until the server stops reading.
		for {
			if _, err := c.Write([]byte{'x'}); err != nil {
				break
			}
			time.Sleep(time.Second)
		}
		took := <-closed
		if took > readTimeout+time.Second {
			t.Errorf("a trickled body kept the connection for %v, want at most %v", took, readTimeout)
		}
		t.Logf("trickled body cut off after %v", time.Since(start))
	})
}

func TestServerLimitsHeaderSize(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ln := startTestServer(t, okHandler())
		c := ln.dial()
		defer c.Close()
		go io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: op\r\nX-Big: "+strings.Repeat("a", 64<<10)+"\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("64 KiB of headers: %d, want 431", resp.StatusCode)
		}
	})
}

func TestLimitListenerClosesConnectionsBeyondMax(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &limitListener{Listener: inner, max: 2}
	defer ln.Close()
	accepted := make(chan net.Conn, 10)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	var clients []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients = append(clients, c)
	}
	first, second := <-accepted, <-accepted
	defer second.Close()
	// The third is closed by the listener: its client reads EOF.
	clients[2].SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := clients[2].Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("third connection: read %d, %v; want EOF", n, err)
	}
	if got := ln.open.Load(); got != 2 {
		t.Fatalf("%d open, want 2", got)
	}
	// Closing one (twice: a second Close must not free another slot)
	// makes room for one more.
	first.Close()
	first.Close()
	if got := ln.open.Load(); got != 1 {
		t.Fatalf("%d open after a close, want 1", got)
	}
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case a := <-accepted:
		a.Close()
	case <-time.After(10 * time.Second):
		t.Fatal("no room after a connection closed")
	}
}

func TestReadyzWithholdsReasons(t *testing.T) {
	secret := `watch: failing for 3s: services is forbidden: User "system:serviceaccount:widget-system:widget-operator" cannot list`
	rec := httptest.NewRecorder()
	writeReadyz(rec, []reconcile.Check{{Name: "watch widgets"}, {Name: "watch deployments", Err: errors.New("not synced")}, {Name: "watch services", Err: errors.New(secret)}})
	want := "[+]watch widgets ok\n[-]watch deployments failed: reason withheld\n[-]watch services failed: reason withheld\nreadyz check failed\n"
	if rec.Code != http.StatusServiceUnavailable || rec.Body.String() != want {
		t.Errorf("readyz = %d %q, want 503 %q", rec.Code, rec.Body.String(), want)
	}
	rec = httptest.NewRecorder()
	writeReadyz(rec, []reconcile.Check{{Name: "watch widgets"}, {Name: "watch services"}})
	if rec.Code != http.StatusOK || rec.Body.String() != "ok\n" {
		t.Errorf("readyz = %d %q, want 200 ok", rec.Code, rec.Body.String())
	}
}

// freeAddr returns a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func TestServe(t *testing.T) {
	reviewer, err := k8sapi.New(&k8sapi.Config{Host: "https://apiserver.test"})
	if err != nil {
		t.Fatal(err)
	}
	op := &operator{log: slog.New(slog.DiscardHandler), registry: metrics.NewRegistry(), ctrl: &reconcile.Controller{}}
	get := func(client *http.Client, url string) int {
		resp, err := client.Get(url)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	// A certificate folder without a certificate is a start-up error.
	opts := Options{MetricsAddr: freeAddr(t), ProbeAddr: freeAddr(t), MetricsCertDir: t.TempDir()}
	if _, err := op.serve(opts, reviewer); err == nil || !strings.Contains(err.Error(), "metrics endpoint") {
		t.Fatalf("missing certificate: %v", err)
	}

	// Secure by default: TLS, and a scrape without a token is refused.
	opts.MetricsCertDir = ""
	servers, err := op.serve(opts, reviewer)
	if err != nil {
		t.Fatal(err)
	}
	insecureTLS := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	if code := get(insecureTLS, "https://"+opts.MetricsAddr+"/metrics"); code != http.StatusUnauthorized {
		t.Errorf("secure metrics without a token: %d, want 401", code)
	}
	if code := get(http.DefaultClient, "http://"+opts.ProbeAddr+"/healthz"); code != http.StatusOK {
		t.Errorf("healthz: %d", code)
	}
	shutdownServers(servers)

	// Plain HTTP for anyone with --metrics-secure=false; the probe off.
	insecure := Options{MetricsAddr: freeAddr(t), ProbeAddr: "0", InsecureMetrics: true}
	servers, err = op.serve(insecure, reviewer)
	if err != nil {
		t.Fatal(err)
	}
	if code := get(http.DefaultClient, "http://"+insecure.MetricsAddr+"/metrics"); code != http.StatusOK || len(servers) != 1 {
		t.Errorf("insecure metrics: %d, %d servers", code, len(servers))
	}
	// Only GET (and HEAD) reach the registry.
	resp, err := http.Post("http://"+insecure.MetricsAddr+"/metrics", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST /metrics: %d, Allow %q; want 405 and GET, HEAD", resp.StatusCode, resp.Header.Get("Allow"))
	}
	shutdownServers(servers)

	// A port in use is a start-up error, and stops the server started.
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	insecure.ProbeAddr = busy.Addr().String()
	if _, err := op.serve(insecure, reviewer); err == nil || !strings.Contains(err.Error(), "health probe endpoint") {
		t.Fatalf("probe port in use: %v", err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		ln, err := net.Listen("tcp", insecure.MetricsAddr)
		if err == nil {
			ln.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the metrics port is still in use: %v", err)
		}
		runtime.Gosched()
	}
}
