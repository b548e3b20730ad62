package reconcile

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/queue"
	"github.com/zerodep-k8s/widget-operator/watch"
)

// A change seen by the watch, of a primary object or of an owned one, is
// reconciled before the backlog of keys that the first list queued.
func TestLiveChangeOvertakesBacklog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		rec := &recorder{}
		first := true
		gate := ReconcilerFunc(func(ctx context.Context, key string) (queue.Result, error) {
			if first { // hold the one worker until the changes are queued
				first = false
				<-release
			}
			return rec.Reconcile(ctx, key)
		})
		c := &Controller{Name: "t", Workers: 1, Reconciler: gate}
		var items []obj
		for i := range 50 {
			items = append(items, object("ns", fmt.Sprintf("w%02d", i), "1"))
		}
		prim := newMemSource(items...)
		own := newMemSource()
		WatchPrimary(c, watch.Config[obj]{Source: prim, Name: "prims"})
		WatchOwned(c, watch.Config[obj]{Source: own, Name: "owned"}, thingsRes)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- c.Run(ctx) }()
		settle() // the worker holds the first key of the backlog

		prim.events <- k8sapi.WatchEvent[obj]{Type: k8sapi.Added, Object: object("ns", "new", "2")}
		synctest.Wait() // queued first
		own.events <- k8sapi.WatchEvent[obj]{Type: k8sapi.Added, Object: child("ns", "w40-child", "example.com/v1", "Thing", "w40")}
		synctest.Wait()
		close(release)
		settle()
		rec.mu.Lock()
		got := rec.keys
		rec.mu.Unlock()
		// ns/w40 moved up out of the backlog: reconciled once.
		if len(got) != 51 || got[0] != "ns/w00" || got[1] != "ns/new" || got[2] != "ns/w40" || got[3] != "ns/w01" {
			t.Errorf("reconciled %d keys, starting %q; want 51, ns/w00 then the live ns/new and ns/w40, then ns/w01", len(got), got[:min(len(got), 4)])
		}
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
}

// Taking a shard queues its keys behind the live changes.
func TestShardKeysAreBacklog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &Controller{Name: "t", Reconciler: &recorder{}}
		var items []obj
		for i := range 8 {
			items = append(items, object("ns", fmt.Sprintf("w%d", i), "1"))
		}
		cache := WatchPrimary(c, watch.Config[obj]{Source: newMemSource(items...), Name: "prims"})
		// What Election.init sets up around leader.Shards, for two shards.
		c.election.shardCtx, c.election.inFlight = make([]context.Context, 2), make([]sync.WaitGroup, 2)
		go cache.Run(t.Context())
		settle()
		for c.queue.Len() > 0 { // the first list's keys
			k, _ := c.queue.Get()
			c.queue.Done(k)
		}
		shard, giveUp := context.WithCancel(t.Context())
		defer giveUp()
		go c.election.holdShard(shard, 1)
		synctest.Wait()
		n := c.queue.Len()
		c.queue.Add("ns/live")
		if k, _ := c.queue.Get(); n == 0 || k != "ns/live" {
			t.Errorf("after taking a shard of %d keys, Get = %q; want the live ns/live", n, k)
		}
	})
}
