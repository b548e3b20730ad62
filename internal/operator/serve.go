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
	"sync/atomic"
	"time"

	"github.com/zerodep-k8s/widget-operator/internal/metricsauth"
	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/reconcile"
)

// The limits of the metrics and probe servers. A client that holds a
// connection without finishing its request, trickles a body, or idles
// between requests is cut off; at most maxConns connections are open per
// endpoint, and a connection beyond them is closed at once. Each open
// connection costs about 10 KiB (20 KiB with TLS), so an endpoint can
// hold at most a few MiB however many clients connect.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
	writeTimeout      = 30 * time.Second
	idleTimeout       = 30 * time.Second
	maxHeaderBytes    = 16 << 10
	maxConns          = 100
)

// limitListener closes each connection accepted while max are open, so
// that a flood of connections costs a bounded amount of memory. It is
// safe for concurrent use.
type limitListener struct {
	net.Listener
	max  int64
	open atomic.Int64
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) > l.max {
			l.open.Add(-1)
			c.Close()
			continue
		}
		return &limitConn{Conn: c, l: l}, nil
	}
}

type limitConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
	return err
}

// newServer returns a server with the endpoints' limits, HTTP/1.1 only.
func newServer(h http.Handler, log *slog.Logger) *http.Server {
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		Protocols:         &protocols,
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
		certs, err := metricsauth.NewCertificates(opts.MetricsCertDir, op.log, host)
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
		inner, err := net.Listen("tcp", e.addr)
		if err != nil {
			shutdownServers(servers)
			return nil, fmt.Errorf("%s endpoint: %w", e.what, err)
		}
		var ln net.Listener = &limitListener{Listener: inner, max: maxConns}
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
