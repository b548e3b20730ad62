package reconcile_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/queue"
	"github.com/zerodep-k8s/widget-operator/reconcile"
	"github.com/zerodep-k8s/widget-operator/watch"
)

// configMap is a ConfigMap with its data.
type configMap struct {
	k8sapi.TypeMeta
	k8sapi.ObjectMeta `json:"metadata"`
	Data              map[string]string `json:"data,omitempty"`
}

const kitManager = "kit-test"

var kitLabels = map[string]string{"kit.widget.test/managed": "true"}

// thingReconciler keeps a ConfigMap "<name>-cm" for each thing, holding
// the thing's name, through the kit alone.
type thingReconciler struct {
	things   *watch.Cache[thing]
	children *watch.Cache[configMap]
	client   k8sapi.Typed[configMap]
	refused  chan error // the NotControlledErrors of ApplyChild
}

func (r *thingReconciler) Reconcile(ctx context.Context, key string) (queue.Result, error) {
	ns, name, err := k8sapi.SplitKey(key)
	if err != nil {
		return queue.Result{}, err
	}
	th, ok := r.things.Get(ns, name)
	if !ok {
		return queue.Result{}, nil
	}
	want := &configMap{
		TypeMeta: k8sapi.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: k8sapi.ObjectMeta{Namespace: ns, Name: name + "-cm", Labels: kitLabels,
			OwnerReferences: []k8sapi.OwnerReference{reconcile.NewControllerRef(things, &th.ObjectMeta)}},
		Data: map[string]string{"from": name},
	}
	if cm, ok := r.children.Get(ns, want.Name); ok && maps.Equal(cm.Data, want.Data) {
		return queue.Result{}, nil
	}
	_, err = reconcile.ApplyChild(ctx, r.children, r.client, kitManager, want)
	if nc := (*reconcile.NotControlledError)(nil); errors.As(err, &nc) {
		r.refused <- err
		return queue.Result{}, &reconcile.TerminalError{Err: err}
	}
	return queue.Result{}, err
}

func newThing(name string) *thing {
	return &thing{TypeMeta: k8sapi.TypeMeta{APIVersion: things.GroupVersion(), Kind: "Thing"}, ObjectMeta: k8sapi.ObjectMeta{Name: name}}
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-time.After(50 * time.Millisecond)
	}
}

// A Controller on a real API server: a primary resource (a custom one)
// and its owned children (ConfigMaps), created, restored when changed,
// and refused when someone else's object holds the name, in the child
// cache or not; with leader
// election, one Lease, named as configured, held while it runs and
// released when it stops.
func TestControllerAgainstAPIServer(t *testing.T) {
	tc, ns, ctx := setup(t)
	cms := k8sapi.For[configMap](tc.Client, k8sapi.ConfigMaps)
	c := &reconcile.Controller{Name: "kit", Workers: 2,
		LeaderElection: &reconcile.LeaderElection{Client: tc.Client, Namespace: ns, Name: "kit-leader", Identity: "kit-test"}}
	r := &thingReconciler{client: cms, refused: make(chan error, 10)}
	r.things = reconcile.WatchPrimary(c, watch.Config[thing]{Source: watch.ClientSource[thing](tc.Client, things), Namespace: ns, Name: "things"})
	r.children = reconcile.WatchOwned(c, watch.Config[configMap]{Source: watch.ClientSource[configMap](tc.Client, k8sapi.ConfigMaps),
		Namespace: ns, LabelSelector: "kit.widget.test/managed=true", Name: "configmaps"}, things)
	c.Reconciler = r
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()

	a, err := tc.Create(ctx, ns, newThing("a"), k8sapi.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	get := func(name string) *configMap {
		cm, err := cms.Get(ctx, ns, name, k8sapi.GetOptions{})
		if err != nil && !k8sapi.IsNotFound(err) {
			t.Fatal(err)
		}
		return cm
	}
	eventually(t, "the child of a", func() bool { cm := get("a-cm"); return cm != nil && cm.Data["from"] == "a" })
	if !reconcile.IsControlledBy(&get("a-cm").ObjectMeta, a.UID) {
		t.Error("the child is not controlled by its thing")
	}
	leases := k8sapi.For[k8sapi.Lease](tc.Client, k8sapi.Leases)
	holders := func() map[string]string {
		l, err := leases.List(ctx, ns, k8sapi.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, le := range l.Items {
			out[le.Name] = *le.Spec.HolderIdentity
		}
		return out
	}
	if h := holders(); len(h) != 1 || h["kit-leader"] != "kit-test" || !c.IsLeader() {
		t.Errorf("Leases while leading %v, IsLeader %v; want kit-leader alone, held by kit-test", h, c.IsLeader())
	}
	for _, ch := range c.Checks(time.Now()) {
		if ch.Err != nil {
			t.Errorf("check %s: %v", ch.Name, ch.Err)
		}
	}

	// A change of the child wakes its owner, which restores it.
	patch, _ := json.Marshal(map[string]any{"data": map[string]string{"from": "someone else"}})
	if _, err := cms.Patch(ctx, ns, "a-cm", k8sapi.MergePatch, patch, k8sapi.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the child of a restored", func() bool { cm := get("a-cm"); return cm != nil && cm.Data["from"] == "a" })

	// Another's object of the child's name, outside the child cache (no
	// label): nothing is written to it.
	if _, err := cms.Create(ctx, ns, &configMap{ObjectMeta: k8sapi.ObjectMeta{Name: "b-cm"}, Data: map[string]string{"owner": "none"}}, k8sapi.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.Create(ctx, ns, newThing("b"), k8sapi.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	refused := func(name string) {
		t.Helper()
		select {
		case err := <-r.refused:
			var nc *reconcile.NotControlledError
			if !errors.As(err, &nc) || nc.Kind != "ConfigMap" || nc.Existing.Name != name {
				t.Errorf("refusal %v, want one of %s", err, name)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("no refusal for %s", name)
		}
		if cm := get(name); cm.Data["owner"] != "none" || len(cm.OwnerReferences) != 0 {
			t.Errorf("the foreign object was written: %+v", cm)
		}
	}
	refused("b-cm")

	// Another's object in the child cache (it has the label): refused
	// too, where a forced apply would take it over.
	if _, err := cms.Create(ctx, ns, &configMap{ObjectMeta: k8sapi.ObjectMeta{Name: "d-cm", Labels: kitLabels}, Data: map[string]string{"owner": "none"}}, k8sapi.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "d-cm in the cache", func() bool { _, ok := r.children.Get(ns, "d-cm"); return ok })
	if _, err := tc.Create(ctx, ns, newThing("d"), k8sapi.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	refused("d-cm")

	stop()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	if h := holders(); len(h) != 1 || h["kit-leader"] != "" {
		t.Errorf("Leases after Run returned %v; want kit-leader alone, released", h)
	}

	// The child's own object, outside the cache (no label yet): the
	// create is refused, and ApplyChild applies over it; the cache reads
	// the answer at once.
	c3, err := tc.Create(ctx, ns, newThing("c"), k8sapi.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ref := reconcile.NewControllerRef(things, &c3.ObjectMeta)
	if _, err := cms.Create(ctx, ns, &configMap{ObjectMeta: k8sapi.ObjectMeta{Name: "c-cm", OwnerReferences: []k8sapi.OwnerReference{ref}}}, k8sapi.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	want := &configMap{TypeMeta: k8sapi.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: k8sapi.ObjectMeta{Namespace: ns, Name: "c-cm", Labels: kitLabels, OwnerReferences: []k8sapi.OwnerReference{ref}},
		Data:       map[string]string{"from": "c"}}
	got, err := reconcile.ApplyChild(ctx, r.children, cms, kitManager, want)
	if err != nil || got.Data["from"] != "c" || got.Labels["kit.widget.test/managed"] != "true" {
		t.Fatalf("ApplyChild over our own object = %+v, %v", got, err)
	}
	if cached, ok := r.children.Get(ns, "c-cm"); !ok || cached.ResourceVersion != got.ResourceVersion {
		t.Errorf("the cache does not read the write back: %+v", cached)
	}
}
