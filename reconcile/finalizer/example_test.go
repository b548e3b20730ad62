package finalizer_test

import (
	"context"
	"fmt"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/reconcile/finalizer"
)

// The finalizer's part of two reconciles of a Deployment: the first adds
// the finalizer, the second, once the Deployment is being deleted, cleans
// up and removes it. The patcher here prints each patch; a program's sends
// it to the Deployment's resource:
//
//	deployments := k8sapi.For[k8sapi.Deployment](client, k8sapi.Deployments)
//	patcher := finalizer.JSONPatcherFunc(func(ctx context.Context, ns, name string, patch []byte) error {
//		_, err := deployments.Patch(ctx, ns, name, k8sapi.JSONPatch, patch, k8sapi.PatchOptions{})
//		return err
//	})
func ExampleFinalizer_Run() {
	f := &finalizer.Finalizer{
		Name: "example.com/release-dns",
		Patcher: finalizer.JSONPatcherFunc(func(ctx context.Context, ns, name string, patch []byte) error {
			fmt.Printf("patch %s/%s %s\n", ns, name, patch)
			return nil
		}),
	}
	releaseDNS := func(ctx context.Context) error {
		fmt.Println("release the DNS name")
		return nil
	}
	ctx := context.Background()

	// A new Deployment, as read from a cache.
	d := &k8sapi.Deployment{ObjectMeta: k8sapi.ObjectMeta{Namespace: "shop", Name: "web", ResourceVersion: "7"}}
	proceed, err := f.Run(ctx, d, releaseDNS)
	fmt.Println("proceed:", proceed, err)

	// Later: the Deployment carries the finalizer and is being deleted.
	now := time.Now()
	d = &k8sapi.Deployment{ObjectMeta: k8sapi.ObjectMeta{Namespace: "shop", Name: "web", ResourceVersion: "9",
		Finalizers: []string{"example.com/release-dns"}, DeletionTimestamp: &now}}
	proceed, err = f.Run(ctx, d, releaseDNS)
	fmt.Println("proceed:", proceed, err)
	// Output:
	// patch shop/web [{"op":"test","path":"/metadata/resourceVersion","value":"7"},{"op":"add","path":"/metadata/finalizers","value":["example.com/release-dns"]}]
	// proceed: true <nil>
	// release the DNS name
	// patch shop/web [{"op":"test","path":"/metadata/resourceVersion","value":"9"},{"op":"test","path":"/metadata/finalizers/0","value":"example.com/release-dns"},{"op":"remove","path":"/metadata/finalizers/0"}]
	// proceed: false <nil>
}
