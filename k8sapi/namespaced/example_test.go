package namespaced_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/k8sapi/namespaced"
)

// exampleClient is a client of an httptest server that stands in for the
// API server, answering with h.
func exampleClient(h http.HandlerFunc) (*k8sapi.Client, func()) {
	srv := httptest.NewServer(h)
	c, err := k8sapi.New(&k8sapi.Config{Host: srv.URL})
	if err != nil {
		log.Fatal(err)
	}
	return c, srv.Close
}

// A handle bound to a namespace: calls no longer pass it.
func ExampleIn() {
	c, done := exampleClient(func(w http.ResponseWriter, r *http.Request) {
		fmt.Println(r.Method, r.URL.Path)
		io.WriteString(w, `{"metadata":{"name":"web","namespace":"shop"}}`)
	})
	defer done()
	shop := namespaced.In(k8sapi.For[k8sapi.Deployment](c, k8sapi.Deployments), "shop")
	ctx := context.Background()
	d, err := shop.Get(ctx, "web", k8sapi.GetOptions{})
	if err != nil {
		log.Fatal(err)
	}
	if err := shop.Delete(ctx, d.Name, k8sapi.DeleteOptions{}); err != nil {
		log.Fatal(err)
	}
	// Output:
	// GET /apis/apps/v1/namespaces/shop/deployments/web
	// DELETE /apis/apps/v1/namespaces/shop/deployments/web
}

// All reads a page at a time as the loop goes, following continue tokens.
func ExampleHandle_All() {
	c, done := exampleClient(func(w http.ResponseWriter, r *http.Request) {
		fmt.Printf("page %q\n", r.URL.Query().Get("continue"))
		if r.URL.Query().Get("continue") == "" {
			io.WriteString(w, `{"metadata":{"continue":"t1"},"items":[{"metadata":{"name":"api"}},{"metadata":{"name":"cart"}}]}`)
			return
		}
		io.WriteString(w, `{"metadata":{},"items":[{"metadata":{"name":"web"}}]}`)
	})
	defer done()
	// A struct of the caller's own, with the fields it needs.
	type pod struct {
		k8sapi.ObjectMeta `json:"metadata"`
	}
	pods := namespaced.In(k8sapi.For[pod](c, k8sapi.Pods), "shop")
	for p, err := range pods.All(context.Background(), k8sapi.ListOptions{Limit: 2}) {
		if err != nil {
			log.Fatal(err) // such as IsGone: the continue token expired
		}
		fmt.Println(p.Name)
	}
	// Output:
	// page ""
	// api
	// cart
	// page "t1"
	// web
}

// Events iterates over a watch's events and closes the watch after the
// loop.
func ExampleHandle_Events() {
	c, done := exampleClient(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"type":"ADDED","object":{"metadata":{"name":"web","resourceVersion":"10"}}}
{"type":"DELETED","object":{"metadata":{"name":"web","resourceVersion":"11"}}}
`)
	})
	defer done()
	services := namespaced.In(k8sapi.For[k8sapi.Service](c, k8sapi.Services), "shop")
	for ev, err := range services.Events(context.Background(), k8sapi.ListOptions{ResourceVersion: "9"}) {
		if err != nil {
			log.Fatal(err) // IsGone(err): list again
		}
		fmt.Println(ev.Type, ev.Object.Name, ev.Object.ResourceVersion)
	}
	fmt.Println("the server ended the watch")
	// Output:
	// ADDED web 10
	// DELETED web 11
	// the server ended the watch
}
