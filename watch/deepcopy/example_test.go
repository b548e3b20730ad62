package deepcopy_test

import (
	"fmt"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/watch/deepcopy"
)

// An object from a watch.Store or watch.Cache is shared with every reader.
// To change it before a write, change a copy.
func ExampleClone() {
	replicas := int32(2)
	cached := &k8sapi.Deployment{
		ObjectMeta: k8sapi.ObjectMeta{Namespace: "shop", Name: "web", Labels: map[string]string{"tier": "front"}},
		Spec:       k8sapi.DeploymentSpec{Replicas: &replicas},
	}

	d := deepcopy.Clone(cached)
	d.Labels["tier"] = "edge"
	*d.Spec.Replicas = 5

	fmt.Println("cached:", cached.Labels["tier"], *cached.Spec.Replicas)
	fmt.Println("copy:  ", d.Labels["tier"], *d.Spec.Replicas)
	// Output:
	// cached: front 2
	// copy:   edge 5
}
