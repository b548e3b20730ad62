package reconcile_test

// Tests of the finalizer helper (package reconcile/finalizer) and the
// Controller against a real kube-apiserver, on a test CRD. Build the local
// control plane first: go run ./hack/localcluster build

import (
	"context"
	"errors"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/reconcile/finalizer"
	"github.com/zerodep-k8s/widget-operator/testenv/controlplane"
)

// plane is started by the first test that needs it; etcd and the API
// server are enough.
var plane = controlplane.Shared{Options: controlplane.Options{Bare: true}}

func TestMain(m *testing.M) { os.Exit(plane.Run(m)) }

// thing is the custom resource of the test CRD.
type thing struct {
	k8sapi.TypeMeta
	k8sapi.ObjectMeta `json:"metadata"`
}

var things = k8sapi.Resource{Group: "finalizer.widget.test", Version: "v1", Resource: "things", Namespaced: true, Kind: "Thing"}

const thingCRD = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
"metadata":{"name":"things.finalizer.widget.test"},
"spec":{"group":"finalizer.widget.test","scope":"Namespaced",
 "names":{"plural":"things","singular":"thing","kind":"Thing","listKind":"ThingList"},
 "versions":[{"name":"v1","served":true,"storage":true,
  "schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`

const finalizerName = "finalizer.widget.test/cleanup"

// setup installs the CRD (once per plane) and returns a client of things
// in a namespace of the test's own.
func setup(t *testing.T) (k8sapi.Typed[thing], string, context.Context) {
	t.Helper()
	p := plane.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	err := p.Do(ctx, http.MethodPost, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", []byte(thingCRD), nil)
	var se *controlplane.StatusError
	if err != nil && !(errors.As(err, &se) && se.Code == http.StatusConflict) {
		t.Fatal(err)
	}
	cert, key := p.AdminCertificate()
	c, err := k8sapi.New(&k8sapi.Config{Host: p.Host(), CAData: p.CAData(), CertData: cert, KeyData: key})
	if err != nil {
		t.Fatal(err)
	}
	tc := k8sapi.For[thing](c, things)
	ns := p.TestNamespace(t)
	// The CRD is served once a list succeeds.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := tc.List(ctx, ns, k8sapi.ListOptions{Limit: 1}); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("things not served: %v", err)
		}
		<-time.After(100 * time.Millisecond)
	}
	return tc, ns, ctx
}

func newFinalizer(tc k8sapi.Typed[thing]) *finalizer.Finalizer {
	return &finalizer.Finalizer{Name: finalizerName, Patcher: finalizer.JSONPatcherFunc(
		func(ctx context.Context, namespace, name string, patch []byte) error {
			_, err := tc.Patch(ctx, namespace, name, k8sapi.JSONPatch, patch, k8sapi.PatchOptions{})
			return err
		})}
}

func create(t *testing.T, ctx context.Context, tc k8sapi.Typed[thing], ns, name string) *thing {
	t.Helper()
	obj, err := tc.Create(ctx, ns, &thing{TypeMeta: k8sapi.TypeMeta{APIVersion: "finalizer.widget.test/v1", Kind: "Thing"},
		ObjectMeta: k8sapi.ObjectMeta{Name: name}}, k8sapi.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

func get(t *testing.T, ctx context.Context, tc k8sapi.Typed[thing], ns, name string) *thing {
	t.Helper()
	obj, err := tc.Get(ctx, ns, name, k8sapi.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

// The whole life: the finalizer goes on before any external work, a failed
// cleanup keeps it (and the object), a retry that succeeds removes it and
// the object goes.
func TestAPIServerFinalizerLifecycle(t *testing.T) {
	tc, ns, ctx := setup(t)
	f := newFinalizer(tc)
	obj := create(t, ctx, tc, ns, "a")

	proceed, err := f.Run(ctx, obj, nil)
	if err != nil || !proceed {
		t.Fatalf("first run: proceed %v, err %v", proceed, err)
	}
	obj = get(t, ctx, tc, ns, "a")
	if !finalizer.HasFinalizer(obj, finalizerName) {
		t.Fatalf("finalizers %v", obj.Finalizers)
	}
	// A second run of an unchanged object writes nothing and proceeds.
	rv := obj.ResourceVersion
	if proceed, err := f.Run(ctx, obj, nil); err != nil || !proceed {
		t.Fatalf("second run: proceed %v, err %v", proceed, err)
	}
	if get(t, ctx, tc, ns, "a").ResourceVersion != rv {
		t.Fatal("a run with the finalizer in place wrote")
	}

	if err := tc.Delete(ctx, ns, "a", k8sapi.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	obj = get(t, ctx, tc, ns, "a")
	if obj.DeletionTimestamp == nil {
		t.Fatal("no deletionTimestamp after delete")
	}
	cleanupErr := errors.New("bucket still busy")
	if proceed, err := f.Run(ctx, obj, func(context.Context) error { return cleanupErr }); proceed || !errors.Is(err, cleanupErr) {
		t.Fatalf("failing cleanup: proceed %v, err %v", proceed, err)
	}
	obj = get(t, ctx, tc, ns, "a")
	if !finalizer.HasFinalizer(obj, finalizerName) {
		t.Fatal("a failed cleanup removed the finalizer")
	}
	ran := 0
	if proceed, err := f.Run(ctx, obj, func(context.Context) error { ran++; return nil }); proceed || err != nil || ran != 1 {
		t.Fatalf("cleanup retry: proceed %v, err %v, ran %d", proceed, err, ran)
	}
	if _, err := tc.Get(ctx, ns, "a", k8sapi.GetOptions{}); !k8sapi.IsNotFound(err) {
		t.Fatalf("object still there after its finalizer went: %v", err)
	}
}

// The finalizer already removed by someone else: nothing to clean up,
// nothing written.
func TestAPIServerFinalizerAlreadyRemoved(t *testing.T) {
	tc, ns, ctx := setup(t)
	f := newFinalizer(tc)
	obj := create(t, ctx, tc, ns, "b")
	// Another finalizer holds the object, so it stays while being deleted.
	if _, err := tc.Patch(ctx, ns, "b", k8sapi.MergePatch, []byte(`{"metadata":{"finalizers":["someone.else/hold"]}}`), k8sapi.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		tc.Patch(context.Background(), ns, "b", k8sapi.MergePatch, []byte(`{"metadata":{"finalizers":null}}`), k8sapi.PatchOptions{})
	})
	if err := tc.Delete(ctx, ns, "b", k8sapi.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	obj = get(t, ctx, tc, ns, "b")
	ran := false
	if proceed, err := f.Run(ctx, obj, func(context.Context) error { ran = true; return nil }); proceed || err != nil || ran {
		t.Fatalf("proceed %v, err %v, cleanup ran %v", proceed, err, ran)
	}
	if get(t, ctx, tc, ns, "b").ResourceVersion != obj.ResourceVersion {
		t.Fatal("the run wrote")
	}
}

// Deleted during cleanup: another actor removes the finalizer while our
// cleanup runs and the object goes. Our removal finds nothing and reports
// done, not an error.
func TestAPIServerFinalizerDeletedDuringCleanup(t *testing.T) {
	tc, ns, ctx := setup(t)
	f := newFinalizer(tc)
	obj := create(t, ctx, tc, ns, "c")
	if _, err := f.Run(ctx, obj, nil); err != nil {
		t.Fatal(err)
	}
	if err := tc.Delete(ctx, ns, "c", k8sapi.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	obj = get(t, ctx, tc, ns, "c")
	proceed, err := f.Run(ctx, obj, func(ctx context.Context) error {
		_, err := tc.Patch(ctx, ns, "c", k8sapi.MergePatch, []byte(`{"metadata":{"finalizers":null}}`), k8sapi.PatchOptions{})
		return err
	})
	if proceed || err != nil {
		t.Fatalf("proceed %v, err %v", proceed, err)
	}
	if _, err := tc.Get(ctx, ns, "c", k8sapi.GetOptions{}); !k8sapi.IsNotFound(err) {
		t.Fatalf("object still there: %v", err)
	}
}

// Concurrent edits: a run from a stale copy must not undo someone else's
// change to the finalizers. Its patch is refused; a run from a fresh copy
// succeeds and keeps the other finalizer.
func TestAPIServerFinalizerStaleCopy(t *testing.T) {
	tc, ns, ctx := setup(t)
	f := newFinalizer(tc)
	stale := create(t, ctx, tc, ns, "d")
	if _, err := tc.Patch(ctx, ns, "d", k8sapi.MergePatch, []byte(`{"metadata":{"finalizers":["someone.else/hold"]}}`), k8sapi.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		tc.Patch(context.Background(), ns, "d", k8sapi.MergePatch, []byte(`{"metadata":{"finalizers":null}}`), k8sapi.PatchOptions{})
	})
	if proceed, err := f.Run(ctx, stale, nil); proceed || err == nil {
		t.Fatalf("stale copy: proceed %v, err %v; want a refused patch", proceed, err)
	}
	fresh := get(t, ctx, tc, ns, "d")
	if proceed, err := f.Run(ctx, fresh, nil); !proceed || err != nil {
		t.Fatalf("fresh copy: proceed %v, err %v", proceed, err)
	}
	got := get(t, ctx, tc, ns, "d").Finalizers
	if len(got) != 2 || got[0] != "someone.else/hold" || got[1] != finalizerName {
		t.Fatalf("finalizers %v", got)
	}
}
