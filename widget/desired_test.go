package widget

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

func TestDesiredObjects(t *testing.T) {
	tests := []struct {
		name           string
		spec           WidgetSpec
		wantDeployment string
		wantService    string
	}{
		{
			name:           "explicit",
			spec:           WidgetSpec{Image: "nginx:1.27", Replicas: ptr(int32(3)), Port: ptr(int32(9000))},
			wantDeployment: `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"shop","labels":{"app.kubernetes.io/instance":"web","app.kubernetes.io/managed-by":"widget-operator","app.kubernetes.io/name":"widget"},"ownerReferences":[{"apiVersion":"example.com/v1","kind":"Widget","name":"web","uid":"uid-web","controller":true,"blockOwnerDeletion":true}]},"spec":{"replicas":3,"selector":{"matchLabels":{"app.kubernetes.io/instance":"web","app.kubernetes.io/name":"widget"}},"template":{"metadata":{"labels":{"app.kubernetes.io/instance":"web","app.kubernetes.io/managed-by":"widget-operator","app.kubernetes.io/name":"widget"}},"spec":{"containers":[{"name":"widget","image":"nginx:1.27","ports":[{"name":"http","containerPort":9000,"protocol":"TCP"}]}]}}}}`,
			wantService:    `{"apiVersion":"v1","kind":"Service","metadata":{"name":"web","namespace":"shop","labels":{"app.kubernetes.io/instance":"web","app.kubernetes.io/managed-by":"widget-operator","app.kubernetes.io/name":"widget"},"ownerReferences":[{"apiVersion":"example.com/v1","kind":"Widget","name":"web","uid":"uid-web","controller":true,"blockOwnerDeletion":true}]},"spec":{"selector":{"app.kubernetes.io/instance":"web","app.kubernetes.io/name":"widget"},"ports":[{"name":"http","protocol":"TCP","port":80,"targetPort":"http"}]}}`,
		},
		{
			name:           "defaults",
			spec:           WidgetSpec{Image: "busybox"},
			wantDeployment: `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"shop","labels":{"app.kubernetes.io/instance":"web","app.kubernetes.io/managed-by":"widget-operator","app.kubernetes.io/name":"widget"},"ownerReferences":[{"apiVersion":"example.com/v1","kind":"Widget","name":"web","uid":"uid-web","controller":true,"blockOwnerDeletion":true}]},"spec":{"replicas":1,"selector":{"matchLabels":{"app.kubernetes.io/instance":"web","app.kubernetes.io/name":"widget"}},"template":{"metadata":{"labels":{"app.kubernetes.io/instance":"web","app.kubernetes.io/managed-by":"widget-operator","app.kubernetes.io/name":"widget"}},"spec":{"containers":[{"name":"widget","image":"busybox","ports":[{"name":"http","containerPort":8080,"protocol":"TCP"}]}]}}}}`,
			wantService:    `{"apiVersion":"v1","kind":"Service","metadata":{"name":"web","namespace":"shop","labels":{"app.kubernetes.io/instance":"web","app.kubernetes.io/managed-by":"widget-operator","app.kubernetes.io/name":"widget"},"ownerReferences":[{"apiVersion":"example.com/v1","kind":"Widget","name":"web","uid":"uid-web","controller":true,"blockOwnerDeletion":true}]},"spec":{"selector":{"app.kubernetes.io/instance":"web","app.kubernetes.io/name":"widget"},"ports":[{"name":"http","protocol":"TCP","port":80,"targetPort":"http"}]}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &Widget{Spec: tt.spec}
			w.Namespace, w.Name, w.UID = "shop", "web", "uid-web"
			w.ResourceVersion, w.Generation, w.Labels = "5", 4, map[string]string{"not": "copied"}
			for _, c := range []struct {
				obj  any
				want string
			}{{DesiredDeployment(w), tt.wantDeployment}, {DesiredService(w), tt.wantService}} {
				b, err := json.Marshal(c.obj)
				if err != nil {
					t.Fatal(err)
				}
				if string(b) != c.want {
					t.Errorf("got  %s\nwant %s", b, c.want)
				}
			}
		})
	}
}

func TestUpToDate(t *testing.T) {
	w := widget()
	deploymentTests := []struct {
		name   string
		change func(d *k8sapi.Deployment)
		want   bool
	}{
		{"as applied", func(d *k8sapi.Deployment) {}, true},
		{"server defaulted protocol away", func(d *k8sapi.Deployment) { d.Spec.Template.Spec.Containers[0].Ports[0].Protocol = "" }, true},
		{"extra label", func(d *k8sapi.Deployment) { d.Labels["x"] = "y" }, true},
		{"missing label", func(d *k8sapi.Deployment) { delete(d.Labels, LabelManagedBy) }, false},
		{"changed label", func(d *k8sapi.Deployment) { d.Labels[LabelInstance] = "other" }, false},
		{"missing owner", func(d *k8sapi.Deployment) { d.OwnerReferences = nil }, false},
		{"owner lost blockOwnerDeletion", func(d *k8sapi.Deployment) { d.OwnerReferences[0].BlockOwnerDeletion = nil }, false},
		{"replicas", func(d *k8sapi.Deployment) { d.Spec.Replicas = ptr(int32(1)) }, false},
		{"replicas missing", func(d *k8sapi.Deployment) { d.Spec.Replicas = nil }, false},
		{"selector", func(d *k8sapi.Deployment) { d.Spec.Selector.MatchLabels["x"] = "y" }, false},
		{"template label", func(d *k8sapi.Deployment) { delete(d.Spec.Template.Labels, LabelName) }, false},
		{"image", func(d *k8sapi.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "other" }, false},
		{"container renamed", func(d *k8sapi.Deployment) { d.Spec.Template.Spec.Containers[0].Name = "main" }, false},
		{"port number", func(d *k8sapi.Deployment) { d.Spec.Template.Spec.Containers[0].Ports[0].ContainerPort = 80 }, false},
		{"port protocol", func(d *k8sapi.Deployment) { d.Spec.Template.Spec.Containers[0].Ports[0].Protocol = "UDP" }, false},
		{"port missing", func(d *k8sapi.Deployment) { d.Spec.Template.Spec.Containers[0].Ports = nil }, false},
		// What the cache trims away must not change the answer.
		{"image past the longest a Widget may have", func(d *k8sapi.Deployment) {
			d.Spec.Template.Spec.Containers[0].Image += strings.Repeat("x", 4*MaxImageLength)
		}, false},
		{"another controller first", func(d *k8sapi.Deployment) {
			d.OwnerReferences = append([]k8sapi.OwnerReference{{Kind: "Widget", Name: "x", UID: "x", Controller: ptr(false)}}, d.OwnerReferences...)
		}, true},
		{"many selector labels", func(d *k8sapi.Deployment) { maps.Copy(d.Spec.Selector.MatchLabels, manyLabels(50)) }, false},
		{"many template labels", func(d *k8sapi.Deployment) { maps.Copy(d.Spec.Template.Labels, manyLabels(50)) }, true},
		{"containers and ports around ours", func(d *k8sapi.Deployment) {
			c := &d.Spec.Template.Spec.Containers[0]
			c.Ports = append([]k8sapi.ContainerPort{{Name: "metrics", ContainerPort: 9090}}, c.Ports...)
			d.Spec.Template.Spec.Containers = append([]k8sapi.Container{{Name: "sidecar", Image: "s"}}, *c, k8sapi.Container{Name: "z"})
		}, true},
	}
	for _, tt := range deploymentTests {
		t.Run("deployment/"+tt.name, func(t *testing.T) {
			d := ownedDeployment(t, w, 3)
			tt.change(d)
			if got := DeploymentUpToDate(d, DesiredDeployment(w)); got != tt.want {
				t.Errorf("DeploymentUpToDate = %v, want %v", got, tt.want)
			}
			TrimDeployment(d)
			if got := DeploymentUpToDate(d, DesiredDeployment(w)); got != tt.want {
				t.Errorf("DeploymentUpToDate of the trimmed Deployment = %v, want %v", got, tt.want)
			}
		})
	}
	serviceTests := []struct {
		name   string
		change func(s *k8sapi.Service)
		want   bool
	}{
		{"as applied", func(s *k8sapi.Service) {}, true},
		{"extra port", func(s *k8sapi.Service) {
			s.Spec.Ports = append(s.Spec.Ports, k8sapi.ServicePort{Name: "m", Port: 9, TargetPort: k8sapi.FromInt(9)})
		}, true},
		{"selector extra key", func(s *k8sapi.Service) { s.Spec.Selector["x"] = "y" }, false},
		{"target port number", func(s *k8sapi.Service) { s.Spec.Ports[0].TargetPort = k8sapi.FromInt(8080) }, false},
		{"port", func(s *k8sapi.Service) { s.Spec.Ports[0].Port = 8080 }, false},
		{"owner of another uid", func(s *k8sapi.Service) { s.OwnerReferences[0].UID = "other" }, false},
		{"many selector labels", func(s *k8sapi.Service) { maps.Copy(s.Spec.Selector, manyLabels(50)) }, false},
		{"our port after others", func(s *k8sapi.Service) {
			s.Spec.Ports = append([]k8sapi.ServicePort{{Name: "m", Port: 9}}, s.Spec.Ports...)
		}, true},
	}
	for _, tt := range serviceTests {
		t.Run("service/"+tt.name, func(t *testing.T) {
			s := ownedService(t, w)
			tt.change(s)
			if got := ServiceUpToDate(s, DesiredService(w)); got != tt.want {
				t.Errorf("ServiceUpToDate = %v, want %v", got, tt.want)
			}
			TrimService(s)
			if got := ServiceUpToDate(s, DesiredService(w)); got != tt.want {
				t.Errorf("ServiceUpToDate of the trimmed Service = %v, want %v", got, tt.want)
			}
		})
	}
}
