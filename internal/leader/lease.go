package leader

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// keeper reads, takes, renews and releases Leases for one replica: the
// one Lease loop under both the Elector and Shards. Its methods are called
// from Run's goroutine only.
type keeper struct {
	cfg    Config // defaults filled in; for Shards, Name is its longest Lease name
	leases k8sapi.Typed[k8sapi.Lease]
	// retake lets keep take back a Lease it finds free or expired, not
	// only one still its own: the Elector's rule. A shard found free goes
	// back through balance instead.
	retake  bool
	failing bool // the last read or write failed
}

// slot is one Lease as this replica knows it. Owned by Run's goroutine.
type slot struct {
	name       string
	seen       *k8sapi.Lease // as last read or written; nil if missing or unread
	observed   record
	observedAt time.Time // when this version was first seen, on our clock
	lastRenew  time.Time // start of our last successful write; zero when not ours
	// While work runs on the Lease (the Elector's leading function, a
	// shard's Work): stop ends its context, done is closed when it has
	// returned.
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

// newKeeper checks cfg, fills in its defaults and returns a keeper for
// the Lease cfg names.
func newKeeper(cfg Config) (keeper, error) {
	if cfg.Client == nil {
		return keeper{}, errors.New("leader: Config.Client is required")
	}
	cfg.Namespace = cmp.Or(cfg.Namespace, cfg.Client.Namespace())
	cfg.LeaseDuration = cmp.Or(cfg.LeaseDuration, DefaultLeaseDuration)
	cfg.RenewDeadline = cmp.Or(cfg.RenewDeadline, DefaultRenewDeadline)
	cfg.RetryPeriod = cmp.Or(cfg.RetryPeriod, DefaultRetryPeriod)
	cfg.Clock = cmp.Or[k8sapi.Clock](cfg.Clock, k8sapi.RealClock{})
	cfg.Logger = cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	// A bad name would be refused by the server at every attempt, forever:
	// say so now instead.
	switch {
	case cfg.Name == "":
		return keeper{}, errors.New("leader: Config.Name is required")
	case !isDNSSubdomain(cfg.Name):
		return keeper{}, fmt.Errorf("leader: lease name %q is not a valid object name (lower-case letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253 characters)", cfg.Name)
	case !isDNSSubdomain(cfg.Namespace) || strings.Contains(cfg.Namespace, "."):
		return keeper{}, fmt.Errorf("leader: lease namespace %q is not a valid namespace name (lower-case letters, digits and '-', starting and ending with a letter or digit, at most 63 characters)", cfg.Namespace)
	case cfg.LeaseDuration < time.Second:
		return keeper{}, fmt.Errorf("leader: LeaseDuration %v is under the API's 1s resolution", cfg.LeaseDuration)
	case cfg.RenewDeadline >= cfg.LeaseDuration:
		return keeper{}, fmt.Errorf("leader: RenewDeadline %v must be less than LeaseDuration %v", cfg.RenewDeadline, cfg.LeaseDuration)
	case cfg.RetryPeriod <= 0 || cfg.RetryPeriod >= cfg.RenewDeadline:
		return keeper{}, fmt.Errorf("leader: RetryPeriod %v must be positive and less than RenewDeadline %v", cfg.RetryPeriod, cfg.RenewDeadline)
	}
	if cfg.Identity == "" {
		id, err := DefaultIdentity()
		if err != nil {
			return keeper{}, err
		}
		cfg.Identity = id
	}
	return keeper{cfg: cfg, leases: k8sapi.For[k8sapi.Lease](cfg.Client, k8sapi.Leases)}, nil
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

// Identity returns this replica's identity.
func (k *keeper) Identity() string { return k.cfg.Identity }

// live reports whether sl, as last read, is held by another replica that
// has renewed it within its lease duration.
func (k *keeper) live(sl *slot) bool {
	return !canAcquire(sl.observed, sl.observedAt, k.cfg.Clock.Now(), k.cfg.Identity, k.cfg.LeaseDuration)
}

// take reads sl's Lease and, if it is missing, free, ours or expired,
// writes it for this replica. It returns the holder it found and whether
// this replica holds the Lease now.
func (k *keeper) take(ctx context.Context, sl *slot) (from string, ok bool) {
	ok = k.read(ctx, sl) == nil && !k.live(sl)
	from = sl.observed.holder // before write makes it ours
	return from, ok && k.write(ctx, sl)
}

// keep renews a Lease this replica holds and reports whether it still
// may act on it: renewed now, or not renewed but still within the renew
// deadline and not taken by anyone else. A renewal writes from the copy
// written last, without reading first; if that fails (a conflict:
// someone else wrote the Lease), it reads the Lease and tries again if it
// is still ours (or, with retake, free or expired).
func (k *keeper) keep(ctx context.Context, sl *slot) bool {
	ctx, cancel := context.WithDeadline(ctx, sl.lastRenew.Add(k.cfg.RenewDeadline))
	defer cancel()
	if sl.seen != nil && k.write(ctx, sl) {
		return true
	}
	if ctx.Err() == nil && k.read(ctx, sl) == nil && (sl.observed.holder == k.cfg.Identity || k.retake && !k.live(sl)) && k.write(ctx, sl) {
		return true
	}
	return sl.observed.holder == k.cfg.Identity && !mustStepDown(sl.lastRenew, k.cfg.Clock.Now(), k.cfg.RenewDeadline)
}

// read gets sl's Lease and notes when it changed (a new resourceVersion,
// or none known to compare with): at the time the answer came, so that
// expiry is never judged early.
func (k *keeper) read(ctx context.Context, sl *slot) error {
	got, err := k.leases.Get(ctx, k.cfg.Namespace, sl.name, k8sapi.GetOptions{})
	if k8sapi.IsNotFound(err) {
		got, err = nil, nil
	}
	if k.note("reading the lease", err) != nil {
		return err
	}
	if got == nil || sl.seen == nil || got.ResourceVersion != sl.seen.ResourceVersion {
		sl.observed, sl.observedAt = recordOf(got), k.cfg.Clock.Now()
	}
	sl.seen = got
	return nil
}

// write takes or renews sl for this replica, from the Lease as last seen
// (creating it when there was none), conditional on its resourceVersion.
// The renew deadline counts from the start of the write.
func (k *keeper) write(ctx context.Context, sl *slot) bool {
	now := k.cfg.Clock.Now()
	var got *k8sapi.Lease
	var err error
	if sl.seen == nil {
		l := first(k.cfg.Identity, now, k.cfg.LeaseDuration).apply(k8sapi.Lease{
			TypeMeta:   k8sapi.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
			ObjectMeta: k8sapi.ObjectMeta{Name: sl.name, Namespace: k.cfg.Namespace},
		})
		got, err = k.leases.Create(ctx, k.cfg.Namespace, &l, k8sapi.WriteOptions{})
	} else {
		upd := next(recordOf(sl.seen), k.cfg.Identity, now, k.cfg.LeaseDuration).apply(*sl.seen)
		got, err = k.leases.Update(ctx, k.cfg.Namespace, sl.name, &upd, k8sapi.WriteOptions{})
	}
	if k.note("writing the lease", err) != nil {
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
func (k *keeper) release(ctx context.Context, sl *slot) bool {
	defer func() { *sl = slot{name: sl.name} }()
	if !sl.ours() || sl.seen == nil && k.read(ctx, sl) != nil {
		return false // not ours, or unread (read logged why): it will expire
	}
	if sl.seen == nil || sl.observed.holder != k.cfg.Identity {
		return false // gone, or not ours any more
	}
	upd := released(sl.observed, k.cfg.Clock.Now()).apply(*sl.seen)
	if _, err := k.leases.Update(ctx, k.cfg.Namespace, sl.name, &upd, k8sapi.WriteOptions{}); err != nil {
		k.cfg.Logger.Warn("leader: releasing the lease failed; it will expire", "lease", sl.name, "err", err)
		return false
	}
	return true
}

// handOver waits, at most RenewDeadline in all, for the work on each
// slot held to return, and then releases those Leases, with a deadline of
// its own, as Run's context has ended. A Lease whose work did not return
// in time is not released: it will expire. It reports which slots it
// released.
func (k *keeper) handOver(sls []*slot) []bool {
	deadline := k.after(k.cfg.RenewDeadline)
	for _, sl := range sls {
		if sl.ours() && !sl.idle() {
			select {
			case <-sl.done:
			case <-deadline:
				k.cfg.Logger.Warn("leader: work did not return in time; not releasing its lease, it will expire", "lease", sl.name)
				*sl = slot{name: sl.name}
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), k.cfg.RetryPeriod)
	defer cancel()
	released := make([]bool, len(sls))
	for i, sl := range sls {
		released[i] = k.release(ctx, sl)
	}
	return released
}

// note notes how an attempt went and returns its error: it logs the
// first failure of a streak, but not conflicts, which are normal races.
func (k *keeper) note(what string, err error) error {
	switch {
	case err == nil:
		k.failing = false
	case !k.failing && !k8sapi.IsConflict(err) && !k8sapi.IsAlreadyExists(err):
		k.failing = true
		k.cfg.Logger.Warn("leader: "+what+" failed; retrying, further failures are not logged until an attempt succeeds", "err", err)
	}
	return err
}

// earliest returns the earliest renew deadline of the slots held, and at
// most RenewDeadline from now.
func (k *keeper) earliest(sls []*slot) time.Time {
	t := k.cfg.Clock.Now().Add(k.cfg.RenewDeadline)
	for _, sl := range sls {
		if sl.ours() && sl.lastRenew.Add(k.cfg.RenewDeadline).Before(t) {
			t = sl.lastRenew.Add(k.cfg.RenewDeadline)
		}
	}
	return t
}

// pause waits a retry period, but never past the renew deadline of a
// slot held, so that work on a Lease that could not be renewed stops
// right at it. It reports false if ctx ended first.
func (k *keeper) pause(ctx context.Context, sls []*slot) bool {
	select {
	case <-ctx.Done():
		return false
	case <-k.after(max(min(k.cfg.RetryPeriod, k.earliest(sls).Sub(k.cfg.Clock.Now())), 0)):
		return true
	}
}

// start runs work on a goroutine of its own, with a context that
// sl.stop ends; sl.done is closed when work has returned.
func (k *keeper) start(ctx context.Context, sl *slot, work func(context.Context)) {
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	sl.stop, sl.done = stop, done
	go func() {
		defer close(done)
		work(wctx)
	}()
}

// after returns a channel that is closed once d has elapsed on the clock.
func (k *keeper) after(d time.Duration) <-chan struct{} {
	c := make(chan struct{})
	k.cfg.Clock.AfterFunc(d, func() { close(c) })
	return c
}
