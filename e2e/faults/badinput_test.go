package faults

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/e2e/harness"
	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/reconcile"
	"github.com/zerodep-k8s/widget-operator/widget"
)

// permissiveCRD is the Widget CRD with its validation out of the way, as an
// old or edited CRD might be.
const permissiveCRD = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
"metadata":{"name":"widgets.example.com"},
"spec":{"group":"example.com","scope":"Namespaced",
 "names":{"kind":"Widget","listKind":"WidgetList","plural":"widgets","singular":"widget"},
 "versions":[{"name":"v1","served":true,"storage":true,"subresources":{"status":{}},
  "schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`

// TestWidgetsThatBypassValidation installs a permissive CRD on the scratch
// plane and creates Widgets its real schema would refuse. Each fails with
// a message naming the field; a valid sibling in the same namespace
// converges.
func TestWidgetsThatBypassValidation(t *testing.T) {
	p := scratch.Get(t)
	env.Install(t, p)
	ns := p.TestNamespace(t)
	c := admin(t, p)
	ctx := ctxFor(t, 5*time.Minute)
	crds := k8sapi.For[json.RawMessage](c, k8sapi.CustomResourceDefinitions)
	raw := json.RawMessage(permissiveCRD)
	if _, err := crds.Apply(ctx, "", "widgets.example.com", &raw, k8sapi.PatchOptions{FieldManager: "e2e-crd", Force: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		harness.Kubectl(t, p, "apply", "--server-side", "--force-conflicts", "-f", "manifests/crd.yaml")
	})
	o := startOp(t, p, "--namespace", ns)

	huge := strings.Repeat("x", 200<<10)
	for _, tc := range []struct{ name, spec, want string }{
		{"missing-image", `{"replicas":1}`, "spec.image: must not be empty"},
		{"negative-replicas", `{"image":"` + image + `","replicas":-3}`, "spec.replicas: -3 is out of range"},
		{"huge-image", `{"image":"` + huge + `","replicas":1}`, "spec.image: 204800 characters is longer than"},
		{"replicas-string", `{"image":"` + image + `","replicas":"three"}`, `spec.replicas: must be an integer, got string "three"`},
		{"image-number", `{"image":7,"replicas":1}`, "spec.image: must be a string"},
		{"spec-number", `42`, "spec: must be an object"},
		{"replicas-float", `{"image":"` + image + `","replicas":1.5}`, "spec.replicas: must be an integer"},
		{"replicas-huge", `{"image":"` + image + `","replicas":1e12}`, "spec.replicas: 1000000000000 is out of range 1..10"},
		{"unknown-field", `{"image":"` + image + `","replicas":1,"colour":"blue"}`, `spec."colour": unknown field`},
	} {
		body := json.RawMessage(fmt.Sprintf(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":%q},"spec":%s,"colour":"blue"}`, tc.name, tc.spec))
		eventually(t, 30*time.Second, func() (bool, string) { // the CRD cache may lag the update
			_, err := k8sapi.For[json.RawMessage](c, widget.Widgets).Create(ctx, ns, &body, k8sapi.WriteOptions{})
			return err == nil || k8sapi.IsAlreadyExists(err), fmt.Sprint(err)
		})
		t.Run(tc.name, func(t *testing.T) {
			eventually(t, time.Minute, func() (bool, string) {
				w, err := widgets(c).Get(ctx, ns, tc.name, k8sapi.GetOptions{})
				if err != nil {
					return false, err.Error()
				}
				cond, _ := reconcile.FindCondition(w.Status.Conditions, widget.ConditionReady)
				return w.Status.Phase == widget.PhaseFailed && strings.Contains(cond.Message, tc.want),
					fmt.Sprintf("phase %q message %.200q", w.Status.Phase, cond.Message)
			})
		})
	}
	// Unknown fields outside spec are not the operator's business: a valid
	// sibling with one converges.
	sibling := json.RawMessage(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"sibling"},"spec":{"image":"` + image + `","replicas":1},"extra":{"a":[1,2]}}`)
	if _, err := k8sapi.For[json.RawMessage](c, widget.Widgets).Create(ctx, ns, &sibling, k8sapi.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAllReady(t, c, ns, []string{"sibling"}, 2*time.Minute)
	o.alive(t)
}
