package operations

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// TestMetricsProbesAndLogs runs an operator with its endpoints on,
// reconciles a Widget, and reads /metrics, the probes and the log.
func TestMetricsProbesAndLogs(t *testing.T) {
	p := env.Plane.Get(t)
	ns := p.TestNamespace(t)
	c := admin(t, p)
	metricsAddr, probeAddr := freeAddr(t), freeAddr(t)
	o := env.StartOperator(t, p, "--namespace", ns, "--metrics-bind-address", metricsAddr, "--health-probe-bind-address", probeAddr)
	t.Cleanup(o.Stop)

	waitStatus(t, "http://"+probeAddr+"/readyz", http.StatusOK, 60*time.Second)
	if code, body, err := get("http://" + probeAddr + "/healthz"); err != nil || code != http.StatusOK {
		t.Fatalf("/healthz: %d %q %v", code, body, err)
	}

	ctx := ctxFor(t, 3*time.Minute)
	if _, err := widgets(c).Create(ctx, ns, newWidget("web", image, 1), k8sapi.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	w := waitReady(t, c, ns, "web", 1)

	t.Run("metrics", func(t *testing.T) {
		m, _ := scrape(t, metricsAddr)
		type check struct {
			name   string
			labels []string
			ok     func(float64) bool
			want   string
		}
		atLeast := func(n float64) func(float64) bool { return func(v float64) bool { return v >= n } }
		positive := func(v float64) bool { return v > 0 }
		any := func(v float64) bool { return v >= 0 }
		ctl := []string{"controller", "widget"}
		wq := []string{"name", "widget", "controller", "widget"}
		checks := []check{
			{"controller_runtime_reconcile_total", []string{"controller", "widget", "result", "success"}, atLeast(1), ">= 1"},
			{"controller_runtime_reconcile_total", []string{"controller", "widget", "result", "error"}, any, ">= 0"},
			{"controller_runtime_reconcile_errors_total", ctl, any, ">= 0"},
			{"controller_runtime_reconcile_time_seconds_count", ctl, atLeast(1), ">= 1"},
			{"controller_runtime_reconcile_time_seconds_bucket", append([]string{"le", "+Inf"}, ctl...), atLeast(1), ">= 1"},
			{"controller_runtime_active_workers", ctl, func(v float64) bool { return v >= 0 && v <= 4 }, "0..4"},
			{"controller_runtime_max_concurrent_reconciles", ctl, func(v float64) bool { return v == 4 }, "4 (the default --workers)"},
			{"workqueue_depth", wq, any, ">= 0"},
			{"workqueue_adds_total", wq, positive, "> 0"},
			{"workqueue_queue_duration_seconds_count", wq, positive, "> 0"},
			{"workqueue_work_duration_seconds_count", wq, positive, "> 0"},
			{"workqueue_retries_total", wq, any, ">= 0"},
			{"workqueue_unfinished_work_seconds", wq, any, ">= 0"},
			{"workqueue_longest_running_processor_seconds", wq, any, ">= 0"},
			{"widget_operator_watch_events_total", []string{"resource", "widgets", "type", "ADDED"}, atLeast(1), ">= 1"},
			{"widget_operator_watch_events_total", []string{"resource", "deployments", "type", "ADDED"}, atLeast(1), ">= 1"},
			{"widget_operator_watch_events_total", []string{"resource", "services", "type", "ADDED"}, atLeast(1), ">= 1"},
			{"widget_operator_watch_events_total", []string{"resource", "widgets", "type", "MODIFIED"}, atLeast(1), ">= 1 (our status writes)"},
			{"widget_operator_watch_relists_total", []string{"resource", "widgets"}, func(v float64) bool { return v == 0 }, "0"},
			{"widget_operator_watch_reconnects_total", []string{"resource", "widgets"}, any, ">= 0"},
			{"widget_operator_watch_last_event_age_seconds", []string{"resource", "widgets"}, func(v float64) bool { return v >= 0 && v < 700 }, "0..700 (under the longest watch timeout)"},
			{"widget_operator_api_requests_total", []string{"verb", "patch", "code", "200"}, positive, "> 0"},
			{"widget_operator_api_requests_total", []string{"verb", "list", "code", "200"}, positive, "> 0"},
			{"widget_operator_api_requests_total", []string{"verb", "watch", "code", "200"}, positive, "> 0"},
			{"widget_operator_api_request_duration_seconds_count", []string{"verb", "patch"}, positive, "> 0"},
			{"widget_operator_leader", nil, func(v float64) bool { return v == 1 }, "1 (no leader election: always leads)"},
			{"widget_operator_cache_objects", []string{"resource", "widgets"}, atLeast(1), ">= 1"},
			{"widget_operator_cache_objects", []string{"resource", "deployments"}, atLeast(1), ">= 1"},
			{"widget_operator_cache_bytes", []string{"resource", "widgets"}, atLeast(500), ">= 500 (a Widget's estimate)"},
			{"widget_operator_memory_near_limit", nil, func(v float64) bool { return v == 0 }, "0 (no limit)"},
			{"go_gc_heap_live_bytes", nil, any, ">= 0 (0 before the first GC)"},
			{"go_gc_gomemlimit_bytes", nil, positive, "> 0"},
			{"go_goroutines", nil, positive, "> 0"},
			{"go_memstats_heap_alloc_bytes", nil, positive, "> 0"},
			{"process_resident_memory_bytes", nil, positive, "> 0"},
		}
		for _, ch := range checks {
			v, ok := m.value(ch.name, ch.labels...)
			switch {
			case !ok:
				t.Errorf("%s%v: missing", ch.name, ch.labels)
			case !ch.ok(v):
				t.Errorf("%s%v = %v, want %s", ch.name, ch.labels, v, ch.want)
			}
		}
		// Types as controller-runtime declares them.
		for name, typ := range map[string]string{
			"controller_runtime_reconcile_total":           "counter",
			"controller_runtime_reconcile_time_seconds":    "histogram",
			"workqueue_depth":                              "gauge",
			"workqueue_queue_duration_seconds":             "histogram",
			"workqueue_longest_running_processor_seconds":  "gauge",
			"widget_operator_api_request_duration_seconds": "histogram",
		} {
			if got := m.types[name]; got != typ {
				t.Errorf("TYPE %s = %q, want %q", name, got, typ)
			}
		}
	})

	t.Run("endpoints serve nothing else", func(t *testing.T) {
		token := o.Token(t)
		for _, tc := range []struct {
			addr, path string
			want       int
		}{
			{metricsAddr, "/metrics", 200},
			{probeAddr, "/healthz", 200},
			{probeAddr, "/readyz", 200},
			{metricsAddr, "/", 404},
			{metricsAddr, "/healthz", 404},
			{metricsAddr, "/readyz", 404},
			{metricsAddr, "/metrics/extra", 404},
			{metricsAddr, "/debug/pprof/", 404},
			{metricsAddr, "/debug/vars", 404},
			{probeAddr, "/", 404},
			{probeAddr, "/metrics", 404},
			{probeAddr, "/debug/pprof/", 404},
			{probeAddr, "/livez", 404},
		} {
			code, body, err := get("http://" + tc.addr + tc.path)
			if err != nil {
				t.Fatal(err)
			}
			if code != tc.want {
				t.Errorf("GET %s on %s: %d, want %d", tc.path, tc.addr, code, tc.want)
			}
			if strings.Contains(body, token) || strings.Contains(body, "BEGIN ") {
				t.Errorf("GET %s on %s: the answer holds a credential", tc.path, tc.addr)
			}
		}
		// Writes are not served either.
		for _, u := range []string{"http://" + metricsAddr + "/metrics", "http://" + probeAddr + "/healthz"} {
			resp, err := http.PostForm(u, url.Values{"x": {"1"}})
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode/100 == 2 {
				t.Errorf("POST %s: %d", u, resp.StatusCode)
			}
		}
	})

	t.Run("logs", func(t *testing.T) {
		if strings.Contains(o.Log(), o.Token(t)) {
			t.Fatal("the log holds the token")
		}
		start, ok := firstLog(t, o, "starting widget-operator")
		if !ok {
			t.Fatal("no start-up line")
		}
		u, _ := url.Parse(p.Host())
		if start.Version == "" || start.Scope != "namespace "+ns || start.APIServer != u.Host || start.Auth != "token-file" {
			t.Errorf("start-up line: version %q scope %q apiServer %q auth %q; want a version, %q, %q, token-file",
				start.Version, start.Scope, start.APIServer, start.Auth, "namespace "+ns, u.Host)
		}
		// Every reconcile of the Widget is logged with its fields; the
		// one that saw the Widget's current resourceVersion among them.
		var lines []logRecord
		for _, r := range logRecords(t, o) {
			if r.Msg == "reconciled" || r.Msg == "reconcile failed" {
				lines = append(lines, r)
			}
		}
		if len(lines) == 0 {
			t.Fatal("no reconcile lines")
		}
		for _, r := range lines {
			if r.Controller != "widget" || r.Namespace != ns || r.Name != "web" || r.ResourceVersion == nil ||
				r.Result == "" || r.Duration == nil || *r.Duration <= 0 {
				t.Errorf("reconcile line lacks fields: %+v", r)
			}
		}
		seen := false
		for _, r := range lines {
			if r.ResourceVersion != nil && *r.ResourceVersion != "" && r.Result == "success" {
				seen = true
			}
		}
		if !seen {
			t.Errorf("no successful reconcile line with a resourceVersion (Widget at %s)", w.ResourceVersion)
		}
	})
}
