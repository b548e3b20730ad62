package reconcile

import (
	"fmt"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// NotControlledError is returned by [ApplyChild] when an object of the
// child's name exists that the child's owner does not control: nothing was
// written. ApplyChild finds one its cache holds before writing, and one
// the cache does not select when its create is refused.
type NotControlledError struct {
	Kind     string            // the child's kind, such as "Deployment"
	Existing k8sapi.ObjectMeta // the object found
}

func (e *NotControlledError) Error() string {
	return "reconcile: " + e.Reason()
}

// Reason says why the object found is not the child: "<Kind>
// <namespace/name> exists and is controlled by <kind> <name> (uid <uid>)",
// or "... exists and has no controller".
func (e *NotControlledError) Reason() string {
	msg := fmt.Sprintf("%s %s exists and ", e.Kind, k8sapi.Key(e.Existing.Namespace, e.Existing.Name))
	if c := e.Existing.ControllerOf(); c != nil {
		return msg + fmt.Sprintf("is controlled by %s %s (uid %s)", c.Kind, c.Name, c.UID)
	}
	return msg + "has no controller"
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
