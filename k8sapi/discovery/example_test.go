package discovery_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/k8sapi/discovery"
)

func ExampleResolver_Resolve() {
	// A stand-in for an API server, with one group besides the core one.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api":
			io.WriteString(w, `{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2","items":[{"metadata":{},"versions":[{"version":"v1","resources":[{"resource":"pods","responseKind":{"kind":"Pod"},"scope":"Namespaced","singularResource":"pod","shortNames":["po"]}]}]}]}`)
		case "/apis":
			io.WriteString(w, `{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2","items":[{"metadata":{"name":"example.com"},"versions":[{"version":"v1","resources":[{"resource":"widgets","responseKind":{"kind":"Widget"},"scope":"Namespaced","singularResource":"widget"}]}]}]}`)
		}
	}))
	defer srv.Close()

	c, err := k8sapi.New(&k8sapi.Config{Host: srv.URL})
	if err != nil {
		log.Fatal(err)
	}
	d, err := discovery.New(discovery.Config{Client: c})
	if err != nil {
		log.Fatal(err)
	}
	for _, name := range []string{"po", "Widget", "widgets.example.com", "gadgets"} {
		m, err := d.Resolve(context.Background(), name)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Printf("%s: %s %s (kind %s)\n", name, m.GroupVersion(), m.Resource.Resource, m.Kind)
	}
	// Output:
	// po: v1 pods (kind Pod)
	// Widget: example.com/v1 widgets (kind Widget)
	// widgets.example.com: example.com/v1 widgets (kind Widget)
	// discovery: resolve "gadgets": no resource type has this name
}
