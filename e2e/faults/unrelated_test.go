package faults

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/e2e/harness"
	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/testenv/controlplane"
)

// configMap is core/v1 ConfigMap, as this test needs it.
type configMap struct {
	k8sapi.TypeMeta
	k8sapi.ObjectMeta `json:"metadata"`
	Data              map[string]string `json:"data,omitempty"`
}

// A namespace full of objects the operator has no business with: 5,000
// ConfigMaps and 5,000 Deployments owned by no Widget. The operator's
// watches select only its own children, so it neither caches nor
// reconciles them, and its memory shows it. A bare plane (etcd and
// kube-apiserver) holds them, so that no controller works on them.
func TestUnrelatedObjectsAreNotCached(t *testing.T) {
	const n = 5000
	p := controlplane.StartForTest(t, controlplane.Options{Bare: true})
	env.Install(t, p)
	c := admin(t, p)
	ns := p.TestNamespace(t)

	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("unrelated-%d", i)
	}
	start := time.Now()
	forEach(t, names, 32, func(name string) error {
		cm := &configMap{TypeMeta: k8sapi.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: k8sapi.ObjectMeta{Name: name},
			Data: map[string]string{"payload": strings.Repeat("x", 512)}}
		if _, err := k8sapi.For[configMap](c, k8sapi.ConfigMaps).Create(ctxFor(t, time.Minute), ns, cm, k8sapi.WriteOptions{}); err != nil {
			return err
		}
		replicas := int32(0)
		d := &k8sapi.Deployment{
			TypeMeta:   k8sapi.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
			ObjectMeta: k8sapi.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
			Spec: k8sapi.DeploymentSpec{
				Replicas: &replicas,
				Selector: &k8sapi.LabelSelector{MatchLabels: map[string]string{"app": name}},
				Template: k8sapi.PodTemplateSpec{
					ObjectMeta: k8sapi.ObjectMeta{Labels: map[string]string{"app": name}},
					Spec:       k8sapi.PodSpec{Containers: []k8sapi.Container{{Name: "c", Image: image}}},
				},
			},
		}
		_, err := deployments(c).Create(ctxFor(t, time.Minute), ns, d, k8sapi.WriteOptions{})
		return err
	})
	t.Logf("created %d ConfigMaps and %d Deployments in %v", n, n, time.Since(start).Round(time.Second))

	o := startOp(t, p)
	if _, err := widgets(c).Create(ctxFor(t, time.Minute), ns, harness.NewWidget("mine", image, 1), k8sapi.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 90*time.Second, func() (bool, string) {
		w, err := widgets(c).Get(ctxFor(t, 10*time.Second), ns, "mine", k8sapi.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		_, derr := deployments(c).Get(ctxFor(t, 10*time.Second), ns, "mine", k8sapi.GetOptions{})
		return w.Status.Phase != "" && derr == nil, fmt.Sprintf("phase %q, deployment: %v", w.Status.Phase, derr)
	})
	o.waitReadyz(t, 200, 30*time.Second)

	// The caches hold the operator's own child, not the 5,000 others.
	if got := o.metric(t, "widget_operator_watch_events_total", `resource="deployments"`); got > 5 {
		t.Errorf("%v Deployment events reached the operator, want only its own child's", got)
	}
	rss, err := harness.PeakRSS(o.Cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	const bound = 40 << 20
	t.Logf("peak RSS with %d unrelated Deployments and ConfigMaps: %.1f MiB (bound %d MiB)", n, float64(rss)/(1<<20), bound>>20)
	if rss > bound {
		t.Errorf("peak RSS %.1f MiB, over %d MiB: unrelated objects were cached", float64(rss)/(1<<20), bound>>20)
	}

	// Every list and watch of children carried the operator's selector.
	events, err := p.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if e.User != harness.OperatorUser || (e.Verb != "list" && e.Verb != "watch") {
			continue
		}
		if e.Resource == "configmaps" {
			t.Errorf("the operator read ConfigMaps: %s", e.RequestURI)
		}
		if (e.Resource == "deployments" || e.Resource == "services") && !strings.Contains(e.RequestURI, "labelSelector=") {
			t.Errorf("unselected %s of %s: %s", e.Verb, e.Resource, e.RequestURI)
		}
	}
}
