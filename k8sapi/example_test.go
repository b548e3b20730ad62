package k8sapi_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// exampleServer stands in for an API server: it answers from a few canned
// bodies, over TLS, and returns a Config that trusts it.
func exampleServer(h http.HandlerFunc) (*httptest.Server, *k8sapi.Config) {
	srv := httptest.NewUnstartedServer(h)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return srv, &k8sapi.Config{Host: srv.URL, CAData: ca, BearerToken: "example-token"}
}

// A client from the kubeconfig ($KUBECONFIG or ~/.kube/config) or, in a
// pod, from its service account.
func ExampleNew() {
	cfg, err := k8sapi.Load(k8sapi.LoadOptions{})
	if err != nil {
		log.Fatal(err)
	}
	c, err := k8sapi.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("talking to %s as %s, namespace %s", c.Host(), cfg.AuthMethod(), c.Namespace())
}

func ExampleTyped_Get() {
	srv, cfg := exampleServer(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/apis/apps/v1/namespaces/shop/deployments/web" {
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"deployments.apps \"api\" not found","reason":"NotFound","code":404}`)
			return
		}
		io.WriteString(w, `{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":"web","namespace":"shop","resourceVersion":"48213"},"spec":{"replicas":3,"template":{"metadata":{},"spec":{"containers":[{"name":"web","image":"web:1.8.2"}]}}},"status":{"readyReplicas":3}}`)
	})
	defer srv.Close()
	c, err := k8sapi.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	deployments := k8sapi.For[k8sapi.Deployment](c, k8sapi.Deployments)
	ctx := context.Background()

	d, err := deployments.Get(ctx, "shop", "web", k8sapi.GetOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(d.Name, *d.Spec.Replicas, d.Status.ReadyReplicas, d.ResourceVersion)

	_, err = deployments.Get(ctx, "shop", "api", k8sapi.GetOptions{})
	fmt.Println(k8sapi.IsNotFound(err))
	fmt.Println(err)
	// Output:
	// web 3 3 48213
	// true
	// k8sapi: get deployments shop/api: 404 NotFound: deployments.apps "api" not found
}

// Server-side apply: send only the fields this manager owns; the server
// merges them and records the manager as their owner.
func ExampleTyped_Apply() {
	srv, cfg := exampleServer(func(w http.ResponseWriter, r *http.Request) {
		fmt.Println(r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Content-Type"))
		body, _ := io.ReadAll(r.Body)
		w.Write(body) // a real server returns the merged object
	})
	defer srv.Close()
	c, err := k8sapi.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	replicas := int32(2)
	want := k8sapi.Deployment{
		TypeMeta:   k8sapi.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: k8sapi.ObjectMeta{Name: "web", Namespace: "shop", Labels: map[string]string{"app": "web"}},
		Spec: k8sapi.DeploymentSpec{
			Replicas: &replicas,
			Selector: &k8sapi.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: k8sapi.PodTemplateSpec{
				ObjectMeta: k8sapi.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       k8sapi.PodSpec{Containers: []k8sapi.Container{{Name: "web", Image: "web:1.8.2"}}},
			},
		},
	}
	got, err := k8sapi.For[k8sapi.Deployment](c, k8sapi.Deployments).Apply(context.Background(), "shop", "web", want,
		k8sapi.PatchOptions{FieldManager: "widget-operator", Force: true})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(got.Name, *got.Spec.Replicas)
	// Output:
	// PATCH /apis/apps/v1/namespaces/shop/deployments/web fieldManager=widget-operator&force=true application/apply-patch+yaml
	// web 2
}

func ExampleTyped_Watch() {
	srv, cfg := exampleServer(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"type":"ADDED","object":{"metadata":{"name":"web","resourceVersion":"10"}}}
{"type":"MODIFIED","object":{"metadata":{"name":"web","resourceVersion":"11"}}}
{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"12"}}}
{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old resource version: 5 (10)","reason":"Expired","code":410}}
`)
	})
	defer srv.Close()
	c, err := k8sapi.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	w, err := k8sapi.For[k8sapi.Deployment](c, k8sapi.Deployments).Watch(context.Background(), "shop",
		k8sapi.ListOptions{ResourceVersion: "5", AllowWatchBookmarks: true})
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()
	for {
		ev, err := w.Next()
		if err == io.EOF {
			fmt.Println("server ended the watch; resume from the last resourceVersion")
			return
		}
		if k8sapi.IsGone(err) {
			fmt.Println("too old: list again, then watch from the list's resourceVersion")
			return
		}
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(ev.Type, ev.Object.Name, ev.Object.ResourceVersion)
	}
	// Output:
	// ADDED web 10
	// MODIFIED web 11
	// BOOKMARK  12
	// too old: list again, then watch from the list's resourceVersion
}

// json.RawMessage keeps objects whole, for kinds without a struct.
func ExampleFor_raw() {
	srv, cfg := exampleServer(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"settings"},"data":{"mode":"fast"}}`)
	})
	defer srv.Close()
	c, err := k8sapi.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	raw, err := k8sapi.For[json.RawMessage](c, k8sapi.ConfigMaps).Get(context.Background(), "shop", "settings", k8sapi.GetOptions{})
	if err != nil {
		log.Fatal(err)
	}
	var cm struct {
		Data map[string]string `json:"data"`
	}
	json.Unmarshal(*raw, &cm)
	fmt.Println(cm.Data["mode"])
	// Output: fast
}
