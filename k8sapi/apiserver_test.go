package k8sapi_test

// Conformance tests of the client against a real kube-apiserver, started
// by testenv/controlplane. Build its binaries first:
//
//	go run ./hack/localcluster build

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/k8sapi/namespaced"
	"github.com/zerodep-k8s/widget-operator/testenv/controlplane"
)

// plane is shared by the tests that do not disturb it. A bare plane (etcd
// and apiserver) is enough: nothing here needs Pods to run.
var plane = controlplane.Shared{Options: controlplane.Options{Bare: true}}

func TestMain(m *testing.M) { os.Exit(plane.Run(m)) }

// configMap is core/v1 ConfigMap, as the tests need it.
type configMap struct {
	k8sapi.TypeMeta
	k8sapi.ObjectMeta `json:"metadata"`
	Data              map[string]string `json:"data,omitempty"`
}

func newConfigMap(name string, data map[string]string) *configMap {
	return &configMap{
		TypeMeta:   k8sapi.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: k8sapi.ObjectMeta{Name: name},
		Data:       data,
	}
}

// adminClient returns a client of p that authenticates as the admin user
// with a client certificate.
func adminClient(t *testing.T, p *controlplane.Plane) *k8sapi.Client {
	t.Helper()
	cert, key := p.AdminCertificate()
	c, err := k8sapi.New(&k8sapi.Config{Host: p.Host(), CAData: p.CAData(), CertData: cert, KeyData: key, UserAgent: "k8sapi-conformance"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestAPIServerConfigMapCRUD(t *testing.T) {
	p := plane.Get(t)
	ns := p.TestNamespace(t)
	ctx := testContext(t)
	cms := k8sapi.For[configMap](adminClient(t, p), k8sapi.ConfigMaps)

	created, err := cms.Create(ctx, ns, newConfigMap("one", map[string]string{"a": "1"}), k8sapi.WriteOptions{FieldManager: "conformance"})
	if err != nil {
		t.Fatal(err)
	}
	if created.UID == "" || created.ResourceVersion == "" || created.Namespace != ns || created.Data["a"] != "1" {
		t.Fatalf("created = %+v", created)
	}
	if _, err := cms.Create(ctx, ns, newConfigMap("one", nil), k8sapi.WriteOptions{}); !k8sapi.IsAlreadyExists(err) {
		t.Fatalf("second create: %v, want AlreadyExists", err)
	}

	got, err := cms.Get(ctx, ns, "one", k8sapi.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.UID != created.UID || got.ResourceVersion != created.ResourceVersion {
		t.Fatalf("get = %+v, want the created object", got)
	}

	got.Data["b"] = "2"
	updated, err := cms.Update(ctx, ns, "one", got, k8sapi.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if updated.ResourceVersion == created.ResourceVersion || updated.Data["b"] != "2" {
		t.Fatalf("updated = %+v", updated)
	}
	// The object read before the update now has a stale resourceVersion.
	stale := *created
	stale.Data = map[string]string{"c": "3"}
	_, err = cms.Update(ctx, ns, "one", &stale, k8sapi.WriteOptions{})
	if !k8sapi.IsConflict(err) {
		t.Fatalf("update with a stale resourceVersion: %v, want Conflict", err)
	}
	var apiErr *k8sapi.APIError
	if !errors.As(err, &apiErr) || apiErr.Code != http.StatusConflict || apiErr.Op != "update" || apiErr.Name != "one" {
		t.Fatalf("conflict error = %#v", err)
	}

	list, err := cms.List(ctx, ns, k8sapi.ListOptions{FieldSelector: "metadata.name=one"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "one" || list.Metadata.ResourceVersion == "" {
		t.Fatalf("list = %+v", list)
	}

	// A delete whose precondition does not hold is refused.
	err = cms.Delete(ctx, ns, "one", k8sapi.DeleteOptions{Preconditions: &k8sapi.Preconditions{ResourceVersion: created.ResourceVersion}})
	if !k8sapi.IsConflict(err) {
		t.Fatalf("delete with a stale precondition: %v, want Conflict", err)
	}
	if err := cms.Delete(ctx, ns, "one", k8sapi.DeleteOptions{Preconditions: &k8sapi.Preconditions{UID: created.UID}}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Get(ctx, ns, "one", k8sapi.GetOptions{}); !k8sapi.IsNotFound(err) {
		t.Fatalf("get after delete: %v, want NotFound", err)
	}
	if err := cms.Delete(ctx, ns, "one", k8sapi.DeleteOptions{}); !k8sapi.IsNotFound(err) {
		t.Fatalf("second delete: %v, want NotFound", err)
	}
	if _, err := cms.Create(ctx, ns, newConfigMap("Bad_Name", nil), k8sapi.WriteOptions{}); !k8sapi.IsInvalid(err) {
		t.Fatalf("create with an invalid name: %v, want Invalid", err)
	}
}

func TestAPIServerPatchTypes(t *testing.T) {
	p := plane.Get(t)
	ns := p.TestNamespace(t)
	ctx := testContext(t)
	cms := k8sapi.For[configMap](adminClient(t, p), k8sapi.ConfigMaps)
	if _, err := cms.Create(ctx, ns, newConfigMap("patched", map[string]string{"a": "1", "b": "2"}), k8sapi.WriteOptions{}); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		pt    k8sapi.PatchType
		patch string
		want  map[string]string
	}{
		{k8sapi.MergePatch, `{"data":{"a":"merge","b":null}}`, map[string]string{"a": "merge"}},
		{k8sapi.JSONPatch, `[{"op":"add","path":"/data/c","value":"json"},{"op":"test","path":"/data/a","value":"merge"}]`, map[string]string{"a": "merge", "c": "json"}},
		{k8sapi.StrategicMergePatch, `{"data":{"d":"strategic","c":null}}`, map[string]string{"a": "merge", "d": "strategic"}},
		{k8sapi.ApplyPatch, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"patched"},"data":{"e":"apply"}}`, map[string]string{"a": "merge", "d": "strategic", "e": "apply"}},
	} {
		got, err := cms.Patch(ctx, ns, "patched", tc.pt, []byte(tc.patch), k8sapi.PatchOptions{FieldManager: "conformance-patch"})
		if err != nil {
			t.Fatalf("%s: %v", tc.pt, err)
		}
		if !maps.Equal(got.Data, tc.want) {
			t.Errorf("%s: data = %v, want %v", tc.pt, got.Data, tc.want)
		}
	}

	// A JSON patch whose test fails is refused and changes nothing.
	_, err := cms.Patch(ctx, ns, "patched", k8sapi.JSONPatch, []byte(`[{"op":"test","path":"/data/a","value":"other"},{"op":"remove","path":"/data/a"}]`), k8sapi.PatchOptions{})
	var apiErr *k8sapi.APIError
	if !errors.As(err, &apiErr) || apiErr.Code/100 != 4 {
		t.Fatalf("failing JSON patch: %v, want a 4xx APIError", err)
	}
	if _, err := cms.Patch(ctx, ns, "missing", k8sapi.MergePatch, []byte(`{"data":{"a":"1"}}`), k8sapi.PatchOptions{}); !k8sapi.IsNotFound(err) {
		t.Fatalf("merge patch of a missing object: %v, want NotFound", err)
	}
	if _, err := cms.Patch(ctx, ns, "patched", k8sapi.MergePatch, []byte(`{not json`), k8sapi.PatchOptions{}); err == nil {
		t.Fatal("malformed merge patch: no error")
	}
}

func TestAPIServerApplyConflicts(t *testing.T) {
	p := plane.Get(t)
	ns := p.TestNamespace(t)
	ctx := testContext(t)
	cms := k8sapi.For[configMap](adminClient(t, p), k8sapi.ConfigMaps)

	first := newConfigMap("applied", map[string]string{"owner": "first", "only-first": "x"})
	got, err := cms.Apply(ctx, ns, "applied", first, k8sapi.PatchOptions{FieldManager: "first"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Data["owner"] != "first" {
		t.Fatalf("apply created %+v", got)
	}

	// A second manager that sets a field the first owns, to another value,
	// conflicts.
	second := newConfigMap("applied", map[string]string{"owner": "second"})
	_, err = cms.Apply(ctx, ns, "applied", second, k8sapi.PatchOptions{FieldManager: "second"})
	if !k8sapi.IsConflict(err) {
		t.Fatalf("conflicting apply: %v, want Conflict", err)
	}
	var apiErr *k8sapi.APIError
	if !errors.As(err, &apiErr) || apiErr.Op != "patch" || apiErr.Status.Details == nil || len(apiErr.Status.Details.Causes) == 0 {
		t.Fatalf("conflict error = %#v, want causes naming the field", err)
	}

	// With force, the second manager takes the field.
	got, err = cms.Apply(ctx, ns, "applied", second, k8sapi.PatchOptions{FieldManager: "second", Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"owner": "second", "only-first": "x"}; !maps.Equal(got.Data, want) {
		t.Fatalf("after a forced apply data = %v, want %v", got.Data, want)
	}
	// The first manager applying again without the field it lost drops
	// nothing that it no longer owns.
	got, err = cms.Apply(ctx, ns, "applied", newConfigMap("applied", map[string]string{"only-first": "y"}), k8sapi.PatchOptions{FieldManager: "first"})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"owner": "second", "only-first": "y"}; !maps.Equal(got.Data, want) {
		t.Fatalf("after re-apply data = %v, want %v", got.Data, want)
	}
	// Apply needs a field manager; the server refuses one without.
	if _, err := cms.Apply(ctx, ns, "applied", second, k8sapi.PatchOptions{}); err == nil {
		t.Fatal("apply without a field manager: no error")
	}
}

// gizmo is the custom resource of the test CRD.
type gizmo struct {
	k8sapi.TypeMeta
	k8sapi.ObjectMeta `json:"metadata"`
	Spec              struct {
		Size int `json:"size"`
	} `json:"spec"`
	Status struct {
		Phase              string `json:"phase,omitempty"`
		ObservedGeneration int64  `json:"observedGeneration,omitempty"`
	} `json:"status"`
}

var gizmos = k8sapi.Resource{Group: "conformance.widget.test", Version: "v1", Resource: "gizmos", Namespaced: true}

const gizmoCRD = `{
  "apiVersion": "apiextensions.k8s.io/v1",
  "kind": "CustomResourceDefinition",
  "metadata": {"name": "gizmos.conformance.widget.test"},
  "spec": {
    "group": "conformance.widget.test",
    "scope": "Namespaced",
    "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo", "listKind": "GizmoList"},
    "versions": [{
      "name": "v1", "served": true, "storage": true,
      "subresources": {"status": {}},
      "schema": {"openAPIV3Schema": {
        "type": "object",
        "properties": {
          "spec": {"type": "object", "properties": {"size": {"type": "integer", "minimum": 0}}},
          "status": {"type": "object", "properties": {
            "phase": {"type": "string"},
            "observedGeneration": {"type": "integer"}
          }}
        }
      }}
    }]
  }
}`

// installGizmoCRD creates the test CRD once per plane and waits until the
// apiserver serves it.
func installGizmoCRD(t *testing.T, p *controlplane.Plane, c *k8sapi.Client) {
	t.Helper()
	ctx := testContext(t)
	err := p.Do(ctx, http.MethodPost, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", []byte(gizmoCRD), nil)
	var se *controlplane.StatusError
	if err != nil && !(errors.As(err, &se) && se.Code == http.StatusConflict) {
		t.Fatal(err)
	}
	// Established, then served: a list succeeds.
	g := k8sapi.For[gizmo](c, gizmos)
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := g.List(ctx, "default", k8sapi.ListOptions{Limit: 1})
		if err == nil {
			return
		}
		if !k8sapi.IsNotFound(err) || time.Now().After(deadline) {
			t.Fatalf("gizmos not served: %v", err)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func TestAPIServerStatusSubresource(t *testing.T) {
	p := plane.Get(t)
	ns := p.TestNamespace(t)
	ctx := testContext(t)
	c := adminClient(t, p)
	installGizmoCRD(t, p, c)
	g := k8sapi.For[gizmo](c, gizmos)

	obj := &gizmo{TypeMeta: k8sapi.TypeMeta{APIVersion: "conformance.widget.test/v1", Kind: "Gizmo"}, ObjectMeta: k8sapi.ObjectMeta{Name: "g1"}}
	obj.Spec.Size = 3
	obj.Status.Phase = "set-on-create"
	created, err := g.Create(ctx, ns, obj, k8sapi.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.Status.Phase != "" || created.Generation != 1 || created.Spec.Size != 3 {
		t.Fatalf("created = %+v: the status must be dropped on create", created)
	}

	// Writing status through the main resource does nothing.
	created.Status.Phase = "ignored"
	updated, err := g.Update(ctx, ns, "g1", created, k8sapi.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if updated.Status.Phase != "" {
		t.Fatalf("status written through the main resource: %+v", updated.Status)
	}

	// Through the subresource it is written, and spec changes are ignored.
	updated.Status.Phase = "Ready"
	updated.Status.ObservedGeneration = updated.Generation
	updated.Spec.Size = 99
	st, err := g.Update(ctx, ns, "g1", updated, k8sapi.WriteOptions{Subresource: "status"})
	if err != nil {
		t.Fatal(err)
	}
	if st.Status.Phase != "Ready" || st.Status.ObservedGeneration != 1 || st.Spec.Size != 3 || st.Generation != 1 {
		t.Fatalf("after the status update: %+v", st)
	}
	// A stale resourceVersion conflicts on the subresource too.
	if _, err := g.Update(ctx, ns, "g1", updated, k8sapi.WriteOptions{Subresource: "status"}); !k8sapi.IsConflict(err) {
		t.Fatalf("stale status update: %v, want Conflict", err)
	}
	// Patching status and reading it back.
	if _, err := g.Patch(ctx, ns, "g1", k8sapi.MergePatch, []byte(`{"status":{"phase":"Patched"}}`), k8sapi.PatchOptions{Subresource: "status"}); err != nil {
		t.Fatal(err)
	}
	got, err := g.Get(ctx, ns, "g1", k8sapi.GetOptions{Subresource: "status"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != "Patched" {
		t.Fatalf("status = %+v", got.Status)
	}
	// The schema is enforced.
	bad := &gizmo{TypeMeta: obj.TypeMeta, ObjectMeta: k8sapi.ObjectMeta{Name: "g2"}}
	bad.Spec.Size = -1
	if _, err := g.Create(ctx, ns, bad, k8sapi.WriteOptions{}); !k8sapi.IsInvalid(err) {
		t.Fatalf("create violating the schema: %v, want Invalid", err)
	}
}

func TestAPIServerPagination(t *testing.T) {
	p := plane.Get(t)
	ns := p.TestNamespace(t)
	ctx := testContext(t)
	cms := k8sapi.For[configMap](adminClient(t, p), k8sapi.ConfigMaps)
	const n = 7
	var want []string
	for i := range n {
		cm := newConfigMap(fmt.Sprintf("page-%d", i), nil)
		cm.Labels = map[string]string{"set": "paged"}
		if _, err := cms.Create(ctx, ns, cm, k8sapi.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		want = append(want, cm.Name)
	}
	// Another object that the selector leaves out.
	if _, err := cms.Create(ctx, ns, newConfigMap("unlabelled", nil), k8sapi.WriteOptions{}); err != nil {
		t.Fatal(err)
	}

	var names []string
	opts := k8sapi.ListOptions{LabelSelector: "set=paged", Limit: 3}
	pages := 0
	for {
		page, err := cms.List(ctx, ns, opts)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(page.Items) > 3 {
			t.Fatalf("page of %d items, limit 3", len(page.Items))
		}
		for _, cm := range page.Items {
			names = append(names, cm.Name)
		}
		if page.Metadata.Continue == "" {
			break
		}
		if pages > n {
			t.Fatal("pagination does not end")
		}
		opts.Continue = page.Metadata.Continue
	}
	if pages != 3 || !slices.Equal(names, want) {
		t.Fatalf("got %v in %d pages, want %v in 3", names, pages, want)
	}

	all, err := namespaced.In(cms, ns).ListAll(ctx, k8sapi.ListOptions{LabelSelector: "set=paged", Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	var allNames []string
	for _, cm := range all.Items {
		allNames = append(allNames, cm.Name)
	}
	if !slices.Equal(allNames, want) || all.Metadata.ResourceVersion == "" || all.Metadata.Continue != "" {
		t.Fatalf("ListAll = %v (rv %q, continue %q), want %v", allNames, all.Metadata.ResourceVersion, all.Metadata.Continue, want)
	}

	if _, err := cms.List(ctx, ns, k8sapi.ListOptions{Limit: 3, Continue: "not-a-token"}); err == nil {
		t.Fatal("list with a garbage continue token: no error")
	}
}

// nextEvent reads one event with a deadline, so a missing event fails the
// test instead of hanging it.
func nextEvent[T any](t *testing.T, w *k8sapi.Watcher[T]) k8sapi.WatchEvent[T] {
	t.Helper()
	type result struct {
		ev  k8sapi.WatchEvent[T]
		err error
	}
	ch := make(chan result, 1)
	go func() {
		ev, err := w.Next()
		ch <- result{ev, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("watch: %v", r.err)
		}
		return r.ev
	case <-time.After(30 * time.Second):
		w.Close()
		t.Fatal("watch: no event within 30s")
	}
	panic("unreachable")
}

func TestAPIServerWatchFromResourceVersion(t *testing.T) {
	p := plane.Get(t)
	ns := p.TestNamespace(t)
	ctx := testContext(t)
	cms := k8sapi.For[configMap](adminClient(t, p), k8sapi.ConfigMaps)

	if _, err := cms.Create(ctx, ns, newConfigMap("before", nil), k8sapi.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	list, err := cms.List(ctx, ns, k8sapi.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Changes made after the list, before the watch opens, must still be
	// delivered: the watch starts at the list's resourceVersion.
	if _, err := cms.Create(ctx, ns, newConfigMap("w", map[string]string{"v": "1"}), k8sapi.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := cms.Watch(ctx, ns, k8sapi.ListOptions{ResourceVersion: list.Metadata.ResourceVersion, AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := cms.Patch(ctx, ns, "w", k8sapi.MergePatch, []byte(`{"data":{"v":"2"}}`), k8sapi.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, ns, "w", k8sapi.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	var got []string
	lastRV := list.Metadata.ResourceVersion
	for len(got) < 3 {
		ev := nextEvent(t, w)
		if ev.Type == k8sapi.Bookmark {
			if ev.Object.ResourceVersion == "" {
				t.Fatal("bookmark without a resourceVersion")
			}
			continue
		}
		rv := ev.Object.ResourceVersion
		if a, b := mustAtoi(t, lastRV), mustAtoi(t, rv); b <= a {
			t.Errorf("event %s rv %s after rv %s", ev.Type, rv, lastRV)
		}
		lastRV = rv
		got = append(got, fmt.Sprintf("%s %s %s", ev.Type, ev.Object.Name, ev.Object.Data["v"]))
	}
	want := []string{"ADDED w 1", "MODIFIED w 2", "DELETED w 2"}
	if !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
}

// TestAPIServerWatchInitialEventsBookmark uses a streaming list: initial
// ADDED events, then a bookmark that marks their end.
func TestAPIServerWatchInitialEventsBookmark(t *testing.T) {
	p := plane.Get(t)
	ns := p.TestNamespace(t)
	ctx := testContext(t)
	cms := k8sapi.For[configMap](adminClient(t, p), k8sapi.ConfigMaps)
	for _, name := range []string{"x", "y"} {
		if _, err := cms.Create(ctx, ns, newConfigMap(name, nil), k8sapi.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	yes := true
	w, err := cms.Watch(ctx, ns, k8sapi.ListOptions{SendInitialEvents: &yes, ResourceVersionMatch: "NotOlderThan", AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var added []string
	for {
		ev := nextEvent(t, w)
		if ev.Type == k8sapi.Bookmark {
			if ev.Object.Annotations["k8s.io/initial-events-end"] != "true" {
				continue // a periodic bookmark
			}
			if ev.Object.ResourceVersion == "" {
				t.Fatal("initial-events-end bookmark without a resourceVersion")
			}
			break
		}
		if ev.Type != k8sapi.Added {
			t.Fatalf("initial event %s, want ADDED", ev.Type)
		}
		added = append(added, ev.Object.Name)
	}
	slices.Sort(added)
	// kube-root-ca.crt is there only with a controller manager.
	added = slices.DeleteFunc(added, func(s string) bool { return s == "kube-root-ca.crt" })
	if !slices.Equal(added, []string{"x", "y"}) {
		t.Fatalf("initial events for %v, want [x y]", added)
	}
}

func mustAtoi(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q: %v", s, err)
	}
	return n
}

// TestAPIServerGoneAfterCompaction compacts etcd past a stored
// resourceVersion, on a plane of its own, and expects 410 Gone from a
// watch and from an exact list at that version.
func TestAPIServerGoneAfterCompaction(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		// restart the apiserver after the compaction: its watch cache then
		// starts after the compacted version, as after a real restart.
		restart bool
	}{
		// Without the watch cache every list and watch is served by etcd.
		{name: "etcd", args: []string{"--watch-cache=false"}},
		// The watch cache keeps serving versions that etcd has compacted
		// until it is rebuilt.
		{name: "watch-cache-after-restart", restart: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := controlplane.StartForTest(t, controlplane.Options{Bare: true, APIServerArgs: tc.args})
			ctx := testContext(t)
			cms := k8sapi.For[configMap](adminClient(t, p), k8sapi.ConfigMaps)
			old, err := cms.Create(ctx, "default", newConfigMap("compacted", map[string]string{"v": "0"}), k8sapi.WriteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for i := 1; i <= 3; i++ {
				if _, err := cms.Patch(ctx, "default", "compacted", k8sapi.MergePatch, fmt.Appendf(nil, `{"data":{"v":"%d"}}`, i), k8sapi.PatchOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			rev, err := p.CompactEtcd(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if mustAtoi(t, old.ResourceVersion) >= rev {
				t.Fatalf("compacted to %d, not past %s", rev, old.ResourceVersion)
			}
			if tc.restart {
				p.StopAPIServer()
				if err := p.StartAPIServer(ctx); err != nil {
					t.Fatal(err)
				}
			}

			// A watch from the compacted version: either the open fails
			// with 410 or the stream's first event is an ERROR with 410.
			w, err := cms.Watch(ctx, "default", k8sapi.ListOptions{ResourceVersion: old.ResourceVersion})
			if err == nil {
				defer w.Close()
				done := make(chan error, 1)
				go func() { _, err := w.Next(); done <- err }()
				select {
				case err = <-done:
				case <-time.After(30 * time.Second):
					t.Fatal("watch from a compacted resourceVersion: no answer within 30s")
				}
			}
			if !k8sapi.IsGone(err) {
				t.Fatalf("watch from compacted rv %s: %v, want Gone", old.ResourceVersion, err)
			}
			var apiErr *k8sapi.APIError
			if !errors.As(err, &apiErr) {
				t.Fatalf("%T is not an *APIError", err)
			}

			// An exact list at the compacted version is gone too.
			_, err = cms.List(ctx, "default", k8sapi.ListOptions{ResourceVersion: old.ResourceVersion, ResourceVersionMatch: "Exact"})
			if !k8sapi.IsGone(err) {
				t.Fatalf("exact list at compacted rv: %v, want Gone", err)
			}
			// The cure: a fresh list works.
			if _, err := cms.List(ctx, "default", k8sapi.ListOptions{}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestAPIServerForbiddenServiceAccount(t *testing.T) {
	p := plane.Get(t)
	ns := p.TestNamespace(t)
	ctx := testContext(t)
	token, err := p.ServiceAccountToken(ctx, ns, "nobody", 0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := k8sapi.New(&k8sapi.Config{Host: p.Host(), CAData: p.CAData(), BearerToken: token})
	if err != nil {
		t.Fatal(err)
	}
	cms := k8sapi.For[configMap](c, k8sapi.ConfigMaps)
	_, err = cms.List(ctx, ns, k8sapi.ListOptions{})
	if !k8sapi.IsForbidden(err) {
		t.Fatalf("list as a service account without permission: %v, want Forbidden", err)
	}
	var apiErr *k8sapi.APIError
	if !errors.As(err, &apiErr) || apiErr.Code != http.StatusForbidden || apiErr.Status.Message == "" {
		t.Fatalf("forbidden error = %#v", err)
	}

	bad, err := k8sapi.New(&k8sapi.Config{Host: p.Host(), CAData: p.CAData(), BearerToken: "not-a-token", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k8sapi.For[configMap](bad, k8sapi.ConfigMaps).List(ctx, ns, k8sapi.ListOptions{}); !k8sapi.IsUnauthorized(err) {
		t.Fatalf("list with a garbage token: %v, want Unauthorized", err)
	}
}

// grantConfigMapReader lets the ServiceAccount read ConfigMaps in ns.
func grantConfigMapReader(t *testing.T, p *controlplane.Plane, ns, sa string) {
	t.Helper()
	ctx := testContext(t)
	role := map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
		"metadata": map[string]any{"name": "cm-reader"},
		"rules": []any{map[string]any{
			"apiGroups": []string{""}, "resources": []string{"configmaps"}, "verbs": []string{"get", "list", "watch"},
		}},
	}
	binding := map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
		"metadata": map[string]any{"name": "cm-reader"},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm-reader"},
		"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": sa, "namespace": ns}},
	}
	for _, obj := range []struct {
		path string
		body any
	}{
		{"/apis/rbac.authorization.k8s.io/v1/namespaces/" + ns + "/roles", role},
		{"/apis/rbac.authorization.k8s.io/v1/namespaces/" + ns + "/rolebindings", binding},
	} {
		if err := p.Do(ctx, http.MethodPost, obj.path, obj.body, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// boundToken mints a token of the ServiceAccount bound to a Secret:
// deleting the Secret revokes the token.
func boundToken(t *testing.T, p *controlplane.Plane, ns, sa, secret string) string {
	t.Helper()
	ctx := testContext(t)
	var s struct {
		Metadata struct {
			UID string `json:"uid"`
		} `json:"metadata"`
	}
	if err := p.Do(ctx, http.MethodPost, "/api/v1/namespaces/"+ns+"/secrets", map[string]any{
		"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": secret},
	}, &s); err != nil {
		t.Fatal(err)
	}
	var tr struct {
		Status struct {
			Token string `json:"token"`
		} `json:"status"`
	}
	if err := p.Do(ctx, http.MethodPost, "/api/v1/namespaces/"+ns+"/serviceaccounts/"+sa+"/token", map[string]any{
		"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
		"spec": map[string]any{
			"expirationSeconds": 3600,
			"boundObjectRef":    map[string]any{"apiVersion": "v1", "kind": "Secret", "name": secret, "uid": s.Metadata.UID},
		},
	}, &tr); err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// TestAPIServerTokenFileRotation rewrites the token file while a watch is
// open, then revokes the old token: the open watch keeps delivering, and
// new requests use the new token.
func TestAPIServerTokenFileRotation(t *testing.T) {
	testTokenRotation(t, func(p *controlplane.Plane, tokenFile string) *k8sapi.Config {
		return &k8sapi.Config{Host: p.Host(), CAData: p.CAData(), BearerTokenFile: tokenFile}
	})
}

// TestAPIServerInClusterTokenRotation is the same with the config a pod
// gets from Load in a pod, which names the token file for New to read.
func TestAPIServerInClusterTokenRotation(t *testing.T) {
	testTokenRotation(t, func(p *controlplane.Plane, tokenFile string) *k8sapi.Config {
		dir := filepath.Dir(tokenFile)
		if err := os.WriteFile(filepath.Join(dir, "ca.crt"), p.CAData(), 0o600); err != nil {
			t.Fatal(err)
		}
		u, err := url.Parse(p.Host())
		if err != nil {
			t.Fatal(err)
		}
		t.Setenv("KUBECONFIG", "")
		t.Setenv("KUBERNETES_SERVICE_HOST", u.Hostname())
		t.Setenv("KUBERNETES_SERVICE_PORT", u.Port())
		cfg, err := k8sapi.Load(k8sapi.LoadOptions{InClusterDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	})
}

func testTokenRotation(t *testing.T, config func(p *controlplane.Plane, tokenFile string) *k8sapi.Config) {
	p := plane.Get(t)
	ns := p.TestNamespace(t)
	ctx := testContext(t)
	const sa = "rotating"
	if err := p.CreateServiceAccount(ctx, ns, sa); err != nil {
		t.Fatal(err)
	}
	grantConfigMapReader(t, p, ns, sa)
	token1 := boundToken(t, p, ns, sa, "token-1")
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token1), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := k8sapi.New(config(p, tokenFile))
	if err != nil {
		t.Fatal(err)
	}
	cms := k8sapi.For[configMap](c, k8sapi.ConfigMaps)
	admin := k8sapi.For[configMap](adminClient(t, p), k8sapi.ConfigMaps)

	// Wait until RBAC allows the list (the authorizer's cache is quick,
	// but not instant).
	var list *k8sapi.List[configMap]
	deadline := time.Now().Add(20 * time.Second)
	for {
		list, err = cms.List(ctx, ns, k8sapi.ListOptions{})
		if err == nil {
			break
		}
		if !k8sapi.IsForbidden(err) || time.Now().After(deadline) {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	w, err := cms.Watch(ctx, ns, k8sapi.ListOptions{ResourceVersion: list.Metadata.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	// Rotate: the kubelet writes a new token and the old one stops working.
	token2 := boundToken(t, p, ns, sa, "token-2")
	tmp := tokenFile + ".new"
	if err := os.WriteFile(tmp, []byte(token2), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, tokenFile); err != nil {
		t.Fatal(err)
	}
	if err := p.Do(ctx, http.MethodDelete, "/api/v1/namespaces/"+ns+"/secrets/token-1", nil, nil); err != nil {
		t.Fatal(err)
	}
	// The revocation takes effect once the apiserver's token cache
	// notices; an old-token request then fails with 401.
	old, err := k8sapi.New(&k8sapi.Config{Host: p.Host(), CAData: p.CAData(), BearerToken: token1, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		_, err := k8sapi.For[configMap](old, k8sapi.ConfigMaps).List(ctx, ns, k8sapi.ListOptions{Limit: 1})
		if k8sapi.IsUnauthorized(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("old token still accepted after its Secret was deleted: %v", err)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}

	// The open watch was authenticated when it opened; it keeps going.
	if _, err := admin.Create(ctx, ns, newConfigMap("after-rotation", nil), k8sapi.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	ev := nextEvent(t, w)
	if ev.Type != k8sapi.Added || ev.Object.Name != "after-rotation" {
		t.Fatalf("event %s %s, want ADDED after-rotation", ev.Type, ev.Object.Name)
	}
	// A new request gets a 401 with the old token, re-reads the file and
	// succeeds with the new one.
	got, err := cms.Get(ctx, ns, "after-rotation", k8sapi.GetOptions{})
	if err != nil {
		t.Fatalf("get after rotation: %v", err)
	}
	if got.Name != "after-rotation" {
		t.Fatalf("got %+v", got)
	}
	w2, err := cms.Watch(ctx, ns, k8sapi.ListOptions{ResourceVersion: got.ResourceVersion})
	if err != nil {
		t.Fatalf("watch after rotation: %v", err)
	}
	w2.Close()
}

// TestAPIServerAuditCountsRequests checks that the audit log attributes
// the client's requests to its user, for tests that count requests.
func TestAPIServerAuditCountsRequests(t *testing.T) {
	p := plane.Get(t)
	ns := p.TestNamespace(t)
	ctx := testContext(t)
	token, err := p.ServiceAccountToken(ctx, ns, "counted", 0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := k8sapi.New(&k8sapi.Config{Host: p.Host(), CAData: p.CAData(), BearerToken: token, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	cms := k8sapi.For[configMap](c, k8sapi.ConfigMaps)
	const n = 3
	for range n {
		if _, err := cms.Get(ctx, ns, "nope", k8sapi.GetOptions{}); !k8sapi.IsForbidden(err) {
			t.Fatalf("get: %v, want Forbidden", err)
		}
	}
	user := "system:serviceaccount:" + ns + ":counted"
	match := func(e controlplane.AuditEvent) bool {
		return e.User == user && e.Verb == "get" && e.Resource == "configmaps" && e.Code == http.StatusForbidden
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		events, err := p.AuditEvents()
		if err != nil {
			t.Fatal(err)
		}
		got := controlplane.CountRequests(events, match)
		if got == n {
			return
		}
		if got > n || time.Now().After(deadline) {
			t.Fatalf("audit log has %d forbidden gets by %s, want %d", got, user, n)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
