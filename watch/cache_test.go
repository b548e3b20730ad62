package watch

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// TestCacheReadsOwnWrites drives a Cache's store as its informer does (put
// for an added or modified object, remove for a deleted one, replace for a
// list) around calls of Wrote, and checks what Get returns after each step
// and that no written object outlives the watch catching up.
func TestCacheReadsOwnWrites(t *testing.T) {
	type step struct {
		do   func(c *Cache[thing])
		want string // Get("ns", "a") as name@rv, or "" for none
	}
	get := func(c *Cache[thing]) *thing { o, _ := c.Get("ns", "a"); return o }
	wrote := func(rv string) func(c *Cache[thing]) {
		return func(c *Cache[thing]) { c.Wrote(get(c), obj("a", rv)) }
	}
	created := func(rv string) func(c *Cache[thing]) {
		return func(c *Cache[thing]) { c.Wrote(nil, obj("a", rv)) }
	}
	event := func(rv string) func(c *Cache[thing]) {
		return func(c *Cache[thing]) { c.store.core.put("ns/a", obj("a", rv)) }
	}
	deleted := func(c *Cache[thing]) { c.store.core.remove("ns/a") }
	del := func(c *Cache[thing]) { c.Deleted(get(c)) }
	relist := func(items ...*thing) func(c *Cache[thing]) {
		return func(c *Cache[thing]) { c.store.core.replace(items) }
	}
	for _, tt := range []struct {
		name  string
		steps []step
	}{
		{"update, stale event, own event", []step{
			{event("1"), "a@1"},
			{wrote("5"), "a@5"},
			{event("3"), "a@5"}, // a change made before the write
			{event("5"), "a@5"},
			{event("7"), "a@7"}, // the written object is gone
		}},
		{"create, own event", []step{
			{created("5"), "a@5"},
			{event("5"), "a@5"},
			{deleted, ""},
		}},
		{"create, stale delete", []step{
			{created("5"), "a@5"},
			{deleted, ""}, // a delete always ends it
			{event("9"), "a@9"},
		}},
		{"update, delete", []step{
			{event("1"), "a@1"},
			{wrote("5"), "a@5"},
			{deleted, ""},
		}},
		{"two writes before the first event", []step{
			{event("1"), "a@1"},
			{wrote("5"), "a@5"},
			{wrote("6"), "a@6"},
			{event("5"), "a@6"},
			{event("6"), "a@6"},
			{event("8"), "a@8"},
		}},
		{"create, relist without it", []step{
			{created("5"), "a@5"},
			{relist(obj("b", "2")), ""},
			{event("9"), "a@9"},
		}},
		{"update, relist without it", []step{
			{event("1"), "a@1"},
			{wrote("5"), "a@5"},
			{relist(), ""},
		}},
		{"update, relist changed", []step{
			{event("1"), "a@1"},
			{wrote("5"), "a@5"},
			{relist(obj("a", "7")), "a@7"},
			{event("5"), "a@5"}, // not the write: a replay, as the store sees it
		}},
		{"update, relist unchanged, own event", []step{
			{event("1"), "a@1"},
			{wrote("5"), "a@5"},
			{relist(obj("a", "1")), "a@5"}, // the list predates the write
			{event("5"), "a@5"},
			{event("6"), "a@6"},
		}},
		{"event of the write before Wrote", []step{
			{event("1"), "a@1"},
			{func(c *Cache[thing]) {
				prev := get(c)
				c.store.core.put("ns/a", obj("a", "5"))
				c.Wrote(prev, obj("a", "5"))
			}, "a@5"},
			{event("6"), "a@6"},
		}},
		{"create seen and deleted before Wrote", []step{
			{func(c *Cache[thing]) {
				o := obj("a", "5")
				o.UID = "u5"
				c.store.core.put("ns/a", o)
				c.store.core.remove("ns/a") // by someone else, before the creator's Wrote
				c.Wrote(nil, o)
			}, ""},
			{event("9"), "a@9"},
		}},
		{"watch moved between read and Wrote", []step{
			{event("1"), "a@1"},
			{func(c *Cache[thing]) {
				prev := get(c)
				c.store.core.put("ns/a", obj("a", "3"))
				c.Wrote(prev, obj("a", "5"))
			}, "a@3"},
			{event("5"), "a@5"},
		}},
		{"delete, stale event, own delete, recreated", []step{
			{event("1"), "a@1"},
			{del, ""},
			{event("3"), ""}, // a change made before the delete
			{deleted, ""},
			{event("9"), "a@9"},
		}},
		{"update, delete", []step{
			{event("1"), "a@1"},
			{wrote("5"), "a@5"},
			{del, ""},
			{event("5"), ""},
			{deleted, ""},
		}},
		{"delete, relist without it", []step{
			{event("1"), "a@1"},
			{del, ""},
			{relist(), ""},
			{event("9"), "a@9"},
		}},
		{"delete, relist unchanged, own delete", []step{
			{event("1"), "a@1"},
			{del, ""},
			{relist(obj("a", "1")), ""}, // the list predates the delete
			{deleted, ""},
		}},
		{"delete, then created again by us", []step{
			{event("1"), "a@1"},
			{del, ""},
			{created("7"), "a@7"},
			{event("7"), "a@7"},
		}},
		{"watch moved between read and Deleted", []step{
			{event("1"), "a@1"},
			{func(c *Cache[thing]) {
				prev := get(c)
				c.store.core.put("ns/a", obj("a", "3"))
				c.Deleted(prev)
			}, "a@3"},
			{deleted, ""},
		}},
		{"write that changed nothing", []step{
			{event("4"), "a@4"},
			{wrote("4"), "a@4"},
			{event("6"), "a@6"},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := NewCache(Config[thing]{})
			for i, st := range tt.steps {
				st.do(c)
				got := ""
				o, ok := c.Get("ns", "a")
				if ok != (o != nil) {
					t.Fatalf("step %d: Get = %v, %v", i, o, ok)
				}
				if o != nil {
					got = o.Name + "@" + o.ResourceVersion
				}
				if got != st.want {
					t.Fatalf("step %d: Get = %q, want %q", i, got, st.want)
				}
			}
			if n := len(c.store.core.wrote); n != 0 {
				t.Errorf("%d written objects left after the watch caught up", n)
			}
		})
	}
}

// TestCacheInformerClearsWrites runs a Cache's informer against a scripted
// source: the write is read until its own event arrives, and from then on
// the store's objects, with no call by the caller.
func TestCacheInformerClearsWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newScriptedSource()
		var mu sync.Mutex
		var seen []string
		c := NewCache(Config[thing]{DisableStreamingList: true, Source: src, Handler: OnChange(func(o *thing) {
			mu.Lock()
			seen = append(seen, o.Name+"@"+o.ResourceVersion)
			mu.Unlock()
		})})
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		go c.Run(ctx)
		src.expectList(t, "0", &k8sapi.List[thing]{Metadata: k8sapi.ListMeta{ResourceVersion: "1"}, Items: []thing{*obj("a", "1")}}, nil)
		st := src.expectWatch(t, "1", nil)
		synctest.Wait()
		prev, _ := c.Get("ns", "a")
		c.Wrote(prev, obj("a", "5"))
		st.send(t, k8sapi.Modified, obj("a", "3"))
		synctest.Wait()
		if o, _ := c.Get("ns", "a"); o.ResourceVersion != "5" {
			t.Fatalf("after an older event, Get = %s, want the write (5)", o.ResourceVersion)
		}
		st.send(t, k8sapi.Modified, obj("a", "5"))
		st.send(t, k8sapi.Modified, obj("a", "6"))
		synctest.Wait()
		if o, _ := c.Get("ns", "a"); o.ResourceVersion != "6" {
			t.Fatalf("after the write's event and a later one, Get = %s, want 6", o.ResourceVersion)
		}
		mu.Lock()
		defer mu.Unlock()
		if want := []string{"a@1", "a@3", "a@5", "a@6"}; !slices.Equal(seen, want) {
			t.Errorf("handler saw %v, want %v", seen, want)
		}
	})
}

// TestCacheOwnDeletion: a Handler's OnDelete can tell the deletion the
// caller recorded with Deleted from one made by someone else.
func TestCacheOwnDeletion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newScriptedSource()
		var c *Cache[thing]
		var mu sync.Mutex
		var seen []string
		c = NewCache(Config[thing]{DisableStreamingList: true, Source: src, Handler: Handler[thing]{OnDelete: func(o *thing) {
			mu.Lock()
			seen = append(seen, fmt.Sprintf("%s:%v", o.Name, c.OwnDeletion()))
			mu.Unlock()
		}}})
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		go c.Run(ctx)
		src.expectList(t, "0", &k8sapi.List[thing]{Metadata: k8sapi.ListMeta{ResourceVersion: "1"}, Items: []thing{*obj("a", "1"), *obj("b", "1")}}, nil)
		st := src.expectWatch(t, "1", nil)
		synctest.Wait()
		mine, _ := c.Get("ns", "a")
		c.Deleted(mine)
		st.send(t, k8sapi.Deleted, obj("a", "2"))
		st.send(t, k8sapi.Deleted, obj("b", "2"))
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if want := []string{"a:true", "b:false"}; !slices.Equal(seen, want) {
			t.Errorf("deletions seen as own: %v, want %v", seen, want)
		}
		if c.OwnDeletion() {
			t.Error("OwnDeletion true outside a handler")
		}
	})
}

func TestCacheBuiltInIndexes(t *testing.T) {
	c := NewCache(Config[thing]{Indexers: map[string]IndexFunc[thing]{indexOwnerUID: ownerUIDs}})
	a := owned("a", "1", "w", true)
	a.Labels = map[string]string{"app": "web", "tier": "front"}
	c.store.core.replace([]*thing{a, owned("b", "1", "w", false)})
	for _, tt := range []struct{ index, value, want string }{
		{IndexControllerUID, "uid-w", "a"},
		{IndexLabel, "app=web", "a"},
		{IndexLabel, "tier=front", "a"},
		{indexOwnerUID, "uid-w", "a,b"},
	} {
		if got := names(c.Store().ByIndex(tt.index, tt.value)); strings.Join(got, ",") != tt.want {
			t.Errorf("ByIndex(%s, %s) = %v, want %s", tt.index, tt.value, got, tt.want)
		}
	}
}

// TestCacheRemembersLastRemovals pins the bound on what Wrote can tell of
// deleted objects: the UIDs of the last 256 removed, in order, and no more.
func TestCacheRemembersLastRemovals(t *testing.T) {
	c := NewCache(Config[thing]{})
	for i := range 1000 {
		o := obj("a", strconv.Itoa(i))
		o.UID = "u" + strconv.Itoa(i)
		c.store.core.put("ns/a", o)
		c.store.core.remove("ns/a")
	}
	if n := len(c.store.core.removed); n != 256 {
		t.Fatalf("%d UIDs kept, want 256", n)
	}
	if first, last := c.store.core.removed[0], c.store.core.removed[255]; first != "u744" || last != "u999" {
		t.Errorf("kept %s to %s, want u744 to u999", first, last)
	}
	// An object without a UID (a test's, never the API server's) is
	// removed too: a created one without a UID is still recorded.
	c.store.core.put("ns/b", obj("b", "1"))
	c.store.core.remove("ns/b")
	for _, tt := range []struct {
		uid  string
		want bool // Wrote records it
	}{{"u999", false}, {"u745", false}, {"u744", true}, {"", true}} {
		o := obj("a", "x")
		o.UID = tt.uid
		c.Wrote(nil, o)
		_, recorded := c.store.core.wrote["ns/a"]
		if recorded != tt.want {
			t.Errorf("Wrote(nil, created %q) recorded %v, want %v", tt.uid, recorded, tt.want)
		}
		delete(c.store.core.wrote, "ns/a")
	}
}
