package faults

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/e2e/harness"
	"github.com/zerodep-k8s/widget-operator/testenv/controlplane"
)

// startOpVia runs the operator with a kubeconfig whose server is a proxy.
func startOpVia(t *testing.T, p *controlplane.Plane, server, caFile string, args ...string) *op {
	t.Helper()
	dir := t.TempDir()
	kc := harness.WriteOperatorKubeconfigVia(t, p, dir, server, caFile)
	o := startOp(t, p, append([]string{"--kubeconfig", kc}, args...)...)
	o.addTokenOf(t, filepath.Join(dir, "serviceaccount"))
	return o
}

// TestConnectionsCut puts a TCP proxy of our own between the operator and
// the API server (TLS passes through it). The proxy resets every
// connection every 3 seconds for 20 seconds (a shortened minute), then
// goes silent: it accepts bytes and forwards none.
func TestConnectionsCut(t *testing.T) {
	p := env.Plane.Get(t)
	ns := p.TestNamespace(t)
	c := admin(t, p)
	u, err := url.Parse(p.Host())
	if err != nil {
		t.Fatal(err)
	}
	proxy := harness.StartTCPProxy(t, u.Host)
	o := startOpVia(t, p, "https://"+proxy.Addr(), "", "--namespace", ns)
	o.waitReadyz(t, http.StatusOK, 90*time.Second)

	names := createWidgets(t, c, ns, "cut", 20, 1)
	// The fault's own rhythm: reset everything every 3 seconds for 20.
	tick := time.NewTicker(3 * time.Second)
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); {
		<-tick.C
		proxy.ResetAll()
		o.alive(t)
	}
	tick.Stop()
	accepted, resets := proxy.Stats()
	t.Logf("reset phase: %d connections accepted, %d reset; %d of %d Widgets Ready", accepted, resets, countReady(t, c, ns), len(names))
	waitAllReady(t, c, ns, names, 3*time.Minute)

	o.waitReadyz(t, http.StatusOK, 60*time.Second)
	reconnects := o.metric(t, "widget_operator_watch_reconnects_total")
	proxy.SetMode(harness.Silent)
	silent := time.Now()
	// HTTP/2 pings (15s idle, 15s for the answer) find the dead connection.
	body := o.waitReadyz(t, http.StatusServiceUnavailable, 75*time.Second)
	noticed := time.Since(silent)
	t.Logf("silent proxy noticed after %v: readyz 503 %q", noticed.Round(time.Second), strings.TrimSpace(body))
	if o.count("watch", "err") == 0 {
		t.Errorf("no log line about the failing watches")
	}
	proxy.SetMode(harness.Forward)
	o.waitReadyz(t, http.StatusOK, 2*time.Minute)
	after := o.metric(t, "widget_operator_watch_reconnects_total")
	t.Logf("reconnects %v -> %v", reconnects, after)
	if after <= reconnects {
		t.Errorf("no watch reconnect counted: %v -> %v", reconnects, after)
	}
	more := createWidgets(t, c, ns, "after", 3, 1)
	waitAllReady(t, c, ns, more, 2*time.Minute)
	o.alive(t)
}

// TestThrottlingAndServerErrors puts an HTTPS proxy of our own between the
// operator and the API server that answers 10% of requests with 429 and
// Retry-After: 1, and 10% with 500 or 503.
func TestThrottlingAndServerErrors(t *testing.T) {
	p := env.Plane.Get(t)
	ns := p.TestNamespace(t)
	c := admin(t, p)
	proxy := harness.StartHTTPSProxy(t, p)
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(1, 2))
	proxy.SetInjector(func(r *http.Request) http.Handler {
		mu.Lock()
		x := rng.Float64()
		mu.Unlock()
		switch {
		case x < 0.10:
			return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Retry-After", "1")
				statusJSON(w, http.StatusTooManyRequests, "TooManyRequests", "slow down")
			})
		case x < 0.15:
			return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				statusJSON(w, http.StatusInternalServerError, "InternalError", "injected")
			})
		case x < 0.20:
			return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				statusJSON(w, http.StatusServiceUnavailable, "ServiceUnavailable", "injected")
			})
		}
		return nil
	})
	// The client-side limit a deployment would set; retries after 429
	// and 5xx answers must stay inside it too.
	o := startOpVia(t, p, proxy.URL, proxy.CAFile, "--namespace", ns, "--qps", "20", "--burst", "30")
	names := createWidgets(t, c, ns, "thr", 30, 1)
	start := time.Now()
	waitAllReady(t, c, ns, names, 4*time.Minute)
	t.Logf("30 Widgets Ready in %v", time.Since(start).Round(time.Second))
	// No storm afterwards: with the faults still on, a converged operator
	// settles (the Events and status writes queued behind the rate limit
	// drain), then stays quiet. An absence, seen over a fixed 10 seconds.
	eventually(t, time.Minute, func() (bool, string) {
		reqs := proxy.Requests()
		last := reqs[len(reqs)-1].Time
		return time.Since(last) > 3*time.Second, fmt.Sprintf("last request %v ago", time.Since(last))
	})
	t.Logf("settled %v after the Widgets were created", time.Since(start).Round(time.Second))
	quiet := time.Now()
	time.Sleep(10 * time.Second)
	o.alive(t)

	reqs := proxy.Requests()
	var times []time.Time
	injected, n429, inQuiet := 0, 0, 0
	for _, r := range reqs {
		times = append(times, r.Time)
		if r.Injected {
			injected++
			if r.Status == http.StatusTooManyRequests {
				n429++
			}
		}
		if r.Time.After(quiet) {
			inQuiet++
		}
	}
	peak := maxPerSecond(times)
	t.Logf("%d requests at the proxy, %d answered by it (%d with 429), peak %d in one second, %d in the quiet 10s",
		len(reqs), injected, n429, peak, inQuiet)
	// Stated bounds: 30 Widgets need about 5 requests each (two creates,
	// a status patch, an Event and its retries); the informers add a few.
	if len(reqs) > 30*12 {
		t.Errorf("%d requests for 30 Widgets: a retry storm", len(reqs))
	}
	// The promise: the client's limiter lets at most --burst plus one
	// second of --qps (50) start in any one second. The proxy stamps a
	// request when it arrives, and on a loaded machine a request can
	// arrive up to a second after it took its token, so the margin is
	// one more second of --qps. A limit ignored or doubled (up to 100
	// in one second) still fails whenever the 30 Widgets fill it.
	const (
		peakPromise = 30 + 20
		peakMargin  = 20
	)
	if peak > peakPromise+peakMargin {
		t.Errorf("peak of %d requests in one second, want at most %d (--qps 20 --burst 30, plus %d for a loaded machine)",
			peak, peakPromise+peakMargin, peakMargin)
	}
	if inQuiet > 6 {
		var b strings.Builder
		for _, r := range reqs {
			if r.Time.After(quiet) {
				fmt.Fprintf(&b, "\n  %s %s %s %d injected=%v", r.Time.Format("15:04:05.000"), r.Method, r.URI, r.Status, r.Injected)
			}
		}
		t.Errorf("%d requests in 10 quiet seconds after convergence:%s", inQuiet, b.String())
	}
	// Retry-After is honoured: the same request after a 429 comes at
	// least a second later. Creates (a POST to the collection) and Events
	// share one URI among all objects of a kind, so they are left out;
	// patches, watches and lists are retried by the same code path.
	var early []string
	for i, r := range reqs {
		if !r.Injected || r.Status != http.StatusTooManyRequests || r.Method == http.MethodPost || strings.Contains(r.URI, "/events") {
			continue
		}
		for _, next := range reqs[i+1:] {
			if next.Method == r.Method && next.URI == r.URI {
				if d := next.Time.Sub(r.Time); d < 950*time.Millisecond {
					early = append(early, fmt.Sprintf("%s %s after %v", r.Method, r.URI, d))
				}
				break
			}
		}
	}
	if len(early) > 0 {
		sort.Strings(early)
		t.Errorf("%d retries came before Retry-After:\n%s", len(early), strings.Join(early, "\n"))
	}
}

// statusJSON writes a Kubernetes Status answer.
func statusJSON(w http.ResponseWriter, code int, reason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":%q,"reason":%q,"code":%d}`, msg, reason, code)
}
