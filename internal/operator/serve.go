package operator

import (
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

	"github.com/zerodep-k8s/widget-operator/internal/metricsauth"
	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/reconcile"
)

// The limits of the metrics and probe servers. A client that holds a
// connection without finishing its request, trickles a body, or idles
// between requests is cut off; at most maxConns connections are open per
// endpoint (see connLimit). Each open connection costs about 10 KiB (20
// KiB with TLS), so an endpoint can hold at most a few MiB however many
// clients connect. Net/http reads 4 KiB past MaxHeaderBytes: a request's
// line and headers are limited to 16 KiB in all.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
	writeTimeout      = 30 * time.Second
	idleTimeout       = 30 * time.Second
	maxHeaderBytes    = 12 << 10
	maxConns          = 100
)

// connLimit keeps at most max connections open, as its server's ConnState
// hook, so that a flood of connections costs a bounded amount of memory. A
// new connection at the cap closes the open one that has waited longest
// for a request (idle, or not done sending one), so that connections held
// silent or idle cannot keep out a new one, such as a probe's; when every
// open one is serving a request, the new one is closed instead. It is safe
// for concurrent use.
type connLimit struct {
	max int

	mu sync.Mutex
	// The open connections, each with the time since when it has waited
	// for a request, or zero while it serves one. Not nil.
	conns map[net.Conn]time.Time
}

// State is the server's ConnState hook.
func (l *connLimit) State(c net.Conn, s http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch _, open := l.conns[c]; {
	case s == http.StateNew:
		l.admit(c)
	case open && s == http.StateActive:
		l.conns[c] = time.Time{}
	case open && s == http.StateIdle:
		l.conns[c] = time.Now()
	default: // closed, hijacked, or closed by admit
		delete(l.conns, c)
	}
}

// admit keeps c open if there is room, or room made by closing the
// connection that has waited longest, and closes it otherwise.
func (l *connLimit) admit(c net.Conn) {
	if len(l.conns) >= l.max {
		var oldest net.Conn
		for o, since := range l.conns {
			if !since.IsZero() && (oldest == nil || since.Before(l.conns[oldest])) {
				oldest = o
			}
		}
		if oldest == nil {
			c.Close()
			return
		}
		delete(l.conns, oldest)
		if tc, ok := oldest.(*tls.Conn); ok {
			oldest = tc.NetConn() // at once: its own Close may wait to write
		}
		oldest.Close() // and its server, failing to read, closes it again
	}
	l.conns[c] = time.Now()
}

// newServer returns a server with the endpoints' limits, HTTP/1.1 only.
func newServer(h http.Handler, log *slog.Logger) *http.Server {
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	limit := &connLimit{max: maxConns, conns: map[net.Conn]time.Time{}}
	return &http.Server{
		Handler:           h,
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
	}
}

// serve starts the metrics and probe servers, each answering its own
// paths and nothing else; an address of "" or "0" turns one off. Secure
// metrics are served over TLS with the certificate from
// opts.MetricsCertDir or a self-signed one, and each scrape is reviewed
// with reviewer, a client without a rate limit, so that a scrape does not
// wait behind reconciles (the filter bounds its requests). An error, such
// as a port in use, leaves no server running.
func (op *operator) serve(opts Options, reviewer *k8sapi.Client) ([]*http.Server, error) {
	var metricsHandler http.Handler = op.registry
	var tlsConfig *tls.Config
	if !opts.InsecureMetrics && on(opts.MetricsAddr) {
		host, _ := os.Hostname()
		certs, err := metricsauth.NewCertificates(opts.MetricsCertDir, host)
		if err != nil {
			return nil, fmt.Errorf("metrics endpoint: %w", err)
		}
		auth, err := metricsauth.New(metricsauth.Config{Client: reviewer, Path: "/metrics", Log: op.log})
		if err != nil {
			return nil, err
		}
		metricsHandler, tlsConfig = auth.Wrap(metricsHandler), certs.TLSConfig()
	}
	mm := http.NewServeMux()
	mm.Handle("GET /metrics", metricsHandler)

	pm := http.NewServeMux()
	pm.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeReadyz(w, nil) // no checks: "ok" while the process serves
	})
	pm.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		writeReadyz(w, op.ctrl.Checks(time.Now())) // Checks logs the reasons
	})

	var servers []*http.Server
	for _, e := range []struct {
		addr, what string
		h          http.Handler
		tls        *tls.Config // nil for plain HTTP
	}{
		{opts.MetricsAddr, "metrics", mm, tlsConfig},
		{opts.ProbeAddr, "health probe", pm, nil},
	} {
		if !on(e.addr) {
			continue
		}
		ln, err := net.Listen("tcp", e.addr)
		if err != nil {
			shutdownServers(servers)
			return nil, fmt.Errorf("%s endpoint: %w", e.what, err)
		}
		if e.tls != nil {
			ln = tls.NewListener(ln, e.tls)
		}
		srv := newServer(e.h, op.log)
		servers = append(servers, srv)
		go func() {
			if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
				op.log.Error("endpoint stopped", "addr", ln.Addr().String(), "err", err)
			}
		}()
	}
	return servers, nil
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
