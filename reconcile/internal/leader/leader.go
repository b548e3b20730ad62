// Package leader shares work among the operator's replicas with
// coordination.k8s.io/v1 Leases: a replica works on a shard only while it
// holds the shard's Lease. With one shard this is leader election: one
// Lease, and only its holder works.
//
// A replica takes a Lease when it is missing (it creates it), has no
// holder (released), or has not changed for the holder's lease duration
// as measured on the replica's own clock from when it first saw that
// version: the holder's timestamps are never compared with the local
// clock, so clock skew between nodes cannot give one Lease two holders.
// Every write is an update conditional on the resourceVersion read, so of
// two replicas racing for a Lease one gets a Conflict and tries again
// later.
//
// A holder renews every RetryPeriod. If it has not renewed a Lease
// successfully for RenewDeadline, or finds another holder, it loses the
// Lease: the work on it is cancelled, and the replica campaigns again.
// RenewDeadline is shorter than LeaseDuration, so the work stops before
// any other replica may take the Lease.
//
// When the context given to Run ends, Run cancels the work, waits (at
// most RenewDeadline) for it to return, and then releases the Leases (no
// holder, a one-second duration), so that another replica takes over
// within about one RetryPeriod instead of a whole LeaseDuration.
//
// The timings are controller-runtime's defaults: a 15s lease, a 10s
// renew deadline, a 2s retry period.
package leader

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// The timings of every Lease: controller-runtime's defaults.
const (
	// LeaseDuration is how long others wait, after they last saw a Lease
	// change, before they take it over.
	LeaseDuration = 15 * time.Second
	// RenewDeadline is how long a holder keeps trying to renew a Lease
	// before it loses it: less than LeaseDuration.
	RenewDeadline = 10 * time.Second
	// RetryPeriod is the wait between two rounds of renewing and taking:
	// less than RenewDeadline.
	RetryPeriod = 2 * time.Second
)

// Config configures Shards. Client, Name and Work are required; the zero
// value of every other field is useful.
type Config struct {
	// Client reads and writes the Leases. Required.
	Client *k8sapi.Client
	// Namespace holds the Leases; empty means the client's default
	// namespace.
	Namespace string
	// Name names the Leases. With one shard it is the one Lease's name.
	// With more, shard k is <Name>-shard-<k>, and the replicas'
	// membership Leases are <Name>-member-<j>, j < Shards. Required.
	Name string
	// Shards is the number of shards. Zero or 1 means one shard: leader
	// election.
	Shards int
	// Identity names this replica in the Leases' holderIdentity. It must
	// be unique among the replicas. Empty means DefaultIdentity().
	Identity string
	// Logger receives a line each time a Lease is taken, given up, lost
	// or released, and the first failure of each streak of failed
	// requests. Nil means no logging.
	Logger *slog.Logger
	// Work is called on a goroutine of its own each time this replica
	// takes a shard. Its context ends when the replica must stop working
	// on the shard: before the shard is given to another replica, and,
	// when renewals fail, at the renew deadline, before anyone else could
	// take it. The shard's Lease is released only after Work returns.
	// Required.
	Work func(ctx context.Context, shard int)
}

// Shards holds a share of the shard Leases for this replica, so that the
// replicas of a Deployment split the keys among them with no coordinator
// but the API server. With more than one shard, each live replica holds
// a membership Lease, and each aims for S shards divided by the live
// replicas, rounded down or up (see balance). A replica renews what it
// holds every RetryPeriod, takes free or expired shards, and gives back
// extras when a replica joins. It takes its first shards a round after it
// joined, so that replicas started together each take their share, not
// all of the shards and then give most back.
//
// Create Shards with New and start it with Run, once. Held and
// Transitions are safe to call from any goroutine.
type Shards struct {
	cfg     Config // defaults filled in
	leases  k8sapi.Typed[k8sapi.Lease]
	failing bool          // the last read or write failed; owned by Run's goroutine
	held    []atomic.Bool // held[k]: this replica may work on shard k
	moves   atomic.Uint64
	shards  []*slot // owned by Run's goroutine
	members []*slot // likewise; none with one shard
}

// New checks cfg, fills in its defaults and returns a Shards.
func New(cfg Config) (*Shards, error) {
	if cfg.Client == nil {
		return nil, errors.New("leader: Config.Client is required")
	}
	cfg.Namespace = cmp.Or(cfg.Namespace, cfg.Client.Namespace())
	// The longest Lease name stands for all of them: the one Lease's with
	// one shard, the last membership Lease's with more. A bad name would
	// be refused by the server at every attempt, forever: say so now
	// instead.
	longest := cfg.Name
	if cfg.Shards > 1 {
		longest += "-member-" + strconv.Itoa(cfg.Shards-1)
	}
	switch {
	case cfg.Name == "":
		return nil, errors.New("leader: Config.Name is required")
	case cfg.Work == nil || cfg.Shards < 0:
		return nil, errors.New("leader: Config.Work is required, and Config.Shards may not be negative")
	case !isDNSSubdomain(longest):
		return nil, fmt.Errorf("leader: lease name %q is not a valid object name (lower-case letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253 characters)", longest)
	case !isDNSSubdomain(cfg.Namespace) || strings.Contains(cfg.Namespace, "."):
		return nil, fmt.Errorf("leader: lease namespace %q is not a valid namespace name (lower-case letters, digits and '-', starting and ending with a letter or digit, at most 63 characters)", cfg.Namespace)
	}
	if cfg.Identity == "" {
		id, err := DefaultIdentity()
		if err != nil {
			return nil, err
		}
		cfg.Identity = id
	}
	cfg.Shards = max(cfg.Shards, 1)
	cfg.Logger = cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler)).With("identity", cfg.Identity)
	s := &Shards{cfg: cfg, leases: k8sapi.For[k8sapi.Lease](cfg.Client, k8sapi.Leases), held: make([]atomic.Bool, cfg.Shards)}
	if cfg.Shards == 1 {
		// Leader election: one Lease, named Name, and no membership.
		s.shards = []*slot{{name: cfg.Name}}
		return s, nil
	}
	for k := range cfg.Shards {
		s.shards = append(s.shards, &slot{name: cfg.Name + "-shard-" + strconv.Itoa(k)})
		s.members = append(s.members, &slot{name: cfg.Name + "-member-" + strconv.Itoa(k)})
	}
	return s, nil
}

// DefaultIdentity returns the host name (in a pod, the pod's name), an
// underscore and 32 random hex digits, so that a restarted process never
// mistakes its predecessor's lease for its own.
func DefaultIdentity() (string, error) {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "", fmt.Errorf("leader: no host name for the identity: %v", err)
	}
	var b [16]byte
	rand.Read(b[:])
	return h + "_" + hex.EncodeToString(b[:]), nil
}

// Identity returns this replica's identity.
func (s *Shards) Identity() string { return s.cfg.Identity }

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
		if !s.pause(ctx) {
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
			s.moved("leader: lost the lease", sl, "")
			*sl = slot{name: sl.name, done: sl.done}
		}
	}
	attempt, cancel := context.WithDeadline(ctx, s.earliest())
	defer cancel()
	settled := s.member(attempt)
	var members, holders []string
	for _, sl := range s.members {
		if h := s.holderOf(attempt, sl); h != "" && h != "?" {
			members = append(members, h)
		}
	}
	for _, sl := range s.shards {
		holders = append(holders, s.holderOf(attempt, sl))
	}
	if ctx.Err() != nil || !settled {
		return // not a member since the last round: take nothing, give nothing
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
			s.moved("leader: gave up the lease", sl, "")
		}
	}
	for _, k := range take {
		// A shard lost is taken again only once its Work has returned.
		sl := s.shards[k]
		from := sl.observed.holder // expired, or "" when released or new
		if sl.idle() && s.write(attempt, sl) {
			s.held[k].Store(true)
			s.start(ctx, sl, k)
			s.moved("leader: took the lease", sl, from)
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

// member renews this replica's membership Lease, or takes one that is
// missing, free or expired, and reports whether it held one since the
// round before: a replica that has just joined takes nothing for a round,
// so that replicas started together see each other before they take
// shards, and none takes them all at first. With one shard there is no
// membership, and every replica may take the shard.
func (s *Shards) member(ctx context.Context) (settled bool) {
	for _, sl := range s.members {
		if sl.ours() && s.keep(ctx, sl) {
			return true
		}
		sl.lastRenew = time.Time{} // not ours, or no longer
	}
	for _, sl := range s.members {
		if s.read(ctx, sl) == nil && !s.live(sl) && s.write(ctx, sl) {
			return false
		}
	}
	return len(s.members) == 0
}

// moved counts one move of a shard, whose Lease is sl, and logs it.
func (s *Shards) moved(msg string, sl *slot, from string) {
	s.moves.Add(1)
	s.cfg.Logger.Info(msg, "lease", sl.name, "held", s.Held(), "from", from)
}

// shutdown ends every Work, waits for them, at most RenewDeadline in
// all, and then releases the Leases held, with a deadline of its own, as
// Run's context has ended. A shard whose Work did not return in time is
// not released: its Lease will expire.
func (s *Shards) shutdown() {
	for k, sl := range s.shards {
		if sl.ours() {
			s.held[k].Store(false)
			sl.stop()
		}
	}
	deadline := time.After(RenewDeadline)
	for _, sl := range s.shards {
		if sl.ours() && !sl.idle() {
			select {
			case <-sl.done:
			case <-deadline:
				s.cfg.Logger.Warn("leader: work did not return in time; not releasing its lease, it will expire", "lease", sl.name)
				*sl = slot{name: sl.name}
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), RetryPeriod)
	defer cancel()
	for _, sl := range s.shards {
		if s.release(ctx, sl) {
			s.moved("leader: released the lease", sl, "")
		}
	}
	for _, sl := range s.members {
		s.release(ctx, sl)
	}
}
