package operator

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"
)

// listen opens addr for an endpoint; "" and "0" mean the endpoint is off
// and return a nil listener.
func listen(addr, what string) (net.Listener, error) {
	if addr == "" || addr == "0" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s endpoint: %w", what, err)
	}
	return ln, nil
}

func closeAll(lns ...net.Listener) {
	for _, ln := range lns {
		if ln != nil {
			ln.Close()
		}
	}
}

// serve starts the metrics and probe servers on the listeners that are not
// nil. Each server answers its own paths and nothing else.
func (op *operator) serve(metricsLn, probeLn net.Listener) []*http.Server {
	var servers []*http.Server
	start := func(ln net.Listener, h http.Handler) {
		if ln == nil {
			return
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
		servers = append(servers, srv)
		go func() {
			if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
				op.log.Error("endpoint stopped", "addr", ln.Addr().String(), "err", err)
			}
		}()
	}
	mm := http.NewServeMux()
	mm.Handle("GET /metrics", op.registry)
	start(metricsLn, mm)

	pm := http.NewServeMux()
	pm.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	pm.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if problems := op.notReady(time.Now()); len(problems) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, strings.Join(problems, "\n"))
			return
		}
		fmt.Fprintln(w, "ok")
	})
	start(probeLn, pm)
	return servers
}

func shutdownServers(servers []*http.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, s := range servers {
		_ = s.Shutdown(ctx)
	}
}

// healthSource is what readiness asks of an informer.
type healthSource interface {
	HasSynced() bool
	Healthy(now time.Time) error
}

// notReady lists one line per failing check: a watch that has not synced,
// or one that is failing or has been silent past its deadline.
func (op *operator) notReady(now time.Time) []string {
	var problems []string
	for _, w := range []struct {
		name string
		src  healthSource
	}{{"widgets", op.widgets}, {"deployments", op.deployments}, {"services", op.services}} {
		switch {
		case !w.src.HasSynced():
			problems = append(problems, "watch "+w.name+": not synced")
		default:
			if err := w.src.Healthy(now); err != nil {
				problems = append(problems, "watch "+w.name+": "+err.Error())
			}
		}
	}
	return problems
}
