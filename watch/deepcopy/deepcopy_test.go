package deepcopy

import (
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

func TestClone(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	replicas := int32(3)
	d := &k8sapi.Deployment{
		ObjectMeta: k8sapi.ObjectMeta{Name: "d", Labels: map[string]string{"a": "1"}, CreationTimestamp: &now,
			OwnerReferences: []k8sapi.OwnerReference{{Name: "w", UID: "u"}}},
		Spec: k8sapi.DeploymentSpec{Replicas: &replicas, Template: k8sapi.PodTemplateSpec{
			Spec: k8sapi.PodSpec{Containers: []k8sapi.Container{{Name: "c", Ports: []k8sapi.ContainerPort{{ContainerPort: 80}}}}}}},
	}
	c := Clone(d)
	c.Labels["a"] = "2"
	*c.Spec.Replicas = 5
	c.OwnerReferences[0].Name = "x"
	c.Spec.Template.Spec.Containers[0].Ports[0].ContainerPort = 81
	*c.CreationTimestamp = now.Add(time.Hour)
	if d.Labels["a"] != "1" || *d.Spec.Replicas != 3 || d.OwnerReferences[0].Name != "w" ||
		d.Spec.Template.Spec.Containers[0].Ports[0].ContainerPort != 80 || !d.CreationTimestamp.Equal(now) {
		t.Fatalf("changing the clone changed the original: %+v", d)
	}
	if Clone[k8sapi.Deployment](nil) != nil {
		t.Error("Clone(nil) != nil")
	}
	svc := &k8sapi.Service{Spec: k8sapi.ServiceSpec{Ports: []k8sapi.ServicePort{{TargetPort: k8sapi.FromInt(8080)}}}}
	sc := Clone(svc)
	sc.Spec.Ports[0].TargetPort = k8sapi.FromInt(9080)
	if svc.Spec.Ports[0].TargetPort != k8sapi.FromInt(8080) {
		t.Error("Ports shared between clone and original")
	}
}
