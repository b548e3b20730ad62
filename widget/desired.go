package widget

import (
	"maps"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/reconcile"
)

// FieldManager is the field manager name of every write the operator makes.
const FieldManager = "widget-operator"

// Names inside the objects the operator makes.
const (
	ContainerName       = "widget" // the Deployment's one container
	PortName            = "http"   // the container port, and the Service port that targets it
	ServicePort   int32 = 80       // the port the Service exposes
)

// Well-known label keys set on every object the operator makes.
const (
	LabelName      = "app.kubernetes.io/name"       // always "widget"
	LabelInstance  = "app.kubernetes.io/instance"   // the Widget's name
	LabelManagedBy = "app.kubernetes.io/managed-by" // always FieldManager
)

// DeploymentApply is the apply configuration of a Deployment: the body of a
// server-side apply request. It holds only the fields the operator owns;
// empty fields are left out, so that applying it claims no defaults.
type DeploymentApply struct {
	k8sapi.TypeMeta
	k8sapi.ObjectMeta `json:"metadata"`
	Spec              k8sapi.DeploymentSpec `json:"spec"`
}

// ServiceApply is the apply configuration of a Service, in the same way as
// DeploymentApply.
type ServiceApply struct {
	k8sapi.TypeMeta
	k8sapi.ObjectMeta `json:"metadata"`
	Spec              k8sapi.ServiceSpec `json:"spec"`
}

// Labels returns the labels of the objects made for the Widget named name.
func Labels(name string) map[string]string {
	return map[string]string{LabelName: "widget", LabelInstance: name, LabelManagedBy: FieldManager}
}

// SelectorLabels returns the labels that select the pods of the Widget
// named name: a subset of Labels.
func SelectorLabels(name string) map[string]string {
	return map[string]string{LabelName: "widget", LabelInstance: name}
}

// ControllerRef returns the controller owner reference to w that the
// objects made for it carry.
func ControllerRef(w *Widget) k8sapi.OwnerReference {
	return reconcile.NewControllerRef(&w.ObjectMeta, WidgetAPIVersion, WidgetKind)
}

// DesiredDeployment returns the Deployment that runs w, named after it.
// It expects a spec that passes Validate; missing replicas and port take
// their defaults. It is a pure function of w.
func DesiredDeployment(w *Widget) *DeploymentApply {
	replicas := w.Spec.ReplicasOrDefault()
	return &DeploymentApply{
		TypeMeta:   k8sapi.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: childMeta(w),
		Spec: k8sapi.DeploymentSpec{
			Replicas: &replicas,
			Selector: &k8sapi.LabelSelector{MatchLabels: SelectorLabels(w.Name)},
			Template: k8sapi.PodTemplateSpec{
				ObjectMeta: k8sapi.ObjectMeta{Labels: Labels(w.Name)},
				Spec: k8sapi.PodSpec{Containers: []k8sapi.Container{{
					Name:  ContainerName,
					Image: w.Spec.Image,
					Ports: []k8sapi.ContainerPort{{Name: PortName, ContainerPort: w.Spec.PortOrDefault(), Protocol: "TCP"}},
				}}},
			},
		},
	}
}

// DesiredService returns the Service in front of w's pods, named after it:
// port 80 to the container port named http. It is a pure function of w.
func DesiredService(w *Widget) *ServiceApply {
	return &ServiceApply{
		TypeMeta:   k8sapi.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: childMeta(w),
		Spec: k8sapi.ServiceSpec{
			Selector: SelectorLabels(w.Name),
			Ports: []k8sapi.ServicePort{{
				Name: PortName, Protocol: "TCP", Port: ServicePort,
				TargetPort: k8sapi.FromString(PortName),
			}},
		},
	}
}

func childMeta(w *Widget) k8sapi.ObjectMeta {
	return k8sapi.ObjectMeta{
		Name:            w.Name,
		Namespace:       w.Namespace,
		Labels:          Labels(w.Name),
		OwnerReferences: []k8sapi.OwnerReference{ControllerRef(w)},
	}
}

// DeploymentUpToDate reports whether the observed Deployment already holds
// every field of want, so that applying want would change nothing. Fields
// others added (labels, containers, ports, owners) are allowed.
func DeploymentUpToDate(have *k8sapi.Deployment, want *DeploymentApply) bool {
	if !metaHolds(&have.ObjectMeta, &want.ObjectMeta) {
		return false
	}
	hs, ws := &have.Spec, &want.Spec
	if !int32PtrEqual(hs.Replicas, ws.Replicas) || !selectorEqual(hs.Selector, ws.Selector) ||
		!labelsHold(hs.Template.Labels, ws.Template.Labels) {
		return false
	}
	for _, wc := range ws.Template.Spec.Containers {
		hc := findContainer(hs.Template.Spec.Containers, wc.Name)
		if hc == nil || hc.Image != wc.Image {
			return false
		}
		for _, wp := range wc.Ports {
			hp := findContainerPort(hc.Ports, wp.Name)
			if hp == nil || hp.ContainerPort != wp.ContainerPort || protocolOrTCP(hp.Protocol) != protocolOrTCP(wp.Protocol) {
				return false
			}
		}
	}
	return true
}

// ServiceUpToDate reports whether the observed Service already holds every
// field of want, in the same way as DeploymentUpToDate. The selector must
// be equal, as the API replaces it whole.
func ServiceUpToDate(have *k8sapi.Service, want *ServiceApply) bool {
	if !metaHolds(&have.ObjectMeta, &want.ObjectMeta) || !maps.Equal(have.Spec.Selector, want.Spec.Selector) {
		return false
	}
	for _, wp := range want.Spec.Ports {
		hp := findServicePort(have.Spec.Ports, wp.Name)
		if hp == nil || hp.Port != wp.Port || protocolOrTCP(hp.Protocol) != protocolOrTCP(wp.Protocol) ||
			hp.TargetPort != wp.TargetPort {
			return false
		}
	}
	return true
}

// metaHolds reports whether have carries want's labels and owner references.
func metaHolds(have, want *k8sapi.ObjectMeta) bool {
	if !labelsHold(have.Labels, want.Labels) {
		return false
	}
	for _, w := range want.OwnerReferences {
		found := false
		for _, h := range have.OwnerReferences {
			if h.UID == w.UID {
				found = h.APIVersion == w.APIVersion && h.Kind == w.Kind && h.Name == w.Name &&
					boolPtrEqual(h.Controller, w.Controller) && boolPtrEqual(h.BlockOwnerDeletion, w.BlockOwnerDeletion)
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func labelsHold(have, want map[string]string) bool {
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			return false
		}
	}
	return true
}

func selectorEqual(a, b *k8sapi.LabelSelector) bool {
	if a == nil || b == nil {
		return a == b
	}
	return maps.Equal(a.MatchLabels, b.MatchLabels)
}

func findContainer(cs []k8sapi.Container, name string) *k8sapi.Container {
	for i := range cs {
		if cs[i].Name == name {
			return &cs[i]
		}
	}
	return nil
}

func findContainerPort(ps []k8sapi.ContainerPort, name string) *k8sapi.ContainerPort {
	for i := range ps {
		if ps[i].Name == name {
			return &ps[i]
		}
	}
	return nil
}

func findServicePort(ps []k8sapi.ServicePort, name string) *k8sapi.ServicePort {
	for i := range ps {
		if ps[i].Name == name {
			return &ps[i]
		}
	}
	return nil
}

func protocolOrTCP(p string) string {
	if p == "" {
		return "TCP"
	}
	return p
}

func int32PtrEqual(a, b *int32) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func boolPtrEqual(a, b *bool) bool {
	return (a != nil && *a) == (b != nil && *b)
}
