package metrics

import (
	"cmp"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/zerodep-k8s/widget-operator/queue"
	"github.com/zerodep-k8s/widget-operator/watch"
)

// The result label values of controller_runtime_reconcile_total.
const (
	ResultSuccess      = "success"       // no error, no requeue
	ResultError        = "error"         // the reconcile returned an error
	ResultRequeue      = "requeue"       // asked to run again at once
	ResultRequeueAfter = "requeue_after" // asked to run again after a delay
)

// ReconcileTimeBuckets are the bucket bounds, in seconds, of
// controller_runtime_reconcile_time_seconds, as controller-runtime sets
// them, so that existing dashboards and alerts read our histogram alike.
var ReconcileTimeBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
	1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60}

// WorkqueueBuckets are the bucket bounds, in seconds, of the workqueue
// duration histograms: 10ns to 1000s, ten times apart, as
// controller-runtime sets them (with Prometheus's ExponentialBuckets,
// whose repeated multiplication rounds two of them just below 1e-5 and
// 1e-4), so that the le labels match.
var WorkqueueBuckets = []float64{1e-08, 1e-07, 1e-06, 9.999999999999999e-06, 9.999999999999999e-05, 0.001, 0.01, 0.1, 1, 10, 100, 1000}

// APIRequestBuckets are the bucket bounds, in seconds, of
// <prefix>_api_request_duration_seconds: those client-go uses for
// its request latency.
var APIRequestBuckets = []float64{0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60}

// ControllerMetrics are the controller_runtime_* families of one
// controller, with the names and labels controller-runtime gives them:
//
//	controller_runtime_reconcile_total{controller,result}
//	controller_runtime_reconcile_errors_total{controller}
//	controller_runtime_terminal_reconcile_errors_total{controller} (errors not retried)
//	controller_runtime_reconcile_panics_total{controller}
//	controller_runtime_reconcile_timeouts_total{controller} (reconciles cut at their timeout)
//	controller_runtime_reconcile_time_seconds{controller}
//	controller_runtime_max_concurrent_reconciles{controller}
//	controller_runtime_active_workers{controller}
//
// Register the set with [Registry.Register]. Its series, one per result
// of reconcile_total included, are looked up once, by
// NewControllerMetrics, so that recording takes no lock. Its methods are
// safe for concurrent use.
type ControllerMetrics struct {
	collectors
	errors, terminal, panics, timeouts, time, active *Series
	results                                          map[string]*Series // reconcile_total by result, made at the start
}

// NewControllerMetrics returns the families of the controller name,
// its series at zero (every result of reconcile_total included, so rates
// exist from the start) but max_concurrent_reconciles, set to workers.
func NewControllerMetrics(name string, workers int) *ControllerMetrics {
	total := NewCounterVec("controller_runtime_reconcile_total", "Reconciles per controller, by result.", "controller", "result")
	m := &ControllerMetrics{collectors: collectors{total}, results: map[string]*Series{}}
	m.errors = m.add(NewCounterVec("controller_runtime_reconcile_errors_total", "Reconciles per controller that returned an error.", "controller"), name)
	m.terminal = m.add(NewCounterVec("controller_runtime_terminal_reconcile_errors_total", "Reconciles per controller that returned an error not worth retrying.", "controller"), name)
	m.panics = m.add(NewCounterVec("controller_runtime_reconcile_panics_total", "Reconciles per controller that panicked.", "controller"), name)
	m.timeouts = m.add(NewCounterVec("controller_runtime_reconcile_timeouts_total", "Reconciles per controller whose context ended at the reconcile timeout.", "controller"), name)
	m.time = m.add(NewHistogramVec("controller_runtime_reconcile_time_seconds", "How long each reconcile took, per controller.", ReconcileTimeBuckets, "controller"), name)
	m.add(NewGaugeVec("controller_runtime_max_concurrent_reconciles", "How many reconciles a controller may run at once.", "controller"), name).Set(float64(workers))
	m.active = m.add(NewGaugeVec("controller_runtime_active_workers", "How many of a controller's workers are reconciling now.", "controller"), name)
	for _, r := range []string{ResultSuccess, ResultError, ResultRequeue, ResultRequeueAfter} {
		m.results[r] = total.WithLabelValues(name, r)
	}
	return m
}

// Reconciled records one reconcile that took d and ended with result, one
// of the Result constants; ResultError also counts an error. Any other
// result is timed but not counted: reconcile_total has a series for each
// constant alone.
func (m *ControllerMetrics) Reconciled(d time.Duration, result string) {
	m.time.ObserveDuration(d)
	if s := m.results[result]; s != nil { // read only: no lock on the hot path
		s.Inc()
	}
	if result == ResultError {
		m.errors.Inc()
	}
}

// TerminalError counts an error that will not be retried, on top of
// Reconciled(d, ResultError).
func (m *ControllerMetrics) TerminalError() { m.terminal.Inc() }

// TimedOut counts a reconcile whose context ended at its timeout.
func (m *ControllerMetrics) TimedOut() { m.timeouts.Inc() }

// Panicked counts a reconcile that panicked.
func (m *ControllerMetrics) Panicked() { m.panics.Inc() }

// WorkerStarted and WorkerDone bracket one reconcile, for active_workers.
func (m *ControllerMetrics) WorkerStarted() { m.active.Inc() }

// WorkerDone ends what WorkerStarted began.
func (m *ControllerMetrics) WorkerDone() { m.active.Dec() }

// WorkqueueMetrics are the workqueue_* families of one queue, with the
// names, labels ({name, controller}) and buckets controller-runtime gives
// them: workqueue_depth, workqueue_adds_total,
// workqueue_queue_duration_seconds, workqueue_work_duration_seconds,
// workqueue_retries_total, workqueue_unfinished_work_seconds and
// workqueue_longest_running_processor_seconds. The depth family has no
// priority label: our queue has no priorities, and Prometheus treats
// controller-runtime's empty priority="" as absent, so queries match
// alike. Register the set with [Registry.Register], and set it as the
// queue's queue.Config.Metrics. Its methods do not lock or allocate, as
// the queue calls them under its own lock.
type WorkqueueMetrics struct {
	collectors
	depth, adds, retries, waited, worked *Series
}

var _ queue.Metrics = (*WorkqueueMetrics)(nil)

// NewWorkqueueMetrics returns the families of the queue name of the
// controller controller, its series at zero. unfinished is called at
// every scrape for the unfinished-work and longest-running gauges: the
// queue's Unfinished method, read through a function when the queue is
// made after its metrics.
func NewWorkqueueMetrics(name, controller string, unfinished func() (total, longest time.Duration)) *WorkqueueMetrics {
	l := []string{"name", "controller"}
	m := &WorkqueueMetrics{}
	m.depth = m.add(NewGaugeVec("workqueue_depth", "Keys ready in the work queue now.", l...), name, controller)
	m.adds = m.add(NewCounterVec("workqueue_adds_total", "Adds that made a key ready in the work queue.", l...), name, controller)
	m.waited = m.add(NewHistogramVec("workqueue_queue_duration_seconds", "How long a key waited in the work queue before a worker took it.", WorkqueueBuckets, l...), name, controller)
	m.worked = m.add(NewHistogramVec("workqueue_work_duration_seconds", "How long a worker held a key.", WorkqueueBuckets, l...), name, controller)
	m.retries = m.add(NewCounterVec("workqueue_retries_total", "Keys added back to the work queue with backoff.", l...), name, controller)
	total := NewGaugeFuncVec("workqueue_unfinished_work_seconds", "Seconds the keys held by workers now have been held, summed. A steady rise means stuck workers.", l...)
	longest := NewGaugeFuncVec("workqueue_longest_running_processor_seconds", "Seconds the key held longest by a worker now has been held.", l...)
	total.Bind(func() float64 { t, _ := unfinished(); return t.Seconds() }, name, controller)
	longest.Bind(func() float64 { _, l := unfinished(); return l.Seconds() }, name, controller)
	m.collectors = append(m.collectors, total, longest)
	return m
}

// Added counts an add.
func (m *WorkqueueMetrics) Added() { m.adds.Inc() }

// Depth sets the number of ready keys.
func (m *WorkqueueMetrics) Depth(n int) { m.depth.Set(float64(n)) }

// Retried counts a rate-limited add.
func (m *WorkqueueMetrics) Retried() { m.retries.Inc() }

// Waited observes how long a key waited.
func (m *WorkqueueMetrics) Waited(d time.Duration) { m.waited.ObserveDuration(d) }

// Worked observes how long a key was held.
func (m *WorkqueueMetrics) Worked(d time.Duration) { m.worked.ObserveDuration(d) }

// WatchSource is what the watch families read from an informer; every
// *watch.Informer[T] has these methods.
type WatchSource interface {
	Stats() watch.StatsSnapshot
	LastEvent() time.Time
}

// WatchMetrics are the <prefix>_watch_* and <prefix>_cache_* families,
// read from the informers at every scrape. Register the set with
// [Registry.Register]; it is safe for concurrent use.
type WatchMetrics struct {
	relists, reconnects, events, age, objects, bytes *Vec
}

// NewWatchMetrics returns the watch and cache families, with no informer
// yet, their names starting with prefix, such as "widget_operator".
func NewWatchMetrics(prefix string) *WatchMetrics {
	return &WatchMetrics{
		relists:    newVec(prefix+"_watch_relists_total", "Full lists after the first, after the watch fell too far behind (410 Gone).", typeCounter, nil, true, []string{"resource"}),
		reconnects: newVec(prefix+"_watch_reconnects_total", "Watches reopened after a failure.", typeCounter, nil, true, []string{"resource"}),
		events:     newVec(prefix+"_watch_events_total", "Changes applied to the informer's cache (lists included), and bookmarks received, by type.", typeCounter, nil, true, []string{"resource", "type"}),
		age:        NewGaugeFuncVec(prefix+"_watch_last_event_age_seconds", "Seconds since the informer last heard from the API server. Growing past the watch timeout means the watch is dead.", "resource"),
		objects:    NewGaugeFuncVec(prefix+"_cache_objects", "Objects in the informer's cache.", "resource"),
		bytes:      NewGaugeFuncVec(prefix+"_cache_bytes", "An estimate of the memory the objects in the informer's cache hold, as decoded (see watch.StatsSnapshot): less than the heap they keep.", "resource"),
	}
}

func (m *WatchMetrics) vecs() []*Vec {
	return []*Vec{m.relists, m.reconnects, m.events, m.age, m.objects, m.bytes}
}

// Add starts reporting src under the label resource="resource", such as
// "widgets". Until src hears from the server, the last-event age counts
// from this call, so a watch that never starts shows as one growing old.
func (m *WatchMetrics) Add(resource string, src WatchSource) {
	added := time.Now()
	stat := func(f func(*watch.StatsSnapshot) int64) func() float64 {
		return func() float64 { return float64(f(new(src.Stats()))) }
	}
	m.relists.Bind(stat(func(s *watch.StatsSnapshot) int64 { return s.Relists }), resource)
	m.reconnects.Bind(stat(func(s *watch.StatsSnapshot) int64 { return s.Reconnects }), resource)
	m.events.Bind(stat(func(s *watch.StatsSnapshot) int64 { return s.Added }), resource, "ADDED")
	m.events.Bind(stat(func(s *watch.StatsSnapshot) int64 { return s.Modified }), resource, "MODIFIED")
	m.events.Bind(stat(func(s *watch.StatsSnapshot) int64 { return s.Deleted }), resource, "DELETED")
	m.events.Bind(stat(func(s *watch.StatsSnapshot) int64 { return s.Bookmarks }), resource, "BOOKMARK")
	m.objects.Bind(stat(func(s *watch.StatsSnapshot) int64 { return s.Objects }), resource)
	m.bytes.Bind(stat(func(s *watch.StatsSnapshot) int64 { return s.Bytes }), resource)
	m.age.Bind(func() float64 {
		last := src.LastEvent()
		if last.IsZero() {
			last = added
		}
		return max(time.Since(last).Seconds(), 0)
	}, resource)
}

// APIMetrics are the <prefix>_api_* families, fed by
// [APIMetrics.RoundTripper]: <prefix>_api_requests_total{verb,code}
// and <prefix>_api_request_duration_seconds{verb}. Register the
// set with [Registry.Register]; it is safe for concurrent use.
type APIMetrics struct {
	requests, duration *Vec
}

// NewAPIMetrics returns the API request families, empty, their names
// starting with prefix, such as "widget_operator".
func NewAPIMetrics(prefix string) *APIMetrics {
	return &APIMetrics{
		requests: NewCounterVec(prefix+"_api_requests_total", "Requests sent to the API server, by verb and HTTP status code (\"<error>\" when no answer came).", "verb", "code"),
		duration: NewHistogramVec(prefix+"_api_request_duration_seconds", "Seconds from sending a request to the API server to its response headers, by verb.", APIRequestBuckets, "verb"),
	}
}

func (m *APIMetrics) vecs() []*Vec { return []*Vec{m.requests, m.duration} }

// RoundTripper returns next wrapped to count every request and time it
// to the response headers (for a watch, the opening). Each retry is a
// request of its own. next nil means http.DefaultTransport.
func (m *APIMetrics) RoundTripper(next http.RoundTripper) http.RoundTripper {
	next = cmp.Or(next, http.DefaultTransport)
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		verb := Verb(req.Method, req.URL.Path, req.URL.Query().Get("watch"))
		start := time.Now()
		resp, err := next.RoundTrip(req)
		m.duration.WithLabelValues(verb).ObserveDuration(time.Since(start))
		code := "<error>"
		if err == nil {
			code = strconv.Itoa(resp.StatusCode)
		}
		m.requests.WithLabelValues(verb, code).Inc()
		return resp, err
	})
}

// roundTripFunc is an http.RoundTripper made of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// Verb names the Kubernetes verb of a request from its method, path and
// watch query parameter: get, list, watch, create, update, patch, delete
// or deletecollection for a resource path (/api/v1/... or
// /apis/group/version/...), and the lower-case method for any other path
// such as /version.
func Verb(method, path, watchParam string) string {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	prefix := versionSegments[segs[0]]
	if prefix == 0 || len(segs) < prefix {
		return strings.ToLower(method)
	}
	rest := segs[prefix:]
	legacyWatch := len(rest) > 0 && rest[0] == "watch" // .../v1/watch/...
	if len(rest) >= 3 && rest[0] == "namespaces" {
		rest = rest[2:] // a resource in a namespace
	}
	collection := len(rest) == 1
	read := method == http.MethodGet || method == http.MethodHead
	switch {
	case read && (legacyWatch || watchParam == "true" || watchParam == "1"):
		return "watch"
	case read && collection:
		return "list"
	case read:
		return "get"
	case method == http.MethodDelete && collection:
		return "deletecollection"
	}
	return cmp.Or(writeVerbs[method], strings.ToLower(method))
}

// versionSegments is the number of path segments up to the API version:
// api/VERSION or apis/GROUP/VERSION.
var versionSegments = map[string]int{"api": 2, "apis": 3}

// writeVerbs are the Kubernetes verbs of the methods that change a
// resource.
var writeVerbs = map[string]string{
	http.MethodPost:   "create",
	http.MethodPut:    "update",
	http.MethodPatch:  "patch",
	http.MethodDelete: "delete",
}
