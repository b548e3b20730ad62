package reconcile

import (
	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// NotControlledError is returned by API.ApplyDeployment and
// API.ApplyService when an object of the child's name exists that the
// Widget does not control: nothing was written, and the Reconciler reports
// an OwnershipConflict. An API whose reads see every object of the child's
// name never needs it; one whose caches hold only the operator's own
// objects finds the conflict when its create is refused.
type NotControlledError struct {
	Kind     string            // "Deployment" or "Service"
	Existing k8sapi.ObjectMeta // the object found
}

func (e *NotControlledError) Error() string {
	return "reconcile: " + conflictMessage(e.Kind, &e.Existing)
}

// Error is a failed step of a reconcile: an operation on one object and
// its cause. Test the cause with errors.Is and errors.As; it is often a
// *k8sapi.APIError.
type Error struct {
	Op        string // what failed, such as "apply deployment" or "patch widget status"
	Namespace string // the object's namespace
	Name      string // the object's name
	Err       error  // the cause
}

// Error reads "reconcile: <op> <namespace>/<name>: <cause>".
func (e *Error) Error() string {
	return "reconcile: " + e.Op + " " + k8sapi.Key(e.Namespace, e.Name) + ": " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }
