package manager

import (
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/zerodep-k8s/widget-operator/manager/internal/certs"
	"github.com/zerodep-k8s/widget-operator/manager/internal/metricsauth"
	"github.com/zerodep-k8s/widget-operator/reconcile"
)

// The limits of the metrics and probe servers. A client that holds a
// connection without finishing its request, or idles between requests, is
// cut off, and a body (none is read) is not waited for; at most maxConns
// connections are open per endpoint, and a connection beyond them waits to
// be accepted; from roomConns on, a new one ends an idle or silent one
// (see connLimit).
// Each open connection costs about 10 KiB (20 KiB with TLS), so an
// endpoint can hold at most a few MiB however many clients connect.
// Net/http reads 4 KiB past MaxHeaderBytes: a request's line and headers
// are limited to 16 KiB in all.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
	writeTimeout      = 30 * time.Second
	idleTimeout       = 30 * time.Second
	maxHeaderBytes    = 12 << 10
	maxConns          = 100
	roomConns         = maxConns - 10
)

// connLimit, as a server's listener and its ConnState hook, keeps at
// most cap(slots) of its connections open, so that a flood of connections
// costs a bounded amount of memory: Accept waits for room, and the flood
// waits in the kernel's backlog. From room connections on, each new one
// ends the one that has waited longest for a request (idle, or not done
// sending one), so that connections held silent or idle cannot keep out a
// new one, such as a probe's. It is safe for concurrent use.
type connLimit struct {
	net.Listener
	slots chan struct{} // a value per open connection
	room  int

	mu sync.Mutex
	// The open connections not being ended, each with the time since when
	// it has waited for a request, or zero while it serves one. Not nil.
	conns map[net.Conn]time.Time
}

func (l *connLimit) Accept() (net.Conn, error) {
	l.slots <- struct{}{}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
	}
	return c, err
}

// State is the server's ConnState hook.
func (l *connLimit) State(c net.Conn, s http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch s {
	case http.StateNew:
		l.makeRoom()
		l.conns[c] = time.Now()
	case http.StateActive:
		l.conns[c] = time.Time{}
	case http.StateIdle:
		l.conns[c] = time.Now()
	default: // closed or hijacked: the last state
		delete(l.conns, c)
		<-l.slots
	}
}

// makeRoom ends the connection that has waited longest for a request, if
// room or more are open.
func (l *connLimit) makeRoom() {
	var oldest net.Conn
	for c, since := range l.conns {
		if !since.IsZero() && (oldest == nil || since.Before(l.conns[oldest])) {
			oldest = c
		}
	}
	if len(l.conns) >= l.room && oldest != nil {
		delete(l.conns, oldest)
		if tc, ok := oldest.(*tls.Conn); ok {
			oldest = tc.NetConn() // at once: its own Close may wait to write
		}
		oldest.Close() // and its server, failing to read, closes it again
	}
}

// newServer returns a server with the endpoints' limits, HTTP/1.1 only,
// and the listener it must serve: inner with a connLimit, and TLS when
// tlsConfig is not nil.
func newServer(h http.Handler, inner net.Listener, tlsConfig *tls.Config, log *slog.Logger) (*http.Server, net.Listener) {
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	limit := &connLimit{Listener: inner, slots: make(chan struct{}, maxConns), room: roomConns, conns: map[net.Conn]time.Time{}}
	var ln net.Listener = limit
	if tlsConfig != nil {
		ln = tls.NewListener(limit, tlsConfig)
	}
	return &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// No endpoint reads a body, and net/http reads what comes
			// of one after the answer: a trickled one would hold the
			// connection until readTimeout.
			if r.ContentLength != 0 {
				http.NewResponseController(w).SetReadDeadline(time.Now())
			}
			h.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		Protocols:         &protocols,
		ConnState:         limit.State,
		// TLS handshake failures and the like, at debug level: anyone
		// who can connect can cause them.
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}, ln
}

// serve starts the metrics and probe servers, each answering its own
// paths and nothing else; an address of "" or "0" turns one off. Secure
// metrics are served over TLS with the certificate from
// Config.MetricsCertDir or a self-signed one, and each scrape is reviewed
// with Config.ReviewClient (the filter bounds its requests). /readyz
// answers for the checks of runs. An error, such as a port in use,
// leaves no server running.
func (m *Manager) serve(runs []Runnable) ([]*http.Server, error) {
	var metricsHandler http.Handler = m.registry
	var tlsConfig *tls.Config
	if !m.cfg.InsecureMetrics && on(m.cfg.MetricsAddr) {
		host, _ := os.Hostname()
		cert, err := certs.New(m.cfg.MetricsCertDir, m.log, m.cfg.Name+" metrics", host)
		if err != nil {
			return nil, fmt.Errorf("metrics endpoint: %w", err)
		}
		auth, err := metricsauth.New(metricsauth.Config{Client: cmp.Or(m.cfg.ReviewClient, m.cfg.Client), Path: "/metrics", Log: m.log, Realm: m.cfg.Name})
		if err != nil {
			return nil, err
		}
		metricsHandler, tlsConfig = auth.Wrap(metricsHandler), cert.TLSConfig()
	}
	mm := http.NewServeMux()
	mm.Handle("GET /metrics", metricsHandler)

	pm := http.NewServeMux()
	pm.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeReadyz(w, nil) // no checks: "ok" while the process serves
	})
	pm.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		all := checks(runs, time.Now()) // Checks logs the reasons
		if m.memoryState().stuck {      // watchMemory logged why
			all = append(all, reconcile.Check{Name: "memory", Err: errGCBusy})
		}
		writeReadyz(w, all)
	})

	var servers []*http.Server
	for _, e := range []struct {
		addr, what string
		h          http.Handler
		tls        *tls.Config // nil for plain HTTP
	}{
		{m.cfg.MetricsAddr, "metrics", mm, tlsConfig},
		{m.cfg.ProbeAddr, "health probe", pm, nil},
	} {
		if !on(e.addr) {
			continue
		}
		inner, err := net.Listen("tcp", e.addr)
		if err != nil {
			shutdownServers(servers)
			return nil, fmt.Errorf("%s endpoint: %w", e.what, err)
		}
		srv, ln := newServer(e.h, inner, e.tls, m.log)
		servers = append(servers, srv)
		go func() {
			if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
				m.log.Error("endpoint stopped", "addr", ln.Addr().String(), "err", err)
			}
		}()
	}
	return servers, nil
}

// checks returns the checks of runs, in order, each name once: the
// controllers that share a cache check it alike.
func checks(runs []Runnable, now time.Time) []reconcile.Check {
	var all []reconcile.Check
	for _, c := range runs {
		for _, ch := range c.Checks(now) {
			if !slices.ContainsFunc(all, func(o reconcile.Check) bool { return o.Name == ch.Name }) {
				all = append(all, ch)
			}
		}
	}
	return all
}

// on reports whether an endpoint's address turns it on: "" and "0" do not.
func on(addr string) bool {
	return addr != "" && addr != "0"
}

func shutdownServers(servers []*http.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, s := range servers {
		_ = s.Shutdown(ctx)
	}
}

// writeReadyz answers "ok" when every check passes; otherwise 503 and one
// line per check, as the API server's health endpoints do, with the
// reasons withheld: they can name the operator's identity and its
// permissions, and anyone who can reach the port may ask. They go to the
// log instead.
func writeReadyz(w http.ResponseWriter, checks []reconcile.Check) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if !slices.ContainsFunc(checks, func(c reconcile.Check) bool { return c.Err != nil }) {
		fmt.Fprintln(w, "ok")
		return
	}
	w.WriteHeader(http.StatusServiceUnavailable)
	for _, c := range checks {
		if c.Err == nil {
			fmt.Fprintf(w, "[+]%s ok\n", c.Name)
		} else {
			fmt.Fprintf(w, "[-]%s failed: reason withheld\n", c.Name)
		}
	}
	fmt.Fprintln(w, "readyz check failed")
}
