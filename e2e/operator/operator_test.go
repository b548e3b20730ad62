// Package operator tests the Widget operator's behaviour end to end: its
// binary, as its ServiceAccount, against the local control plane.
package operator

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/e2e/harness"
	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/reconcile"
	"github.com/zerodep-k8s/widget-operator/widget"
)

var env harness.Env

func TestMain(m *testing.M) { os.Exit(env.Main(m)) }

var (
	eventually = harness.Eventually
	ctxFor     = harness.Ctx
	widgets    = harness.Widgets
	newWidget  = harness.NewWidget
	admin      = harness.Admin
	writesBy   = harness.WritesBy
	describe   = harness.Describe
	kubectl    = harness.Kubectl
)

func waitReady(t *testing.T, c *k8sapi.Client, ns, name string, want int32) *widget.Widget {
	t.Helper()
	return harness.WaitReady(t, c, ns, name, want, 90*time.Second)
}

func getDeployment(t *testing.T, c *k8sapi.Client, ns, name string) (*k8sapi.Deployment, error) {
	return k8sapi.For[k8sapi.Deployment](c, k8sapi.Deployments).Get(ctxFor(t, 10*time.Second), ns, name, k8sapi.GetOptions{})
}

func getService(t *testing.T, c *k8sapi.Client, ns, name string) (*k8sapi.Service, error) {
	return k8sapi.For[k8sapi.Service](c, k8sapi.Services).Get(ctxFor(t, 10*time.Second), ns, name, k8sapi.GetOptions{})
}

func TestWidgetLifecycle(t *testing.T) {
	p := env.Plane.Get(t)
	env.SharedOperator(t, p)
	ns := p.TestNamespace(t)
	c := admin(t, p)
	ctx := ctxFor(t, 5*time.Minute)

	w, err := widgets(c).Create(ctx, ns, newWidget("web", "registry.k8s.io/pause:3.10", 3), k8sapi.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("ready with 3 of 3 pods", func(t *testing.T) {
		w = waitReady(t, c, ns, "web", 3)
		cond, ok := reconcile.FindCondition(w.Status.Conditions, widget.ConditionReady)
		if !ok || cond.Status != "True" || cond.ObservedGeneration != w.Generation {
			t.Fatalf("Ready condition = %+v", cond)
		}
		d, err := getDeployment(t, c, ns, "web")
		if err != nil {
			t.Fatal(err)
		}
		ref := d.ControllerOf()
		if ref == nil || ref.UID != w.UID || ref.Kind != "Widget" || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
			t.Fatalf("deployment owner = %+v", d.OwnerReferences)
		}
		if d.Labels["app.kubernetes.io/managed-by"] != "widget-operator" || d.Labels["app.kubernetes.io/instance"] != "web" {
			t.Fatalf("deployment labels = %v", d.Labels)
		}
		s, err := getService(t, c, ns, "web")
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Spec.Ports) != 1 || s.Spec.Ports[0].Port != 80 || s.Spec.Ports[0].TargetPort != k8sapi.FromString("http") {
			t.Fatalf("service ports = %+v", s.Spec.Ports)
		}
		if s.ControllerOf() == nil || s.ControllerOf().UID != w.UID {
			t.Fatalf("service owner = %+v", s.OwnerReferences)
		}
	})

	t.Run("steady state makes no writes", func(t *testing.T) {
		// The absence of writes can only be seen over a stretch of time:
		// 30 seconds of an unchanged world, then the audit log.
		from := time.Now()
		time.Sleep(30 * time.Second)
		if writes := writesBy(t, p, ns, from); len(writes) != 0 {
			t.Fatalf("%d writes by the operator in steady state:%s", len(writes), describe(writes))
		}
	})

	t.Run("image and replica changes roll through", func(t *testing.T) {
		patch := `{"spec":{"image":"registry.k8s.io/pause:3.9","replicas":2}}`
		if _, err := widgets(c).Patch(ctx, ns, "web", k8sapi.MergePatch, []byte(patch), k8sapi.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		waitReady(t, c, ns, "web", 2)
		d, err := getDeployment(t, c, ns, "web")
		if err != nil {
			t.Fatal(err)
		}
		if img := d.Spec.Template.Spec.Containers[0].Image; img != "registry.k8s.io/pause:3.9" || *d.Spec.Replicas != 2 {
			t.Fatalf("deployment image %q replicas %d", img, *d.Spec.Replicas)
		}
	})

	t.Run("a manual edit of replicas is reverted", func(t *testing.T) {
		patch := `{"spec":{"replicas":5}}`
		if _, err := k8sapi.For[k8sapi.Deployment](c, k8sapi.Deployments).Patch(ctx, ns, "web", k8sapi.MergePatch, []byte(patch), k8sapi.PatchOptions{FieldManager: "someone"}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 60*time.Second, func() (bool, string) {
			d, err := getDeployment(t, c, ns, "web")
			if err != nil {
				return false, err.Error()
			}
			return *d.Spec.Replicas == 2, fmt.Sprintf("replicas %d", *d.Spec.Replicas)
		})
	})

	t.Run("a deleted Service is recreated", func(t *testing.T) {
		old, err := getService(t, c, ns, "web")
		if err != nil {
			t.Fatal(err)
		}
		if err := k8sapi.For[k8sapi.Service](c, k8sapi.Services).Delete(ctx, ns, "web", k8sapi.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 60*time.Second, func() (bool, string) {
			s, err := getService(t, c, ns, "web")
			if err != nil {
				return false, err.Error()
			}
			return s.UID != old.UID, "still the old Service"
		})
	})

	t.Run("deleting the Widget collects its children", func(t *testing.T) {
		if err := widgets(c).Delete(ctx, ns, "web", k8sapi.DeleteOptions{PropagationPolicy: "Background"}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 90*time.Second, func() (bool, string) {
			_, derr := getDeployment(t, c, ns, "web")
			_, serr := getService(t, c, ns, "web")
			return k8sapi.IsNotFound(derr) && k8sapi.IsNotFound(serr), fmt.Sprintf("deployment: %v; service: %v", derr, serr)
		})
	})
}

func TestOwnershipConflict(t *testing.T) {
	p := env.Plane.Get(t)
	env.SharedOperator(t, p)
	ns := p.TestNamespace(t)
	c := admin(t, p)
	ctx := ctxFor(t, 2*time.Minute)

	// A Service named like the Widget, owned by no one.
	svc := &k8sapi.Service{
		TypeMeta:   k8sapi.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: k8sapi.ObjectMeta{Name: "taken"},
		Spec:       k8sapi.ServiceSpec{Ports: []k8sapi.ServicePort{{Port: 81}}},
	}
	if _, err := k8sapi.For[k8sapi.Service](c, k8sapi.Services).Create(ctx, ns, svc, k8sapi.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := widgets(c).Create(ctx, ns, newWidget("taken", "registry.k8s.io/pause:3.10", 1), k8sapi.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, func() (bool, string) {
		w, err := widgets(c).Get(ctx, ns, "taken", k8sapi.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		cond, _ := reconcile.FindCondition(w.Status.Conditions, widget.ConditionReady)
		return w.Status.Phase == widget.PhaseFailed && cond.Reason == "OwnershipConflict", fmt.Sprintf("status %+v", w.Status)
	})
	s, err := getService(t, c, ns, "taken")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.OwnerReferences) != 0 || s.Spec.Ports[0].Port != 81 {
		t.Fatalf("the Service was taken over: owners %+v ports %+v", s.OwnerReferences, s.Spec.Ports)
	}
}

// permissiveCRD is the Widget CRD with its validation out of the way, as an
// old or edited CRD might be.
const permissiveCRD = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
"metadata":{"name":"widgets.example.com"},
"spec":{"group":"example.com","scope":"Namespaced",
 "names":{"kind":"Widget","listKind":"WidgetList","plural":"widgets","singular":"widget"},
 "versions":[{"name":"v1","served":true,"storage":true,"subresources":{"status":{}},
  "schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`

func TestInvalidWidgetFailsWithoutHotLoop(t *testing.T) {
	p := env.Plane.Get(t)
	env.SharedOperator(t, p)
	ns := p.TestNamespace(t)
	c := admin(t, p)
	ctx := ctxFor(t, 3*time.Minute)

	crds := k8sapi.For[json.RawMessage](c, k8sapi.CustomResourceDefinitions)
	apply := func(body string) {
		t.Helper()
		raw := json.RawMessage(body)
		if _, err := crds.Apply(ctx, "", "widgets.example.com", &raw, k8sapi.PatchOptions{FieldManager: "e2e-crd", Force: true}); err != nil {
			t.Fatal(err)
		}
	}
	apply(permissiveCRD)
	t.Cleanup(func() { kubectl(t, p, "apply", "--server-side", "--force-conflicts", "-f", "manifests/crd.yaml") })

	bad := json.RawMessage(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"fifty"},"spec":{"image":"registry.k8s.io/pause:3.10","replicas":50}}`)
	good := json.RawMessage(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"sibling"},"spec":{"image":"registry.k8s.io/pause:3.10","replicas":1}}`)
	raw := k8sapi.For[json.RawMessage](c, widget.Widgets)
	// The API server's CRD cache may lag the update for a moment.
	eventually(t, 30*time.Second, func() (bool, string) {
		_, err := raw.Create(ctx, ns, &bad, k8sapi.WriteOptions{})
		return err == nil, fmt.Sprint(err)
	})
	if _, err := raw.Create(ctx, ns, &good, k8sapi.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	from := time.Now()
	eventually(t, 60*time.Second, func() (bool, string) {
		w, err := widgets(c).Get(ctx, ns, "fifty", k8sapi.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		cond, _ := reconcile.FindCondition(w.Status.Conditions, widget.ConditionReady)
		return w.Status.Phase == widget.PhaseFailed && strings.Contains(cond.Message, "spec.replicas"), fmt.Sprintf("status %+v", w.Status)
	})
	waitReady(t, c, ns, "sibling", 1)
	if _, err := getDeployment(t, c, ns, "fifty"); !k8sapi.IsNotFound(err) {
		t.Fatalf("a Deployment was made for the invalid Widget: %v", err)
	}
	// No hot loop: over ten quiet seconds, the invalid Widget draws no
	// more writes than its one status update and its Event.
	time.Sleep(10 * time.Second)
	var onBad []string
	for _, e := range writesBy(t, p, ns, from) {
		if e.Name == "fifty" || strings.HasPrefix(e.Name, "fifty.") {
			onBad = append(onBad, e.Verb+" "+e.Resource+"/"+e.Subresource)
		}
	}
	if len(onBad) > 3 {
		t.Fatalf("%d writes about the invalid Widget: %v", len(onBad), onBad)
	}
}
