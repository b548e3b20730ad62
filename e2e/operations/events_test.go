package operations

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/e2e/harness"
	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/widget"
)

// TestEvents checks the events.k8s.io/v1 Events the operator writes on a
// Widget: Normal Created and Updated for its children, Warning for an
// ownership conflict, an invalid spec and a failing write, the last
// aggregated into one Event with a growing series count.
func TestEvents(t *testing.T) {
	p := env.Plane.Get(t)
	ns := p.TestNamespace(t)
	c := admin(t, p)
	o := env.StartOperator(t, p, "--namespace", ns)
	t.Cleanup(o.Stop)
	ctx := ctxFor(t, 4*time.Minute)

	byOperator := func(e k8sapi.Event) bool {
		return e.ReportingController == "widget-operator" && e.Action == "Reconcile" && e.ReportingInstance != ""
	}

	t.Run("created and updated", func(t *testing.T) {
		w, err := widgets(c).Create(ctx, ns, newWidget("web", image, 1), k8sapi.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// One Event for what one reconcile created.
		e := waitEvent(t, c, ns, "web", time.Minute, func(e k8sapi.Event) bool {
			return e.Type == "Normal" && e.Reason == widget.ReasonCreated
		})
		if e.Note != "Created Deployment and Service "+ns+"/web" || !byOperator(e) ||
			e.Regarding.UID != w.UID || e.Regarding.APIVersion != widget.WidgetAPIVersion {
			t.Errorf("Created Event: %+v", e)
		}
		waitReady(t, c, ns, "web", 1)
		patch := `{"spec":{"image":"registry.k8s.io/pause:3.9"}}`
		if _, err := widgets(c).Patch(ctx, ns, "web", k8sapi.MergePatch, []byte(patch), k8sapi.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		waitEvent(t, c, ns, "web", time.Minute, func(e k8sapi.Event) bool {
			return e.Type == "Normal" && e.Reason == widget.ReasonUpdated && e.Note == "Updated Deployment "+ns+"/web" && byOperator(e)
		})
		// The Service did not change, so it has no Updated Event.
		for _, e := range eventsAbout(t, c, ns, "web") {
			if e.Reason == widget.ReasonUpdated && strings.Contains(e.Note, "Service") {
				t.Errorf("an Updated Event for an unchanged Service: %s", e.Note)
			}
		}
	})

	t.Run("ownership conflict", func(t *testing.T) {
		svc := &k8sapi.Service{
			TypeMeta:   k8sapi.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: k8sapi.ObjectMeta{Name: "taken"},
			Spec:       k8sapi.ServiceSpec{Ports: []k8sapi.ServicePort{{Port: 81}}},
		}
		if _, err := k8sapi.For[k8sapi.Service](c, k8sapi.Services).Create(ctx, ns, svc, k8sapi.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := widgets(c).Create(ctx, ns, newWidget("taken", image, 1), k8sapi.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitEvent(t, c, ns, "taken", time.Minute, func(e k8sapi.Event) bool {
			return e.Type == "Warning" && e.Reason == widget.ReasonOwnershipConflict &&
				strings.Contains(e.Note, "Service "+ns+"/taken exists and has no controller") && byOperator(e)
		})
	})

	t.Run("reconcile error, aggregated", func(t *testing.T) {
		// An admission webhook that cannot be reached makes every
		// create of a Deployment fail with a 500, a transient failure,
		// so the Widget's reconcile fails and is retried with backoff.
		// (A quota is no longer that: it is waited out, with one Event.)
		name := "unreachable-" + ns
		hook := json.RawMessage(`{"apiVersion":"admissionregistration.k8s.io/v1","kind":"ValidatingWebhookConfiguration",
"metadata":{"name":"` + name + `"},
"webhooks":[{"name":"unreachable.widget.test","clientConfig":{"url":"https://127.0.0.1:1/validate"},
 "rules":[{"apiGroups":["apps"],"apiVersions":["v1"],"operations":["CREATE"],"resources":["deployments"]}],
 "namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"` + ns + `"}},
 "failurePolicy":"Fail","sideEffects":"None","admissionReviewVersions":["v1"],"timeoutSeconds":1}]}`)
		hooks := k8sapi.For[json.RawMessage](c, k8sapi.Resource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"})
		if _, err := hooks.Create(ctx, "", &hook, k8sapi.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { hooks.Delete(ctxFor(t, 10*time.Second), "", name, k8sapi.DeleteOptions{}) })
		// The webhook is called after a moment: wait until a dry-run
		// create of a Deployment is refused.
		eventually(t, 60*time.Second, func() (bool, string) {
			out, err := harness.KubectlErr(p, "-n", ns, "create", "deployment", "probe", "--image", image, "--dry-run=server")
			return err != nil && strings.Contains(out, "webhook"), "a Deployment may still be created: " + out
		})
		if _, err := widgets(c).Create(ctx, ns, newWidget("hooked", image, 1), k8sapi.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		e := waitEvent(t, c, ns, "hooked", 90*time.Second, func(e k8sapi.Event) bool {
			return e.Type == "Warning" && e.Reason == widget.ReasonReconcileError && e.Series != nil && e.Series.Count >= 3
		})
		if !strings.Contains(e.Note, "apply deployment "+ns+"/hooked") || !byOperator(e) {
			t.Errorf("ReconcileError Event: %+v", e)
		}
		var same []string
		for _, e := range eventsAbout(t, c, ns, "hooked") {
			if e.Reason == widget.ReasonReconcileError {
				same = append(same, e.Name)
			}
		}
		if len(same) != 1 {
			t.Errorf("the repeats of one error made %d Events, want 1 with a series: %v", len(same), same)
		}
		if n := countLogs(t, o, func(r logRecord) bool { return r.Msg == "reconcile failed" && r.Name == "hooked" }); n < 3 {
			t.Errorf("%d failed reconciles logged, want at least the 3 the series counts", n)
		}
	})

	t.Run("invalid spec", func(t *testing.T) {
		// The CRD's schema keeps invalid specs out; an older, permissive
		// CRD lets them in, and the operator must report them.
		crds := k8sapi.For[json.RawMessage](c, k8sapi.CustomResourceDefinitions)
		raw := json.RawMessage(permissiveCRD)
		if _, err := crds.Apply(ctx, "", "widgets.example.com", &raw, k8sapi.PatchOptions{FieldManager: "e2e-crd", Force: true}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { kubectl(t, p, "apply", "--server-side", "--force-conflicts", "-f", "manifests/crd.yaml") })
		bad := json.RawMessage(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"fifty"},"spec":{"image":"` + image + `","replicas":50}}`)
		rawWidgets := k8sapi.For[json.RawMessage](c, widget.Widgets)
		// The API server's CRD cache may lag the update for a moment.
		eventually(t, 30*time.Second, func() (bool, string) {
			_, err := rawWidgets.Create(ctx, ns, &bad, k8sapi.WriteOptions{})
			return err == nil, fmt.Sprint(err)
		})
		waitEvent(t, c, ns, "fifty", time.Minute, func(e k8sapi.Event) bool {
			return e.Type == "Warning" && e.Reason == widget.ReasonInvalidSpec && strings.Contains(e.Note, "spec.replicas: 50") && byOperator(e)
		})
	})
}

// permissiveCRD is the Widget CRD with its validation out of the way, as an
// old or edited CRD might be.
const permissiveCRD = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
"metadata":{"name":"widgets.example.com"},
"spec":{"group":"example.com","scope":"Namespaced",
 "names":{"kind":"Widget","listKind":"WidgetList","plural":"widgets","singular":"widget"},
 "versions":[{"name":"v1","served":true,"storage":true,"subresources":{"status":{}},
  "schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`

// noEventsRole is the operator's ClusterRole without the Events rule.
const noEventsRole = `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole",
"metadata":{"name":"widget-operator-no-events"},
"rules":[
 {"apiGroups":["example.com"],"resources":["widgets"],"verbs":["get","list","watch"]},
 {"apiGroups":["example.com"],"resources":["widgets/status"],"verbs":["patch"]},
 {"apiGroups":["example.com"],"resources":["widgets/finalizers"],"verbs":["update"]},
 {"apiGroups":["apps"],"resources":["deployments"],"verbs":["get","list","watch","create","patch"]},
 {"apiGroups":[""],"resources":["services"],"verbs":["get","list","watch","create","patch"]}]}`

// TestEventsForbidden runs the operator as a ServiceAccount that may do
// everything but write Events: reconciling goes on, the refusal is logged
// once, and the metrics count the Events lost.
func TestEventsForbidden(t *testing.T) {
	p := env.Plane.Get(t)
	env.Install(t, p)
	ns := p.TestNamespace(t)
	c := admin(t, p)
	ctx := ctxFor(t, 3*time.Minute)

	const sa = "widget-operator-no-events"
	raw := json.RawMessage(noEventsRole)
	if _, err := k8sapi.For[json.RawMessage](c, k8sapi.Resource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}).
		Apply(ctx, "", sa, &raw, k8sapi.PatchOptions{FieldManager: "e2e", Force: true}); err != nil {
		t.Fatal(err)
	}
	kubectl(t, p, "-n", harness.OperatorNamespace, "create", "serviceaccount", sa)
	kubectl(t, p, "create", "clusterrolebinding", sa, "--clusterrole", sa, "--serviceaccount", harness.OperatorNamespace+":"+sa)
	t.Cleanup(func() {
		harness.KubectlErr(p, "delete", "--ignore-not-found", "clusterrolebinding", sa)
		harness.KubectlErr(p, "delete", "--ignore-not-found", "clusterrole", sa)
		harness.KubectlErr(p, "-n", harness.OperatorNamespace, "delete", "--ignore-not-found", "serviceaccount", sa)
	})

	metricsAddr := freeAddr(t)
	o := env.StartOperatorAs(t, p, sa, "--namespace", ns, "--metrics-bind-address", metricsAddr)
	t.Cleanup(o.Stop)
	names := []string{"one", "two", "three"}
	for _, n := range names {
		if _, err := widgets(c).Create(ctx, ns, newWidget(n, image, 1), k8sapi.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range names {
		waitReady(t, c, ns, n, 1)
	}
	// Each Widget's Created Event was refused.
	eventually(t, 30*time.Second, func() (bool, string) {
		m, _ := scrape(t, metricsAddr)
		v, _ := m.value("widget_operator_events_dropped_total")
		return v >= float64(len(names)), fmt.Sprintf("widget_operator_events_dropped_total = %v", v)
	})
	refusals := countLogs(t, o, func(r logRecord) bool { return strings.HasPrefix(r.Msg, "events: not allowed to write Events") })
	if refusals != 1 {
		t.Errorf("the refusal to write Events was logged %d times, want once", refusals)
	}
	if evs := eventsAbout(t, c, ns, "one"); len(evs) != 0 {
		t.Errorf("Events written without permission:%s", describeEvents(evs))
	}
	if code, _, _ := get("http://" + metricsAddr + "/metrics"); code != http.StatusOK {
		t.Errorf("/metrics: %d", code)
	}
}
