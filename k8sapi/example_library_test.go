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
	deployments := k8sapi.For[k8sapi.Deployment](c, k8sapi.Deployments)
	ctx := context.Background()
	d, err := deployments.Get(ctx, "shop", "web", k8sapi.GetOptions{})
	if err != nil {
		log.Fatal(err)
	}
	replicas := int32(3)
	d.Spec.Replicas = &replicas
	if _, err := deployments.Update(ctx, "shop", d.Name, d, k8sapi.WriteOptions{}); err != nil {
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
