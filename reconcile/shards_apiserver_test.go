package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/reconcile"
	"github.com/zerodep-k8s/widget-operator/testenv/controlplane"
	"github.com/zerodep-k8s/widget-operator/watch"
)

// Tests of shard selectors (k8sapi.ListOptions.ShardSelector, built by
// reconcile.ShardSelector) against a real kube-apiserver: one of their own
// with the ShardedListAndWatch feature gate on, and the package's shared
// plane, where it is off, as it is by default in Kubernetes 1.37.

const shardGate = "--feature-gates=ShardedListAndWatch=true"

// adminClient returns a client of p as its admin, with maxRetries as
// k8sapi.Config.MaxRetries.
func adminClient(t *testing.T, p *controlplane.Plane, maxRetries int) *k8sapi.Client {
	t.Helper()
	cert, key := p.AdminCertificate()
	c, err := k8sapi.New(&k8sapi.Config{Host: p.Host(), CAData: p.CAData(), CertData: cert, KeyData: key, MaxRetries: maxRetries})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// shardOf returns the shard of shards that owns bucket b, as
// reconcile.ShardSelector lays them out.
func shardOf(b, shards int) int {
	k := 0
	for (k+1)*256/shards <= b {
		k++
	}
	return k
}

// createConfigMaps creates n ConfigMaps named prefix-i in ns, and records
// in shard the shard of shards that each one's uid belongs to.
func createConfigMaps(t *testing.T, ctx context.Context, cms k8sapi.Typed[configMap], ns, prefix string, n, shards int, shard map[string]int) {
	t.Helper()
	for i := range n {
		cm := &configMap{TypeMeta: k8sapi.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: k8sapi.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i)}}
		got, err := cms.Create(ctx, ns, cm, k8sapi.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		shard[got.Name] = shardOf(reconcile.Bucket(string(got.UID)), shards)
	}
}

// namesOf returns the sorted names of shard k in shard (every name, for
// k < 0).
func namesOf(shard map[string]int, k int) []string {
	var names []string
	for name, s := range shard {
		if s == k || k < 0 {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

func itemNames(items []configMap) []string {
	var names []string
	for _, cm := range items {
		names = append(names, cm.Name)
	}
	slices.Sort(names)
	return names
}

func storeNames(s *watch.Store[configMap]) []string {
	var names []string
	for _, cm := range s.List() {
		names = append(names, cm.Name)
	}
	slices.Sort(names)
	return names
}

// With the gate on, the shard selectors of 3 shards partition 60
// ConfigMaps exactly, by the bucket of each uid: in lists from etcd and
// from the watch cache, in the initial state of informers (a streaming
// list, and a list then a watch), and in the watch events of new and
// changed objects, each delivered to its own shard's informer alone. A
// custom resource is split alike.
func TestShardSelectorAgainstAPIServer(t *testing.T) {
	start := time.Now()
	p := controlplane.StartForTest(t, controlplane.Options{Bare: true, APIServerArgs: []string{shardGate}})
	t.Logf("plane with %s started in %v", shardGate, time.Since(start).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := adminClient(t, p, 0)
	cms := k8sapi.For[configMap](c, k8sapi.ConfigMaps)
	ns := p.TestNamespace(t)
	if ok, err := k8sapi.ServesShardSelector(ctx, c, k8sapi.ConfigMaps, ns); !ok || err != nil {
		t.Fatalf("ServesShardSelector with the gate on = %v, %v; want true", ok, err)
	}

	const shards = 3
	shard := map[string]int{}
	createConfigMaps(t, ctx, cms, ns, "cm", 60, shards, shard)
	sels := make([]string, shards)
	for k := range shards {
		sels[k], _ = reconcile.ShardSelector("object.metadata.uid", shards, k)
		t.Logf("shard %d: %d ConfigMaps of 60: %s", k, len(namesOf(shard, k)), sels[k])
	}
	for _, rv := range []string{"", "0"} { // etcd, the watch cache
		for k, sel := range sels {
			l, err := cms.List(ctx, ns, k8sapi.ListOptions{ShardSelector: sel, ResourceVersion: rv})
			if err != nil {
				t.Fatal(err)
			}
			if got, want := itemNames(l.Items), namesOf(shard, k); !slices.Equal(got, want) {
				t.Errorf("resourceVersion %q: shard %d lists %v, want %v", rv, k, got, want)
			}
			if l.Metadata.ShardInfo == nil || l.Metadata.ShardInfo.Selector != sel {
				t.Errorf("resourceVersion %q: shard %d's list echoes %+v, want %q", rv, k, l.Metadata.ShardInfo, sel)
			}
		}
	}
	both, _ := reconcile.ShardSelector("object.metadata.uid", shards, 2, 0)
	l, err := cms.List(ctx, ns, k8sapi.ListOptions{ShardSelector: both})
	if want := append(namesOf(shard, 0), namesOf(shard, 2)...); err != nil || len(l.Items) != len(want) {
		t.Errorf("shards 0 and 2 (%s) list %d, %v; want %d", both, len(l.Items), err, len(want))
	}

	infs := make([]*watch.Informer[configMap], shards)
	for k, sel := range sels {
		infs[k] = watch.New(watch.Config[configMap]{Source: watch.ClientSource[configMap](c, k8sapi.ConfigMaps),
			Namespace: ns, ShardSelector: sel, DisableStreamingList: k == 1, Name: fmt.Sprint("shard ", k)})
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- infs[k].Run(runCtx) }()
		t.Cleanup(func() { stop(); <-done })
	}
	eventually(t, "the informers' sync", func() bool {
		return infs[0].HasSynced() && infs[1].HasSynced() && infs[2].HasSynced()
	})
	for k, inf := range infs {
		if got, want := storeNames(inf.Store()), namesOf(shard, k); !slices.Equal(got, want) {
			t.Errorf("shard %d's informer synced with %v, want %v", k, got, want)
		}
	}

	// New objects and a change, then fences until every shard has had
	// one: a watch delivers in order, so each informer has then had every
	// event it will get of what came before.
	createConfigMaps(t, ctx, cms, ns, "new", 12, shards, shard)
	changed, _ := cms.Get(ctx, ns, "cm-0", k8sapi.GetOptions{})
	changed.Data = map[string]string{"changed": "yes"}
	if _, err := cms.Update(ctx, ns, "cm-0", changed, k8sapi.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	fenced := map[int]bool{}
	for i := 0; len(fenced) < shards; i++ {
		if i == 50 {
			t.Fatalf("50 fences made %v of %d shards", slices.Collect(maps.Keys(fenced)), shards)
		}
		name := fmt.Sprint("fence-", i)
		createConfigMaps(t, ctx, cms, ns, name, 1, shards, shard)
		k := shard[name+"-0"]
		eventually(t, name+"-0 in shard "+fmt.Sprint(k), func() bool { _, ok := infs[k].Store().Get(ns, name+"-0"); return ok })
		fenced[k] = true
	}
	for k, inf := range infs {
		if got, want := storeNames(inf.Store()), namesOf(shard, k); !slices.Equal(got, want) {
			t.Errorf("shard %d's informer holds %v, want %v", k, got, want)
		}
		// A streaming list ends with a bookmark.
		if s := inf.Stats(); s.Relists != 0 || k != 1 && s.Bookmarks == 0 {
			t.Errorf("shard %d's informer: %+v, want no relist, and a streaming list but for shard 1", k, s)
		}
	}
	if cm, ok := infs[shard["cm-0"]].Store().Get(ns, "cm-0"); !ok || cm.Data["changed"] != "yes" {
		t.Errorf("shard %d holds cm-0 = %+v, want it changed", shard["cm-0"], cm)
	}

	// A custom resource's lists are split alike, but do not say so.
	if err := p.Do(ctx, http.MethodPost, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", []byte(thingCRD), nil); err != nil {
		t.Fatal(err)
	}
	tc := k8sapi.For[thing](c, things)
	eventually(t, "things served", func() bool { _, err := tc.List(ctx, ns, k8sapi.ListOptions{Limit: 1}); return err == nil })
	thingShard := map[string]int{}
	for i := range 30 {
		th, err := tc.Create(ctx, ns, newThing(fmt.Sprint("thing-", i)), k8sapi.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		thingShard[th.Name] = shardOf(reconcile.Bucket(string(th.UID)), shards)
	}
	for k, sel := range sels {
		l, err := tc.List(ctx, ns, k8sapi.ListOptions{ShardSelector: sel})
		var got []string
		for _, th := range l.Items {
			got = append(got, th.Name)
		}
		slices.Sort(got)
		if want := namesOf(thingShard, k); err != nil || !slices.Equal(got, want) || l.Metadata.ShardInfo != nil {
			t.Errorf("shard %d lists things %v, %+v, %v; want %v and no shard info", k, got, l.Metadata, err, want)
		}
	}

	// A selector the server cannot parse is a 500 Internal Server Error,
	// not a 400 (Kubernetes 1.37), which this client retries, as it does
	// any 5xx of a GET: asked without retries here.
	_, err = k8sapi.For[configMap](adminClient(t, p, -1), k8sapi.ConfigMaps).List(ctx, ns,
		k8sapi.ListOptions{ShardSelector: "shardRange(object.metadata.uid, '0x0', '0x8000000000000000')"})
	var apiErr *k8sapi.APIError
	if !errors.As(err, &apiErr) || apiErr.Code != 500 {
		t.Errorf("a list with a malformed shard selector: %v, want a 500", err)
	}
	t.Logf("a malformed shard selector: %v", err)
	t.Logf("whole test: %v", time.Since(start).Round(time.Millisecond))
}

// With the gate off, the server ignores the parameter, even malformed:
// a list or an informer with a shard selector gets every object, the
// list names no shard, and ServesShardSelector reports false.
func TestShardSelectorWithoutTheGate(t *testing.T) {
	p := plane.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := adminClient(t, p, 0)
	cms := k8sapi.For[configMap](c, k8sapi.ConfigMaps)
	ns := p.TestNamespace(t)
	shard := map[string]int{}
	createConfigMaps(t, ctx, cms, ns, "cm", 6, 3, shard)
	if ok, err := k8sapi.ServesShardSelector(ctx, c, k8sapi.ConfigMaps, ns); ok || err != nil {
		t.Fatalf("ServesShardSelector with the gate off = %v, %v; want false", ok, err)
	}
	sel, _ := reconcile.ShardSelector("object.metadata.uid", 3, 0)
	for _, s := range []string{sel, "nonsense(("} {
		l, err := cms.List(ctx, ns, k8sapi.ListOptions{ShardSelector: s})
		if err != nil || !slices.Equal(itemNames(l.Items), namesOf(shard, -1)) || l.Metadata.ShardInfo != nil {
			t.Errorf("a list with shardSelector %q: %+v, %v; want all 6, no shard info", s, l, err)
		}
	}
	inf := watch.New(watch.Config[configMap]{Source: watch.ClientSource[configMap](c, k8sapi.ConfigMaps), Namespace: ns, ShardSelector: sel})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- inf.Run(runCtx) }()
	defer func() { stop(); <-done }()
	eventually(t, "the informer's sync", inf.HasSynced)
	if got := storeNames(inf.Store()); !slices.Equal(got, namesOf(shard, -1)) {
		t.Errorf("an informer of shard 0 of 3 holds %v, want all 6", got)
	}
}
