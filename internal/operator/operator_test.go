package operator

import (
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/watch"
	"github.com/zerodep-k8s/widget-operator/widget"
)

// Shards alone configure sharding: without LeaderElect, every replica would
// reconcile every Widget.
func TestLeaderElection(t *testing.T) {
	client, err := k8sapi.New(&k8sapi.Config{Host: "https://apiserver.test"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name        string
		leaderElect bool
		shards      int
		want        bool // an election
	}{
		{"neither", false, 0, false},
		{"one shard alone", false, 1, false},
		{"leader election", true, 0, true},
		{"leader election of one shard", true, 1, true},
		{"shards alone", false, 3, true},
		{"leader election and shards", true, 3, true},
	} {
		opts := Options{LeaderElect: tt.leaderElect, Shards: tt.shards,
			LeaderElectionNamespace: "ops", LeaderElectionID: "widget-operator"}
		le := leaderElection(opts, client, "replica-a")
		if (le != nil) != tt.want {
			t.Errorf("%s: leaderElection = %+v, want an election: %v", tt.name, le, tt.want)
			continue
		}
		if le == nil {
			continue
		}
		if le.Client != client || le.Namespace != "ops" || le.Name != "widget-operator" ||
			le.Shards != tt.shards || le.Identity != "replica-a" {
			t.Errorf("%s: leaderElection = %+v, want client, ops/widget-operator, %d shards, replica-a", tt.name, le, tt.shards)
		}
	}
}

// fakeCluster is a fake of the API server's writes, as a Transport: a
// create stores its body under a new UID and resourceVersion, a merge
// patch of a Widget's status merges into the stored Widget under a new
// resourceVersion. It records every request as "METHOD path".
type fakeCluster struct {
	mu       sync.Mutex
	objects  map[string]map[string]any // by path of the object
	requests []string
	rv       int
}

func (c *fakeCluster) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.requests = append(c.requests, r.Method+" "+r.URL.Path)
	rec := httptest.NewRecorder()
	rec.Header().Set("Content-Type", "application/json")
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil && err != io.EOF {
		http.Error(rec, err.Error(), http.StatusBadRequest)
		return rec.Result(), nil
	}
	var obj map[string]any
	switch {
	case r.Method == http.MethodPost:
		obj = body
		meta := obj["metadata"].(map[string]any)
		meta["uid"] = "uid-" + path.Base(r.URL.Path) + "-" + meta["name"].(string)
		c.objects[r.URL.Path+"/"+meta["name"].(string)] = obj
		rec.WriteHeader(http.StatusCreated)
	case r.Method == http.MethodPatch && strings.HasPrefix(r.Header.Get("Content-Type"), string(k8sapi.MergePatch)) &&
		strings.HasSuffix(r.URL.Path, "/status") && c.objects[path.Dir(r.URL.Path)] != nil:
		obj = c.objects[path.Dir(r.URL.Path)]
		merge(obj, body)
	default:
		http.Error(rec, "the fake does not serve "+r.Method+" "+r.URL.Path, http.StatusNotFound)
		return rec.Result(), nil
	}
	c.rv++
	obj["metadata"].(map[string]any)["resourceVersion"] = strconv.Itoa(c.rv)
	json.NewEncoder(rec).Encode(obj)
	return rec.Result(), nil
}

// merge applies patch, a JSON merge patch, to obj.
func merge(obj, patch map[string]any) {
	for k, v := range patch {
		sub, isMap := v.(map[string]any)
		have, hasMap := obj[k].(map[string]any)
		switch {
		case v == nil:
			delete(obj, k)
		case isMap && hasMap:
			merge(have, sub)
		default:
			obj[k] = v
		}
	}
}

// A reconcile right after the operator's writes reads them from its caches
// and writes nothing: the status patch's answer goes to the Widget cache,
// the children's answers to theirs.
func TestReconcileReadsItsWrites(t *testing.T) {
	w := &widget.Widget{
		TypeMeta:   k8sapi.TypeMeta{APIVersion: widget.WidgetAPIVersion, Kind: widget.WidgetKind},
		ObjectMeta: k8sapi.ObjectMeta{Namespace: "default", Name: "web", UID: "uid-web", Generation: 1, ResourceVersion: "10"},
		Spec:       widget.WidgetSpec{Image: "nginx:1.27"},
	}
	stored, err := json.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := json.Unmarshal(stored, &obj); err != nil {
		t.Fatal(err)
	}
	fake := &fakeCluster{objects: map[string]map[string]any{"/apis/example.com/v1/namespaces/default/widgets/web": obj}, rv: 10}
	client, err := k8sapi.New(&k8sapi.Config{Host: "https://apiserver.test", Transport: fake})
	if err != nil {
		t.Fatal(err)
	}
	op := &operator{
		widgets:     watch.NewCache(watch.Config[widget.Widget]{Name: "widgets"}),
		deployments: watch.NewCache(watch.Config[k8sapi.Deployment]{Name: "deployments"}),
		services:    watch.NewCache(watch.Config[k8sapi.Service]{Name: "services"}),
	}
	op.widgets.Wrote(nil, w) // as if listed
	r := &widget.Reconciler{Widgets: op.widgets, Deployments: op.deployments, Services: op.services,
		Client: &clusterAPI{op: op, client: client}}

	if _, err := r.Reconcile(t.Context(), "default/web"); err != nil {
		t.Fatalf("first reconcile: %v", err)
	}
	want := []string{
		"POST /apis/apps/v1/namespaces/default/deployments",
		"POST /api/v1/namespaces/default/services",
		"PATCH /apis/example.com/v1/namespaces/default/widgets/web/status",
	}
	if !slices.Equal(fake.requests, want) {
		t.Fatalf("first reconcile sent %q, want %q", fake.requests, want)
	}
	if got, _ := op.widgets.Get("default", "web"); got.Status.ObservedGeneration != 1 || len(got.Status.Conditions) == 0 {
		t.Errorf("after the status patch the cache reads status %+v, want the one written", got.Status)
	}
	fake.requests = nil
	if _, err := r.Reconcile(t.Context(), "default/web"); err != nil {
		t.Fatalf("second reconcile: %v", err)
	}
	if len(fake.requests) != 0 {
		t.Errorf("second reconcile of an unchanged Widget sent %q, want nothing", fake.requests)
	}
}

// recorded returns the object of testdata/<file>, a list of one object that
// kube-apiserver v1.37.2 sent, decoded.
func recorded[T any](t *testing.T, file string) *T {
	t.Helper()
	data, err := os.ReadFile("testdata/" + file)
	if err != nil {
		t.Fatal(err)
	}
	var list k8sapi.List[T]
	if err := json.Unmarshal(data, &list); err != nil || len(list.Items) != 1 {
		t.Fatalf("%s: want a list of one object: %v", file, err)
	}
	return &list.Items[0]
}

// sameMap reports whether a and b are one map.
func sameMap(a, b map[string]string) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// TestChildrenShareMaps: a child's Transform gives its labels and selector
// the maps of the Widget's other child, when that one's cache holds it
// with equal ones, and only then.
func TestChildrenShareMaps(t *testing.T) {
	op := &operator{
		deployments: watch.NewCache(watch.Config[k8sapi.Deployment]{Name: "deployments"}),
		services:    watch.NewCache(watch.Config[k8sapi.Service]{Name: "services"}),
	}
	d := recorded[k8sapi.Deployment](t, "deployments-list.json")
	op.trimDeployment(d) // no Service yet
	op.deployments.Wrote(nil, d)
	s := recorded[k8sapi.Service](t, "services-list.json")
	op.trimService(s)
	if !sameMap(s.Labels, d.Labels) || !sameMap(s.Spec.Selector, d.Spec.Selector.MatchLabels) {
		t.Errorf("Service's labels %v and selector %v do not share the Deployment's", s.Labels, s.Spec.Selector)
	}
	op.services.Wrote(nil, s)
	d = recorded[k8sapi.Deployment](t, "deployments-list.json")
	op.trimDeployment(d)
	if !sameMap(d.Labels, s.Labels) || !sameMap(d.Spec.Template.Labels, s.Labels) || !sameMap(d.Spec.Selector.MatchLabels, s.Spec.Selector) {
		t.Errorf("Deployment's labels %v, template labels %v and selector %v do not share the Service's", d.Labels, d.Spec.Template.Labels, d.Spec.Selector)
	}
	d = recorded[k8sapi.Deployment](t, "deployments-list.json")
	d.Labels["app.kubernetes.io/name"] = "other"
	d.Spec.Selector.MatchLabels["tier"] = "web"
	op.trimDeployment(d)
	if sameMap(d.Labels, s.Labels) || sameMap(d.Spec.Selector.MatchLabels, s.Spec.Selector) ||
		d.Labels["app.kubernetes.io/name"] != "other" || d.Spec.Selector.MatchLabels["tier"] != "web" {
		t.Errorf("Deployment's labels %v and selector %v: want its own", d.Labels, d.Spec.Selector)
	}
	// A foreign Deployment is cached without a spec.
	d = recorded[k8sapi.Deployment](t, "deployments-list.json")
	d.OwnerReferences = nil
	op.trimDeployment(d)
	op.deployments.Wrote(nil, d)
	s = recorded[k8sapi.Service](t, "services-list.json")
	op.trimService(s)
	if !maps.Equal(s.Spec.Selector, widget.SelectorLabels(s.Name)) {
		t.Errorf("Service's selector beside a foreign Deployment: %v", s.Spec.Selector)
	}
}
