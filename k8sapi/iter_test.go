package k8sapi

import (
	"errors"
	"net/http"
	"net/url"
	"reflect"
	"testing"
)

func TestAllFollowsContinueLazily(t *testing.T) {
	page1, page2 := testdata(t, "deployments-page1.json"), testdata(t, "deployments-page2.json")
	srv := newAPIServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("continue") == "" {
			w.Write(page1)
		} else {
			w.Write(page2)
		}
	})
	c, _ := newTestClient(t, srv, nil)
	shop := For[Deployment](c, Deployments).In("shop")
	var names []string
	for d, err := range shop.All(t.Context(), ListOptions{LabelSelector: "app=web"}) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, d.Name)
	}
	if !reflect.DeepEqual(names, []string{"api", "cart", "web"}) || len(srv.requests()) != 2 {
		t.Errorf("got %v in %d requests, want api cart web in 2", names, len(srv.requests()))
	}
	q, _ := url.ParseQuery(srv.requests()[0].RawQuery)
	if srv.requests()[0].Path != "/apis/apps/v1/namespaces/shop/deployments" || q.Get("limit") != "500" || q.Get("labelSelector") != "app=web" {
		t.Errorf("first request %+v", srv.requests()[0])
	}
	// Breaking out after the first object reads no second page.
	for range shop.All(t.Context(), ListOptions{}) {
		break
	}
	if n := len(srv.requests()); n != 3 {
		t.Errorf("%d requests after an early break, want 3", n)
	}
}

func TestAllStopsOnError(t *testing.T) {
	srv := expiredAfterFirstPage(t)
	c, _ := newTestClient(t, srv, nil)
	var n int
	var errs []error
	for d, err := range For[Deployment](c, Deployments).All(t.Context(), "", ListOptions{Limit: 2}) {
		if err != nil {
			if d != nil {
				t.Error("non-nil object with an error")
			}
			errs = append(errs, err)
			continue
		}
		n++
	}
	if n != 2 || len(errs) != 1 || !IsGone(errs[0]) {
		t.Errorf("%d objects, errors %v; want 2 and one 410", n, errs)
	}

	// A server that repeats its token ends the loop with a DecodeError.
	page1 := testdata(t, "deployments-page1.json")
	srv = newAPIServer(t, func(w http.ResponseWriter, r *http.Request) { w.Write(page1) })
	c, _ = newTestClient(t, srv, nil)
	errs = nil
	for _, err := range For[Deployment](c, Deployments).All(t.Context(), "", ListOptions{}) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	var de *DecodeError
	if len(errs) != 1 || !errors.As(errs[0], &de) || len(srv.requests()) != 2 {
		t.Errorf("errors %v after %d requests, want one DecodeError after 2", errs, len(srv.requests()))
	}
}

func TestEvents(t *testing.T) {
	srv := newAPIServer(t, serveStream(testdata(t, "watch-deployments.json")))
	c, _ := newTestClient(t, srv, nil)
	var types []EventType
	for ev, err := range For[Deployment](c, Deployments).In("shop").Events(t.Context(), ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, ev.Type)
	}
	if want := []EventType{Added, Bookmark, Modified, Deleted}; !reflect.DeepEqual(types, want) {
		t.Errorf("events %v, want %v", types, want)
	}

	srv = newAPIServer(t, serveStream(testdata(t, "watch-error-gone.json")))
	c, _ = newTestClient(t, srv, nil)
	w, err := For[Deployment](c, Deployments).Watch(t.Context(), "", ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var errs []error
	types = nil
	for ev, err := range w.Events() {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		types = append(types, ev.Type)
	}
	if len(types) != 1 || len(errs) != 1 || !IsGone(errs[0]) {
		t.Errorf("events %v errors %v, want one ADDED and one 410", types, errs)
	}

	// A watch that cannot be opened is one error.
	srv = newAPIServer(t, serveFile(t, 403, "status-403-forbidden.json"))
	c, _ = newTestClient(t, srv, nil)
	errs = nil
	for _, err := range For[Deployment](c, Deployments).Events(t.Context(), "", ListOptions{}) {
		errs = append(errs, err)
	}
	if len(errs) != 1 || !IsForbidden(errs[0]) {
		t.Errorf("errors %v, want one Forbidden", errs)
	}
}

func TestNamespacedPaths(t *testing.T) {
	srv := newAPIServer(t, serveFile(t, 200, "deployment.json"))
	c, _ := newTestClient(t, srv, nil)
	shop := For[Deployment](c, Deployments).In("shop")
	ctx := t.Context()
	d, err := shop.Get(ctx, "web", GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	shop.Create(ctx, d, WriteOptions{})
	shop.Update(ctx, "web", d, WriteOptions{})
	shop.Patch(ctx, "web", MergePatch, []byte(`{}`), PatchOptions{})
	shop.Apply(ctx, "web", map[string]string{}, PatchOptions{FieldManager: "m"})
	shop.Delete(ctx, "web", DeleteOptions{})
	For[Deployment](c, Deployments).In("").List(ctx, ListOptions{})
	For[Namespace](c, Namespaces).In("shop").Get(ctx, "shop", GetOptions{})
	var got []string
	for _, r := range srv.requests() {
		got = append(got, r.Method+" "+r.Path)
	}
	const obj = "/apis/apps/v1/namespaces/shop/deployments/web"
	want := []string{"GET " + obj, "POST /apis/apps/v1/namespaces/shop/deployments", "PUT " + obj, "PATCH " + obj, "PATCH " + obj,
		"DELETE " + obj, "GET /apis/apps/v1/deployments", "GET /api/v1/namespaces/shop"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("requests\n%q\nwant\n%q", got, want)
	}
	if _, err := shop.Get(ctx, "", GetOptions{}); err == nil {
		t.Error("Get with no name: no error")
	}
	if _, err := For[Deployment](c, Deployments).In("").Get(ctx, "web", GetOptions{}); err == nil {
		t.Error("Get of a namespaced object with no namespace: no error")
	}
}

// Namespace is core/v1 Namespace, as the tests need it.
type Namespace struct {
	TypeMeta
	ObjectMeta `json:"metadata"`
}

func TestStream(t *testing.T) {
	srv := newAPIServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/missing" {
			w.WriteHeader(404)
			w.Write(testdata(t, "status-404-notfound.json"))
			return
		}
		w.Write([]byte("line 1\nline 2\n"))
	})
	c, _ := newTestClient(t, srv, nil)
	body, err := c.Stream(t.Context(), "/api/v1/namespaces/shop/pods/web-0/log", url.Values{"follow": {"true"}}, "*/*")
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 64)
	n, _ := body.Read(b)
	body.Close()
	r := srv.requests()[0]
	if string(b[:n]) != "line 1\nline 2\n" || r.Accept != "*/*" || r.RawQuery != "follow=true" || r.Path != "/api/v1/namespaces/shop/pods/web-0/log" {
		t.Errorf("read %q; request %+v", b[:n], r)
	}
	if _, err := c.Stream(t.Context(), "/apis", nil, ""); err != nil || srv.requests()[1].Accept != "application/json" {
		t.Errorf("default accept: %v, %+v", err, srv.requests()[1])
	}
	_, err = c.Stream(t.Context(), "/missing", nil, "")
	var ae *APIError
	if !IsNotFound(err) || !errors.As(err, &ae) || ae.Op != "get" || ae.Resource != "/missing" {
		t.Errorf("missing: %v", err)
	}
	for _, p := range []string{"", "api", "/api/../x", "/api/", "/api//v1", "/api?x=1", "/a/./b"} {
		var re *RequestError
		if _, err := c.Stream(t.Context(), p, nil, ""); !errors.As(err, &re) {
			t.Errorf("path %q: %v, want a RequestError", p, err)
		}
	}
	if n := len(srv.requests()); n != 3 {
		t.Errorf("%d requests, want 3: bad paths are not sent", n)
	}
}
