package metrics

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/queue"
	"github.com/zerodep-k8s/widget-operator/watch"
)

// samples scrapes r and returns "name{labels}" -> value.
func samples(t *testing.T, r *Registry) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, f := range parseExposition(t, scrape(t, r)) {
		for _, s := range f.samples {
			var ls []string
			for _, l := range s.labels {
				ls = append(ls, l[0]+"="+l[1])
			}
			out[s.name+"{"+strings.Join(ls, ",")+"}"] = s.value
		}
	}
	return out
}

func TestWorkqueueBucketsMatchControllerRuntime(t *testing.T) {
	// The le labels a controller-runtime operator writes for
	// ExponentialBuckets(10e-9, 10, 12), rounding of the repeated
	// multiplication included.
	var got []string
	for _, b := range WorkqueueBuckets {
		got = append(got, string(appendFloat(nil, b)))
	}
	want := "1e-08 1e-07 1e-06 9.999999999999999e-06 9.999999999999999e-05 0.001 0.01 0.1 1 10 100 1000"
	if strings.Join(got, " ") != want {
		t.Errorf("buckets = %s", strings.Join(got, " "))
	}
}

func TestControllerMetrics(t *testing.T) {
	r := NewRegistry()
	s := NewControllerMetrics("widget", 3)
	r.MustRegister(s)
	s.WorkerStarted()
	s.Reconciled(20*time.Millisecond, ResultSuccess)
	s.Reconciled(2*time.Second, ResultError)
	s.TerminalError()
	s.TimedOut()
	s.Reconciled(time.Millisecond, ResultRequeueAfter)
	s.Reconciled(time.Millisecond, "bogus") // timed, not counted
	got := samples(t, r)
	if v, ok := got["controller_runtime_reconcile_total{controller=widget,result=bogus}"]; ok {
		t.Errorf("a result outside the constants has a series (%v)", v)
	}
	for k, want := range map[string]float64{
		"controller_runtime_reconcile_total{controller=widget,result=success}":         1,
		"controller_runtime_reconcile_total{controller=widget,result=error}":           1,
		"controller_runtime_reconcile_total{controller=widget,result=requeue}":         0,
		"controller_runtime_reconcile_total{controller=widget,result=requeue_after}":   1,
		"controller_runtime_reconcile_errors_total{controller=widget}":                 1,
		"controller_runtime_terminal_reconcile_errors_total{controller=widget}":        1,
		"controller_runtime_reconcile_panics_total{controller=widget}":                 0,
		"controller_runtime_reconcile_timeouts_total{controller=widget}":               1,
		"controller_runtime_reconcile_time_seconds_bucket{controller=widget,le=0.005}": 2,
		"controller_runtime_reconcile_time_seconds_bucket{controller=widget,le=0.025}": 3,
		"controller_runtime_reconcile_time_seconds_count{controller=widget}":           4,
		"controller_runtime_max_concurrent_reconciles{controller=widget}":              3,
		"controller_runtime_active_workers{controller=widget}":                         1,
	} {
		if v, ok := got[k]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", k, v, ok, want)
		}
	}
}

// TestQueueAdapter drives a real queue with a fake clock through the
// adapter and checks the workqueue families.
func TestQueueAdapter(t *testing.T) {
	r := NewRegistry()
	var q *queue.Queue
	m := NewWorkqueueMetrics("widgets", "widget", func() (time.Duration, time.Duration) { return q.Unfinished() })
	r.MustRegister(m)
	clk := &fakeClock{now: time.Unix(1000, 0)}
	q = queue.New(queue.Config{Name: "widgets", Clock: clk, Metrics: m})
	q.Add("a")
	q.Add("b")
	q.Add("a")
	clk.now = clk.now.Add(2 * time.Second)
	k, _ := q.Get()
	clk.now = clk.now.Add(3 * time.Second)
	got := samples(t, r)
	for key, want := range map[string]float64{
		"workqueue_adds_total{name=widgets,controller=widget}":                          2,
		"workqueue_depth{name=widgets,controller=widget}":                               1,
		"workqueue_queue_duration_seconds_count{name=widgets,controller=widget}":        1,
		"workqueue_queue_duration_seconds_bucket{name=widgets,controller=widget,le=1}":  0,
		"workqueue_queue_duration_seconds_bucket{name=widgets,controller=widget,le=10}": 1,
		"workqueue_unfinished_work_seconds{name=widgets,controller=widget}":             3,
		"workqueue_longest_running_processor_seconds{name=widgets,controller=widget}":   3,
		"workqueue_retries_total{name=widgets,controller=widget}":                       0,
		"workqueue_work_duration_seconds_count{name=widgets,controller=widget}":         0,
	} {
		if v, ok := got[key]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", key, v, ok, want)
		}
	}
	q.Done(k)
	q.AddRateLimited("a")
	got = samples(t, r)
	if got["workqueue_work_duration_seconds_count{name=widgets,controller=widget}"] != 1 ||
		got["workqueue_retries_total{name=widgets,controller=widget}"] != 1 ||
		got["workqueue_unfinished_work_seconds{name=widgets,controller=widget}"] != 0 {
		t.Errorf("after Done: %v", got)
	}
}

// fakeClock is a k8sapi.Clock whose time the test sets; its timers never
// fire.
type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time { return c.now }

func (c *fakeClock) AfterFunc(d time.Duration, f func()) k8sapi.Timer { return stoppedTimer{} }

type stoppedTimer struct{}

func (stoppedTimer) Stop() bool                 { return true }
func (stoppedTimer) Reset(d time.Duration) bool { return true }

// recordingSource is a WatchSource whose figures the test sets.
type recordingSource struct {
	stats watch.StatsSnapshot
	last  time.Time
}

func (s *recordingSource) Stats() watch.StatsSnapshot { return s.stats }
func (s *recordingSource) LastEvent() time.Time       { return s.last }

func TestWatchMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := NewRegistry()
		m := NewWatchMetrics("widget_operator")
		r.MustRegister(m)
		src := &recordingSource{stats: watch.StatsSnapshot{Relists: 2, Reconnects: 5, Added: 7, Modified: 11, Deleted: 1, Bookmarks: 3, Objects: 6, Bytes: 4096}}
		m.Add("widgets", src)
		time.Sleep(40 * time.Second) // the bubble's clock
		got := samples(t, r)
		for key, want := range map[string]float64{
			"widget_operator_watch_relists_total{resource=widgets}":              2,
			"widget_operator_watch_reconnects_total{resource=widgets}":           5,
			"widget_operator_watch_events_total{resource=widgets,type=ADDED}":    7,
			"widget_operator_watch_events_total{resource=widgets,type=MODIFIED}": 11,
			"widget_operator_watch_events_total{resource=widgets,type=DELETED}":  1,
			"widget_operator_watch_events_total{resource=widgets,type=BOOKMARK}": 3,
			"widget_operator_watch_last_event_age_seconds{resource=widgets}":     40, // never heard: since Add
			"widget_operator_cache_objects{resource=widgets}":                    6,
			"widget_operator_cache_bytes{resource=widgets}":                      4096,
		} {
			if v, ok := got[key]; !ok || v != want {
				t.Errorf("%s = %v (present %v), want %v", key, v, ok, want)
			}
		}
		src.last = time.Now().Add(-1500 * time.Millisecond)
		if got := samples(t, r)["widget_operator_watch_last_event_age_seconds{resource=widgets}"]; got != 1.5 {
			t.Errorf("age = %v", got)
		}
	})
}

func TestVerb(t *testing.T) {
	for _, tc := range []struct{ method, path, watch, want string }{
		{"GET", "/api/v1/namespaces/default/pods", "", "list"},
		{"GET", "/api/v1/namespaces/default/pods/web", "", "get"},
		{"GET", "/api/v1/namespaces/default/pods/web/log", "", "get"},
		{"GET", "/api/v1/namespaces", "", "list"},
		{"GET", "/api/v1/namespaces/default", "", "get"},
		{"GET", "/api/v1/pods", "", "list"},
		{"GET", "/apis/example.com/v1/namespaces/ns/widgets", "true", "watch"},
		{"GET", "/apis/example.com/v1/watch/namespaces/ns/widgets", "", "watch"},
		{"GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/x", "", "get"},
		{"POST", "/apis/events.k8s.io/v1/namespaces/ns/events", "", "create"},
		{"PUT", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l", "", "update"},
		{"PUT", "/apis/example.com/v1/namespaces/ns/widgets/w/status", "", "update"},
		{"PATCH", "/apis/apps/v1/namespaces/ns/deployments/d", "", "patch"},
		{"DELETE", "/apis/apps/v1/namespaces/ns/deployments/d", "", "delete"},
		{"DELETE", "/apis/apps/v1/namespaces/ns/deployments", "", "deletecollection"},
		{"GET", "/version", "", "get"},
		{"GET", "/", "", "get"},
		{"GET", "/apis", "", "get"},
		{"OPTIONS", "/api/v1/pods", "", "options"},
		// A group version's own path is an API path too.
		{"GET", "/api/v1", "", "get"},
		{"POST", "/apis/apps/v1", "", "create"},
		{"GET", "/apis/apps", "", "get"},
	} {
		if got := Verb(tc.method, tc.path, tc.watch); got != tc.want {
			t.Errorf("Verb(%s %s watch=%q) = %q, want %q", tc.method, tc.path, tc.watch, got, tc.want)
		}
	}
}

// failingTransport answers with code, or fails when code is 0.
type failingTransport struct{ calls atomic.Int32 }

func (f *failingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if f.calls.Add(1) == 1 {
		return nil, fmt.Errorf("connection refused")
	}
	rec := httptest.NewRecorder()
	rec.WriteHeader(http.StatusNotFound)
	return rec.Result(), nil
}

func TestAPIRoundTripper(t *testing.T) {
	r := NewRegistry()
	m := NewAPIMetrics("widget_operator")
	r.MustRegister(m)
	c := &http.Client{Transport: m.RoundTripper(&failingTransport{})}
	for range 3 {
		resp, err := c.Get("https://api.invalid/api/v1/namespaces/ns/pods/p")
		if err == nil {
			resp.Body.Close()
		}
	}
	got := samples(t, r)
	if got["widget_operator_api_requests_total{verb=get,code=<error>}"] != 1 ||
		got["widget_operator_api_requests_total{verb=get,code=404}"] != 2 ||
		got["widget_operator_api_request_duration_seconds_count{verb=get}"] != 3 {
		t.Errorf("api samples: %v", got)
	}
}
