package reconcile

import (
	"fmt"
	"slices"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// NewControllerRef returns an owner reference to the object of resource
// owner whose metadata is meta, marked controller: true and
// blockOwnerDeletion: true: its apiVersion and kind are owner's. Give it
// to SetControllerReference or put it in a desired object's metadata.
func NewControllerRef(owner k8sapi.Resource, meta *k8sapi.ObjectMeta) k8sapi.OwnerReference {
	return k8sapi.OwnerReference{
		APIVersion:         owner.GroupVersion(),
		Kind:               owner.Kind,
		Name:               meta.Name,
		UID:                meta.UID,
		Controller:         new(true),
		BlockOwnerDeletion: new(true),
	}
}

// ControllerOf returns the controller owner reference of obj when its
// controller is an object of resource owner (of owner's apiVersion and
// kind), and nil otherwise.
func ControllerOf(obj *k8sapi.ObjectMeta, owner k8sapi.Resource) *k8sapi.OwnerReference {
	if c := obj.ControllerOf(); c != nil && c.Kind == owner.Kind && c.APIVersion == owner.GroupVersion() {
		return c
	}
	return nil
}

// checkOwner returns an error naming the field of owner, the owner
// resource of the cache name, that owner references need and it lacks, or
// nil.
func checkOwner(name string, owner k8sapi.Resource) error {
	for _, f := range [][2]string{{"Kind", owner.Kind}, {"Version", owner.Version}, {"Resource", owner.Resource}} {
		if f[1] == "" {
			return fmt.Errorf("reconcile: WatchOwned %s: the owner resource %+v has no %s, so no owner reference would match it", name, owner, f[0])
		}
	}
	return nil
}

// SetControllerReference makes ref the controller owner reference of obj.
// A reference with the same UID is replaced; other references are kept.
// ref is marked controller: true. It fails with an *AlreadyOwnedError when
// another owner, by UID, is already obj's controller; obj is then
// unchanged.
//
// SetControllerReference modifies obj (with a new OwnerReferences slice):
// use it on objects you are building, never on one from a cache.
func SetControllerReference(obj *k8sapi.ObjectMeta, ref k8sapi.OwnerReference) error {
	if c := obj.ControllerOf(); c != nil && c.UID != ref.UID {
		return &AlreadyOwnedError{Namespace: obj.Namespace, Name: obj.Name, Owner: *c}
	}
	ref.Controller = new(true)
	refs := slices.DeleteFunc(slices.Clone(obj.OwnerReferences), func(r k8sapi.OwnerReference) bool { return r.UID == ref.UID })
	obj.OwnerReferences = append(refs, ref)
	return nil
}

// IsControlledBy reports whether obj's controller owner reference has the
// given owner UID. It is false when obj has no controller.
func IsControlledBy(obj *k8sapi.ObjectMeta, ownerUID string) bool {
	c := obj.ControllerOf()
	return c != nil && ownerUID != "" && c.UID == ownerUID
}

// AlreadyOwnedError says an object already has another controller.
type AlreadyOwnedError struct {
	Namespace, Name string                // the object
	Owner           k8sapi.OwnerReference // its current controller
}

// Error says which object and which controller.
func (e *AlreadyOwnedError) Error() string {
	return fmt.Sprintf("reconcile: %s is already controlled by %s %s (uid %s)",
		k8sapi.Key(e.Namespace, e.Name), e.Owner.Kind, e.Owner.Name, e.Owner.UID)
}
