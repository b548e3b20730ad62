package reconcile

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/reconcile/internal/leader"
	"github.com/zerodep-k8s/widget-operator/watch"
)

// ShardedCache reads the objects of one resource from the caches of the
// shards this replica holds, when its controller's election splits the
// caches (LeaderElection.SplitCaches); otherwise it reads one cache of
// every object. Make it with [WatchPrimaryShards] or [WatchOwnedShards].
//
// With split caches, the election starts a cache per shard when it takes
// the shard, of that shard's objects alone, and shows it to Get once the
// shard's caches of every controller have synced; it hides it when the
// shard goes, then stops it and drops its objects once the shard's
// reconciles in flight have ended. Its readiness and its metrics are
// those of the caches running, summed. Its methods are safe for
// concurrent use.
type ShardedCache[T any] struct {
	open   func(k int) *watch.Cache[T] // nil with one cache of every object
	bucket func(obj *T) int            // Bucket of the object's uid, or of its owner's

	mu      sync.Mutex
	running []*watch.Cache[T] // by shard; nil for a shard not held
	stops   []context.CancelFunc
	shown   []*watch.Cache[T] // what Get reads: running[k] once shown, else nil
}

// WatchPrimaryShards is [WatchPrimary], read through a ShardedCache.
// With split caches (see ShardedCache), the cache of shard k holds the
// objects of the uids in it (cfg.ShardSelector is replaced by
// ShardSelector("object.metadata.uid", Shards, k)), and the election maps
// a key to the shard whose cache holds its object.
func WatchPrimaryShards[T any, P Object[T]](c *Controller, cfg watch.Config[T]) *ShardedCache[T] {
	n := c.splitShards()
	if n == 0 {
		return fixed(WatchPrimary[T, P](c, cfg))
	}
	s := watchShards[T, P](c, cfg, n, func(m *k8sapi.ObjectMeta) []string { return []string{k8sapi.Key(m.Namespace, m.Name)} },
		func(m *k8sapi.ObjectMeta) string { return string(m.UID) },
		func(cfg *watch.Config[T], k int) { cfg.ShardSelector, _ = ShardSelector("object.metadata.uid", n, k) }, false)
	c.primary, c.primaryRV, c.confirm = s, resourceVersionIn[T, P](s), confirmIn[T, P](s, cfg.Source)
	return s
}

// WatchOwnedShards is [WatchOwned], read through a ShardedCache. With
// split caches (see ShardedCache), the cache of shard k holds the objects
// whose label holds a bucket of the shard (the selector "<label> in (<the
// shard's buckets>)" is added to cfg.LabelSelector): the caller puts on
// each object it makes the label with the [Bucket] of its owner's uid,
// such as strconv.Itoa(reconcile.Bucket(string(owner.UID))). An empty
// label makes Run fail.
func WatchOwnedShards[T any, P Object[T]](c *Controller, cfg watch.Config[T], owner k8sapi.Resource, label string) *ShardedCache[T] {
	n := c.splitShards()
	if n == 0 {
		return fixed(WatchOwned[T, P](c, cfg, owner))
	}
	if label == "" {
		c.noteErr(errors.New("reconcile: WatchOwnedShards of " + cfg.Name + " needs a label"))
	}
	c.noteErr(checkOwner(cfg.Name, owner))
	s := watchShards[T, P](c, cfg, n, func(m *k8sapi.ObjectMeta) []string { return ownerKeys(m, owner) },
		func(m *k8sapi.ObjectMeta) string {
			if ref := ControllerOf(m, owner); ref != nil {
				return string(ref.UID)
			}
			return ""
		},
		func(cfg *watch.Config[T], k int) { cfg.LabelSelector = bucketSelector(cfg.LabelSelector, label, n, k) }, true)
	c.views = append(c.views, s)
	return s
}

// watchShards makes the ShardedCache of n shards whose shard k's cache
// is of cfg as selected by sel(cfg, k): a change of an object queues
// keys (doubted at a deletion with owned; see onChange), and uid gives
// the uid that its bucket is of. It is checked with
// the controller's caches and reported in the metrics of its Caches.
func watchShards[T any, P Object[T]](c *Controller, cfg watch.Config[T], n int, keys func(m *k8sapi.ObjectMeta) []string,
	uid func(m *k8sapi.ObjectMeta) string, sel func(cfg *watch.Config[T], k int), owned bool) *ShardedCache[T] {
	s := &ShardedCache[T]{bucket: func(obj *T) int { return Bucket(uid(P(obj).GetObjectMeta())) },
		running: make([]*watch.Cache[T], n), stops: make([]context.CancelFunc, n), shown: make([]*watch.Cache[T], n)}
	s.open = func(k int) *watch.Cache[T] {
		cfg := cfg
		sel(&cfg, k)
		var wc *watch.Cache[T]
		cfg.Handler = onChange(c, func(obj *T) []string { return keys(P(obj).GetObjectMeta()) }, func() *watch.Cache[T] { return wc }, owned)
		wc = watch.NewCache[T, P](cfg)
		return wc
	}
	if m := c.set.Metrics; m != nil {
		m.Add(cfg.Name, s)
	}
	c.track(named{s, cfg.Name, s.Len, nil}, cfg.Source != nil)
	return s
}

// splitShards returns the number of shards when the controller's
// election splits the caches, else 0.
func (c *Controller) splitShards() int {
	c.init()
	return c.election.split()
}

// shardKeys returns the primary keys of shard k of n.
func (c *Controller) shardKeys(k, n int) []string {
	if c.primary != nil {
		return c.primary.keysOf(k)
	}
	return slices.DeleteFunc(c.keys(), func(key string) bool { return leader.ShardOf(key, n) != k })
}

// fixed returns the view of one cache of every object.
func fixed[T any](c *watch.Cache[T]) *ShardedCache[T] {
	return &ShardedCache[T]{bucket: func(*T) int { return 0 }, shown: []*watch.Cache[T]{c}}
}

// Get returns the object namespace/name from the cache shown that holds
// it (see watch.Cache.Get), or nil and false.
func (s *ShardedCache[T]) Get(namespace, name string) (*T, bool) {
	obj, _ := s.find(namespace, name)
	return obj, obj != nil
}

// find returns the object namespace/name and its shard, from the cache
// shown of that shard, or nil and -1. An object in the cache of another
// shard (from a server that ignores shard selectors) is not found.
func (s *ShardedCache[T]) find(namespace, name string) (*T, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, c := range s.shown {
		if c == nil {
			continue
		}
		if obj, ok := c.Get(namespace, name); ok && bucketShard(s.bucket(obj), len(s.shown)) == k {
			return obj, k
		}
	}
	return nil, -1
}

// Wrote hands obj to the cache of its shard, if shown (see
// watch.Cache.Wrote); otherwise the object is not this replica's, and it
// is dropped.
func (s *ShardedCache[T]) Wrote(prev, obj *T) {
	if c := s.shownOf(obj); c != nil {
		c.Wrote(prev, obj)
	}
}

// Deleted hands obj, as read from Get, to the cache of its shard, if
// shown (see watch.Cache.Deleted).
func (s *ShardedCache[T]) Deleted(obj *T) {
	if c := s.shownOf(obj); c != nil {
		c.Deleted(obj)
	}
}

// shownOf returns the cache shown of obj's shard, or nil.
func (s *ShardedCache[T]) shownOf(obj *T) *watch.Cache[T] {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.shown[bucketShard(s.bucket(obj), len(s.shown))]
}

// Len returns the number of objects in the caches shown.
func (s *ShardedCache[T]) Len() int {
	n := 0
	for _, c := range s.caches(true) {
		n += c.Store().Len()
	}
	return n
}

// HasSynced reports whether every cache running has synced: true when
// none runs.
func (s *ShardedCache[T]) HasSynced() bool {
	for _, c := range s.caches(false) {
		if !c.HasSynced() {
			return false
		}
	}
	return true
}

// Healthy returns the first failure of a cache running (see
// watch.Informer.Healthy), or nil.
func (s *ShardedCache[T]) Healthy(now time.Time) error {
	for _, c := range s.caches(false) {
		if err := c.Healthy(now); err != nil {
			return err
		}
	}
	return nil
}

// Stats returns the counters of the caches running, summed: a counter
// goes down when a shard goes.
func (s *ShardedCache[T]) Stats() (sum watch.StatsSnapshot) {
	for _, c := range s.caches(false) {
		st := c.Stats()
		sum.Relists, sum.Reconnects, sum.Bookmarks = sum.Relists+st.Relists, sum.Reconnects+st.Reconnects, sum.Bookmarks+st.Bookmarks
		sum.Added, sum.Modified, sum.Deleted = sum.Added+st.Added, sum.Modified+st.Modified, sum.Deleted+st.Deleted
		sum.Objects, sum.Bytes = sum.Objects+st.Objects, sum.Bytes+st.Bytes
	}
	return sum
}

// LastEvent returns the latest LastEvent of the caches running; now when
// none runs, since none has a watch to hear from.
func (s *ShardedCache[T]) LastEvent() time.Time {
	caches := s.caches(false)
	if len(caches) == 0 {
		return time.Now()
	}
	var last time.Time
	for _, c := range caches {
		if t := c.LastEvent(); t.After(last) {
			last = t
		}
	}
	return last
}

// caches returns the caches shown, or running.
func (s *ShardedCache[T]) caches(shown bool) []*watch.Cache[T] {
	s.mu.Lock()
	defer s.mu.Unlock()
	all := s.running
	if shown {
		all = s.shown
	}
	var out []*watch.Cache[T]
	for _, c := range all {
		if c != nil {
			out = append(out, c)
		}
	}
	return out
}

// start makes the cache of shard k and runs it, hidden.
func (s *ShardedCache[T]) start(k int) {
	ctx, cancel := context.WithCancel(context.Background())
	c := s.open(k)
	s.mu.Lock()
	s.running[k], s.stops[k] = c, cancel
	s.mu.Unlock()
	go func() { _ = c.Run(ctx) }() // Run fails only without a Source, which WatchMapped refuses
}

func (s *ShardedCache[T]) synced(k int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running[k] != nil && s.running[k].HasSynced()
}

// show shows shard k's cache to Get, or hides it.
func (s *ShardedCache[T]) show(k int, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shown[k] = nil
	if on {
		s.shown[k] = s.running[k]
	}
}

// stop stops shard k's cache and drops it.
func (s *ShardedCache[T]) stop(k int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stops[k] != nil {
		s.stops[k]()
	}
	s.running[k], s.stops[k], s.shown[k] = nil, nil, nil
}

// keysOf returns the keys of shard k's cache.
func (s *ShardedCache[T]) keysOf(k int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running[k] == nil {
		return nil
	}
	return s.running[k].Store().Keys()
}

// holder returns the shard whose cache shown holds key, or -1.
func (s *ShardedCache[T]) holder(key string) int {
	ns, name, _ := k8sapi.SplitKey(key)
	_, k := s.find(ns, name)
	return k
}

// shardView is what the election does with a [ShardedCache] of any type.
type shardView interface {
	start(k int)
	synced(k int) bool
	show(k int, on bool)
	stop(k int)
	keysOf(k int) []string
	holder(key string) int
}

// bucketShard returns the shard of shards that owns bucket b (see
// [ShardSelector]).
func bucketShard(b, shards int) int {
	return ((b+1)*shards - 1) / 256
}

// bucketSelector returns the label selector of the objects whose label
// holds a bucket of shard k of shards, after base, if any.
func bucketSelector(base, label string, shards, k int) string {
	var buckets []string
	for b := k * 256 / shards; b < (k+1)*256/shards; b++ {
		buckets = append(buckets, strconv.Itoa(b))
	}
	sel := label + " in (" + strings.Join(buckets, ",") + ")"
	if base == "" {
		return sel
	}
	return base + "," + sel
}
