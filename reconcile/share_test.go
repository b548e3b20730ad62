package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/queue"
	"github.com/zerodep-k8s/widget-operator/reconcile/internal/leader"
	"github.com/zerodep-k8s/widget-operator/testenv/logbuf"
	"github.com/zerodep-k8s/widget-operator/watch"
)

// countedSource is a memSource that counts its lists and the watches it
// opens (a memSource refuses streaming lists).
type countedSource struct {
	*memSource
	lists, watches atomic.Int32
}

func (s *countedSource) List(ctx context.Context, ns string, opts k8sapi.ListOptions) (*k8sapi.List[obj], error) {
	s.lists.Add(1)
	return s.memSource.List(ctx, ns, opts)
}

func (s *countedSource) Watch(ctx context.Context, ns string, opts k8sapi.ListOptions) (watch.Stream[obj], error) {
	st, err := s.memSource.Watch(ctx, ns, opts)
	if err == nil {
		s.watches.Add(1)
	}
	return st, err
}

// other is another object type, for a cache name taken by obj.
type other struct{ obj }

// Two controllers that name the same cache share it: one list, one watch,
// each controller's handler on it, run by the set alone. A name taken by
// another object type is an error at Run.
func TestCachesShared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		caches := &Caches{}
		var recA, recB recorder
		a := &Controller{Name: "a", Reconciler: &recA, Caches: caches}
		b := &Controller{Name: "b", Reconciler: &recB, Caches: caches}
		src := &countedSource{memSource: newMemSource(object("ns", "x", "1"))}
		cfg := watch.Config[obj]{Source: src, Name: "things"}
		ca := WatchPrimary(a, cfg)
		cb := WatchMapped(b, cfg, func(o *obj) []string { return []string{"b/" + o.Name} })
		if ca != cb {
			t.Fatal("two controllers got two caches of one name")
		}
		if own := WatchPrimary(a, watch.Config[obj]{Source: src, Name: "things", LabelSelector: "x=y"}); own == ca {
			t.Fatal("a cache of other selectors is the same cache")
		}
		if own := WatchPrimary(a, watch.Config[obj]{Source: src, Name: "things", ShardSelector: "s"}); own == ca {
			t.Fatal("a cache of another shard selector is the same cache")
		}
		wrong := &Controller{Name: "wrong", Reconciler: &recB, Caches: caches}
		WatchPrimary(wrong, watch.Config[other]{Name: "things"})
		if err := wrong.Run(t.Context()); err == nil || !strings.Contains(err.Error(), "another object type") {
			t.Errorf("a cache name of two object types: Run = %v", err)
		}

		go caches.Run(t.Context())
		go a.Run(t.Context())
		go b.Run(t.Context())
		settle()
		if got := recA.sorted(); !slices.Equal(got, []string{"ns/x"}) {
			t.Errorf("a reconciled %q, want ns/x", got)
		}
		if got := recB.sorted(); !slices.Equal(got, []string{"b/x"}) {
			t.Errorf("b reconciled %q, want b/x", got)
		}
		// Three caches of src: "things", and "things" with a label or a
		// shard selector.
		if l, w := src.lists.Load(), src.watches.Load(); l != 3 || w != 3 {
			t.Errorf("%d lists and %d watches of three caches, want 3 and 3", l, w)
		}
		if checks := b.Checks(time.Now()); len(checks) != 1 || checks[0].Err != nil {
			t.Errorf("b's checks = %v, want one passing", checks)
		}
		caches.Run(t.Context()) // returns at once
		if l := src.lists.Load(); l != 3 {
			t.Errorf("%d lists after a second Caches.Run, want 3", l)
		}
		late := &Controller{Name: "late", Reconciler: &recB, Caches: caches}
		WatchPrimary(late, cfg)
		if err := late.Run(t.Context()); err == nil || !strings.Contains(err.Error(), "after its Caches started") {
			t.Errorf("a cache made after Caches.Run: Run = %v", err)
		}
	})
}

// A shard taken queues its keys of every controller of the election, and
// is given up only once the reconciles in flight of each have ended.
func TestElectionShared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		started, release := make(chan string, 1), make(chan struct{})
		slow := ReconcilerFunc(func(ctx context.Context, key string) (queue.Result, error) {
			started <- key
			<-release
			return queue.Result{}, nil
		})
		e := &Election{}
		var ctrls [2]*Controller
		var keys [2][2][]string // by controller and shard
		for i := range ctrls {
			ctrls[i] = &Controller{Name: fmt.Sprint(i), Reconciler: slow, Election: e}
			var items []obj
			for j := range 8 {
				items = append(items, object(fmt.Sprint("ns", i), fmt.Sprint("w", j), "1"))
			}
			cache := WatchPrimary(ctrls[i], watch.Config[obj]{Source: newMemSource(items...), Name: "prims"})
			go cache.Run(t.Context())
			settle()
			for _, k := range cache.Store().Keys() {
				keys[i][leader.ShardOf(k, 2)] = append(keys[i][leader.ShardOf(k, 2)], k)
			}
			for ctrls[i].queue.Len() > 0 { // the first list's keys
				k, _ := ctrls[i].queue.Get()
				ctrls[i].queue.Done(k)
			}
		}
		// What init sets up around leader.Shards, for two shards.
		e.shardCtx, e.inFlight = make([]context.Context, 2), make([]sync.WaitGroup, 2)
		shard, giveUp := context.WithCancel(t.Context())
		held := make(chan struct{})
		go func() { defer close(held); e.holdShard(shard, 1) }()
		synctest.Wait()
		for i, c := range ctrls {
			var queued []string
			for c.queue.Len() > 0 {
				k, _ := c.queue.Get()
				queued = append(queued, k)
				c.queue.Done(k)
			}
			if want := slices.Sorted(slices.Values(keys[i][1])); !slices.Equal(slices.Sorted(slices.Values(queued)), want) || len(want) == 0 {
				t.Errorf("controller %d: queued %q on taking shard 1, want %q", i, queued, want)
			}
		}
		// Controller 1's reconcile in flight holds the shard.
		go e.reconcile(t.Context(), ctrls[1], keys[1][1][0])
		<-started
		giveUp()
		synctest.Wait()
		select {
		case <-held:
			t.Fatal("the shard was given up with a reconcile of the second controller in flight")
		default:
		}
		close(release)
		<-held
	})
}

// A cache without a Source is an error at Run, not a watch that never
// syncs.
func TestWatchWithoutSource(t *testing.T) {
	c := &Controller{Name: "t", Reconciler: &recorder{}}
	WatchPrimary(c, watch.Config[obj]{Name: "things"})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := c.Run(ctx); err == nil || !strings.Contains(err.Error(), "no Source") {
		t.Errorf("Run = %v, want an error naming the missing Source", err)
	}
}

// refusing is an http.RoundTripper that fails every request: a fake API
// server that is never reached.
type refusing struct{}

func (refusing) RoundTrip(*http.Request) (*http.Response, error) { return nil, errors.New("refused") }

// An election run before any controller has joined waits for one (here,
// one without caches, which joins as it starts) before it campaigns.
func TestElectionWaitsForAMember(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client, err := k8sapi.New(&k8sapi.Config{Host: "https://apiserver.test", Transport: refusing{}})
		if err != nil {
			t.Fatal(err)
		}
		var logs logbuf.Buffer
		e := &Election{LeaderElection: &LeaderElection{Client: client, Name: "l", Identity: "me"}, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go e.Run(ctx)
		settle()
		if strings.Contains(logs.String(), "waiting for leadership") {
			t.Fatal("campaigning with no controller")
		}
		c := &Controller{Name: "t", Reconciler: &recorder{}, Election: e}
		go c.Run(ctx)
		settle()
		if !strings.Contains(logs.String(), "waiting for leadership") {
			t.Errorf("not campaigning once a controller joined:\n%s", logs.String())
		}
	})
}
