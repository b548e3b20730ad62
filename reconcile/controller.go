package reconcile

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/metrics"
	"github.com/zerodep-k8s/widget-operator/queue"
	"github.com/zerodep-k8s/widget-operator/reconcile/internal/leader"
	"github.com/zerodep-k8s/widget-operator/watch"
)

// Reconciler makes the world match the object named by key ("namespace/name",
// or "name" for a cluster-scoped object). A [Controller] never calls it
// twice at once for the same key.
//
// What it returns decides what comes next; see [Controller].
type Reconciler interface {
	Reconcile(ctx context.Context, key string) (queue.Result, error)
}

// ReconcilerFunc adapts a function to a [Reconciler].
type ReconcilerFunc func(ctx context.Context, key string) (queue.Result, error)

// Reconcile calls f(ctx, key).
func (f ReconcilerFunc) Reconcile(ctx context.Context, key string) (queue.Result, error) {
	return f(ctx, key)
}

// DefaultShutdownTimeout is the zero value's meaning of
// [Controller.ShutdownTimeout].
const DefaultShutdownTimeout = 30 * time.Second

// LeaderElection configures leader election with a Lease
// (coordination.k8s.io/v1): only the replica that holds it reconciles.
// With Shards above 1 it configures sharding instead: the keys are split
// into Shards shards by a stable hash of the key, each shard a Lease
// named <Name>-shard-<k>, and each replica holds a membership Lease
// <Name>-member-<j> (j < Shards) besides. A replica reconciles a key only
// while it holds the key's shard; the live replicas share the shards
// evenly, and take those of a replica that stops renewing, with the API
// server as their only coordinator.
type LeaderElection struct {
	// Client reads and writes the Leases. Required. Give it no rate limit
	// of its own (k8sapi.Config QPS zero): a renewal must not wait behind
	// a burst of reconciles.
	Client *k8sapi.Client
	// Namespace and Name locate the Lease (with shards, name its Leases).
	// Empty Namespace means the client's default namespace; Name is
	// required.
	Namespace, Name string
	// Shards is the number of shards; zero or 1 means one Lease, named
	// Name: leader election. Replicas beyond it hold no shard and wait.
	Shards int
	// Identity names this replica in the Leases. Empty means one made by
	// [NewIdentity].
	Identity string
	// SplitCaches, with Shards above 1, has each replica cache only the
	// objects of the shards it holds, in the caches made with
	// [WatchPrimaryShards] and [WatchOwnedShards], and map a key to the
	// shard of its cached primary object's uid rather than to the hash of
	// the key (see [ShardedCache]). Set it only when the API server serves
	// shard selectors ([k8sapi.ServesShardSelector]), with at most 256
	// Shards. False means every replica caches every object.
	SplitCaches bool
}

// NewIdentity returns a new identity for a replica in Leases: the host
// name and a random suffix.
func NewIdentity() (string, error) { return leader.DefaultIdentity() }

// Controller runs a [Reconciler] over a queue of keys that watch caches
// fill: a primary resource ([WatchPrimary], or [WatchPrimaryShards]), the
// resources it owns ([WatchOwned], or [WatchOwnedShards]) and any others
// ([WatchMapped]).
//
// Set the fields, then make the caches with those functions, then call
// Run once. Do not change the fields after the first
// of those calls. The other methods are safe for concurrent use, with Run
// and with each other.
//
// What Reconcile returns decides what happens to the key, by the class
// its Classify field (nil: [Classify]) gives the error:
//
//   - nil: done, or run again after Result.RequeueAfter if positive;
//   - a Permanent error (a [*TerminalError], a key that is not valid
//     ([k8sapi.ErrInvalidKey]), a 400 or 422 from the API server): not
//     retried until the key is queued again by a change, and counted in
//     controller_runtime_terminal_reconcile_errors_total;
//   - a Moot error (a 404, a terminating namespace): dropped;
//   - a Waiting error with a positive Result.RequeueAfter: run again after
//     RequeueAfter;
//   - any other error: retried after the wait its RateLimiter gives.
//
// A key queued by the deletion of an owned object, while the primary
// cache still holds the owner, is checked with the server before its
// reconcile: a garbage collector deletes children after their owner, and
// the owner's cache may not have seen the owner's deletion yet. When the
// server no longer has that owner (by UID), the reconcile reads it as
// gone, so that it does not make the children again.
//
// Every reconcile is logged (debug when it succeeds) and measured.
type Controller struct {
	// Name names the controller in logs, in the controller label of its
	// metrics and as its queue's name. Required.
	Name string
	// Reconciler reconciles the keys. Required by Run; it may be set
	// after the caches are made, since they are built before it.
	Reconciler Reconciler
	// Workers is the number of keys reconciled at once. Zero or negative
	// means 1.
	Workers int
	// Logger receives the controller's lines. Nil means no logging.
	Logger *slog.Logger
	// Metrics receives the controller_runtime_* series of the controller,
	// the workqueue_* series of its queue, the <MetricsPrefix>_watch_*
	// and _cache_* series of its caches and <MetricsPrefix>_leader (1 while
	// [Controller.IsLeader] reports true, else 0). Nil means no metrics.
	Metrics *metrics.Registry
	// MetricsPrefix starts the names of the series that are the
	// operator's own, such as "widget_operator". Empty means "operator".
	MetricsPrefix string
	// LeaderElection, when not nil, makes the controller reconcile a key
	// only while it holds the Lease of the key's shard (with one shard,
	// the Lease). Caches run and sync either way, so that a takeover is
	// fast. A Lease is handed over only after the reconciles of its keys
	// in flight have ended: they are cancelled when it is given to
	// another replica, or when it could not be renewed in time; the
	// replica then campaigns again. Nil means no leader election. It
	// must be nil when Election is set.
	LeaderElection *LeaderElection
	// Caches, when not nil, holds the controller's caches, shared with
	// the other controllers that name it, and run by its owner, not by
	// Run. Nil means caches of the controller's own, which Run runs.
	Caches *Caches
	// Election, when not nil, is the leader election or the set of shards
	// that the controller shares with others, run by its owner, not by
	// Run; its metrics are its own. Nil means one of the controller's own
	// made from LeaderElection (none when that is nil), which Run runs.
	Election *Election
	// ShutdownTimeout bounds how long reconciles in flight may go on
	// once Run's ctx ends; zero means DefaultShutdownTimeout. With leader
	// election the bound is at most the Lease's renew deadline less its
	// retry period (8s), after which the Lease is released. Reconciles are
	// cut at once when the Lease is lost.
	ShutdownTimeout time.Duration
	// ReconcileTimeout bounds one reconcile: its ctx is cancelled once
	// it has run this long, and the reconcile is counted in
	// controller_runtime_reconcile_timeouts_total. Zero or negative
	// means no bound.
	ReconcileTimeout time.Duration
	// Classify sorts the errors of Reconcile into the classes that
	// decide what happens to their keys. Nil means [Classify].
	Classify func(err error) Class
	// RateLimiter decides how long a key waits to be retried after a
	// failed reconcile; compose one from queue's limiters, such as
	// queue.MaxOf(&queue.ExponentialBackoff{Base: time.Second},
	// &queue.TokenBucket{QPS: 50}). Nil means queue.DefaultRateLimiter().
	RateLimiter queue.RateLimiter
	// Background holds functions that Run runs as it runs the caches,
	// such as an Event writer, or a watch that only queues keys and that
	// no reconcile waits for: they start before the caches sync, and
	// their ctx ends after the workers have stopped, when Run has them
	// return before it does. Nil means none.
	Background []func(ctx context.Context)

	initOnce sync.Once
	initErr  error // of the first init: metrics or leader election
	queue    *queue.Queue
	series   *metrics.ControllerMetrics
	set      *Caches         // Caches, or one of its own; set by init
	election *Election       // Election, or one of its own; set by init
	keys     func() []string // the primary cache's keys; none without WatchPrimary
	// primary and views are the ShardedCaches of split caches: the
	// primary one, and the others; set before Run.
	primary shardView
	views   []shardView

	log       *slog.Logger                        // Logger, or one that discards
	primaryRV func(namespace, name string) string // "" without WatchPrimary; set before Run
	// confirm checks the primary object of namespace/name with the
	// server (see confirmIn); it does nothing without WatchPrimary. doubted
	// holds the keys queued by the deletion of an owned object and not
	// reconciled since: their owner is confirmed first.
	confirm func(ctx context.Context, namespace, name string) error
	doubted sync.Map

	mu     sync.Mutex
	caches []named
	// cacheErr is the first error of a Watch* call (a cache it cannot
	// share, an owner it cannot match); Run returns it.
	cacheErr error
	// failed names the failing checks that Checks last logged, at
	// failedLogged; guarded by mu.
	failed       string
	failedLogged time.Time
}

// cache is what the controller does with one of its caches.
type cache interface {
	HasSynced() bool
	Healthy(now time.Time) error
}

// named is a cache, with its name, a count of its objects for the log,
// and, for a cache of a Caches, its Run.
type named struct {
	cache
	name string
	len  func() int
	run  func(ctx context.Context) error
}

// Object is the constraint of P, the pointer type of T, in the generic
// functions of this package: [watch.Object], *T with object metadata. It
// is inferred, as in reconcile.WatchPrimary(c, cfg).
type Object[T any] = watch.Object[T]

// Check is one readiness check of a [Controller]: one of its caches.
type Check struct {
	Name string // "watch " and the cache's Config.Name, such as "watch widgets"
	Err  error  // why it fails; nil when it passes
}

// WatchPrimary makes the cache of the primary resource: a change of an
// object queues its own key. The controller runs the cache, waits for it
// to sync before it reconciles, checks it in [Controller.Checks] and logs
// the resourceVersion the cache holds with each reconcile. As with
// [WatchMapped], the keys of a list's changes are queued behind those of
// live changes. cfg.Handler is replaced.
func WatchPrimary[T any, P Object[T]](c *Controller, cfg watch.Config[T]) *watch.Cache[T] {
	cache := WatchMapped[T, P](c, cfg, func(obj *T) []string {
		m := P(obj).GetObjectMeta()
		return []string{k8sapi.Key(m.Namespace, m.Name)}
	})
	c.keys = cache.Store().Keys
	c.primaryRV = resourceVersionIn[T, P](cache)
	c.confirm = confirmIn[T, P](cache, cfg.Source)
	return cache
}

// confirmIn returns the check of a primary object whose owned object was
// deleted: when view holds it, a list of that name from src must hold it
// too, by UID, or the view forgets it (see watch.Cache.Deleted) until its
// watch catches up.
func confirmIn[T any, P Object[T]](view interface {
	CacheView[T]
	Deleted(obj *T)
}, src watch.Source[T]) func(ctx context.Context, namespace, name string) error {
	return func(ctx context.Context, namespace, name string) error {
		obj, ok := view.Get(namespace, name)
		if !ok || src == nil {
			return nil
		}
		list, err := src.List(ctx, namespace, k8sapi.ListOptions{FieldSelector: "metadata.name=" + name})
		if err != nil {
			return err
		}
		for i := range list.Items {
			if P(&list.Items[i]).GetObjectMeta().UID == P(obj).GetObjectMeta().UID {
				return nil
			}
		}
		view.Deleted(obj)
		return nil
	}
}

// resourceVersionIn returns the function that reads the resourceVersion
// of an object in r, "" for none.
func resourceVersionIn[T any, P Object[T]](r CacheView[T]) func(ns, name string) string {
	return func(ns, name string) string {
		if obj, ok := r.Get(ns, name); ok {
			return P(obj).GetObjectMeta().ResourceVersion
		}
		return ""
	}
}

// WatchOwned makes the cache of a resource the primary one owns: a change
// of an object queues the key of its controller owner when that owner is
// of resource owner (by [ControllerOf]), such as Deployments owned by a
// custom resource. A cluster-scoped owner (owner.Namespaced false) has the
// key of its name alone. The controller runs the cache as WatchPrimary's;
// cfg.Handler is replaced. An owner without Kind, Version or Resource
// makes Run fail.
func WatchOwned[T any, P Object[T]](c *Controller, cfg watch.Config[T], owner k8sapi.Resource) *watch.Cache[T] {
	cache := watchMapped[T, P](c, cfg, func(obj *T) []string { return ownerKeys(P(obj).GetObjectMeta(), owner) }, true)
	c.noteErr(checkOwner(cfg.Name, owner))
	return cache
}

// ownerKeys returns the key of m's controller owner when it is of
// resource owner, else none.
func ownerKeys(m *k8sapi.ObjectMeta, owner k8sapi.Resource) []string {
	ref := ControllerOf(m, owner)
	if ref == nil {
		return nil
	}
	if !owner.Namespaced {
		return []string{ref.Name}
	}
	return []string{k8sapi.Key(m.Namespace, ref.Name)}
}

// noteErr keeps err, if it is the first, for Run to return.
func (c *Controller) noteErr(err error) {
	c.mu.Lock()
	c.cacheErr = cmp.Or(c.cacheErr, err)
	c.mu.Unlock()
}

// WatchMapped makes the cache of any other resource: a change of an
// object queues the keys that keys returns for it (the new object's, for
// an update). The keys of a change that a list found (the first list or a
// relist: see [watch.Informer.Listing]) are queued behind those of live
// changes, with [queue.Queue.AddBacklog]. The controller runs the cache as
// WatchPrimary's; cfg.Handler is replaced.
func WatchMapped[T any, P Object[T]](c *Controller, cfg watch.Config[T], keys func(obj *T) []string) *watch.Cache[T] {
	return watchMapped[T, P](c, cfg, keys, false)
}

// watchMapped is WatchMapped; owned says the objects are owned by the
// primary ones, whose keys their deletion queues as doubted.
func watchMapped[T any, P Object[T]](c *Controller, cfg watch.Config[T], keys func(obj *T) []string, owned bool) *watch.Cache[T] {
	c.init()
	var shared *watch.Cache[T] // the cache that calls the handler
	cfg.Handler = onChange(c, keys, func() *watch.Cache[T] { return shared }, owned)
	// The cache of the set under that name, or this one, new.
	wc := watch.NewCache[T, P](cfg)
	n := c.set.entry(named{wc, cfg.Name, wc.Store().Len, wc.Run}, cfg.Namespace, cfg.LabelSelector, cfg.FieldSelector, cfg.ShardSelector)
	shared, ok := n.cache.(*watch.Cache[T])
	if !c.track(n, ok && cfg.Source != nil) {
		return wc // never run: Run fails
	}
	if shared != wc {
		shared.AddHandler(cfg.Handler)
	}
	return shared
}

// onChange is the handler of the cache that cache returns: it queues the
// keys of a changed object, behind the live changes while the cache is
// listing. With owned, the keys of an object deleted other than by the
// controller itself (see watch.Cache.OwnDeletion) are doubted: their owner
// is confirmed before their reconcile.
func onChange[T any](c *Controller, keys func(obj *T) []string, cache func() *watch.Cache[T], owned bool) watch.Handler[T] {
	h := watch.OnChange(func(obj *T) { c.add(keys(obj), cache().Listing(), false) })
	if owned {
		h.OnDelete = func(obj *T) { c.add(keys(obj), cache().Listing(), !cache().OwnDeletion()) }
	}
	return h
}

// add queues keys, behind the live changes if backlog, and marks them
// doubted if doubt.
func (c *Controller) add(keys []string, backlog, doubt bool) {
	for _, key := range keys {
		if doubt {
			c.doubted.Store(key, true)
		}
		if backlog {
			c.queue.AddBacklog(key)
		} else {
			c.queue.Add(key)
		}
	}
}

// init makes the queue, the metrics and the holder of the Leases. It
// runs once; the queue exists even when it fails.
func (c *Controller) init() error {
	c.initOnce.Do(func() {
		c.log = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))
		// Without WatchPrimary: no keys, and no resourceVersion to log.
		c.keys = func() []string { return nil }
		c.primaryRV = func(string, string) string { return "" }
		c.confirm = func(context.Context, string, string) error { return nil }
		wq := metrics.NewWorkqueueMetrics(c.Name, c.Name, func() (time.Duration, time.Duration) { return c.queue.Unfinished() })
		c.queue = queue.New(queue.Config{Name: c.Name, Metrics: wq, RateLimiter: c.RateLimiter})
		c.series = metrics.NewControllerMetrics(c.Name, c.workers())
		collectors := []metrics.Collector{c.series, wq}
		c.set, c.election = c.Caches, c.Election
		if c.set == nil {
			c.set = &Caches{Metrics: metrics.NewWatchMetrics(cmp.Or(c.MetricsPrefix, "operator"))}
			collectors = append(collectors, c.set.Metrics)
		}
		if c.election == nil {
			c.election = &Election{LeaderElection: c.LeaderElection, Logger: c.Logger, Metrics: c.Metrics, MetricsPrefix: c.MetricsPrefix}
		} else if c.LeaderElection != nil {
			c.initErr = errors.New("reconcile: Controller.LeaderElection is set with Election: set the Election's")
		}
		for _, m := range collectors {
			if c.Metrics != nil && c.initErr == nil {
				c.initErr = c.Metrics.Register(m)
			}
		}
		c.initErr = cmp.Or(c.initErr, c.election.join(c))
	})
	return c.initErr
}

func (c *Controller) workers() int { return max(c.Workers, 1) }

// Enqueue queues key for a reconcile, for a source of changes other than
// the controller's caches (such as an informer it does not run). Keys
// queued before Run are reconciled once it starts.
func (c *Controller) Enqueue(key string) {
	c.init()
	c.queue.Add(key)
}

// IsLeader reports whether the controller may reconcile: always true
// without leader election; with it, whether it holds the Lease, or with
// shards, whether it holds one.
func (c *Controller) IsLeader() bool {
	c.init()
	return c.election.IsLeader()
}

// Checks returns the readiness of each cache, in the order they were made:
// a cache fails while it has not synced, or while its watch is failing or
// has been silent past its deadline (see watch.Informer.Healthy).
//
// It logs the reasons of the failing checks ("readyz: checks failing"),
// since a readiness endpoint that calls it should withhold them: when the
// set of failing checks changes, and at most once a minute while it stays
// the same, so that frequent probes do not flood the log.
func (c *Controller) Checks(now time.Time) []Check {
	c.init()
	c.mu.Lock()
	defer c.mu.Unlock()
	checks := make([]Check, 0, len(c.caches))
	var names, reasons []string
	for _, w := range c.caches {
		err := w.Healthy(now) // a failing list, before the sync, says why
		if err == nil && !w.HasSynced() {
			err = errNotSynced
		}
		checks = append(checks, Check{"watch " + w.name, err})
		if err != nil {
			names = append(names, "watch "+w.name)
			reasons = append(reasons, "watch "+w.name+": "+err.Error())
		}
	}
	failed := strings.Join(names, ", ")
	if failed == c.failed && (failed == "" || now.Sub(c.failedLogged) < time.Minute) {
		return checks
	}
	if failed == "" {
		c.log.Info("readyz: every check passes again")
	} else {
		c.log.Info("readyz: checks failing", "failed", failed, "reasons", strings.Join(reasons, "; "))
	}
	c.failed, c.failedLogged = failed, now
	return checks
}

var errNotSynced = errors.New("not synced")

// track adds n to the controller's caches, if ok: if it is of the
// caller's type and has a Source. Else it notes why for Run, and reports
// false.
func (c *Controller) track(n named, ok bool) bool {
	c.mu.Lock()
	switch {
	case ok:
		c.caches = append(c.caches, n)
	case c.cacheErr != nil:
	case n.cache == nil:
		c.cacheErr = errors.New("reconcile: a cache made after its Caches started")
	default:
		c.cacheErr = errors.New("reconcile: cache " + n.name + " has no Source, or another of that name has another object type")
	}
	c.mu.Unlock()
	return ok
}

// synced reports whether every cache of the controller has synced.
func (c *Controller) synced() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !slices.ContainsFunc(c.caches, func(w named) bool { return !w.HasSynced() })
}

// Run runs the caches, waits for them to sync, then reconciles with
// Workers workers (once it leads, with leader election) until ctx ends.
// Then it stops taking keys, lets the reconciles in flight finish for up
// to ShutdownTimeout (their ctx is cancelled after that), and stops the
// caches and releases the Leases last. It returns nil after such a
// shutdown, and an error when the configuration is incomplete or the
// metrics cannot be registered.
func (c *Controller) Run(ctx context.Context) error {
	switch {
	case c.Name == "":
		return errors.New("reconcile: Controller.Name is required")
	case c.Reconciler == nil:
		return errors.New("reconcile: Controller.Reconciler is required")
	}
	if err := c.init(); err != nil {
		return err
	}
	c.mu.Lock()
	err := c.cacheErr
	c.mu.Unlock()
	if err != nil {
		return err
	}
	// The caches run until the very end: they stop only after the
	// workers. Followers keep theirs warm too, so that a takeover is
	// fast.
	bgCtx, stopCaches := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stopCaches()
	if c.set != c.Caches { // its own
		wg.Go(func() { c.set.Run(bgCtx) })
	}
	if c.election != c.Election {
		// The Leases are held until the workers have drained, and
		// released with the caches.
		wg.Go(func() { c.election.Run(bgCtx) })
	}
	for _, f := range c.Background {
		wg.Go(func() { f(bgCtx) })
	}
	if !waitUntil(ctx, c.synced) {
		return nil
	}
	var counts []any
	c.mu.Lock()
	for _, w := range c.caches {
		counts = append(counts, w.name, w.len())
	}
	c.mu.Unlock()
	c.log.Info("caches synced", counts...)
	if waitUntil(ctx, c.IsLeader) {
		c.lead(ctx)
	}
	return nil
}

// waitUntil waits until cond holds, or ctx ends, and reports which came
// first. It polls: syncing and the first leadership are one-offs.
func waitUntil(ctx context.Context, cond func() bool) bool {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		if cond() {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}

// lead runs the workers until ctx ends, when reconciles in flight get up
// to the drain timeout to finish. With leader election, a key is
// reconciled only while its shard is held, and cancelled at once when
// the shard is lost, since another replica may then act on it.
func (c *Controller) lead(ctx context.Context) {
	c.log.Info("starting workers", "workers", c.workers())
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	runner := &queue.Runner{
		Queue:   c.queue,
		Workers: c.workers(),
		Logger:  c.Logger,
		Func: func(_ context.Context, key string) (queue.Result, error) {
			return c.election.reconcile(workCtx, c, key)
		},
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = runner.Run(ctx)
	}()
	<-ctx.Done()
	drain := c.drainTimeout()
	c.log.Info("shutting down: finishing reconciles in flight", "timeout", drain)
	timer := time.AfterFunc(drain, func() {
		c.log.Warn("shutdown timeout passed with reconciles still in flight; cancelling them")
		cancelWork()
	})
	defer timer.Stop()
	<-done
}

// drainTimeout is how long reconciles in flight may run once the process
// is stopping: ShutdownTimeout, but with leader election no longer than
// the renew deadline less a retry period, so that another replica takes
// the Leases over sooner than if this one had died.
func (c *Controller) drainTimeout() time.Duration {
	d := cmp.Or(c.ShutdownTimeout, DefaultShutdownTimeout)
	if c.LeaderElection == nil && (c.Election == nil || c.Election.LeaderElection == nil) {
		return d
	}
	return min(d, leader.RenewDeadline-leader.RetryPeriod)
}

// reconcileKey reconciles key, logs and measures it, and tells the
// queue's runner what to do next by the class of the error.
func (c *Controller) reconcileKey(ctx context.Context, key string) (queue.Result, error) {
	start := time.Now()
	c.series.WorkerStarted()
	defer c.series.WorkerDone()
	defer func() {
		// Count a panic, then let the queue's runner recover it, log it
		// with the key and retry the key with backoff.
		if r := recover(); r != nil {
			c.series.Panicked()
			panic(r)
		}
	}()
	res, err := c.reconcileWithin(ctx, key)
	ns, name, _ := k8sapi.SplitKey(key)
	class := c.classOf(err)
	if class == Moot {
		// The object or its namespace is going away: retrying would
		// only fail again.
		c.log.Debug("nothing to do; not retrying", "controller", c.Name, "namespace", ns, "name", name, "err", err)
		return queue.Result{}, nil
	}
	rv := c.primaryRV(ns, name)
	result := metrics.ResultSuccess
	switch {
	case err != nil:
		result = metrics.ResultError
	case res.RequeueAfter > 0:
		result = metrics.ResultRequeueAfter
	}
	c.series.Reconciled(time.Since(start), result)
	attrs := []any{"controller", c.Name, "namespace", ns, "name", name, "resourceVersion", rv,
		"result", result, "duration", time.Since(start)}
	switch {
	case err == nil:
		c.log.Debug("reconciled", attrs...)
		return res, nil
	case class == Permanent:
		// A change to the object or its children brings it back.
		c.series.TerminalError()
		c.log.Warn("reconcile failed; not retrying until the object or a child changes", append(attrs, "err", err)...)
		return queue.Result{}, nil
	case class == Waiting && res.RequeueAfter > 0:
		c.log.Warn("reconcile failed; waiting", append(attrs, "retryAfter", res.RequeueAfter, "err", err)...)
		return res, nil
	}
	c.log.Error("reconcile failed", append(attrs, "err", err)...)
	return queue.Result{}, err
}

// errReconcileTimeout ends the ctx of a reconcile at ReconcileTimeout.
var errReconcileTimeout = errors.New("reconcile: ReconcileTimeout passed")

// reconcileWithin calls the Reconciler with ctx bounded by
// ReconcileTimeout, and counts the reconciles that ran past it.
// A doubted key's owner is confirmed first, within the same bound.
func (c *Controller) reconcileWithin(ctx context.Context, key string) (queue.Result, error) {
	if c.ReconcileTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, c.ReconcileTimeout, errReconcileTimeout)
		defer cancel()
		defer func() {
			if context.Cause(ctx) == errReconcileTimeout {
				c.series.TimedOut()
			}
		}()
	}
	if _, doubted := c.doubted.LoadAndDelete(key); doubted {
		ns, name, _ := k8sapi.SplitKey(key)
		if err := c.confirm(ctx, ns, name); err != nil {
			c.doubted.Store(key, true)
			return queue.Result{}, &Error{Op: "confirm owner", Namespace: ns, Name: name, Err: err}
		}
	}
	return c.Reconciler.Reconcile(ctx, key)
}

// classOf returns the class of err by Classify, or [Classify] when it is
// nil; nil is Transient.
func (c *Controller) classOf(err error) Class {
	if err == nil || c.Classify == nil {
		return Classify(err)
	}
	return c.Classify(err)
}
