package leader

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// ShardConfig configures Shards. Client, Name, Shards and Work are
// required; the zero value of every other field is useful.
type ShardConfig struct {
	// Client reads and writes the Leases. Required.
	Client *k8sapi.Client
	// Namespace holds the Leases; empty means the client's default
	// namespace.
	Namespace string
	// Name is the prefix of the Leases: shard k is <Name>-shard-<k>, and
	// the replicas' membership Leases are <Name>-member-<j>, j < Shards.
	// Required.
	Name string
	// Shards is the number of shards, at least 1.
	Shards int
	// Identity names this replica in the Leases; empty means
	// DefaultIdentity().
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod mean what they mean in
	// Config, with the same defaults, for every Lease.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Clock is the time source. Nil means the real clock.
	Clock k8sapi.Clock
	// Logger receives a line each time a shard moves. Nil means no
	// logging.
	Logger *slog.Logger
	// Work is called on a goroutine of its own each time this replica
	// takes a shard. Its context ends when the replica must stop working
	// on the shard: before the shard is given to another replica, and,
	// when renewals fail, at the renew deadline, before anyone else could
	// take it. The shard's Lease is released only after Work returns.
	// Required.
	Work func(ctx context.Context, shard int)
}

// Shards holds a share of S shard Leases for this replica, so that the
// replicas of a Deployment split the keys among them with no coordinator
// but the API server. Each live replica holds a membership Lease; each
// aims for S divided by the live replicas, rounded down or up (see
// balance). A replica renews what it holds every RetryPeriod, takes free
// or expired shards, and gives back extras when a replica joins. Expiry
// is judged as the Elector judges it: by how long a Lease has not changed
// on this replica's own clock.
//
// Create Shards with NewShards and start it with Run, once. Holds, Held
// and Transitions are safe to call from any goroutine.
type Shards struct {
	cfg     ShardConfig
	leases  k8sapi.Typed[k8sapi.Lease]
	held    []atomic.Bool // held[k]: this replica may work on shard k
	moves   atomic.Uint64
	log     *slog.Logger
	shards  []*slot // owned by Run's goroutine
	members []*slot // likewise
}

// slot is one Lease as this replica knows it. Owned by Run's goroutine.
type slot struct {
	name       string
	seen       *k8sapi.Lease // as last read or written; nil if missing or unread
	observed   record
	observedAt time.Time // when observed was first seen, on our clock
	lastRenew  time.Time // start of our last successful write; zero when not ours
	// While a shard is worked on: stop ends Work's context, done is
	// closed when Work has returned, giving is set once the shard is to
	// be given up.
	stop   context.CancelFunc
	done   chan struct{}
	giving bool
}

func (s *slot) ours() bool { return !s.lastRenew.IsZero() }

// NewShards checks cfg and returns a Shards.
func NewShards(cfg ShardConfig) (*Shards, error) {
	if cfg.Work == nil || cfg.Shards < 1 {
		return nil, errors.New("leader: ShardConfig.Work and a Shards count of at least 1 are required")
	}
	// The Elector checks the client, names and durations the same way;
	// the longest Lease name stands for all of them.
	e, err := New(Config{Client: cfg.Client, Namespace: cfg.Namespace, Name: cfg.Name + "-member-" + strconv.Itoa(cfg.Shards-1),
		Identity: cfg.Identity, LeaseDuration: cfg.LeaseDuration, RenewDeadline: cfg.RenewDeadline,
		RetryPeriod: cfg.RetryPeriod, Clock: cfg.Clock, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	cfg.Namespace, cfg.Identity, cfg.Clock = e.namespace, e.identity, e.clock
	cfg.LeaseDuration, cfg.RenewDeadline, cfg.RetryPeriod = e.leaseDuration, e.renewDeadline, e.retryPeriod
	s := &Shards{cfg: cfg, leases: e.leases, held: make([]atomic.Bool, cfg.Shards),
		log: cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler)).With("identity", cfg.Identity)}
	for k := range cfg.Shards {
		s.shards = append(s.shards, &slot{name: cfg.Name + "-shard-" + strconv.Itoa(k)})
		s.members = append(s.members, &slot{name: cfg.Name + "-member-" + strconv.Itoa(k)})
	}
	return s, nil
}

// Holds reports whether this replica may work on shard k now.
func (s *Shards) Holds(k int) bool { return k >= 0 && k < len(s.held) && s.held[k].Load() }

// Held returns how many shards this replica holds.
func (s *Shards) Held() int {
	n := 0
	for k := range s.held {
		if s.held[k].Load() {
			n++
		}
	}
	return n
}

// Transitions counts the shards this replica took, gave up or lost.
func (s *Shards) Transitions() uint64 { return s.moves.Load() }

// Identity returns this replica's identity.
func (s *Shards) Identity() string { return s.cfg.Identity }

// Run holds a share of the shards until ctx ends. Then it ends every
// Work's context, waits for them (at most RenewDeadline) and releases
// its Leases. It returns nil.
func (s *Shards) Run(ctx context.Context) error {
	defer s.shutdown()
	for {
		s.step(ctx)
		wait := s.cfg.RetryPeriod
		for _, sl := range s.shards {
			if sl.ours() {
				// Never sleep past a renew deadline: work on a shard that
				// could not be renewed must stop right at it.
				wait = min(wait, sl.lastRenew.Add(s.cfg.RenewDeadline).Sub(s.cfg.Clock.Now()))
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.after(max(wait, 0)):
		}
	}
}

// step is one round: renew, look, then take and give. No request of it
// outlasts the earliest renew deadline of the shards held, and work on a
// shard past its deadline stops at the end.
func (s *Shards) step(ctx context.Context) {
	for k, sl := range s.shards {
		if sl.ours() && !s.keep(ctx, sl) {
			s.lose(k, sl)
		}
	}
	until := s.cfg.Clock.Now().Add(s.cfg.RenewDeadline)
	for _, sl := range s.shards {
		if sl.ours() && sl.lastRenew.Add(s.cfg.RenewDeadline).Before(until) {
			until = sl.lastRenew.Add(s.cfg.RenewDeadline)
		}
	}
	attempt, cancel := context.WithDeadline(ctx, until)
	defer cancel()
	defer func() {
		for k, sl := range s.shards {
			if sl.ours() && mustStepDown(sl.lastRenew, s.cfg.Clock.Now(), s.cfg.RenewDeadline) {
				s.lose(k, sl)
			}
		}
	}()
	self := s.memberSlot(attempt)
	v := view{self: s.cfg.Identity, holders: make([]string, len(s.shards))}
	if self != nil {
		v.members = append(v.members, s.cfg.Identity)
	}
	for _, sl := range s.members {
		if sl != self && s.read(attempt, sl) == nil && s.live(sl) {
			v.members = append(v.members, sl.observed.holder)
		}
	}
	for k, sl := range s.shards {
		switch {
		case sl.ours():
			v.holders[k] = s.cfg.Identity
		case s.read(attempt, sl) != nil:
			v.holders[k] = "?" // unknown: neither free nor anyone's
		case s.live(sl):
			v.holders[k] = sl.observed.holder
		}
	}
	if ctx.Err() != nil || self == nil {
		return // not a member (yet): take nothing, give nothing
	}
	take, give := balance(v)
	for _, k := range give {
		if sl := s.shards[k]; !sl.giving {
			sl.giving = true
			s.held[k].Store(false)
			sl.stop()
		}
	}
	for k, sl := range s.shards {
		if sl.giving {
			select {
			case <-sl.done:
				s.release(attempt, sl)
				s.moved("shard: gave up", k, "")
			default: // Work still returning; keep renewing meanwhile
			}
		}
	}
	for _, k := range take {
		sl := s.shards[k]
		if sl.done != nil {
			select {
			case <-sl.done:
			default:
				continue // lost, and its Work has not returned yet
			}
		}
		from := sl.observed.holder // expired, or "" when released or new
		if s.write(attempt, sl) {
			s.start(ctx, k, sl)
			s.moved("shard: took", k, from)
		}
	}
}

// memberSlot renews this replica's membership Lease, or takes a free one,
// and returns it; nil when it holds none.
func (s *Shards) memberSlot(ctx context.Context) *slot {
	for _, sl := range s.members {
		if sl.ours() {
			if s.keep(ctx, sl) {
				return sl
			}
			sl.lastRenew = time.Time{}
		}
	}
	for _, sl := range s.members {
		if s.read(ctx, sl) == nil && !s.live(sl) && s.write(ctx, sl) {
			return sl
		}
	}
	return nil
}

// live reports whether sl, as last read, is held by another replica that
// has renewed it within its lease duration.
func (s *Shards) live(sl *slot) bool {
	return sl.observed.holder != s.cfg.Identity &&
		!canAcquire(sl.observed, sl.observedAt, s.cfg.Clock.Now(), s.cfg.Identity, s.cfg.LeaseDuration)
}

// keep renews a Lease this replica holds and reports whether it still
// may act on it: renewed now, or not renewed but still within the renew
// deadline and not taken by anyone else.
func (s *Shards) keep(ctx context.Context, sl *slot) bool {
	ctx, cancel := context.WithDeadline(ctx, sl.lastRenew.Add(s.cfg.RenewDeadline))
	defer cancel()
	if sl.seen != nil && s.write(ctx, sl) {
		return true
	}
	if ctx.Err() == nil && s.read(ctx, sl) == nil && sl.observed.holder == s.cfg.Identity && s.write(ctx, sl) {
		return true
	}
	return sl.observed.holder == s.cfg.Identity && !mustStepDown(sl.lastRenew, s.cfg.Clock.Now(), s.cfg.RenewDeadline)
}

// read gets sl's Lease and notes when its record changed: at the time the
// answer came, so that expiry is never judged early.
func (s *Shards) read(ctx context.Context, sl *slot) error {
	got, err := s.leases.Get(ctx, s.cfg.Namespace, sl.name, k8sapi.GetOptions{})
	if k8sapi.IsNotFound(err) {
		got, err = nil, nil
	}
	if err != nil {
		return err
	}
	var rec record
	if got != nil {
		rec = recordOf(got)
	}
	if !rec.equal(sl.observed) || sl.observedAt.IsZero() {
		sl.observed, sl.observedAt = rec, s.cfg.Clock.Now()
	}
	sl.seen = got
	return nil
}

// write takes or renews sl for this replica, from the Lease as last seen
// (creating it when there was none), conditional on its resourceVersion.
// The renew deadline counts from the start of the write.
func (s *Shards) write(ctx context.Context, sl *slot) bool {
	now := s.cfg.Clock.Now()
	var got *k8sapi.Lease
	var err error
	if sl.seen == nil {
		l := first(s.cfg.Identity, now, s.cfg.LeaseDuration).apply(k8sapi.Lease{
			TypeMeta:   k8sapi.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
			ObjectMeta: k8sapi.ObjectMeta{Name: sl.name, Namespace: s.cfg.Namespace},
		})
		got, err = s.leases.Create(ctx, s.cfg.Namespace, &l, k8sapi.WriteOptions{})
	} else {
		upd := next(recordOf(sl.seen), s.cfg.Identity, now, s.cfg.LeaseDuration).apply(*sl.seen)
		got, err = s.leases.Update(ctx, s.cfg.Namespace, sl.name, &upd, k8sapi.WriteOptions{})
	}
	if err != nil {
		sl.seen = nil // read it again before the next write
		sl.observedAt = time.Time{}
		return false
	}
	sl.seen, sl.observed, sl.observedAt, sl.lastRenew = got, recordOf(got), now, now
	return true
}

// release gives sl's Lease up (no holder, a one-second duration), so
// that another replica takes it at its next round.
func (s *Shards) release(ctx context.Context, sl *slot) {
	if sl.seen != nil && sl.ours() {
		upd := released(recordOf(sl.seen), s.cfg.Clock.Now()).apply(*sl.seen)
		if _, err := s.leases.Update(ctx, s.cfg.Namespace, sl.name, &upd, k8sapi.WriteOptions{}); err != nil {
			s.log.Warn("shard: release failed; the lease will expire", "lease", sl.name, "err", err)
		}
	}
	*sl = slot{name: sl.name}
}

// start marks shard k held and runs Work for it.
func (s *Shards) start(ctx context.Context, k int, sl *slot) {
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	sl.stop, sl.done, sl.giving = stop, done, false
	s.held[k].Store(true)
	go func() {
		defer close(done)
		s.cfg.Work(wctx, k)
	}()
}

// lose stops work on shard k, which this replica may no longer act on:
// its renewal failed past the deadline, or another replica holds it.
func (s *Shards) lose(k int, sl *slot) {
	s.held[k].Store(false)
	sl.stop()
	*sl = slot{name: sl.name, done: sl.done}
	s.moved("shard: lost", k, "")
}

func (s *Shards) moved(msg string, k int, from string) {
	s.moves.Add(1)
	s.log.Info(msg, "shard", k, "held", s.Held(), "from", from)
}

// shutdown ends every Work, waits for them at most RenewDeadline, and
// releases the Leases of the shards whose Work returned and the
// membership Lease.
func (s *Shards) shutdown() {
	for k, sl := range s.shards {
		if sl.ours() {
			s.held[k].Store(false)
			sl.stop()
		}
	}
	deadline := s.after(s.cfg.RenewDeadline)
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RetryPeriod)
	defer cancel()
	for k, sl := range s.shards {
		if !sl.ours() {
			continue
		}
		select {
		case <-sl.done:
			s.release(ctx, sl)
			s.moved("shard: released at shutdown", k, "")
		case <-deadline:
			s.log.Warn(fmt.Sprintf("shard: work on shard %d did not return in time; its lease will expire", k))
		}
	}
	for _, sl := range s.members {
		s.release(ctx, sl)
	}
}

// after returns a channel closed once d has elapsed on the clock.
func (s *Shards) after(d time.Duration) <-chan struct{} {
	c := make(chan struct{})
	s.cfg.Clock.AfterFunc(d, func() { close(c) })
	return c
}
