package reconcile

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"

	"github.com/zerodep-k8s/widget-operator/metrics"
	"github.com/zerodep-k8s/widget-operator/queue"
	"github.com/zerodep-k8s/widget-operator/reconcile/internal/leader"
)

// Caches is a set of watch caches that controllers share
// ([Controller.Caches]): the calls of [WatchPrimary], [WatchOwned] and
// [WatchMapped] of any controller of the set that name the same cache get
// one [watch.Cache], with one list and one watch, and each call's handler
// on it. A cache is named by its watch.Config Name, Namespace and
// selectors (label, field and shard); the other fields of the first config
// under that name are the cache's (later ones are ignored), and a config
// of another object type under the same name is an error, which the
// controller's Run returns.
//
// Its owner runs it with [Caches.Run], once, after the last cache is
// made and until the last controller has returned; the controllers wait
// for their caches to sync and check them, but do not run them. The zero
// value is an empty set. Its methods are safe for concurrent use.
type Caches struct {
	// Metrics, when not nil, reports each cache under its Config.Name.
	// Nil means no metrics.
	Metrics *metrics.WatchMetrics

	mu      sync.Mutex
	caches  []named  // in the order made
	keys    []string // keys[i] names caches[i] (see entry)
	running bool     // Run was called: no more caches, nor handlers
}

// entry returns the cache of s named by n's name, namespace and the
// selectors, or n, made for them, if it has none; none once it runs.
func (s *Caches) entry(n named, namespace, labels, fields, shards string) named {
	key := n.name + "\x00" + namespace + "\x00" + labels + "\x00" + fields + "\x00" + shards
	s.mu.Lock()
	i := slices.Index(s.keys, key)
	switch {
	case s.running:
		n = named{}
	case i >= 0:
		n = s.caches[i]
	default:
		s.caches, s.keys = append(s.caches, n), append(s.keys, key)
		if s.Metrics != nil {
			s.Metrics.Add(n.name, n.cache.(metrics.WatchSource))
		}
	}
	s.mu.Unlock()
	return n
}

// Run runs every cache of the set until ctx ends. Called again, it
// returns at once.
func (s *Caches) Run(ctx context.Context) {
	s.mu.Lock()
	caches, running := s.caches, s.running
	s.running = true
	s.mu.Unlock()
	if running {
		return
	}
	var wg sync.WaitGroup
	for _, w := range caches {
		// Run fails only without a Source, which WatchMapped refuses.
		wg.Go(func() { w.run(ctx) })
	}
	wg.Wait()
}

// Election is one leader election, or one set of shards, shared by the
// controllers that name it ([Controller.Election]): each reconciles its
// keys of the shards held (every key, while it leads). Taking a shard
// queues the shard's keys of every controller's primary cache, behind the
// live changes (see [queue.Queue.AddBacklog]), and a shard is handed over
// only after the reconciles of its keys in flight, of every controller,
// have ended.
//
// Its owner runs it with [Election.Run], once, after the controllers
// have made their caches; it campaigns once their caches have synced.
// Set the fields before the first controller's first cache is made. Its
// methods are safe for concurrent use.
type Election struct {
	// LeaderElection configures the Leases. Nil means none: the
	// controllers always lead.
	LeaderElection *LeaderElection
	// Logger receives the election's lines. Nil means no logging.
	Logger *slog.Logger
	// Metrics receives <MetricsPrefix>_leader (1 while [Election.IsLeader]
	// reports true, else 0) and, with shards, <MetricsPrefix>_shards_held
	// and <MetricsPrefix>_shard_transitions_total. Nil means no metrics.
	Metrics *metrics.Registry
	// MetricsPrefix starts the names of its series. Empty means
	// "operator".
	MetricsPrefix string

	// initErr, shards (nil without leader election), shardCtx and
	// inFlight are set as the first controller joins, under mu.
	// shardCtx[k] is the context of the shard k while this replica holds
	// it, nil otherwise; inFlight[k] counts the reconciles of its keys
	// running, each added under mu while shardCtx[k] is set.
	initErr  error
	shards   *leader.Shards
	mu       sync.Mutex
	shardCtx []context.Context
	inFlight []sync.WaitGroup
	members  []*Controller
}

// join adds c to the members, and makes the election on the first call.
func (e *Election) join(c *Controller) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.members == nil {
		e.initErr = e.init()
	}
	e.members = append(e.members, c)
	return e.initErr
}

func (e *Election) init() error {
	prefix := cmp.Or(e.MetricsPrefix, "operator")
	collectors := []metrics.Collector{metrics.NewGaugeFunc(prefix+"_leader", "1 while this replica is the leader, 0 otherwise.", func() float64 {
		if e.IsLeader() {
			return 1
		}
		return 0
	})}
	if le := e.LeaderElection; le != nil {
		if le.SplitCaches && le.Shards > 256 {
			return errors.New("reconcile: LeaderElection.SplitCaches takes at most 256 Shards")
		}
		var err error
		e.shards, err = leader.New(leader.Config{Client: le.Client, Namespace: le.Namespace, Name: le.Name,
			Shards: le.Shards, Identity: le.Identity, Logger: e.Logger, Work: e.holdShard})
		if err != nil {
			return err
		}
		n := max(le.Shards, 1)
		e.shardCtx, e.inFlight = make([]context.Context, n), make([]sync.WaitGroup, n)
		if n > 1 {
			collectors = append(collectors, metrics.NewGaugeFunc(prefix+"_shards_held",
				"Shards this replica holds.", func() float64 { return float64(e.shards.Held()) }),
				metrics.NewCounterFunc(prefix+"_shard_transitions_total",
					"Shards this replica took, gave up or lost.", func() float64 { return float64(e.shards.Transitions()) }))
		}
	}
	for _, m := range collectors {
		if e.Metrics != nil {
			if err := e.Metrics.Register(m); err != nil {
				return err
			}
		}
	}
	return nil
}

// IsLeader reports whether the controllers may reconcile: always true
// without leader election; with it, whether this replica holds the
// Lease, or with shards, whether it holds one. Before a controller has
// joined (made its first cache), it reports true.
func (e *Election) IsLeader() bool {
	e.mu.Lock()
	s := e.shards
	e.mu.Unlock()
	return s == nil || s.Held() > 0
}

// Run campaigns, once a controller has joined and the caches of every
// controller have synced, until ctx ends, then releases the Leases.
// Without leader election, or when its configuration is not valid (which
// the controllers' Run reports), it returns then. Call it once.
func (e *Election) Run(ctx context.Context) {
	if !waitUntil(ctx, e.synced) {
		return
	}
	e.mu.Lock()
	shards := e.shards
	e.mu.Unlock()
	if shards == nil {
		return
	}
	msg := "waiting for leadership"
	if len(e.shardCtx) > 1 {
		msg = "sharding"
	}
	cmp.Or(e.Logger, slog.New(slog.DiscardHandler)).Info(msg, "lease", e.LeaderElection.Name, "shards", len(e.shardCtx), "identity", shards.Identity())
	shards.Run(ctx)
}

// synced reports whether a controller has joined, and the caches of
// every one have synced.
func (e *Election) synced() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.members == nil {
		return false
	}
	for _, c := range e.members {
		if !c.synced() {
			return false
		}
	}
	return true
}

// split returns the number of shards when the caches are split by
// shard (LeaderElection.SplitCaches), else 0.
func (e *Election) split() int {
	if le := e.LeaderElection; le != nil && le.SplitCaches && le.Shards > 1 {
		return le.Shards
	}
	return 0
}

// holdShard runs while this replica holds shard k (ctx ends when it must
// stop): with split caches, it starts the shard's caches of every member
// and waits for them to sync; then it queues the shard's keys of every
// member. When ctx ends, it hides the shard's caches, waits for the
// reconciles of the shard's keys in flight, which ctx cancels, and stops
// the caches.
func (e *Election) holdShard(ctx context.Context, k int) {
	e.mu.Lock()
	members := slices.Clone(e.members)
	e.mu.Unlock()
	var views, primaries []shardView // shown in this order, hidden in the reverse
	for _, c := range members {
		views = append(views, c.views...)
		if c.primary != nil {
			primaries = append(primaries, c.primary)
		}
	}
	views = append(views, primaries...)
	for _, v := range views {
		v.start(k)
		defer v.stop(k)
	}
	if !waitUntil(ctx, func() bool { return !slices.ContainsFunc(views, func(v shardView) bool { return !v.synced(k) }) }) {
		return
	}
	e.mu.Lock()
	e.shardCtx[k] = ctx
	e.mu.Unlock()
	for _, v := range views {
		v.show(k, true)
	}
	for _, c := range members {
		for _, key := range c.shardKeys(k, len(e.shardCtx)) {
			c.queue.AddBacklog(key)
		}
	}
	<-ctx.Done()
	e.mu.Lock()
	e.shardCtx[k] = nil
	e.mu.Unlock()
	for _, v := range slices.Backward(views) {
		v.show(k, false)
	}
	e.inFlight[k].Wait()
}

// reconcile reconciles key with c if this replica holds the key's shard,
// with a context that also ends with the shard; a key of a shard it does
// not hold is dropped: the holder queues it when it takes the shard. With
// split caches, a key's shard is the one whose cache shown holds its
// object; a key of none is reconciled (it finds no object).
func (e *Election) reconcile(ctx context.Context, c *Controller, key string) (queue.Result, error) {
	if len(e.shardCtx) == 0 {
		return c.reconcileKey(ctx, key)
	}
	k := leader.ShardOf(key, len(e.shardCtx))
	if c.primary != nil {
		if k = c.primary.holder(key); k < 0 {
			return c.reconcileKey(ctx, key) // an object gone: its reconcile finds nothing
		}
	}
	e.mu.Lock()
	sctx := e.shardCtx[k]
	if sctx == nil || sctx.Err() != nil {
		e.mu.Unlock()
		c.doubted.Delete(key) // not this replica's to reconcile
		return queue.Result{}, nil
	}
	e.inFlight[k].Add(1)
	e.mu.Unlock()
	defer e.inFlight[k].Done()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(sctx, cancel)
	defer stop()
	return c.reconcileKey(ctx, key)
}
