package leader

import (
	"context"
	"errors"
	"log/slog"
	"slices"
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
	keeper
	work    func(ctx context.Context, shard int)
	held    []atomic.Bool // held[k]: this replica may work on shard k
	moves   atomic.Uint64
	shards  []*slot // owned by Run's goroutine
	members []*slot // likewise
}

// NewShards checks cfg and returns a Shards.
func NewShards(cfg ShardConfig) (*Shards, error) {
	if cfg.Work == nil || cfg.Shards < 1 {
		return nil, errors.New("leader: ShardConfig.Work and a Shards count of at least 1 are required")
	}
	// The longest Lease name stands for all of them.
	k, err := newKeeper(Config{Client: cfg.Client, Namespace: cfg.Namespace, Name: cfg.Name + "-member-" + strconv.Itoa(cfg.Shards-1),
		Identity: cfg.Identity, LeaseDuration: cfg.LeaseDuration, RenewDeadline: cfg.RenewDeadline,
		RetryPeriod: cfg.RetryPeriod, Clock: cfg.Clock, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	k.cfg.Logger = k.cfg.Logger.With("identity", k.cfg.Identity)
	s := &Shards{keeper: k, work: cfg.Work, held: make([]atomic.Bool, cfg.Shards)}
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

// Run holds a share of the shards until ctx ends. Then it ends every
// Work's context, waits for them (at most RenewDeadline) and releases
// its Leases. It returns nil.
func (s *Shards) Run(ctx context.Context) error {
	defer s.shutdown()
	for {
		s.step(ctx)
		if !s.pause(ctx, s.shards) {
			return nil
		}
	}
}

// step is one round: renew, look, then take and give. No request of it
// outlasts the earliest renew deadline of the shards held; work on a
// shard past its deadline stops at the next round, which Run starts
// right at that deadline.
func (s *Shards) step(ctx context.Context) {
	for k, sl := range s.shards {
		if sl.ours() && !s.keep(ctx, sl) {
			// Lost: this replica may no longer act on it. A retake waits
			// for its Work to return.
			s.held[k].Store(false)
			sl.stop()
			*sl = slot{name: sl.name, done: sl.done}
			s.moved("shard: lost", k, "")
		}
	}
	attempt, cancel := context.WithDeadline(ctx, s.earliest(s.shards))
	defer cancel()
	member := s.member(attempt)
	var members, holders []string
	for _, sl := range s.members {
		if h := s.holderOf(attempt, sl); h != "" && h != "?" {
			members = append(members, h)
		}
	}
	for _, sl := range s.shards {
		holders = append(holders, s.holderOf(attempt, sl))
	}
	if ctx.Err() != nil || !member {
		return // not a member (yet): take nothing, give nothing
	}
	take, give := balance(s.cfg.Identity, members, holders)
	for _, k := range give {
		s.held[k].Store(false)
		s.shards[k].stop()
	}
	for k, sl := range s.shards {
		// A shard still ours but no longer held is being given up: its
		// Lease goes once its Work has returned.
		if sl.ours() && !s.held[k].Load() && sl.idle() {
			s.release(attempt, sl)
			s.moved("shard: gave up", k, "")
		}
	}
	for _, k := range take {
		// A shard lost is taken again only once its Work has returned.
		sl := s.shards[k]
		from := sl.observed.holder // expired, or "" when released or new
		if sl.idle() && s.write(attempt, sl) {
			s.held[k].Store(true)
			s.start(ctx, sl, func(ctx context.Context) { s.work(ctx, k) })
			s.moved("shard: took", k, from)
		}
	}
}

// holderOf returns who holds sl's Lease, reading it unless this replica
// holds it: "" when it is missing, free or expired, "?" when it could not
// be read (neither free nor anyone's).
func (s *Shards) holderOf(ctx context.Context, sl *slot) string {
	switch {
	case sl.ours():
		return s.cfg.Identity
	case s.read(ctx, sl) != nil:
		return "?"
	case s.live(sl):
		return sl.observed.holder
	}
	return ""
}

// member renews this replica's membership Lease, or takes a free one,
// and reports whether it holds one.
func (s *Shards) member(ctx context.Context) bool {
	for _, sl := range s.members {
		if sl.ours() && s.keep(ctx, sl) {
			return true
		}
		sl.lastRenew = time.Time{} // not ours, or no longer
	}
	for _, sl := range s.members {
		if _, ok := s.take(ctx, sl); ok {
			return true
		}
	}
	return false
}

// moved counts one move of shard k and logs it.
func (s *Shards) moved(msg string, k int, from string) {
	s.moves.Add(1)
	s.cfg.Logger.Info(msg, "shard", k, "held", s.Held(), "from", from)
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
	released := s.handOver(slices.Concat(s.shards, s.members))
	for k := range s.shards {
		if released[k] {
			s.moved("shard: released at shutdown", k, "")
		}
	}
}
