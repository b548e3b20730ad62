package faults

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/e2e/harness"
)

// hostileServer is the injector of TestHostileAPIServer: while a scenario
// is set, it answers the operator's Widget lists and watches itself, a
// given number of times (of the 100 MiB response, the lists alone
// count).
type hostileServer struct {
	mu       sync.Mutex
	scenario string
	left     int
}

func (h *hostileServer) set(scenario string, times int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.scenario, h.left = scenario, times
}

func (h *hostileServer) remaining() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.left
}

func (h *hostileServer) inject(r *http.Request) http.Handler {
	if !strings.HasSuffix(r.URL.Path, "/widgets") || r.Method != http.MethodGet {
		return nil
	}
	watch := r.URL.Query().Get("watch") == "1" || r.URL.Query().Get("watch") == "true"
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.left <= 0 {
		return nil
	}
	var f http.HandlerFunc
	switch {
	case h.scenario == "truncated watch JSON" && watch:
		f = func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"type":"ADDED","object":{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"trunc`)
		}
	case h.scenario == "HTML error page" && watch:
		f = func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			fmt.Fprint(w, "<html><head><title>502 Bad Gateway</title></head><body><h1>Bad Gateway</h1><hr>nginx</body></html>\n")
		}
	case h.scenario == "ERROR event with garbage" && watch:
		f = func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"type":"ERROR","object":"<html>garbage \u0000 inside</html>"}`+"\n")
			fmt.Fprint(w, `{"type":"ERROR","object":{"kind":"Status","code":"four-ten","details":[1,2,3]}}`+"\n")
		}
	case h.scenario == "100 MiB response" && watch:
		// Every watch is refused as expired, so that the operator lists
		// (after its streaming list is refused too): only the list
		// counts.
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			statusJSON(w, http.StatusGone, "Expired", "too old resource version")
		})
	case h.scenario == "100 MiB response":
		f = func(w http.ResponseWriter, _ *http.Request) {
			// Chunked, so that the size is known only at the end.
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"kind":"WidgetList","apiVersion":"example.com/v1","metadata":{"resourceVersion":"1"},"items":[{"metadata":{"name":"`)
			chunk := []byte(strings.Repeat("a", 1<<20))
			for range 100 {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
			fmt.Fprint(w, `"}}]}`)
		}
	default:
		return nil
	}
	h.left--
	return f
}

// TestHostileAPIServer has an HTTPS proxy answer the operator's Widget
// lists and watches with broken bodies. Each gives a typed error in the
// log and a reconnect, never a crash, and the peak RSS stays bounded.
func TestHostileAPIServer(t *testing.T) {
	p := env.Plane.Get(t)
	ns := p.TestNamespace(t)
	c := admin(t, p)
	proxy := harness.StartHTTPSProxy(t, p)
	h := &hostileServer{}
	proxy.SetInjector(h.inject)
	o := startOpVia(t, p, proxy.URL, proxy.CAFile, "--namespace", ns)
	o.waitReadyz(t, http.StatusOK, 90*time.Second)
	waitAllReady(t, c, ns, createWidgets(t, c, ns, "before", 1, 1), 2*time.Minute)
	rss0, err := harness.PeakRSS(o.Cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("peak RSS before: %d MiB", rss0>>20)

	for i, sc := range []struct {
		name  string
		times int
		want  string // in the operator's log
	}{
		{"truncated watch JSON", 2, "unexpected EOF"},
		{"HTML error page", 6, "502"},
		{"ERROR event with garbage", 1, "ERROR event"},
		{"100 MiB response", 1, "response body too large"},
	} {
		t.Run(sc.name, func(t *testing.T) {
			logBefore := len(o.Log())
			failures := o.metric(t, "widget_operator_watch_reconnects_total", `resource="widgets"`)
			h.set(sc.name, sc.times)
			proxy.DropStreams() // end the open watch, so that a new one comes
			eventually(t, 2*time.Minute, func() (bool, string) {
				o.alive(t)
				n := h.remaining()
				return n == 0, fmt.Sprintf("%d injections left", n)
			})
			h.set("", 0)
			names := createWidgets(t, c, ns, fmt.Sprintf("after-%d", i), 1, 1)
			waitAllReady(t, c, ns, names, 2*time.Minute)
			o.alive(t)
			log := o.Log()[logBefore:]
			if !strings.Contains(log, sc.want) {
				t.Errorf("no %q in the log:\n%s", sc.want, harness.Tail(log, 4096))
			}
			for _, line := range strings.Split(log, "\n") {
				if strings.Contains(line, sc.want) {
					t.Logf("log: %s", harness.Tail(line, 400))
					break
				}
			}
			if strings.Contains(log, "panic") || strings.Contains(log, "goroutine ") {
				t.Errorf("a panic in the log:\n%s", harness.Tail(log, 4096))
			}
			after := o.metric(t, "widget_operator_watch_reconnects_total", `resource="widgets"`)
			if after <= failures {
				t.Errorf("no reconnect counted: %v -> %v", failures, after)
			}
		})
	}
	rss, err := harness.PeakRSS(o.Cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	// A list page may hold up to 64 MiB; reading one that is larger stops
	// at the limit, with a buffer that doubles as it grows, and the GC lets
	// the heap reach twice what is live.
	const bound = 320 << 20
	t.Logf("peak RSS after: %d MiB (bound %d MiB)", rss>>20, bound>>20)
	if rss > bound {
		t.Errorf("peak RSS %d MiB over the bound of %d MiB", rss>>20, bound>>20)
	}
}
