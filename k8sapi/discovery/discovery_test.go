package discovery

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// recordedServer serves the discovery documents recorded in testdata from
// kube-apiserver v1.37.2 (RECORD_TESTDATA=1 go test -run
// TestAPIServerResolve), and counts requests. apis,
// when set, replaces the /apis document.
type recordedServer struct {
	*httptest.Server
	mu       sync.Mutex
	requests []string
	apis     []byte
}

func newRecordedServer(t *testing.T) *recordedServer {
	t.Helper()
	docs := map[string][]byte{}
	for _, name := range []string{"api", "apis"} {
		b, err := os.ReadFile(filepath.Join("testdata", name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		docs["/"+name] = b
	}
	s := &recordedServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.requests = append(s.requests, r.URL.Path)
		doc := docs[r.URL.Path]
		if r.URL.Path == "/apis" && s.apis != nil {
			doc = s.apis
		}
		s.mu.Unlock()
		if !strings.HasPrefix(r.Header.Get("Accept"), "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList") || doc == nil {
			http.Error(w, "not recorded", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
		w.Write(doc)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *recordedServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

func (s *recordedServer) client(t *testing.T) *k8sapi.Client {
	t.Helper()
	c, err := k8sapi.New(&k8sapi.Config{Host: s.URL, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestResolveRecorded(t *testing.T) {
	srv := newRecordedServer(t)
	r, err := New(Config{Client: srv.client(t)})
	if err != nil {
		t.Fatal(err)
	}
	deployments := k8sapi.Resource{Group: "apps", Version: "v1", Resource: "deployments", Namespaced: true}
	for _, tc := range []struct {
		name string
		want k8sapi.Resource
		kind string
	}{
		{"deployments", deployments, "Deployment"},
		{"deployment", deployments, "Deployment"},
		{"Deployment", deployments, "Deployment"},
		{"DEPLOY", deployments, "Deployment"},
		{"deploy", deployments, "Deployment"},
		{"deployments.apps", deployments, "Deployment"},
		{"deploy.apps", deployments, "Deployment"},
		{"deployments.v1.apps", deployments, "Deployment"},
		{"po", k8sapi.Pods, "Pod"},
		{"pods", k8sapi.Pods, "Pod"},
		{"Pod", k8sapi.Pods, "Pod"},
		{"ns", k8sapi.Namespaces, "Namespace"},
		// The core group comes first, as kubectl has it.
		{"events", k8sapi.Resource{Version: "v1", Resource: "events", Namespaced: true}, "Event"},
		{"ev", k8sapi.Resource{Version: "v1", Resource: "events", Namespaced: true}, "Event"},
		{"events.events.k8s.io", k8sapi.Events, "Event"},
		{"customresourcedefinitions", k8sapi.CustomResourceDefinitions, "CustomResourceDefinition"},
		{"crd", k8sapi.CustomResourceDefinitions, "CustomResourceDefinition"},
		// The preferred version first; another when asked for.
		{"hpa", k8sapi.Resource{Group: "autoscaling", Version: "v2", Resource: "horizontalpodautoscalers", Namespaced: true}, "HorizontalPodAutoscaler"},
		{"hpa.v1.autoscaling", k8sapi.Resource{Group: "autoscaling", Version: "v1", Resource: "horizontalpodautoscalers", Namespaced: true}, "HorizontalPodAutoscaler"},
	} {
		m, err := r.Resolve(t.Context(), tc.name)
		want := tc.want
		want.Kind = tc.kind
		if err != nil || m.Resource != want {
			t.Errorf("Resolve(%q) = %+v, %v; want %+v %s", tc.name, m, err, tc.want, tc.kind)
		}
	}
	if n := srv.count(); n != 2 {
		t.Errorf("%d requests for the hits, want 2 (/api and /apis, once)", n)
	}
	m, _ := r.Resolve(t.Context(), "deploy")
	if m.Singular != "deployment" || !contains(m.ShortNames, "deploy") || !contains(m.Verbs, "watch") || !contains(m.Categories, "all") {
		t.Errorf("deploy: %+v", m)
	}
	m.ShortNames[0] = "changed"
	if m, _ := r.Resolve(t.Context(), "deploy"); m.ShortNames[0] != "deploy" {
		t.Error("changing a result changed the cache")
	}

	for _, name := range []string{"widgets", "", "deployments.v2.apps", "deployments.apps.x", "log", "pods/log", "deployments.", ".apps"} {
		before := srv.count()
		_, err := r.Resolve(t.Context(), name)
		var de *Error
		if !errors.Is(err, ErrNotFound) || !errors.As(err, &de) || de.Name != name {
			t.Errorf("Resolve(%q): %v, want ErrNotFound", name, err)
		}
		// A miss reads the documents again (but an empty name is no name).
		if want := 2; name == "" {
			if srv.count() != before {
				t.Errorf("Resolve(\"\") sent requests")
			}
		} else if srv.count()-before != want {
			t.Errorf("Resolve(%q): %d requests, want %d", name, srv.count()-before, want)
		}
	}
	if _, err := r.Resolve(t.Context(), "widgets"); err == nil || err.Error() != `discovery: resolve "widgets": no resource type has this name` {
		t.Errorf("error string %q", err)
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestResolveCacheTTL: hits within the TTL send nothing, the first call
// after it reads again, and a miss finds a type added since.
func TestResolveCacheTTL(t *testing.T) {
	srv := newRecordedServer(t)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r, _ := New(Config{Client: srv.client(t), TTL: time.Minute, Now: func() time.Time { return now }})
	ctx := t.Context()
	if _, err := r.Resolve(ctx, "deploy"); err != nil {
		t.Fatal(err)
	}
	now = now.Add(59 * time.Second)
	if _, err := r.Resolve(ctx, "po"); err != nil || srv.count() != 2 {
		t.Fatalf("within the TTL: %v, %d requests, want 2", err, srv.count())
	}
	now = now.Add(time.Second)
	if _, err := r.Resolve(ctx, "po"); err != nil || srv.count() != 4 {
		t.Fatalf("at the TTL: %v, %d requests, want 4", err, srv.count())
	}

	// A CRD installed: the next miss reads it.
	apis, _ := os.ReadFile(filepath.Join("testdata", "apis.json"))
	widgets := `{"metadata":{"name":"example.com"},"versions":[{"version":"v1","resources":[{"resource":"widgets","responseKind":{"group":"example.com","version":"v1","kind":"Widget"},"scope":"Namespaced","singularResource":"widget","verbs":["get","list"],"shortNames":["wd"]}],"freshness":"Current"}]}`
	srv.mu.Lock()
	srv.apis = []byte(strings.Replace(string(apis), `"items":[`, `"items":[`+widgets+",", 1))
	srv.mu.Unlock()
	m, err := r.Resolve(ctx, "widgets.example.com")
	want := k8sapi.Resource{Group: "example.com", Version: "v1", Resource: "widgets", Namespaced: true, Kind: "Widget"}
	if err != nil || m.Resource != want || srv.count() != 6 {
		t.Fatalf("after a CRD was added: %+v, %v, %d requests", m, err, srv.count())
	}
	if m, err := r.Resolve(ctx, "wd"); err != nil || m.Resource != want || srv.count() != 6 {
		t.Errorf("short name, cached: %+v, %v, %d requests", m, err, srv.count())
	}

	all, err := r.Resources(ctx)
	if err != nil || len(all) == 0 || all[0].Group != "" {
		t.Errorf("Resources: %d, %v; want the core group first", len(all), err)
	}
	for _, m := range all {
		if strings.Contains(m.Resource.Resource, "/") {
			t.Errorf("subresource listed: %+v", m)
		}
	}
}

func TestResolveErrors(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Error("New with no Client: no error")
	}
	// A server without aggregated discovery answers the legacy documents.
	legacy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"kind":"APIVersions","versions":["v1"],"serverAddressByClientCIDRs":[]}`))
	}))
	defer legacy.Close()
	c, _ := k8sapi.New(&k8sapi.Config{Host: legacy.URL})
	r, _ := New(Config{Client: c})
	_, err := r.Resolve(t.Context(), "pods")
	if err == nil || !strings.Contains(err.Error(), "not aggregated discovery") || errors.Is(err, ErrNotFound) {
		t.Errorf("legacy server: %v", err)
	}

	forbidden := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"forbidden: User \"x\" cannot get path \"/api\"","reason":"Forbidden","code":403}`))
	}))
	defer forbidden.Close()
	c, _ = k8sapi.New(&k8sapi.Config{Host: forbidden.URL})
	r, _ = New(Config{Client: c})
	_, err = r.Resolve(t.Context(), "pods")
	var de *Error
	if !k8sapi.IsForbidden(err) || !errors.As(err, &de) || de.Name != "pods" {
		t.Errorf("forbidden: %v", err)
	}
	if _, err := r.Resources(t.Context()); !k8sapi.IsForbidden(err) {
		t.Errorf("Resources, forbidden: %v", err)
	}

	garbage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"kind":`)) }))
	defer garbage.Close()
	c, _ = k8sapi.New(&k8sapi.Config{Host: garbage.URL})
	r, _ = New(Config{Client: c})
	if _, err := r.Resolve(t.Context(), "pods"); err == nil || errors.Is(err, ErrNotFound) {
		t.Errorf("truncated document: %v", err)
	}
}

// TestResolveConcurrent: concurrent first calls read the documents once.
func TestResolveConcurrent(t *testing.T) {
	srv := newRecordedServer(t)
	r, _ := New(Config{Client: srv.client(t)})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			if _, err := r.Resolve(t.Context(), "deploy"); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := srv.count(); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
}

// TestResourcesCacheTTL: Resources reads the documents once, serves them
// from the cache within the TTL, and reads them again at the TTL. A zero
// TTL means ten minutes.
func TestResourcesCacheTTL(t *testing.T) {
	for _, tt := range []struct {
		name string
		ttl  time.Duration
		want time.Duration
	}{
		{"TTL", time.Minute, time.Minute},
		{"zero TTL", 0, 10 * time.Minute},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := newRecordedServer(t)
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			r, _ := New(Config{Client: srv.client(t), TTL: tt.ttl, Now: func() time.Time { return now }})
			ctx := t.Context()
			if _, err := r.Resources(ctx); err != nil || srv.count() != 2 {
				t.Fatalf("first call: %v, %d requests, want 2", err, srv.count())
			}
			now = now.Add(tt.want - time.Second)
			if _, err := r.Resources(ctx); err != nil || srv.count() != 2 {
				t.Fatalf("within the TTL: %v, %d requests, want 2", err, srv.count())
			}
			if _, err := r.Resolve(ctx, "deploy"); err != nil || srv.count() != 2 {
				t.Fatalf("Resolve within the TTL: %v, %d requests, want 2", err, srv.count())
			}
			now = now.Add(time.Second)
			if _, err := r.Resources(ctx); err != nil || srv.count() != 4 {
				t.Fatalf("at the TTL: %v, %d requests, want 4", err, srv.count())
			}
		})
	}
}

// A discovery document of exactly 16 MiB is read; one byte more is
// refused with ErrBodyTooLarge.
func TestDocumentSizeLimit(t *testing.T) {
	apis, err := os.ReadFile(filepath.Join("testdata", "apis.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		size     int
		tooLarge bool
	}{{docLimit, false}, {docLimit + 1, true}} {
		srv := newRecordedServer(t)
		srv.apis = append(apis[:len(apis):len(apis)], strings.Repeat(" ", tt.size-len(apis))...)
		r, _ := New(Config{Client: srv.client(t)})
		_, err := r.Resolve(t.Context(), "deploy")
		if tt.tooLarge != errors.Is(err, k8sapi.ErrBodyTooLarge) || !tt.tooLarge && err != nil {
			t.Errorf("document of %d bytes: %v", tt.size, err)
		}
	}
}

// A resource's singular name is the one the server gives, or else its
// kind in lower case.
func TestSingularName(t *testing.T) {
	doc := `{"kind":"APIGroupDiscoveryList","items":[{"metadata":{"name":"example.com"},"versions":[{"version":"v1","resources":[
		{"resource":"widgets","responseKind":{"kind":"Widget"},"singularResource":"thingy"},
		{"resource":"gadgets","responseKind":{"kind":"Gadget"}}]}]}]}`
	ms, err := parse("/apis", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range ms {
		got = append(got, m.Resource.Resource+"="+m.Singular)
	}
	if strings.Join(got, ",") != "widgets=thingy,gadgets=gadget" {
		t.Errorf("singular names %q, want widgets=thingy and gadgets=gadget", got)
	}
}
