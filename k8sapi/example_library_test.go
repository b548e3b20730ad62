package k8sapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// A handle bound to a namespace: calls no longer pass it.
func ExampleTyped_In() {
	srv, cfg := exampleServer(func(w http.ResponseWriter, r *http.Request) {
		fmt.Println(r.Method, r.URL.Path)
		io.WriteString(w, `{"metadata":{"name":"web","namespace":"shop"}}`)
	})
	defer srv.Close()
	c, err := k8sapi.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	shop := k8sapi.For[k8sapi.Deployment](c, k8sapi.Deployments).In("shop")
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
func ExampleTyped_All() {
	srv, cfg := exampleServer(func(w http.ResponseWriter, r *http.Request) {
		fmt.Printf("page %q\n", r.URL.Query().Get("continue"))
		if r.URL.Query().Get("continue") == "" {
			io.WriteString(w, `{"metadata":{"continue":"t1"},"items":[{"metadata":{"name":"api"}},{"metadata":{"name":"cart"}}]}`)
			return
		}
		io.WriteString(w, `{"metadata":{},"items":[{"metadata":{"name":"web"}}]}`)
	})
	defer srv.Close()
	c, err := k8sapi.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	// A struct of the caller's own, with the fields it needs.
	type pod struct {
		k8sapi.ObjectMeta `json:"metadata"`
	}
	pods := k8sapi.For[pod](c, k8sapi.Pods).In("shop")
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
func ExampleTyped_Events() {
	srv, cfg := exampleServer(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"type":"ADDED","object":{"metadata":{"name":"web","resourceVersion":"10"}}}
{"type":"DELETED","object":{"metadata":{"name":"web","resourceVersion":"11"}}}
`)
	})
	defer srv.Close()
	c, err := k8sapi.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	services := k8sapi.For[k8sapi.Service](c, k8sapi.Services).In("shop")
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

// Update through a reduced struct keeps the fields it lacks: here the
// Deployment's strategy, which k8sapi.Deployment does not name.
func ExampleTyped_Update() {
	srv, cfg := exampleServer(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			var sent struct {
				Spec struct {
					Replicas int             `json:"replicas"`
					Strategy json.RawMessage `json:"strategy"`
				} `json:"spec"`
			}
			json.NewDecoder(r.Body).Decode(&sent)
			fmt.Println("PUT replicas", sent.Spec.Replicas, "strategy", string(sent.Spec.Strategy))
		}
		io.WriteString(w, `{"metadata":{"name":"web","resourceVersion":"7"},"spec":{"replicas":1,"strategy":{"type":"Recreate"},"template":{"spec":{"containers":[]}}}}`)
	})
	defer srv.Close()
	c, err := k8sapi.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	shop := k8sapi.For[k8sapi.Deployment](c, k8sapi.Deployments).In("shop")
	ctx := context.Background()
	d, err := shop.Get(ctx, "web", k8sapi.GetOptions{})
	if err != nil {
		log.Fatal(err)
	}
	replicas := int32(3)
	d.Spec.Replicas = &replicas
	if _, err := shop.Update(ctx, d.Name, d, k8sapi.WriteOptions{}); err != nil {
		log.Fatal(err)
	}
	// Output:
	// PUT replicas 3 strategy {"type":"Recreate"}
}

// IntOrString holds what the API accepts as a number or a string.
func ExampleIntOrString() {
	var p k8sapi.ServicePort
	json.Unmarshal([]byte(`{"port":80,"targetPort":"http"}`), &p)
	fmt.Println(p.TargetPort.IsString(), p.TargetPort)

	p.TargetPort = k8sapi.FromInt(8080)
	b, _ := json.Marshal(p)
	fmt.Println(string(b))
	// Output:
	// true http
	// {"port":80,"targetPort":8080}
}
