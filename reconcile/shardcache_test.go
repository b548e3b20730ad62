package reconcile

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/metrics"
	"github.com/zerodep-k8s/widget-operator/watch"
)

// A bucket belongs to the shard whose range ShardSelector writes around
// it: shard k of S owns the buckets from k*256/S to (k+1)*256/S.
func TestBucketShard(t *testing.T) {
	for _, tc := range []struct{ b, shards, want int }{
		{0, 1, 0}, {255, 1, 0},
		{127, 2, 0}, {128, 2, 1},
		{84, 3, 0}, {85, 3, 1}, {169, 3, 1}, {170, 3, 2}, {255, 3, 2},
		{63, 4, 0}, {64, 4, 1}, {255, 4, 3},
		{0, 256, 0}, {200, 256, 200},
	} {
		if got := bucketShard(tc.b, tc.shards); got != tc.want {
			t.Errorf("bucketShard(%d, %d) = %d, want %d", tc.b, tc.shards, got, tc.want)
		}
	}
	for shards := 1; shards <= 256; shards++ {
		for b := range 256 {
			k := bucketShard(b, shards)
			if k < 0 || k >= shards || b < k*256/shards || b >= (k+1)*256/shards {
				t.Fatalf("bucketShard(%d, %d) = %d: not the shard whose range holds it", b, shards, k)
			}
		}
	}
}

func TestBucketSelector(t *testing.T) {
	for _, tc := range []struct {
		base          string
		shards, shard int
		want          string
	}{
		{"", 256, 5, "l in (5)"},
		{"a=b", 128, 1, "a=b,l in (2,3)"},
		{"a=b,c", 64, 63, "a=b,c,l in (252,253,254,255)"},
		{"", 3, 1, "l in (" + strings.Join(numbers(85, 170), ",") + ")"},
	} {
		if got := bucketSelector(tc.base, "l", tc.shards, tc.shard); got != tc.want {
			t.Errorf("bucketSelector(%q, l, %d, %d) = %q, want %q", tc.base, tc.shards, tc.shard, got, tc.want)
		}
	}
}

func numbers(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprint(i))
	}
	return out
}

// selectingSource is a fake watch.Source in memory that selects as a
// server with shard selectors does, by the rules of ShardSelector and
// bucketSelector over 2 shards: primaries by their uid, children by the
// label "bucket". Its lists of children wait for release, when not nil.
type selectingSource struct {
	*memSource
	release chan struct{}
}

func (s *selectingSource) List(ctx context.Context, ns string, opts k8sapi.ListOptions) (*k8sapi.List[obj], error) {
	if s.release != nil && opts.LabelSelector != "" {
		select {
		case <-s.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	l, err := s.memSource.List(ctx, ns, opts)
	l.Items = slices.DeleteFunc(l.Items, func(o obj) bool {
		if ref := o.ControllerOf(); ref != nil {
			return bucketSelector("", "bucket", 2, bucketShard(Bucket(string(ref.UID)), 2)) != opts.LabelSelector
		}
		sel, _ := ShardSelector("object.metadata.uid", 2, bucketShard(Bucket(string(o.UID)), 2))
		return sel != opts.ShardSelector
	})
	return l, err
}

// With split caches, a replica caches nothing of a shard it does not
// hold. Taking one starts its caches, which /readyz checks until they
// sync, then shows them and queues their keys; a key maps to the shard
// whose cache holds its object. Giving it up drops its objects.
func TestSplitCaches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client, err := k8sapi.New(&k8sapi.Config{Host: "https://127.0.0.1:1"})
		if err != nil {
			t.Fatal(err)
		}
		var items []obj
		keys, uids := [2][]string{}, map[string]string{}
		for i := range 12 {
			p := object("ns", fmt.Sprintf("p%d", i), "1")
			p.UID = fmt.Sprintf("%d-uid", i) // FNV-1a's top byte hardly moves with the last byte
			k := bucketShard(Bucket(p.UID), 2)
			uids[p.Name] = p.UID
			keys[k] = append(keys[k], "ns/"+p.Name)
			items = append(items, p, child("ns", p.Name, thingsRes.GroupVersion(), thingsRes.Kind, p.Name))
			items[len(items)-1].OwnerReferences[0].UID = p.UID
		}
		if len(keys[0]) == 0 || len(keys[1]) == 0 {
			t.Fatalf("keys by shard %v: want some in each", keys)
		}
		src := &selectingSource{memSource: newMemSource(items...)}
		reg := metrics.NewRegistry()
		rec := &recorder{}
		c := &Controller{Name: "t", Reconciler: rec, Metrics: reg,
			LeaderElection: &LeaderElection{Client: client, Name: "l", Shards: 2, SplitCaches: true}}
		prims := WatchPrimaryShards(c, watch.Config[obj]{Source: src, Name: "prims"})
		kids := WatchOwnedShards(c, watch.Config[obj]{Source: src, Name: "kids"}, thingsRes, "bucket")
		if prims.Len() != 0 || !c.synced() || c.election.split() != 2 {
			t.Fatalf("no shard held: %d cached, synced %v, split %d; want none, synced, 2", prims.Len(), c.synced(), c.election.split())
		}

		// Shard 1, its children's list held back: checked, not synced,
		// nothing shown.
		src.release = make(chan struct{})
		ctx1, giveUp1 := context.WithCancel(t.Context())
		held1 := make(chan struct{})
		go func() { defer close(held1); c.election.holdShard(ctx1, 1) }()
		settle()
		if checks := c.Checks(time.Now()); checks[1].Err == nil {
			t.Errorf("shard 1 taken, its children not synced: checks %v, want watch kids failing", checks)
		}
		if _, ok := prims.Get("ns", keys[1][0][3:]); ok {
			t.Errorf("shard 1 not synced: Get found %s", keys[1][0])
		}
		for c.queue.Len() > 0 { // the keys of the primaries' list
			k, _ := c.queue.Get()
			c.queue.Done(k)
		}
		close(src.release)
		settle()
		if checks := c.Checks(time.Now()); checks[0].Err != nil || checks[1].Err != nil {
			t.Errorf("shard 1 synced: checks %v, want passing", checks)
		}
		var queued []string
		for c.queue.Len() > 0 {
			k, _ := c.queue.Get()
			queued = append(queued, k)
			c.queue.Done(k)
		}
		slices.Sort(queued)
		if want := slices.Sorted(slices.Values(keys[1])); !slices.Equal(queued, want) {
			t.Errorf("queued %q on taking shard 1, want %q", queued, want)
		}
		if prims.Len() != len(keys[1]) || kids.Len() != len(keys[1]) {
			t.Errorf("shard 1 held: %d primaries and %d children cached, want %d each", prims.Len(), kids.Len(), len(keys[1]))
		}
		if v := sample(t, reg, `operator_cache_objects{resource="prims"}`); v != fmt.Sprint(len(keys[1])) {
			t.Errorf("operator_cache_objects of prims %q, want %d", v, len(keys[1]))
		}
		if got, want := prims.holder(keys[1][0]), 1; got != want {
			t.Errorf("holder(%s) = %d, want %d", keys[1][0], got, want)
		}
		if got := prims.holder(keys[0][0]); got != -1 {
			t.Errorf("holder(%s), of a shard not held, = %d, want -1", keys[0][0], got)
		}
		// A write of a shard held is read back; one of another, dropped.
		for k, name := range []string{keys[0][0][3:], keys[1][0][3:]} {
			kid := child("ns", name, thingsRes.GroupVersion(), thingsRes.Kind, name)
			kid.UID, kid.OwnerReferences[0].UID, kid.ResourceVersion = "uid-new", uids[name], "9"
			prev, _ := kids.Get("ns", name)
			kids.Wrote(prev, &kid)
			if got, _ := kids.Get("ns", name); (got != nil && got.ResourceVersion == "9") != (k == 1) {
				t.Errorf("a write of a child of shard %d: read back %v", k, got)
			}
		}

		// A deletion of an object of a shard held is read back.
		if obj, ok := prims.Get("ns", keys[1][0][3:]); !ok {
			t.Errorf("shard 1 held: no %s", keys[1][0])
		} else {
			prims.Deleted(obj)
			if _, ok := prims.Get("ns", obj.Name); ok {
				t.Errorf("a deletion of %s, of shard 1: still read", keys[1][0])
			}
		}

		// An object in the cache of a shard not its own, as from a
		// server that ignores shard selectors, is not read.
		stray := object("ns", keys[0][1][3:], "1")
		stray.UID = uids[stray.Name]
		prims.shown[1].Wrote(nil, &stray)
		if got, ok := prims.Get("ns", stray.Name); ok || prims.holder(keys[0][1]) != -1 {
			t.Errorf("an object of shard 0 in shard 1's cache: Get = %v, holder %d; want none", got, prims.holder(keys[0][1]))
		}

		// Reconciles: a key of the shard, and one in no cache.
		for _, key := range []string{keys[1][0], keys[0][0]} {
			if _, err := c.election.reconcile(t.Context(), c, key); err != nil {
				t.Fatal(err)
			}
		}
		if got, want := rec.sorted(), slices.Sorted(slices.Values([]string{keys[1][0], keys[0][0]})); !slices.Equal(got, want) {
			t.Errorf("reconciled %q, want %q", got, want)
		}

		giveUp1()
		<-held1
		if prims.Len() != 0 || kids.Len() != 0 || prims.Stats().Objects != 0 || prims.holder(keys[1][0]) != -1 {
			t.Errorf("shard 1 given up: %d primaries, %d children, %d objects counted; want none", prims.Len(), kids.Len(), prims.Stats().Objects)
		}
		if _, ok := prims.Get("ns", keys[1][0][3:]); ok {
			t.Errorf("shard 1 given up: Get still finds %s", keys[1][0])
		}
	})
}

// Without split caches, a ShardedCache reads and writes its one cache,
// of every object, and a key's shard is the hash of the key.
func TestShardedCacheOfOne(t *testing.T) {
	c := &Controller{Name: "t", Reconciler: &recorder{}}
	s := WatchPrimaryShards(c, watch.Config[obj]{Source: newMemSource(), Name: "prims"})
	o := object("ns", "x", "1")
	s.Wrote(nil, &o)
	if got, ok := s.Get("ns", "x"); !ok || got != &o || c.primary != nil {
		t.Errorf("a write read back %v, %v; primary view %v; want the write, no view", got, ok, c.primary)
	}
}
