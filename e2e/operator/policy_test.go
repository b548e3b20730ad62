package operator

import (
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/widget"
)

// TestWidenedChildIsRefusedToOperator: the shipped admission policy
// (manifests/rbac/children_policy.yaml) judges the whole object, so a
// Widget's Deployment that the admin gave a volume is refused to the
// operator's next apply. The Widget is Failed with ChildRejected and the
// policy's message; once the volume is taken off, the change of the
// child retries it and the Widget is Ready.
func TestWidenedChildIsRefusedToOperator(t *testing.T) {
	p := env.Plane.Get(t)
	env.SharedOperator(t, p)
	ns := p.TestNamespace(t)
	c := admin(t, p)
	ctx := ctxFor(t, 5*time.Minute)
	if _, err := widgets(c).Create(ctx, ns, newWidget("web", "registry.k8s.io/pause:3.10", 1), k8sapi.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitReady(t, c, ns, "web", 1)

	deployments := k8sapi.For[k8sapi.Deployment](c, k8sapi.Deployments)
	volume := `{"spec":{"template":{"spec":{"volumes":[{"name":"scratch","emptyDir":{}}]}}}}`
	if _, err := deployments.Patch(ctx, ns, "web", k8sapi.MergePatch, []byte(volume), k8sapi.PatchOptions{FieldManager: "someone"}); err != nil {
		t.Fatal(err)
	}
	if _, err := widgets(c).Patch(ctx, ns, "web", k8sapi.MergePatch, []byte(`{"spec":{"replicas":2}}`), k8sapi.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFailed(t, c, ns, "web", widget.ReasonChildRejected, nil,
		"Deployment "+ns+"/web refused by the API server (422 Invalid)",
		"ValidatingAdmissionPolicy 'widget-operator-children'", "no volumes (hostPath, Secret or any other)")

	unvolume := `[{"op":"remove","path":"/spec/template/spec/volumes"}]`
	if _, err := deployments.Patch(ctx, ns, "web", k8sapi.JSONPatch, []byte(unvolume), k8sapi.PatchOptions{FieldManager: "someone"}); err != nil {
		t.Fatal(err)
	}
	waitReady(t, c, ns, "web", 2)
}
