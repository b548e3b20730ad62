package watch

import (
	"strings"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// MaxKeptString is the length, in bytes, to which [TrimMeta] cuts the
// fields of an owner reference: longer than any valid name, kind,
// apiVersion or UID.
const MaxKeptString = 512

// TrimMeta reduces m in place to what a controller reads of an object it
// caches, for a [Config.Transform]: its name, namespace, UID,
// resourceVersion, generation and timestamps; the labels whose keys are
// given; and its controller owner reference, each of its strings cut to
// MaxKeptString bytes by [Clip]. Annotations, finalizers, other labels
// and other owner references go. What it keeps is bounded whatever the
// object holds, so that whoever can label an object cannot make the
// cache grow with it. A controller that reads finalizers (package
// reconcile/finalizer) or annotations must keep them itself.
func TrimMeta(m *k8sapi.ObjectMeta, labels ...string) {
	var kept map[string]string
	for _, k := range labels {
		if v, ok := m.Labels[k]; ok {
			if kept == nil {
				kept = make(map[string]string, len(labels))
			}
			kept[k] = v
		}
	}
	var refs []k8sapi.OwnerReference
	if c := m.ControllerOf(); c != nil {
		r := *c
		for _, f := range []*string{&r.APIVersion, &r.Kind, &r.Name, &r.UID} {
			*f = Clip(*f, MaxKeptString)
		}
		refs = []k8sapi.OwnerReference{r}
	}
	*m = k8sapi.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
		Generation: m.Generation, CreationTimestamp: m.CreationTimestamp, DeletionTimestamp: m.DeletionTimestamp,
		Labels: kept, OwnerReferences: refs}
}

// Clip returns s, or a copy of its first n bytes when it is longer: a
// copy, so that the long string can be freed. A value cut past the
// longest valid one still differs from every valid one.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.Clone(s[:n])
}
