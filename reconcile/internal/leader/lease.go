package leader

import (
	"context"
	"strings"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// slot is one Lease as this replica knows it. Owned by Run's goroutine.
type slot struct {
	name       string
	seen       *k8sapi.Lease // as last read or written; nil if missing or unread
	observed   record
	observedAt time.Time // when this version was first seen, on our clock
	lastRenew  time.Time // start of our last successful write; zero when not ours
	// While a shard's Work runs on the Lease: stop ends its context,
	// done is closed when it has returned.
	stop context.CancelFunc
	done chan struct{}
}

func (s *slot) ours() bool { return !s.lastRenew.IsZero() }

// idle reports whether no work runs on s: none was started, or it has
// returned.
func (s *slot) idle() bool {
	select {
	case <-s.done:
		return true
	default:
		return s.done == nil
	}
}

// isDNSSubdomain reports whether s is an RFC 1123 subdomain, as the
// names of most objects, Leases included, are: at most 253 characters,
// in labels of lower-case letters, digits and '-', each starting and
// ending with a letter or digit, at most 63 characters. A namespace name
// is one such label.
func isDNSSubdomain(s string) bool {
	if len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' ||
			strings.Trim(label, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
			return false
		}
	}
	return true
}

// live reports whether sl, as last read, is held by another replica that
// has renewed it within its lease duration.
func (s *Shards) live(sl *slot) bool {
	return !canAcquire(sl.observed, sl.observedAt, time.Now(), s.cfg.Identity, LeaseDuration)
}

// keep renews a Lease this replica holds and reports whether it still
// may act on it: renewed now, or not renewed but still within the renew
// deadline and not taken by anyone else. A renewal writes from the copy
// written last, without reading first; if that fails (a conflict:
// someone else wrote the Lease), it reads the Lease and tries again if it
// is still ours.
func (s *Shards) keep(ctx context.Context, sl *slot) bool {
	ctx, cancel := context.WithDeadline(ctx, sl.lastRenew.Add(RenewDeadline))
	defer cancel()
	if sl.seen != nil && s.write(ctx, sl) {
		return true
	}
	if ctx.Err() == nil && s.read(ctx, sl) == nil && sl.observed.holder == s.cfg.Identity && s.write(ctx, sl) {
		return true
	}
	return sl.observed.holder == s.cfg.Identity && !mustStepDown(sl.lastRenew, time.Now(), RenewDeadline)
}

// read gets sl's Lease and notes when it changed (a new resourceVersion,
// or none known to compare with): at the time the answer came, so that
// expiry is never judged early.
func (s *Shards) read(ctx context.Context, sl *slot) error {
	got, err := s.leases.Get(ctx, s.cfg.Namespace, sl.name, k8sapi.GetOptions{})
	if k8sapi.IsNotFound(err) {
		got, err = nil, nil
	}
	if s.note("reading the lease", err) != nil {
		return err
	}
	if got == nil || sl.seen == nil || got.ResourceVersion != sl.seen.ResourceVersion {
		sl.observed, sl.observedAt = recordOf(got), time.Now()
	}
	sl.seen = got
	return nil
}

// write takes or renews sl for this replica, from the Lease as last seen
// (creating it when there was none), conditional on its resourceVersion.
// The renew deadline counts from the start of the write.
func (s *Shards) write(ctx context.Context, sl *slot) bool {
	now := time.Now()
	var got *k8sapi.Lease
	var err error
	if sl.seen == nil {
		l := first(s.cfg.Identity, now, LeaseDuration).apply(k8sapi.Lease{
			TypeMeta:   k8sapi.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
			ObjectMeta: k8sapi.ObjectMeta{Name: sl.name, Namespace: s.cfg.Namespace},
		})
		got, err = s.leases.Create(ctx, s.cfg.Namespace, &l, k8sapi.WriteOptions{})
	} else {
		upd := next(recordOf(sl.seen), s.cfg.Identity, now, LeaseDuration).apply(*sl.seen)
		got, err = s.leases.Update(ctx, s.cfg.Namespace, sl.name, &upd, k8sapi.WriteOptions{})
	}
	if s.note("writing the lease", err) != nil {
		sl.seen = nil // read it again before the next write
		return false
	}
	sl.seen, sl.observed, sl.observedAt, sl.lastRenew = got, recordOf(got), now, now
	return true
}

// release gives sl's Lease up if this replica holds it: no holder and a
// one-second duration, so that the next candidate takes it at its next
// try. When the last write failed (it may have been cut short by a
// shutdown) it reads the Lease first. It forgets sl either way, and
// reports whether it released the Lease.
func (s *Shards) release(ctx context.Context, sl *slot) bool {
	defer func() { *sl = slot{name: sl.name} }()
	if !sl.ours() || sl.seen == nil && s.read(ctx, sl) != nil {
		return false // not ours, or unread (read logged why): it will expire
	}
	if sl.seen == nil || sl.observed.holder != s.cfg.Identity {
		return false // gone, or not ours any more
	}
	upd := released(sl.observed, time.Now()).apply(*sl.seen)
	if _, err := s.leases.Update(ctx, s.cfg.Namespace, sl.name, &upd, k8sapi.WriteOptions{}); err != nil {
		s.cfg.Logger.Warn("leader: releasing the lease failed; it will expire", "lease", sl.name, "err", err)
		return false
	}
	return true
}

// note notes how an attempt went and returns its error: it logs the
// first failure of a streak, but not conflicts, which are normal races.
func (s *Shards) note(what string, err error) error {
	switch {
	case err == nil:
		s.failing = false
	case !s.failing && !k8sapi.IsConflict(err) && !k8sapi.IsAlreadyExists(err):
		s.failing = true
		s.cfg.Logger.Warn("leader: "+what+" failed; retrying, further failures are not logged until an attempt succeeds", "err", err)
	}
	return err
}

// earliest returns the earliest renew deadline of the shards held, and
// at most RenewDeadline from now.
func (s *Shards) earliest() time.Time {
	t := time.Now().Add(RenewDeadline)
	for _, sl := range s.shards {
		if sl.ours() && sl.lastRenew.Add(RenewDeadline).Before(t) {
			t = sl.lastRenew.Add(RenewDeadline)
		}
	}
	return t
}

// pause waits a retry period, but never past the renew deadline of a
// shard held, so that work on a Lease that could not be renewed stops
// right at it. It reports false if ctx ended first.
func (s *Shards) pause(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(max(min(RetryPeriod, time.Until(s.earliest())), 0)):
		return true
	}
}

// start runs Work on shard k, whose Lease is sl, on a goroutine of its
// own, with a context that sl.stop ends; sl.done is closed when Work has
// returned.
func (s *Shards) start(ctx context.Context, sl *slot, k int) {
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	sl.stop, sl.done = stop, done
	go func() {
		defer close(done)
		s.cfg.Work(wctx, k)
	}()
}
