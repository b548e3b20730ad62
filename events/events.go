// Package events records Kubernetes Events (events.k8s.io/v1) about the
// objects a controller manages, without ever making a reconcile wait for
// the API server or letting a failing object flood it.
//
// A reconciler calls [Recorder.Event], which only checks a per-object
// rate limit and queues the event; one goroutine, [Recorder.Run], writes
// them:
//
//   - Repeats are aggregated. The same note of the same type and reason
//     about the same object, seen again within 10 minutes of the last
//     time, does not create a new Event: the existing one's series is
//     patched (count and lastObservedTime) with a JSON merge patch. The
//     first repeat sets count 2.
//   - Each object has a token bucket (25 events, one more every 5
//     minutes), so an object that fails in a loop costs at most one write
//     per 5 minutes once its burst is spent. Repeats count too: a
//     series patch is a write.
//   - The queue is bounded (1000 events); an event that finds it
//     full is dropped and counted.
//   - Failures are logged once per streak: the first failed write is
//     logged, later ones are not until a write succeeds again. A missing
//     permission (403) is therefore logged once, with a hint about RBAC,
//     and changes nothing else.
//
// The client needs create and patch on events.k8s.io events in the
// namespace of each object reported on ("default" for a cluster-scoped one).
package events

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// The Recorder's settings.
const (
	// queueSize bounds the events waiting to be written.
	queueSize = 1000
	// burst and refill are the per-object rate limit: burst events at
	// once, then one per refill.
	burst  = 25
	refill = 5 * time.Minute
	// action is what every Event says its writer was doing.
	action = "Reconcile"
	// window is how long after an event's last occurrence a repeat still
	// joins its series.
	window = 10 * time.Minute
	// writeTimeout bounds one write to the API server.
	writeTimeout = 15 * time.Second
	// maxTracked bounds the per-object rate limiters and the aggregation
	// cache; see Recorder.
	maxTracked = 4096
)

// API limits on Event fields.
const (
	maxNoteBytes   = 1024
	maxReasonBytes = 128
	maxNameBytes   = 253
)

// Config configures a Recorder. Client and Controller are required; the
// zero value of every other field is useful.
type Config struct {
	// Client writes the Events. Required.
	Client *k8sapi.Client
	// Controller is the Events' reportingController: the operator that
	// wrote them, such as "example.com/widget-operator". Required.
	Controller string
	// Instance is the Events' reportingInstance: which replica wrote
	// them. Empty means the host name (in a pod, the pod's name).
	Instance string
	// Logger receives write failures, one line per streak. Nil means no
	// logging.
	Logger *slog.Logger
}

// Stats counts what a Recorder did.
type Stats struct {
	Created     int64 // Events created
	Patched     int64 // series updates of an existing Event
	Dropped     int64 // events dropped because the queue was full, or cut short by Run's end
	RateLimited int64 // events refused by an object's rate limit
	Invalid     int64 // events refused for a bad type or an empty reason
	Failed      int64 // writes the API server refused or did not answer
}

// Recorder records Events. Event is safe for concurrent use and never
// blocks on the network; Run, the single writer, must be started once.
// Events recorded before Run starts wait in the queue.
//
// A Recorder remembers per object a rate limiter and per distinct event
// the Event to patch; both are bounded to 4096 entries, dropping the
// least useful (refilled limiters, expired series), else a few at random,
// when full.
type Recorder struct {
	cfg    Config // with the defaults filled in
	events k8sapi.Typed[k8sapi.Event]
	queue  chan item

	limitMu sync.Mutex
	limits  map[string]*k8sapi.TokenBucket

	created, patched, dropped, rateLimited, invalid, failed atomic.Int64

	// Owned by the Run goroutine.
	series  map[seriesKey]*seriesState
	failing bool
}

// item is one queued event.
type item struct {
	regarding               k8sapi.ObjectReference
	eventType, reason, note string
	at                      time.Time
}

// seriesKey identifies events that aggregate into one series.
type seriesKey struct {
	object, eventType, reason, note string
}

type seriesState struct {
	namespace, name string
	count           int32
	last            time.Time
}

// New returns a Recorder for cfg. It fails only if cfg.Client is nil,
// cfg.Controller is empty or no instance name can be found.
func New(cfg Config) (*Recorder, error) {
	switch {
	case cfg.Client == nil:
		return nil, errors.New("events: Config.Client is required")
	case cfg.Controller == "":
		return nil, errors.New("events: Config.Controller is required")
	}
	if cfg.Instance == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			return nil, fmt.Errorf("events: no Config.Instance and no host name: %v", err)
		}
		cfg.Instance = h
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	return &Recorder{
		cfg:    cfg,
		events: k8sapi.For[k8sapi.Event](cfg.Client, k8sapi.Events),
		queue:  make(chan item, queueSize),
		limits: make(map[string]*k8sapi.TokenBucket),
		series: make(map[seriesKey]*seriesState),
	}, nil
}

// Event queues an Event about regarding. eventType must be "Normal" or
// "Warning" and reason must not be empty; other events are counted as
// Invalid and dropped. note is made one line, escaped and cut to the
// API's 1024 bytes by k8sapi.Printable. Event returns at once: the write
// happens on Run's goroutine, or not at all if the object's rate limit or
// the queue refuses it.
func (r *Recorder) Event(regarding k8sapi.ObjectReference, eventType, reason, note string) {
	if (eventType != "Normal" && eventType != "Warning") || reason == "" || regarding.Name == "" {
		r.invalid.Add(1)
		return
	}
	now := time.Now()
	if !r.allow(objectKey(regarding), now) {
		r.rateLimited.Add(1)
		return
	}
	select {
	case r.queue <- item{regarding: regarding, eventType: eventType, reason: k8sapi.Printable(reason, maxReasonBytes), note: k8sapi.Printable(note, maxNoteBytes), at: now}:
	default:
		r.dropped.Add(1)
	}
}

// Stats returns the counts so far.
func (r *Recorder) Stats() Stats {
	return Stats{
		Created: r.created.Load(), Patched: r.patched.Load(), Dropped: r.dropped.Load(),
		RateLimited: r.rateLimited.Load(), Invalid: r.invalid.Load(), Failed: r.failed.Load(),
	}
}

// Run writes queued events until ctx ends, then returns; events still
// queued are not written. Call it once, on its own goroutine.
func (r *Recorder) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case it := <-r.queue:
			r.write(ctx, it)
		}
	}
}

// write creates the Event, or patches the series it repeats.
func (r *Recorder) write(runCtx context.Context, it item) {
	ctx, cancel := context.WithTimeout(runCtx, writeTimeout)
	defer cancel()
	key := seriesKey{object: objectKey(it.regarding), eventType: it.eventType, reason: it.reason, note: it.note}
	if s := r.series[key]; s != nil && it.at.Sub(s.last) <= window {
		count := s.count + 1
		patch, _ := json.Marshal(map[string]k8sapi.EventSeries{"series": {Count: count, LastObservedTime: k8sapi.MicroTime{Time: it.at}}})
		_, err := r.events.Patch(ctx, s.namespace, s.name, k8sapi.MergePatch, patch, k8sapi.PatchOptions{})
		if err == nil {
			s.count, s.last = count, it.at
		}
		if !k8sapi.IsNotFound(err) {
			r.count(runCtx, &r.patched, err)
			return
		}
		// The Event expired or was deleted: start a new one.
	}
	ev := r.newEvent(it)
	_, err := r.events.Create(ctx, ev.Namespace, ev, k8sapi.WriteOptions{})
	r.count(runCtx, &r.created, err)
	if err != nil {
		return
	}
	expire(r.series, func(s *seriesState) bool { return it.at.Sub(s.last) > window })
	r.series[key] = &seriesState{namespace: ev.Namespace, name: ev.Name, count: 1, last: it.at}
}

// expire makes room in m when it is full: it forgets the entries that stale
// reports (series past their window, buckets full again, which behave like
// new ones), then, while m is still over 15/16 of maxTracked, entries the
// map's random order picks. So m stays bounded, the cost of the scan is
// shared by the next maxTracked/16 entries, and an eviction resets few
// objects' limits, never every one at once.
func expire[K comparable, V any](m map[K]V, stale func(V) bool) {
	if len(m) < maxTracked {
		return
	}
	maps.DeleteFunc(m, func(_ K, v V) bool { return stale(v) })
	for k := range m {
		if len(m) <= maxTracked-maxTracked/16 {
			return
		}
		delete(m, k)
	}
}

func (r *Recorder) newEvent(it item) *k8sapi.Event {
	ns := cmp.Or(it.regarding.Namespace, "default") // Events about cluster-scoped objects go to default
	suffix := fmt.Sprintf(".%016x", rand.Uint64())
	return &k8sapi.Event{
		TypeMeta:            k8sapi.TypeMeta{APIVersion: "events.k8s.io/v1", Kind: "Event"},
		ObjectMeta:          k8sapi.ObjectMeta{Name: k8sapi.Printable(it.regarding.Name, maxNameBytes-len(suffix)) + suffix, Namespace: ns},
		EventTime:           k8sapi.MicroTime{Time: it.at},
		ReportingController: r.cfg.Controller,
		ReportingInstance:   r.cfg.Instance,
		Action:              action,
		Reason:              it.reason,
		Regarding:           it.regarding,
		Note:                it.note,
		Type:                it.eventType,
	}
}

// count counts the end of a write: in n when err is nil; as dropped when
// it was cut short by Run's end, which is nothing to warn about; else as
// a failure, logged if it starts a streak.
func (r *Recorder) count(runCtx context.Context, n *atomic.Int64, err error) {
	switch {
	case err == nil:
		n.Add(1)
		r.failing = false
	case runCtx.Err() != nil:
		r.dropped.Add(1)
	case r.failing:
		r.failed.Add(1)
	default:
		r.failed.Add(1)
		r.failing = true
		msg := "events: writing an Event failed; further failures are not logged until a write succeeds"
		if k8sapi.IsForbidden(err) {
			msg = "events: not allowed to write Events; grant create and patch on events.k8s.io events. Further failures are not logged until a write succeeds"
		}
		r.cfg.Logger.Warn(msg, "err", err)
	}
}

// objectKey identifies the object an event is about.
func objectKey(ref k8sapi.ObjectReference) string {
	return cmp.Or(ref.UID, ref.APIVersion+"/"+ref.Kind+"/"+ref.Namespace+"/"+ref.Name)
}

// allow takes a token from the object's bucket if it has one.
func (r *Recorder) allow(obj string, now time.Time) bool {
	r.limitMu.Lock()
	defer r.limitMu.Unlock()
	b := r.limits[obj]
	if b == nil {
		expire(r.limits, func(b *k8sapi.TokenBucket) bool { return b.Full(now) })
		b = k8sapi.NewTokenBucket(1/refill.Seconds(), burst)
		r.limits[obj] = b
	}
	return b.Allow(now)
}
