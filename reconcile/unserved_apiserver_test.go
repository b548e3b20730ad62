package reconcile_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/queue"
	"github.com/zerodep-k8s/widget-operator/reconcile"
	"github.com/zerodep-k8s/widget-operator/watch"
)

// A Controller whose resource is not served yet, its CRD applied after
// the controller started, waits for it: its check names the watch as
// failing, and once the CRD is applied the controller syncs and
// reconciles, with no restart.
func TestControllerWaitsForItsResource(t *testing.T) {
	p := plane.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := p.TestNamespace(t)
	cert, key := p.AdminCertificate()
	client, err := k8sapi.New(&k8sapi.Config{Host: p.Host(), CAData: p.CAData(), CertData: cert, KeyData: key})
	if err != nil {
		t.Fatal(err)
	}
	// A group of the test's own: no other test has applied its CRD.
	gadgets := k8sapi.Resource{Group: ns + ".widget.test", Version: "v1", Resource: "gadgets", Namespaced: true}
	crd := fmt.Sprintf(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
"metadata":{"name":"gadgets.%[1]s"},
"spec":{"group":"%[1]s","scope":"Namespaced","names":{"plural":"gadgets","singular":"gadget","kind":"Gadget"},
 "versions":[{"name":"v1","served":true,"storage":true,
  "schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`, gadgets.Group)

	reconciled := make(chan string, 10)
	c := &reconcile.Controller{Name: "unserved", Reconciler: reconcile.ReconcilerFunc(func(_ context.Context, key string) (queue.Result, error) {
		reconciled <- key
		return queue.Result{}, nil
	})}
	reconcile.WatchPrimary(c, watch.Config[thing]{Source: watch.ClientSource[thing](client, gadgets), Namespace: ns, Name: "gadgets"})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()

	reason := gadgets.Resource + "." + gadgets.Group + "/v1 is not served (404): waiting for it"
	eventually(t, "the check naming the watch failing", func() bool {
		ch := c.Checks(time.Now())
		return len(ch) == 1 && ch[0].Name == "watch gadgets" && ch[0].Err != nil && strings.Contains(ch[0].Err.Error(), reason)
	})

	if err := p.Do(ctx, http.MethodPost, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", []byte(crd), nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		p.Do(ctx, http.MethodDelete, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets."+gadgets.Group, nil, nil)
	})
	// The API server serves the resource once the CRD is established.
	gc := k8sapi.For[thing](client, gadgets)
	obj := &thing{TypeMeta: k8sapi.TypeMeta{APIVersion: gadgets.GroupVersion(), Kind: "Gadget"}, ObjectMeta: k8sapi.ObjectMeta{Name: "g"}}
	eventually(t, "the gadget created", func() bool {
		_, err := gc.Create(ctx, ns, obj, k8sapi.WriteOptions{})
		return err == nil || k8sapi.IsAlreadyExists(err)
	})
	select {
	case key := <-reconciled:
		if key != ns+"/g" {
			t.Errorf("reconciled %q, want %s/g", key, ns)
		}
	case <-time.After(time.Minute):
		t.Fatal("the gadget was not reconciled within a minute of its creation")
	}
	for _, ch := range c.Checks(time.Now()) {
		if ch.Err != nil {
			t.Errorf("check %s after the sync: %v", ch.Name, ch.Err)
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}
