package operator

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/e2e/harness"
	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/reconcile"
	"github.com/zerodep-k8s/widget-operator/testenv/controlplane"
	"github.com/zerodep-k8s/widget-operator/widget"
)

// settleDeadline is how long an accepted Widget may take to reach Ready
// or Failed on an idle cluster. The promise is "within seconds" (one
// reconcile, about a second unloaded); the rest is margin for a loaded
// machine. It must not pass the first retry of a refused write (10s), so
// a Widget that settles only on a retry still fails.
const settleDeadline = 10 * time.Second

// idleWindow is how long a settled world is watched for writes. The
// absence of writes can only be seen over a stretch of time.
const idleWindow = 60 * time.Second

// TestRefusalsSettle runs the three kinds of refusal that the server keeps
// up, at once so that they share one idle window: each Widget settles to
// Failed within settleDeadline with a reason and the server's message,
// then draws no write for a minute but its rare retries, then recovers
// once the refusal is lifted.
//
// Each scenario has an operator of its own for its namespace: the one of
// servicesForbidden runs as an identity that may not create Services
// there, and no operator for all namespaces may act in it meanwhile.
func TestRefusalsSettle(t *testing.T) {
	p := env.Plane.Get(t)
	env.Install(t, p)
	env.StopShared()
	// Subtests started from goroutines run at once, whatever -parallel
	// says (t.Parallel would wait for a free slot, and there may be only
	// two).
	var wg sync.WaitGroup
	for name, scenario := range map[string]func(*testing.T, *controlplane.Plane){
		"child rejected by an admission policy": childRejected,
		"quota blocks the Deployment":           quotaExceeded,
		"services forbidden by RBAC":            servicesForbidden,
	} {
		wg.Go(func() { t.Run(name, func(t *testing.T) { scenario(t, p) }) })
	}
	wg.Wait()
}

// waitWorkers waits until the operator o has started its workers, so
// that the time to settle counts from a running operator.
func waitWorkers(t *testing.T, o *harness.Operator) {
	t.Helper()
	eventually(t, 60*time.Second, func() (bool, string) {
		return strings.Contains(o.Log(), "starting workers"), "the operator has not started its workers"
	})
}

// waitFailed waits up to settleDeadline for the Widget to be Failed with
// reason and a message holding each of parts, and the Warning Event about
// it; extra, when not nil, must hold too. It returns the Widget.
func waitFailed(t *testing.T, c *k8sapi.Client, ns, name, reason string, extra func(*widget.Widget) bool, parts ...string) *widget.Widget {
	t.Helper()
	var w *widget.Widget
	eventually(t, settleDeadline, func() (bool, string) {
		var err error
		w, err = widgets(c).Get(ctxFor(t, 10*time.Second), ns, name, k8sapi.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		cond, _ := reconcile.FindCondition(w.Status.Conditions, widget.ConditionReady)
		ok := w.Status.Phase == widget.PhaseFailed && cond.Reason == reason && cond.ObservedGeneration == w.Generation
		for _, part := range parts {
			ok = ok && strings.Contains(cond.Message, part)
		}
		return ok && (extra == nil || extra(w)), fmt.Sprintf("status %+v", w.Status)
	})
	eventually(t, 30*time.Second, func() (bool, string) {
		list, err := k8sapi.For[k8sapi.Event](c, k8sapi.Events).List(ctxFor(t, 10*time.Second), ns, k8sapi.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range list.Items {
			if e.Regarding.Name == name && e.Type == "Warning" && e.Reason == reason {
				return true, ""
			}
		}
		return false, "no Warning Event " + reason
	})
	return w
}

// writesIn returns the completed writes by user in namespace ns since from.
func writesIn(t *testing.T, p *controlplane.Plane, user, ns string, from time.Time) []controlplane.AuditEvent {
	t.Helper()
	all, err := p.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	var out []controlplane.AuditEvent
	for _, e := range all {
		if e.User == user && e.Namespace == ns && e.Stage == "ResponseComplete" && !e.Received.Before(from) && harness.IsWrite(e) {
			out = append(out, e)
		}
	}
	return out
}

// idle watches the settled world for idleWindow and returns the writes by
// user in ns; each must be a create of resource that the server refused
// with 403, and at most max of them: the retries of a Widget that waits.
func idle(t *testing.T, p *controlplane.Plane, user, ns, resource string, max int) {
	t.Helper()
	from := time.Now()
	time.Sleep(idleWindow) // a fixed window that proves an absence
	writes := writesIn(t, p, user, ns, from)
	t.Logf("%d writes by the operator over %v of idle:%s", len(writes), idleWindow, describe(writes))
	if len(writes) > max {
		t.Errorf("%d writes, want at most %d", len(writes), max)
	}
	for _, e := range writes {
		if e.Verb != "create" || e.Resource != resource || e.Subresource != "" || e.Code != 403 {
			t.Errorf("a write other than a refused retry: %s", describe([]controlplane.AuditEvent{e}))
		}
	}
}

func applyRaw(t *testing.T, c *k8sapi.Client, r k8sapi.Resource, ns, name, body string) {
	t.Helper()
	raw := json.RawMessage(body)
	if _, err := k8sapi.For[json.RawMessage](c, r).Apply(ctxFor(t, 30*time.Second), ns, name, &raw,
		k8sapi.PatchOptions{FieldManager: "e2e", Force: true}); err != nil {
		t.Fatal(err)
	}
}

var (
	admissionPolicies = k8sapi.Resource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"}
	policyBindings    = k8sapi.Resource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicybindings"}
	resourceQuotas    = k8sapi.Resource{Version: "v1", Resource: "resourcequotas", Namespaced: true}
	roles             = k8sapi.Resource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles", Namespaced: true}
	roleBindings      = k8sapi.Resource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings", Namespaced: true}
)

// childRejected: a ValidatingAdmissionPolicy refuses the Widget's
// Deployment (422 Invalid). The Widget is Failed with ChildRejected and
// the policy's message, and draws no write at all; a new image is tried
// and goes through.
func childRejected(t *testing.T, p *controlplane.Plane) {
	ns := p.TestNamespace(t)
	o := env.StartOperator(t, p, "--namespace", ns)
	t.Cleanup(o.Stop)
	waitWorkers(t, o)
	c := admin(t, p)
	ctx := ctxFor(t, 5*time.Minute)

	const msg = "images from forbidden.example/ are not allowed here"
	name := "no-forbidden-images-" + ns
	applyRaw(t, c, admissionPolicies, "", name, `{"apiVersion":"admissionregistration.k8s.io/v1","kind":"ValidatingAdmissionPolicy",
"metadata":{"name":"`+name+`"},
"spec":{"failurePolicy":"Fail",
 "matchConstraints":{"resourceRules":[{"apiGroups":["apps"],"apiVersions":["v1"],"operations":["CREATE","UPDATE"],"resources":["deployments"]}]},
 "validations":[{"expression":"object.spec.template.spec.containers.all(c, !c.image.startsWith('forbidden.example/'))","message":"`+msg+`","reason":"Invalid"}]}}`)
	applyRaw(t, c, policyBindings, "", name, `{"apiVersion":"admissionregistration.k8s.io/v1","kind":"ValidatingAdmissionPolicyBinding",
"metadata":{"name":"`+name+`"},
"spec":{"policyName":"`+name+`","validationActions":["Deny"],
 "matchResources":{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"`+ns+`"}}}}}`)
	t.Cleanup(func() {
		k8sapi.For[json.RawMessage](c, policyBindings).Delete(ctxFor(t, 10*time.Second), "", name, k8sapi.DeleteOptions{})
		k8sapi.For[json.RawMessage](c, admissionPolicies).Delete(ctxFor(t, 10*time.Second), "", name, k8sapi.DeleteOptions{})
	})
	// The policy is in force once a dry run of such a Deployment is refused.
	probe := json.RawMessage(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"probe"},
"spec":{"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},
 "spec":{"containers":[{"name":"c","image":"forbidden.example/app:1"}]}}}}`)
	eventually(t, 30*time.Second, func() (bool, string) {
		_, err := k8sapi.For[json.RawMessage](c, k8sapi.Deployments).Create(ctx, ns, &probe, k8sapi.WriteOptions{DryRun: true})
		return k8sapi.IsInvalid(err), fmt.Sprintf("dry run: %v", err)
	})

	if _, err := widgets(c).Create(ctx, ns, newWidget("shop", "forbidden.example/app:1", 1), k8sapi.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFailed(t, c, ns, "shop", widget.ReasonChildRejected, nil,
		"Deployment "+ns+"/shop refused by the API server (422 Invalid)", msg)
	idle(t, p, harness.OperatorUser, ns, "deployments", 0)

	// A new generation is tried at once.
	patch := `{"spec":{"image":"registry.k8s.io/pause:3.10"}}`
	if _, err := widgets(c).Patch(ctx, ns, "shop", k8sapi.MergePatch, []byte(patch), k8sapi.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitReady(t, c, ns, "shop", 1)
}

// quotaExceeded: a ResourceQuota allows no Deployment. The Widget is
// Failed with QuotaExceeded and the quota's message, and retried at most
// once a minute; raising the quota retries it at once.
func quotaExceeded(t *testing.T, p *controlplane.Plane) {
	ns := p.TestNamespace(t)
	o := env.StartOperator(t, p, "--namespace", ns)
	t.Cleanup(o.Stop)
	waitWorkers(t, o)
	c := admin(t, p)
	ctx := ctxFor(t, 5*time.Minute)

	applyRaw(t, c, resourceQuotas, ns, "deployments", `{"apiVersion":"v1","kind":"ResourceQuota","metadata":{"name":"deployments"},
"spec":{"hard":{"count/deployments.apps":"0"}}}`)
	type quota struct {
		k8sapi.ObjectMeta `json:"metadata"`
		Status            struct {
			Hard map[string]string `json:"hard"`
		} `json:"status"`
	}
	// Admission counts against the quota once its controller has filled
	// in its status.
	eventually(t, 30*time.Second, func() (bool, string) {
		q, err := k8sapi.For[quota](c, resourceQuotas).Get(ctx, ns, "deployments", k8sapi.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return q.Status.Hard["count/deployments.apps"] == "0", fmt.Sprintf("quota status %+v", q.Status)
	})

	if _, err := widgets(c).Create(ctx, ns, newWidget("shop", "registry.k8s.io/pause:3.10", 1), k8sapi.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFailed(t, c, ns, "shop", widget.ReasonQuotaExceeded, nil,
		"Deployment "+ns+"/shop refused by the API server (403 Forbidden)", "exceeded quota: deployments")
	// At most one retry a minute, after a ramp (10 s, 20 s, 40 s, then
	// 60 s apart): two or three in the window.
	idle(t, p, harness.OperatorUser, ns, "deployments", 3)

	// Raise the quota just after a retry, so that the next one is a
	// minute away: a Deployment within seconds is the quota's watch at
	// work, not the schedule.
	from := time.Now()
	eventually(t, 70*time.Second, func() (bool, string) {
		return len(writesIn(t, p, harness.OperatorUser, ns, from)) > 0, "no retry"
	})
	raised := time.Now()
	patch := `{"spec":{"hard":{"count/deployments.apps":"1"}}}`
	if _, err := k8sapi.For[quota](c, resourceQuotas).Patch(ctx, ns, "deployments", k8sapi.MergePatch, []byte(patch), k8sapi.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// Retried at once, not at the next minute: the promise is the quota
	// watch's reaction (about a second), the bound that plus a margin for
	// a loaded machine, well under the scheduled retry a minute away.
	eventually(t, 20*time.Second, func() (bool, string) {
		_, err := getDeployment(t, c, ns, "shop")
		return err == nil, fmt.Sprintf("no Deployment %v after the quota was raised: %v", time.Since(raised).Round(time.Second), err)
	})
	waitReady(t, c, ns, "shop", 1)
}

// servicesForbidden: an operator of its own, for one namespace, may not
// create Services there. Its Widget gets its Deployment, then is Failed
// with Forbidden and the server's message, retried at most once a minute;
// granting the verb lets the next retry through.
func servicesForbidden(t *testing.T, p *controlplane.Plane) {
	home := p.TestNamespace(t)
	ns := p.TestNamespace(t)
	c := admin(t, p)
	ctx := ctxFor(t, 5*time.Minute)
	role := func(serviceVerbs string) string {
		return `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"widget-operator"},
"rules":[
 {"apiGroups":["example.com"],"resources":["widgets"],"verbs":["list","watch"]},
 {"apiGroups":["example.com"],"resources":["widgets/status"],"verbs":["patch"]},
 {"apiGroups":["example.com"],"resources":["widgets/finalizers"],"verbs":["update"]},
 {"apiGroups":["apps"],"resources":["deployments"],"verbs":["get","list","watch","create","patch"]},
 {"apiGroups":[""],"resources":["services"],"verbs":[` + serviceVerbs + `]},
 {"apiGroups":[""],"resources":["resourcequotas"],"verbs":["list","watch"]},
 {"apiGroups":["events.k8s.io"],"resources":["events"],"verbs":["create","patch"]}]}`
	}
	applyRaw(t, c, roles, ns, "widget-operator", role(`"get","list","watch","patch"`))
	applyRaw(t, c, roleBindings, ns, "widget-operator", `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding",
"metadata":{"name":"widget-operator"},
"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"widget-operator"},
"subjects":[{"kind":"ServiceAccount","name":"`+harness.OperatorSA+`","namespace":"`+home+`"}]}`)
	o := env.StartOperatorIn(t, p, home, harness.OperatorSA, "--namespace", ns)
	waitWorkers(t, o)
	user := harness.ServiceAccountUser(home, harness.OperatorSA)

	if _, err := widgets(c).Create(ctx, ns, newWidget("shop", "registry.k8s.io/pause:3.10", 1), k8sapi.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFailed(t, c, ns, "shop", widget.ReasonForbidden, nil,
		"Service "+ns+"/shop refused by the API server (403 Forbidden)", `cannot create resource "services"`)
	// The Deployment rolls out meanwhile; the window starts once it is
	// done, so that no change of a child wakes the Widget in it.
	waitFailed(t, c, ns, "shop", widget.ReasonForbidden, func(w *widget.Widget) bool { return w.Status.ReadyReplicas == 1 })
	idle(t, p, user, ns, "services", 3)

	applyRaw(t, c, roles, ns, "widget-operator", role(`"get","list","watch","create","patch"`))
	// The next retry, within a minute, goes through.
	harness.WaitReady(t, c, ns, "shop", 1, 90*time.Second)
	if _, err := getService(t, c, ns, "shop"); err != nil {
		t.Fatal(err)
	}
}
