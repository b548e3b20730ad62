package widget

import (
	"maps"
	"slices"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/reconcile"
	"github.com/zerodep-k8s/widget-operator/watch"
)

// The caches of the operator keep only what the Reconciler reads, so that
// whoever may create an object with the operator's label, or write to a
// Widget's children, cannot make them grow: each function below is the
// watch.Config.Transform of one cache, and what it keeps of an object is
// bounded (a few KiB) whatever the object holds. DeploymentUpToDate,
// ServiceUpToDate and StatusFor decide on a trimmed object as on the whole
// one.

// trimMeta keeps of m what watch.TrimMeta keeps with the labels the
// Reconciler compares, those of Labels, but the creationTimestamp, which
// nothing reads, and reports whether m's controller is something other
// than a Widget. Of such a child nothing but its metadata is ever read:
// the Reconciler only learns that it is in the way, so it costs a small,
// fixed amount. The labels of a Widget's child, Labels(name), and its
// Widget owner reference share their strings with the operator's
// constants and with name, the object's (or its Deployment's) name, so
// that the cache holds them once.
func trimMeta(m *k8sapi.ObjectMeta, name string) (foreign bool) {
	if want := Labels(name); labelsHold(m.Labels, want) {
		watch.TrimMeta(m)
		m.Labels = want // what TrimMeta would keep
	} else {
		watch.TrimMeta(m, LabelName, LabelInstance, LabelManagedBy)
	}
	m.CreationTimestamp = nil
	c := reconcile.ControllerOf(m, Widgets)
	if c != nil && c.Name == name {
		c.APIVersion, c.Kind, c.Name = WidgetAPIVersion, WidgetKind, name
	}
	return c == nil
}

// TrimWidget keeps of w the metadata that watch.TrimMeta keeps without
// labels, but the creationTimestamp, and neither apiVersion nor kind,
// which nothing reads; its spec and its status.
func TrimWidget(w *Widget) {
	watch.TrimMeta(&w.ObjectMeta)
	w.TypeMeta, w.CreationTimestamp = k8sapi.TypeMeta{}, nil
}

// TrimDeployment keeps of d the metadata that trimMeta keeps and, when a
// Widget is its controller, its replicas; at most one more selector label
// than a Widget's selector has; the template's Widget labels, which share
// the map of d's when they are equal; the container named ContainerName
// with its image, cut past the longest a Widget may ask for, and its port
// named PortName; and the status with the type and status of its
// Available and Progressing conditions, and the reason and message of a
// Progressing one that is False: what StatusFor reads.
func TrimDeployment(d *k8sapi.Deployment) {
	if trimMeta(&d.ObjectMeta, d.Name) {
		*d = k8sapi.Deployment{ObjectMeta: d.ObjectMeta}
		return
	}
	s := &d.Spec
	if s.Selector != nil {
		s.Selector = &k8sapi.LabelSelector{MatchLabels: firstEntries(s.Selector.MatchLabels, d.Name)}
	}
	trimMeta(&s.Template.ObjectMeta, d.Name)
	if maps.Equal(s.Template.Labels, d.Labels) {
		s.Template.Labels = d.Labels // one map for both, as a Widget's Deployment has
	}
	s.Template.Spec.Containers = named(s.Template.Spec.Containers, ContainerName, func(c k8sapi.Container) string { return c.Name })
	for i := range s.Template.Spec.Containers {
		c := &s.Template.Spec.Containers[i]
		c.Name, c.Image = ContainerName, watch.Clip(c.Image, 4*MaxImageLength+1) // UTF-8 takes up to 4 bytes a character
		c.Ports = named(c.Ports, PortName, func(p k8sapi.ContainerPort) string { return p.Name })
	}
	var conds []k8sapi.Condition
	for _, t := range []string{"Available", "Progressing"} {
		if c, ok := reconcile.FindCondition(d.Status.Conditions, t); ok {
			kept := k8sapi.Condition{Type: t, Status: c.Status}
			if t == "Progressing" && c.Status == "False" {
				kept.Reason, kept.Message = watch.Clip(c.Reason, watch.MaxKeptString), reconcile.TrimMessage(c.Message)
			}
			conds = append(conds, kept)
		}
	}
	d.Status.Conditions = conds
}

// TrimService keeps of s the metadata that trimMeta keeps and, when a
// Widget is its controller, at most one more selector label than a
// Widget's selector has, and the port named PortName.
func TrimService(s *k8sapi.Service) {
	if trimMeta(&s.ObjectMeta, s.Name) {
		*s = k8sapi.Service{ObjectMeta: s.ObjectMeta}
		return
	}
	s.Spec = k8sapi.ServiceSpec{Selector: firstEntries(s.Spec.Selector, s.Name),
		Ports: named(s.Spec.Ports, PortName, func(p k8sapi.ServicePort) string { return p.Name })}
}

// firstEntries returns m, or a new map of some len(SelectorLabels)+1 of its
// entries when it has more: a map compared whole with a Widget's selector
// is unequal to it either way. A map equal to SelectorLabels(name) gives
// way to that one, whose strings are the operator's constants and name.
func firstEntries(m map[string]string, name string) map[string]string {
	if want := SelectorLabels(name); maps.Equal(m, want) {
		return want
	}
	n := len(SelectorLabels("")) + 1
	if len(m) <= n {
		return m
	}
	out := make(map[string]string, n)
	for k, v := range m {
		if len(out) == n {
			break
		}
		out[k] = v
	}
	return out
}

// named returns a new slice holding the first element of list whose name
// is want, or nil when there is none. The API server keeps these names
// unique.
func named[T any](list []T, want string, name func(T) string) []T {
	if i := slices.IndexFunc(list, func(e T) bool { return name(e) == want }); i >= 0 {
		return []T{list[i]}
	}
	return nil
}
