package reconcile

import (
	"cmp"
	"strings"
	"sync"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// The waits of a [Refusals] whose fields are zero.
const (
	DefaultFirstWait = 10 * time.Second
	DefaultMaxWait   = time.Minute
)

// Refusals remembers, per key ("namespace/name"), the last write of a
// Reconciler that the API server refused (a Permanent or Waiting
// failure), with the state S of the object and its children it was
// refused in and what the Reconciler reports of it (P), so that the
// Reconciler does not ask again while nothing has changed. It also
// remembers since when the Transient failures of a key have lasted. A
// Reconciler forgets a key when its writes succeed or its object goes
// away, so memory is bounded by the keys failing.
//
// The zero value is ready to use. Set the fields before first use; a
// Refusals must not be copied after first use. It is safe for concurrent
// use.
type Refusals[S comparable, P any] struct {
	// FirstWait is the wait after a Waiting refusal; each further one in
	// a row doubles it, up to MaxWait. Zero means DefaultFirstWait (10s)
	// and DefaultMaxWait (1m).
	FirstWait, MaxWait time.Duration

	m sync.Map // key → refusal[S, P]
}

// refusal is what Refusals remembers of a key: a refusal (class
// Permanent or Waiting) made in state, which stands while the state does
// (and, when Waiting, until retryAt); or, class Transient, since when its
// Transient failures have lasted.
type refusal[S comparable, P any] struct {
	state   S
	report  P
	class   Class
	quota   bool      // refused by a ResourceQuota
	retryAt time.Time // zero: only a change ends it (Permanent)
	waits   int       // Waiting refusals in a row, which set the next wait
	since   time.Time // Transient: when the current run of failures began
}

func (r *Refusals[S, P]) remembered(key string) refusal[S, P] {
	v, _ := r.m.Load(key)
	f, _ := v.(refusal[S, P])
	return f
}

// Standing returns the report of the refusal of key if it still stands:
// it was made in state and, for a Waiting one, its retry time is after
// now, which is then wait away (zero for a Permanent one).
func (r *Refusals[S, P]) Standing(key string, state S, now time.Time) (report P, wait time.Duration, ok bool) {
	f := r.remembered(key)
	if f.class == Transient || f.state != state || !f.retryAt.IsZero() && !now.Before(f.retryAt) {
		return report, 0, false
	}
	return f.report, max(f.retryAt.Sub(now), 0), true // 0 for the zero retryAt
}

// Refused remembers that the server refused the write of key with err, of
// class (Permanent or Waiting), in state, and what the Reconciler reports
// of it. It returns the wait before the write may be sent again with
// nothing changed: none for a Permanent refusal, and for the n-th Waiting
// one in a row FirstWait·2^(n-1), up to MaxWait.
func (r *Refusals[S, P]) Refused(key string, state S, class Class, err error, report P, now time.Time) time.Duration {
	f := refusal[S, P]{state: state, report: report, class: class, quota: class == Waiting && IsQuotaExceeded(err)}
	if class == Waiting {
		f.waits = r.remembered(key).waits + 1
		f.retryAt = now.Add(k8sapi.Backoff{Base: cmp.Or(r.FirstWait, DefaultFirstWait), Max: cmp.Or(r.MaxWait, DefaultMaxWait)}.Delay(f.waits - 1))
	}
	r.m.Store(key, f)
	return max(f.retryAt.Sub(now), 0) // 0 for the zero retryAt
}

// FailingSince records a Transient failure of key at now and returns when
// the current run of them began.
func (r *Refusals[S, P]) FailingSince(key string, now time.Time) time.Time {
	f := r.remembered(key)
	if f.since.IsZero() {
		f = refusal[S, P]{since: now, waits: f.waits}
		r.m.Store(key, f)
	}
	return f.since
}

// Forget forgets key: its writes succeed, or its object is gone.
func (r *Refusals[S, P]) Forget(key string) { r.m.Delete(key) }

// RetryQuota forgets the refusals by a ResourceQuota of the keys of
// namespace and returns those keys, for the controller to queue when a
// ResourceQuota of namespace changes: their next reconciles send their
// writes again, and, if refused again, wait FirstWait (the backoff starts
// over), since the new quota may take a moment to reach the server's
// admission. It looks only at the refusals it remembers.
func (r *Refusals[S, P]) RetryQuota(namespace string) []string {
	var keys []string
	for k, v := range r.m.Range {
		if key := k.(string); v.(refusal[S, P]).quota && strings.HasPrefix(key, namespace+"/") {
			keys = append(keys, key)
			r.m.Delete(key)
		}
	}
	return keys
}
