package reconcile_test

import (
	"fmt"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/reconcile"
)

// A status written only when it changed: the second SetCondition with the
// same status reports no change and keeps the first transition time.
func ExampleSetCondition() {
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	conds, changed := reconcile.SetCondition(nil, k8sapi.Condition{Type: "Ready", Status: "False", Reason: "Progressing"}, t0)
	fmt.Println(changed, conds[0].Reason, conds[0].LastTransitionTime.Format(time.TimeOnly))
	conds, changed = reconcile.SetCondition(conds, k8sapi.Condition{Type: "Ready", Status: "False", Reason: "Progressing"}, t0.Add(time.Minute))
	fmt.Println(changed)
	conds, changed = reconcile.SetCondition(conds, k8sapi.Condition{Type: "Ready", Status: "True", Reason: "Available"}, t0.Add(2*time.Minute))
	fmt.Println(changed, conds[0].Reason, conds[0].LastTransitionTime.Format(time.TimeOnly), reconcile.IsConditionTrue(conds, "Ready"))
	// Output:
	// true Progressing 10:00:00
	// false
	// true Available 10:02:00 true
}

// The owner is described once, by its Resource: the reference carries
// its apiVersion and kind, and ControllerOf finds it back on the child.
func ExampleNewControllerRef() {
	owner := &k8sapi.ObjectMeta{Name: "web", Namespace: "prod", UID: "0b6c4f1e"}
	ref := reconcile.NewControllerRef(k8sapi.Deployments, owner)
	fmt.Println(ref.APIVersion, ref.Kind, ref.Name, *ref.Controller)

	var child k8sapi.ObjectMeta
	if err := reconcile.SetControllerReference(&child, ref); err != nil {
		fmt.Println(err)
	}
	fmt.Println(reconcile.ControllerOf(&child, k8sapi.Deployments).Name, reconcile.ControllerOf(&child, k8sapi.Namespaces) == nil)
	// Output:
	// apps/v1 Deployment web true
	// web true
}
