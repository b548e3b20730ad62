package k8sapi_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// fullDeployment has what the reduced k8sapi.Deployment lacks: env,
// volumes and their mounts, resources, a strategy with int-or-string
// values, and more.
const fullDeployment = `{
  "apiVersion": "apps/v1", "kind": "Deployment",
  "metadata": {"name": "full", "labels": {"app": "full"}, "annotations": {"note": "kept"}},
  "spec": {
    "replicas": 1,
    "revisionHistoryLimit": 4,
    "minReadySeconds": 3,
    "selector": {"matchLabels": {"app": "full"}},
    "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 2, "maxUnavailable": "10%"}},
    "template": {
      "metadata": {"labels": {"app": "full"}},
      "spec": {
        "containers": [{
          "name": "app", "image": "registry.example.com/app:1",
          "env": [{"name": "MODE", "value": "fast"}],
          "resources": {"limits": {"memory": "64Mi"}, "requests": {"cpu": "50m"}},
          "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]
        }],
        "volumes": [{"name": "scratch", "emptyDir": {}}],
        "terminationGracePeriodSeconds": 5
      }
    }
  }
}`

// TestAPIServerUpdateKeepsUnknownFields reads a full Deployment through the
// reduced struct, changes its replicas and updates it: every field the
// struct lacks is still there when the object is read back whole.
func TestAPIServerUpdateKeepsUnknownFields(t *testing.T) {
	p := plane.Get(t)
	ns := p.TestNamespace(t)
	ctx := testContext(t)
	c := adminClient(t, p)
	raw := k8sapi.For[json.RawMessage](c, k8sapi.Deployments)
	obj := json.RawMessage(fullDeployment)
	if _, err := raw.Create(ctx, ns, &obj, k8sapi.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	before, err := raw.Get(ctx, ns, "full", k8sapi.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// Once from a Get, once from a List item (which keeps no raw JSON,
	// so Update reads the object first).
	deployments := k8sapi.For[k8sapi.Deployment](c, k8sapi.Deployments)
	d, err := deployments.Get(ctx, ns, "full", k8sapi.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	three := int32(3)
	d.Spec.Replicas = &three
	if _, err := deployments.Update(ctx, ns, "full", d, k8sapi.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	list, err := deployments.List(ctx, ns, k8sapi.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("list: %v, %v", list, err)
	}
	item := list.Items[0]
	item.Labels = map[string]string{"app": "full", "tier": "web"}
	if _, err := deployments.Update(ctx, ns, "full", &item, k8sapi.WriteOptions{}); err != nil {
		t.Fatal(err)
	}

	after, err := raw.Get(ctx, ns, "full", k8sapi.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var b, a map[string]any
	if err := json.Unmarshal(*before, &b); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(*after, &a); err != nil {
		t.Fatal(err)
	}
	bs, as := b["spec"].(map[string]any), a["spec"].(map[string]any)
	if as["replicas"] != 3.0 {
		t.Errorf("replicas = %v, want 3", as["replicas"])
	}
	labels := a["metadata"].(map[string]any)["labels"].(map[string]any)
	if labels["tier"] != "web" {
		t.Errorf("labels = %v, want tier=web added", labels)
	}
	// Everything in the spec but replicas is as it was: template (env,
	// resources, volumes, mounts), strategy, revisionHistoryLimit...
	delete(bs, "replicas")
	delete(as, "replicas")
	if !reflect.DeepEqual(as, bs) {
		t.Errorf("spec changed:\nbefore %v\nafter  %v", bs, as)
	}
	if a["metadata"].(map[string]any)["annotations"].(map[string]any)["note"] != "kept" {
		t.Errorf("annotations lost: %v", a["metadata"])
	}
	for _, want := range []string{"strategy", "revisionHistoryLimit", "minReadySeconds"} {
		if as[want] == nil {
			t.Errorf("spec.%s lost", want)
		}
	}
	tmpl := as["template"].(map[string]any)["spec"].(map[string]any)
	ctr := tmpl["containers"].([]any)[0].(map[string]any)
	if tmpl["volumes"] == nil || ctr["env"] == nil || ctr["resources"] == nil || ctr["volumeMounts"] == nil {
		t.Errorf("template lost fields: %v", tmpl)
	}
}
