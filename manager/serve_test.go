package manager

import (
	"bufio"
	"cmp"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/manager/internal/metricsauth"
	"github.com/zerodep-k8s/widget-operator/reconcile"
)

// pipeListener is a fake listener whose connections are in-memory pipes,
// so that the server's deadlines run on synctest's clock. It counts the
// connections accepted that the server has not closed.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
	open  atomic.Int32
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		l.open.Add(1)
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

// dial returns the client end of a new connection; once the listener is
// closed, one that is closed.
func (l *pipeListener) dial() net.Conn {
	client, server := net.Pipe()
	select {
	case l.conns <- &countedConn{Conn: server, l: l}:
	case <-l.done:
		server.Close()
	}
	return client
}

// countedConn is the server's end of a pipeListener's connection.
type countedConn struct {
	net.Conn
	l    *pipeListener
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.l.open.Add(-1) })
	return c.Conn.Close()
}

// startTestServer serves h with the endpoints' limits on a pipeListener,
// over TLS when tlsConfig is not nil, as serve does.
func startTestServer(t *testing.T, h http.Handler, tlsConfig *tls.Config) *pipeListener {
	ln := newPipeListener()
	srv, limited := newServer(h, ln, tlsConfig, slog.New(slog.DiscardHandler))
	go srv.Serve(limited)
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
		ln := startTestServer(t, okHandler(), nil)
		c := ln.dial()
		defer c.Close()
		if took := closedAfter(c); took != readHeaderTimeout {
			t.Errorf("a connection that sends nothing was closed after %v, want %v", took, readHeaderTimeout)
		}
	})
}

func TestServerClosesIdleKeepAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ln := startTestServer(t, okHandler(), nil)
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
		}), nil)
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

// A request with a body, which no endpoint reads, gets its answer at once,
// and its connection is closed: a trickled body holds none.
func TestServerReadsNoBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ln := startTestServer(t, okHandler(), nil)
		c := ln.dial()
		defer c.Close()
		start := time.Now()
		go io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: op\r\nContent-Length: 100000\r\n\r\n")
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		io.Copy(io.Discard, br)
		if took := time.Since(start); resp.StatusCode != http.StatusOK || took != 0 {
			t.Errorf("a request whose body does not come: %d, then closed after %v; want 200 and closed at once", resp.StatusCode, took)
		}
	})
}

// A request's line and headers may take 16 KiB, and no more.
func TestServerLimitsHeaderSize(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ln := startTestServer(t, okHandler(), nil)
		for _, tc := range []struct {
			size, want int
		}{{16 << 10, http.StatusOK}, {16<<10 + 1, http.StatusRequestHeaderFieldsTooLarge}, {64 << 10, http.StatusRequestHeaderFieldsTooLarge}} {
			c := ln.dial()
			head := "GET /healthz HTTP/1.1\r\nHost: op\r\nX-Big: "
			go io.WriteString(c, head+strings.Repeat("a", tc.size-len(head)-len("\r\n\r\n"))+"\r\n\r\n")
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			c.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("%d bytes of request line and headers: %d, want %d", tc.size, resp.StatusCode, tc.want)
			}
		}
	})
}

// At the cap, a connection waits to be accepted until one closes.
func TestConnLimitWaitsForRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inner := newPipeListener()
		l := &connLimit{Listener: inner, slots: make(chan struct{}, 2), room: 2, conns: map[net.Conn]time.Time{}}
		accepted := make(chan net.Conn, 10)
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				l.State(c, http.StateNew)
				l.State(c, http.StateActive) // serving: not to be ended
				accepted <- c
			}
		}()
		for range 3 {
			go inner.dial() // returns once accepted
		}
		synctest.Wait()
		if len(accepted) != 2 {
			t.Fatalf("%d accepted of 3, want 2", len(accepted))
		}
		first, second := <-accepted, <-accepted
		first.Close()
		l.State(first, http.StateClosed)
		synctest.Wait()
		if len(accepted) != 1 {
			t.Fatalf("%d accepted after a close, want 1", len(accepted))
		}
		third := <-accepted
		inner.Close()
		for _, c := range []net.Conn{second, third} {
			// The accept loop goes on, to find the listener closed.
			c.Close()
			l.State(c, http.StateClosed)
		}
	})
}

// From room on, a new connection ends the one that has waited longest
// for a request, if one waits.
func TestConnLimitMakesRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &connLimit{slots: make(chan struct{}, 10), room: 3, conns: map[net.Conn]time.Time{}}
		// Each change of state a second after the last, so that no two
		// connections have waited equally long.
		at := func(c net.Conn, s http.ConnState) {
			time.Sleep(time.Second) // on the bubble's clock
			l.State(c, s)
		}
		var clients []net.Conn
		conn := func() net.Conn { // accepted, its client's end kept
			client, server := net.Pipe()
			clients = append(clients, client)
			l.slots <- struct{}{} // as Accept takes one
			at(server, http.StateNew)
			return server
		}
		// check checks that the connections want, and no others, have
		// been closed: their clients read EOF.
		check := func(what string, want ...int) {
			t.Helper()
			var closed []int
			for i, c := range clients {
				c.SetReadDeadline(time.Now())
				if _, err := c.Read(make([]byte, 1)); err == io.EOF {
					closed = append(closed, i)
				}
			}
			if !slices.Equal(closed, want) {
				t.Errorf("%s: connections %v closed, want %v", what, closed, want)
			}
		}
		serverClose := func(c net.Conn) { // as the server closes one
			c.Close()
			at(c, http.StateClosed)
		}
		c0, c1, c2 := conn(), conn(), conn()
		at(c1, http.StateActive)
		at(c0, http.StateIdle) // now it has waited less than c2
		check("three open")
		c3 := conn()
		check("a fourth", 2)
		serverClose(c2)
		at(c0, http.StateActive)
		at(c3, http.StateActive)
		c4 := conn()
		check("a fifth while three serve", 2) // only the slots bound them
		at(c1, http.StateIdle)
		serverClose(c3)
		at(c4, http.StateIdle)
		conn()
		check("a sixth", 1, 2, 3)
		if len(l.conns) != 3 || len(l.slots) != 4 {
			t.Errorf("%d tracked and %d slots taken, want 3 and 4 (one ended, not yet closed by its server)", len(l.conns), len(l.slots))
		}
	})
}

// The kinds of connections an attacker holds.
const (
	idleAfterRequest = iota // one request (without a token), then idle
	silent                  // sends nothing
	slowHeaders             // request headers, a byte a second
	slowBody                // a POST whose body comes a byte a second
	kinds
)

// client returns a client whose connections are ln's, to https://op when
// tlsConfig is not nil, else http://op. A kubelet's probe opens a new
// connection each time (and sends Connection: close); Prometheus keeps its
// connections.
func client(ln *pipeListener, tlsConfig *tls.Config, keepAlive bool, timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{
		DialContext:       func(context.Context, string, string) (net.Conn, error) { return ln.dial(), nil },
		TLSClientConfig:   tlsConfig,
		DisableKeepAlives: !keepAlive,
	}}
}

// A flood is an attacker on the pod network holding twice maxConns
// connections to a server on ln, of each kind in turn, over TLS when
// tlsConfig is not nil. Each connection the server closes is opened again pace later,
// and a millisecond more for each attacker before: in step, they would
// all open theirs in one instant of the bubble's clock.
type flood struct {
	ln        *pipeListener
	tlsConfig *tls.Config
	path      string
	pace      time.Duration
}

// during runs the flood while it calls get every period, times times, and
// returns the calls that failed, with the first error. Before the first
// call the server must hold at least held of the flood's connections, and
// it must never hold more than maxConns.
func (f flood) during(t *testing.T, held int, period time.Duration, times int, get func() error) (failed int, first error) {
	ctx, stop := context.WithCancel(context.Background())
	var attackers sync.WaitGroup
	defer attackers.Wait()
	defer stop()
	for i := range 2 * maxConns {
		attackers.Go(func() {
			for ctx.Err() == nil {
				c := f.ln.dial()
				closed := context.AfterFunc(ctx, func() { c.Close() })
				f.hold(c, i%kinds)
				closed()
				select {
				case <-ctx.Done():
				case <-time.After(f.pace + time.Duration(i)*time.Millisecond): // on the bubble's clock
				}
			}
		})
	}
	synctest.Wait()
	if n := f.ln.open.Load(); n < int32(held) {
		t.Fatalf("the flood holds %d connections, want at least %d", n, held)
	}
	time.Sleep(period / 2) // out of step with the flood
	for range times {
		if err := get(); err != nil {
			failed++
			first = cmp.Or(first, err)
		}
		synctest.Wait()
		if n := f.ln.open.Load(); n > maxConns {
			t.Errorf("the server holds %d connections, want at most %d", n, maxConns)
		}
		time.Sleep(period) // on the bubble's clock
	}
	return failed, first
}

// hold uses c as a connection of the given kind until it is closed.
func (f flood) hold(c net.Conn, kind int) {
	defer c.Close()
	if f.tlsConfig != nil && kind != silent {
		c = tls.Client(c, f.tlsConfig)
	}
	switch kind {
	case idleAfterRequest:
		io.WriteString(c, "GET "+f.path+" HTTP/1.1\r\nHost: op\r\n\r\n")
		io.Copy(io.Discard, c) // the answer, then nothing until closed
	case silent:
		io.Copy(io.Discard, c)
	case slowHeaders, slowBody:
		closed := make(chan struct{})
		go func() { // as a socket would take what the server sends
			io.Copy(io.Discard, c)
			close(closed)
		}()
		head := "GET " + f.path + " HTTP/1.1\r\nHost: op\r\nX-Slow: " + strings.Repeat("a", 100)
		if kind == slowBody {
			io.WriteString(c, "POST "+f.path+" HTTP/1.1\r\nHost: op\r\nContent-Length: 100000\r\n\r\n")
			head = strings.Repeat("a", 100)
		}
		for i := 0; i < len(head); i++ {
			c.Write([]byte{head[i]})
			select {
			case <-closed:
				return
			case <-time.After(time.Second): // the trickle's pace
			}
		}
	}
}

// A kubelet-style probe every second passes while an attacker holds 100
// connections to the probe port: idle ones, silent ones, and ones that
// send their headers or a body slowly.
func TestProbeSurvivesConnectionFlood(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ln := startTestServer(t, okHandler(), nil)
		kubelet := client(ln, nil, false, time.Second)
		// Slow bodies are closed after their answer: the flood holds the
		// others, three quarters.
		failed, err := flood{ln: ln, path: "/healthz", pace: 100 * time.Millisecond}.during(t, maxConns/2, time.Second, 60, func() error {
			resp, err := kubelet.Get("http://op/healthz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					err = errors.New(resp.Status)
				}
			}
			return err
		})
		if failed > 0 {
			t.Errorf("%d of 60 probes failed during the flood; the first: %v", failed, err)
		}
	})
}

// fakeReviews is a fake of the API server's TokenReview and
// SubjectAccessReview endpoints, as a Transport: token "scraper" is a user
// who may get /metrics; any other token is not authenticated.
type fakeReviews struct{}

func (fakeReviews) RoundTrip(r *http.Request) (*http.Response, error) {
	body, _ := io.ReadAll(r.Body)
	status := `{"authenticated":false}`
	switch {
	case strings.HasSuffix(r.URL.Path, "/subjectaccessreviews"):
		status = `{"allowed":true}`
	case strings.Contains(string(body), `"token":"scraper"`):
		status = `{"authenticated":true,"user":{"username":"scraper"}}`
	}
	rec := httptest.NewRecorder()
	rec.Header().Set("Content-Type", "application/json")
	io.WriteString(rec, `{"status":`+status+`}`)
	return rec.Result(), nil
}

// testCertificate returns a self-signed ECDSA certificate for host "op".
func testCertificate(t *testing.T) tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), DNSNames: []string{"op"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// A scraper with a good token, keeping its connection as Prometheus does,
// is served every 15 s while an attacker holds 100 TLS connections to the
// metrics port: ones that got a 401 and idle, silent ones, and ones that
// send their headers or a body slowly.
func TestScrapeSurvivesConnectionFlood(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reviewer, err := k8sapi.New(&k8sapi.Config{Host: "https://apiserver.test", Transport: fakeReviews{}})
		if err != nil {
			t.Fatal(err)
		}
		auth, err := metricsauth.New(metricsauth.Config{Client: reviewer, Path: "/metrics"})
		if err != nil {
			t.Fatal(err)
		}
		ln := startTestServer(t, auth.Wrap(okHandler()), &tls.Config{Certificates: []tls.Certificate{testCertificate(t)}})
		// X25519 alone, and a connection again 5 s after each the
		// server closes: the flood's handshakes are most of the test's
		// time.
		insecure := &tls.Config{InsecureSkipVerify: true, CurvePreferences: []tls.CurveID{tls.X25519}}
		prometheus := client(ln, insecure, true, 10*time.Second)
		defer prometheus.CloseIdleConnections()
		// The connections that got a 401 are closed at once, and so are
		// those with a body after their answer: the flood holds the
		// others, half of them.
		held := maxConns / 2
		failed, err := flood{ln, insecure, "/metrics", time.Second}.during(t, held, 15*time.Second, 4, func() error {
			req, _ := http.NewRequest("GET", "https://op/metrics", nil)
			req.Header.Set("Authorization", "Bearer scraper")
			resp, err := prometheus.Do(req)
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					err = errors.New(resp.Status)
				}
			}
			return err
		})
		if failed > 0 {
			t.Errorf("%d of 4 scrapes failed during the flood; the first: %v", failed, err)
		}
	})
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
	serve := func(cfg Config) ([]*http.Server, error) {
		cfg.Name, cfg.Client = "test-operator", reviewer
		m, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return m.serve(nil)
	}
	get := func(client *http.Client, url string) int {
		resp, err := client.Get(url)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	// A certificate folder without a certificate is a start-up error.
	opts := Config{MetricsAddr: freeAddr(t), ProbeAddr: freeAddr(t), MetricsCertDir: t.TempDir()}
	if _, err := serve(opts); err == nil || !strings.Contains(err.Error(), "metrics endpoint") {
		t.Fatalf("missing certificate: %v", err)
	}

	// Secure by default: TLS, and a scrape without a token is refused.
	opts.MetricsCertDir = ""
	servers, err := serve(opts)
	if err != nil {
		t.Fatal(err)
	}
	insecureTLS := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	if code := get(insecureTLS, "https://"+opts.MetricsAddr+"/metrics"); code != http.StatusUnauthorized {
		t.Errorf("secure metrics without a token: %d, want 401", code)
	}
	// The challenge and the certificate name the operator.
	resp, err := insecureTLS.Get("https://" + opts.MetricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("WWW-Authenticate"); got != `Bearer realm="test-operator"` || resp.TLS.PeerCertificates[0].Subject.CommonName != "test-operator metrics" {
		t.Errorf("challenge %q, certificate of %q; want the operator's name", got, resp.TLS.PeerCertificates[0].Subject.CommonName)
	}
	if code := get(http.DefaultClient, "http://"+opts.ProbeAddr+"/healthz"); code != http.StatusOK {
		t.Errorf("healthz: %d", code)
	}
	shutdownServers(servers)

	// Plain HTTP for anyone with --metrics-secure=false; the probe off.
	insecure := Config{MetricsAddr: freeAddr(t), ProbeAddr: "0", InsecureMetrics: true}
	servers, err = serve(insecure)
	if err != nil {
		t.Fatal(err)
	}
	if code := get(http.DefaultClient, "http://"+insecure.MetricsAddr+"/metrics"); code != http.StatusOK || len(servers) != 1 {
		t.Errorf("insecure metrics: %d, %d servers", code, len(servers))
	}
	// Only GET (and HEAD) reach the registry.
	resp, err = http.Post("http://"+insecure.MetricsAddr+"/metrics", "text/plain", nil)
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
	if _, err := serve(insecure); err == nil || !strings.Contains(err.Error(), "health probe endpoint") {
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
