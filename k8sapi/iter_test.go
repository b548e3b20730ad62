package k8sapi

import (
	"errors"
	"net/http"
	"net/url"
	"reflect"
	"testing"
)

func TestWatcherEvents(t *testing.T) {
	srv := newAPIServer(t, serveStream(testdata(t, "watch-deployments.json")))
	c, _ := newTestClient(t, srv, nil)
	w, err := For[Deployment](c, Deployments).Watch(t.Context(), "shop", ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var types []EventType
	for ev, err := range w.Events() {
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
	w, err = For[Deployment](c, Deployments).Watch(t.Context(), "", ListOptions{})
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
