package namespaced

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// fakeAPIServer is an httptest server that answers with h (recorded
// responses) and records each request as "METHOD path?query".
func fakeAPIServer(t *testing.T, h http.HandlerFunc) (*k8sapi.Client, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var reqs []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		reqs = append(reqs, r.Method+" "+r.URL.RequestURI())
		mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	c, err := k8sapi.New(&k8sapi.Config{Host: srv.URL, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	return c, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), reqs...)
	}
}

// recorded reads one of the API server responses recorded for k8sapi's
// own tests.
func recorded(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func serve(code int, body []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		w.Write(body)
	}
}

// twoPages serves page1 to a list without a continue token and page2 to
// one with.
func twoPages(page1, page2 []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("continue") == "" {
			w.Write(page1)
			return
		}
		w.Write(page2)
	}
}

func TestAllFollowsContinueLazily(t *testing.T) {
	c, reqs := fakeAPIServer(t, twoPages(recorded(t, "deployments-page1.json"), recorded(t, "deployments-page2.json")))
	shop := In(k8sapi.For[k8sapi.Deployment](c, k8sapi.Deployments), "shop")
	var names []string
	opts := k8sapi.ListOptions{LabelSelector: "app=web", ResourceVersion: "0", ResourceVersionMatch: "NotOlderThan"}
	for d, err := range shop.All(t.Context(), opts) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, d.Name)
	}
	if !reflect.DeepEqual(names, []string{"api", "cart", "web"}) || len(reqs()) != 2 {
		t.Fatalf("got %v in %q, want api cart web in 2 requests", names, reqs())
	}
	// The second page carries the token and neither version field.
	var queries []url.Values
	for _, r := range reqs() {
		path, query, _ := strings.Cut(strings.TrimPrefix(r, "GET "), "?")
		if path != "/apis/apps/v1/namespaces/shop/deployments" {
			t.Errorf("request %q", r)
		}
		q, _ := url.ParseQuery(query)
		queries = append(queries, q)
	}
	want := []url.Values{
		{"labelSelector": {"app=web"}, "limit": {"500"}, "resourceVersion": {"0"}, "resourceVersionMatch": {"NotOlderThan"}},
		{"labelSelector": {"app=web"}, "limit": {"500"}, "continue": {"eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6NDgyMjAsInN0YXJ0Ijoic2hvcC9hcGlcdTAwMDAifQ"}},
	}
	if !reflect.DeepEqual(queries, want) {
		t.Errorf("queries\n%v\nwant\n%v", queries, want)
	}
	// Breaking out after the first object reads no second page.
	for range shop.All(t.Context(), k8sapi.ListOptions{Limit: 2}) {
		break
	}
	if got := reqs(); len(got) != 3 || !strings.Contains(got[2], "limit=2") {
		t.Errorf("requests %q after an early break, want a third with limit=2", got)
	}
}

func TestListAll(t *testing.T) {
	c, reqs := fakeAPIServer(t, twoPages(recorded(t, "deployments-page1.json"), recorded(t, "deployments-page2.json")))
	shop := In(k8sapi.For[k8sapi.Deployment](c, k8sapi.Deployments), "shop")
	l, err := shop.ListAll(t.Context(), k8sapi.ListOptions{LabelSelector: "app=web", ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range l.Items {
		names = append(names, d.Name)
	}
	if !reflect.DeepEqual(names, []string{"api", "cart", "web"}) || l.Metadata.ResourceVersion != "48220" || l.Metadata.Continue != "" {
		t.Errorf("got items %v metadata %+v", names, l.Metadata)
	}
	if got := reqs(); len(got) != 2 || !strings.Contains(got[0], "resourceVersion=0") || !strings.Contains(got[1], "continue=") || strings.Contains(got[1], "resourceVersion") {
		t.Errorf("requests %q, want the version on the first and the token alone on the second", got)
	}
}

func TestListAllContinueExpired(t *testing.T) {
	page1, gone := recorded(t, "deployments-page1.json"), recorded(t, "status-410-expired.json")
	c, _ := fakeAPIServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("continue") == "" {
			w.Write(page1)
			return
		}
		serve(http.StatusGone, gone)(w, r)
	})
	_, err := In(k8sapi.For[k8sapi.Deployment](c, k8sapi.Deployments), "shop").ListAll(t.Context(), k8sapi.ListOptions{})
	var ae *k8sapi.APIError
	if !k8sapi.IsGone(err) || !errors.As(err, &ae) || ae.Op != "list" || ae.Status.Reason != "Expired" {
		t.Fatalf("got %v, want 410 Expired *APIError", err)
	}
}

func TestListAllRepeatedToken(t *testing.T) {
	c, reqs := fakeAPIServer(t, serve(200, recorded(t, "deployments-page1.json")))
	_, err := In(k8sapi.For[k8sapi.Deployment](c, k8sapi.Deployments), "shop").ListAll(t.Context(), k8sapi.ListOptions{})
	var de *k8sapi.DecodeError
	if !errors.As(err, &de) || len(reqs()) != 2 {
		t.Fatalf("got %v after %d requests, want *DecodeError after 2", err, len(reqs()))
	}
}

func TestAllStopsOnError(t *testing.T) {
	page1 := recorded(t, "deployments-page1.json")
	gone := recorded(t, "status-410-expired.json")
	c, _ := fakeAPIServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("continue") == "" {
			w.Write(page1)
			return
		}
		serve(http.StatusGone, gone)(w, r)
	})
	var n int
	var errs []error
	for d, err := range In(k8sapi.For[k8sapi.Deployment](c, k8sapi.Deployments), "").All(t.Context(), k8sapi.ListOptions{Limit: 2}) {
		if err != nil {
			if d != nil {
				t.Error("non-nil object with an error")
			}
			errs = append(errs, err)
			continue
		}
		n++
	}
	if n != 2 || len(errs) != 1 || !k8sapi.IsGone(errs[0]) {
		t.Errorf("%d objects, errors %v; want 2 and one 410", n, errs)
	}

	// A server that repeats its token ends the loop with a DecodeError.
	c, reqs := fakeAPIServer(t, serve(200, page1))
	errs = nil
	for _, err := range In(k8sapi.For[k8sapi.Deployment](c, k8sapi.Deployments), "shop").All(t.Context(), k8sapi.ListOptions{}) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	var de *k8sapi.DecodeError
	if len(errs) != 1 || !errors.As(errs[0], &de) || len(reqs()) != 2 {
		t.Fatalf("errors %v after %d requests, want one DecodeError after 2", errs, len(reqs()))
	}
	if want := "k8sapi: list deployments shop: decode: server returned the same continue token twice"; de.Error() != want {
		t.Errorf("error %q, want %q", de, want)
	}
}

func TestEvents(t *testing.T) {
	c, reqs := fakeAPIServer(t, serve(200, recorded(t, "watch-deployments.json")))
	var types []k8sapi.EventType
	for ev, err := range In(k8sapi.For[k8sapi.Deployment](c, k8sapi.Deployments), "shop").Events(t.Context(), k8sapi.ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, ev.Type)
	}
	if want := []k8sapi.EventType{k8sapi.Added, k8sapi.Bookmark, k8sapi.Modified, k8sapi.Deleted}; !reflect.DeepEqual(types, want) {
		t.Errorf("events %v, want %v", types, want)
	}
	if got := reqs(); len(got) != 1 || !strings.HasPrefix(got[0], "GET /apis/apps/v1/namespaces/shop/deployments?") || !strings.Contains(got[0], "watch=1") {
		t.Errorf("requests %q", got)
	}

	// A watch that cannot be opened is one error.
	c, _ = fakeAPIServer(t, serve(403, recorded(t, "status-403-forbidden.json")))
	var errs []error
	for _, err := range In(k8sapi.For[k8sapi.Deployment](c, k8sapi.Deployments), "").Events(t.Context(), k8sapi.ListOptions{}) {
		errs = append(errs, err)
	}
	if len(errs) != 1 || !k8sapi.IsForbidden(errs[0]) {
		t.Errorf("errors %v, want one Forbidden", errs)
	}
}

func TestEventsClosesTheWatch(t *testing.T) {
	closed := make(chan struct{})
	c, _ := fakeAPIServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"type":"ADDED","object":{"metadata":{"name":"web","resourceVersion":"10"}}}` + "\n"))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(closed)
	})
	for range In(k8sapi.For[json.RawMessage](c, k8sapi.Deployments), "shop").Events(t.Context(), k8sapi.ListOptions{}) {
		break
	}
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("the watch is still open after the loop")
	}
}

func TestPaths(t *testing.T) {
	c, reqs := fakeAPIServer(t, serve(200, recorded(t, "deployment.json")))
	shop := In(k8sapi.For[k8sapi.Deployment](c, k8sapi.Deployments), "shop")
	ctx := t.Context()
	d, err := shop.Get(ctx, "web", k8sapi.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	shop.Create(ctx, d, k8sapi.WriteOptions{})
	shop.Update(ctx, "web", d, k8sapi.WriteOptions{})
	shop.Patch(ctx, "web", k8sapi.MergePatch, []byte(`{}`), k8sapi.PatchOptions{})
	shop.Apply(ctx, "web", map[string]string{}, k8sapi.PatchOptions{FieldManager: "m"})
	shop.Delete(ctx, "web", k8sapi.DeleteOptions{})
	shop.ListAll(ctx, k8sapi.ListOptions{})
	In(k8sapi.For[k8sapi.Deployment](c, k8sapi.Deployments), "").List(ctx, k8sapi.ListOptions{})
	In(k8sapi.For[json.RawMessage](c, k8sapi.Namespaces), "shop").Get(ctx, "shop", k8sapi.GetOptions{})
	if w, err := shop.Watch(ctx, k8sapi.ListOptions{}); err == nil {
		w.Close()
	}
	var got []string
	for _, r := range reqs() {
		path, _, _ := strings.Cut(r, "?")
		got = append(got, path)
	}
	const obj = "/apis/apps/v1/namespaces/shop/deployments/web"
	want := []string{"GET " + obj, "POST /apis/apps/v1/namespaces/shop/deployments", "PUT " + obj, "PATCH " + obj, "PATCH " + obj,
		"DELETE " + obj, "GET /apis/apps/v1/namespaces/shop/deployments", "GET /apis/apps/v1/deployments", "GET /api/v1/namespaces/shop",
		"GET /apis/apps/v1/namespaces/shop/deployments"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("requests\n%q\nwant\n%q", got, want)
	}
	if _, err := shop.Get(ctx, "", k8sapi.GetOptions{}); err == nil {
		t.Error("Get with no name: no error")
	}
	if _, err := In(k8sapi.For[k8sapi.Deployment](c, k8sapi.Deployments), "").Get(ctx, "web", k8sapi.GetOptions{}); err == nil {
		t.Error("Get of a namespaced object with no namespace: no error")
	}
	if n := len(reqs()); n != len(want) {
		t.Errorf("%d requests, want %d: bad calls are not sent", n, len(want))
	}
}
