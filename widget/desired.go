package widget

import (
	"cmp"
	"maps"
	"slices"

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

// LabelOwnerBucket holds reconcile.Bucket of the owner Widget's uid, on
// the children that an operator whose replicas cache their shards alone
// makes.
const LabelOwnerBucket = "widget.example.com/owner-bucket"

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

// DesiredDeployment returns the Deployment that runs w, named after it.
// It expects a spec that passes Validate; missing replicas and port take
// their defaults. It is a pure function of w.
func DesiredDeployment(w *Widget) *DeploymentApply {
	return &DeploymentApply{
		TypeMeta:   k8sapi.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: childMeta(w),
		Spec: k8sapi.DeploymentSpec{
			Replicas: new(w.Spec.ReplicasOrDefault()),
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

// childMeta is the metadata of the objects made for w: its name, the
// Labels, and a controller owner reference to w.
func childMeta(w *Widget) k8sapi.ObjectMeta {
	return k8sapi.ObjectMeta{
		Name:            w.Name,
		Namespace:       w.Namespace,
		Labels:          Labels(w.Name),
		OwnerReferences: []k8sapi.OwnerReference{reconcile.NewControllerRef(Widgets, &w.ObjectMeta)},
	}
}

// DeploymentUpToDate reports whether the observed Deployment already holds
// every field of want, so that applying want would change nothing. Fields
// others added (labels, containers, ports, owners) are allowed.
func DeploymentUpToDate(have *k8sapi.Deployment, want *DeploymentApply) bool {
	hs, ws := &have.Spec, &want.Spec
	return metaHolds(&have.ObjectMeta, &want.ObjectMeta) && int32PtrEqual(hs.Replicas, ws.Replicas) &&
		selectorEqual(hs.Selector, ws.Selector) && labelsHold(hs.Template.Labels, ws.Template.Labels) &&
		holdsAll(hs.Template.Spec.Containers, ws.Template.Spec.Containers, containerHolds)
}

// containerHolds reports whether the observed container h is w: the same
// name and image, and w's ports among h's.
func containerHolds(h, w k8sapi.Container) bool {
	return h.Name == w.Name && h.Image == w.Image && holdsAll(h.Ports, w.Ports, func(hp, wp k8sapi.ContainerPort) bool {
		return hp.Name == wp.Name && hp.ContainerPort == wp.ContainerPort && sameProtocol(hp.Protocol, wp.Protocol)
	})
}

// ServiceUpToDate reports whether the observed Service already holds every
// field of want, in the same way as DeploymentUpToDate. The selector must
// be equal, as the API replaces it whole.
func ServiceUpToDate(have *k8sapi.Service, want *ServiceApply) bool {
	return metaHolds(&have.ObjectMeta, &want.ObjectMeta) && maps.Equal(have.Spec.Selector, want.Spec.Selector) &&
		holdsAll(have.Spec.Ports, want.Spec.Ports, func(hp, wp k8sapi.ServicePort) bool {
			return hp.Name == wp.Name && hp.Port == wp.Port && sameProtocol(hp.Protocol, wp.Protocol) &&
				hp.TargetPort == wp.TargetPort
		})
}

// holdsAll reports whether each element of want matches some element of
// have. The lists it is given are keyed by a name the API server keeps
// unique (containers, ports), so at most one element can match.
func holdsAll[T any](have, want []T, match func(h, w T) bool) bool {
	for _, w := range want {
		if !slices.ContainsFunc(have, func(h T) bool { return match(h, w) }) {
			return false
		}
	}
	return true
}

// metaHolds reports whether have carries want's labels and owner
// references, each field of them.
func metaHolds(have, want *k8sapi.ObjectMeta) bool {
	return labelsHold(have.Labels, want.Labels) && holdsAll(have.OwnerReferences, want.OwnerReferences, func(h, w k8sapi.OwnerReference) bool {
		return h.UID == w.UID && h.APIVersion == w.APIVersion && h.Kind == w.Kind && h.Name == w.Name &&
			boolPtrEqual(h.Controller, w.Controller) && boolPtrEqual(h.BlockOwnerDeletion, w.BlockOwnerDeletion)
	})
}

func labelsHold(have, want map[string]string) bool {
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			return false
		}
	}
	return true
}

// selectorEqual reports whether a and b are both nil or select alike.
func selectorEqual(a, b *k8sapi.LabelSelector) bool {
	return a == b || a != nil && b != nil && maps.Equal(a.MatchLabels, b.MatchLabels)
}

// sameProtocol compares two port protocols, the empty one meaning TCP.
func sameProtocol(a, b string) bool {
	return cmp.Or(a, "TCP") == cmp.Or(b, "TCP")
}

// int32PtrEqual reports whether a and b are both nil or point at equal
// values.
func int32PtrEqual(a, b *int32) bool {
	return a == b || a != nil && b != nil && *a == *b
}

func boolPtrEqual(a, b *bool) bool {
	return (a != nil && *a) == (b != nil && *b)
}
