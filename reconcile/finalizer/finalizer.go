// Package finalizer guards the clean-up work of a controller with a
// finalizer on its object, safe against concurrent edits of the object's
// finalizers.
package finalizer

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/reconcile"
)

// JSONPatcher sends a JSON patch (RFC 6902, Content-Type
// application/json-patch+json) to one object.
type JSONPatcher interface {
	JSONPatch(ctx context.Context, namespace, name string, patch []byte) error
}

// JSONPatcherFunc adapts a function to JSONPatcher.
type JSONPatcherFunc func(ctx context.Context, namespace, name string, patch []byte) error

// JSONPatch calls f.
func (f JSONPatcherFunc) JSONPatch(ctx context.Context, namespace, name string, patch []byte) error {
	return f(ctx, namespace, name, patch)
}

// ErrNoResourceVersion is wrapped by Finalizer.Run's error for an object
// with no resourceVersion: one that did not come from the API server.
var ErrNoResourceVersion = errors.New("object has no resourceVersion")

// Finalizer guards external clean-up work with a finalizer on an object.
// Its patches carry a JSON patch "test" of /metadata/resourceVersion, so
// one made from a stale copy fails (and is retried with a fresh copy)
// instead of undoing someone else's edit of the finalizers. A Finalizer
// holds no state of its own; it is safe for concurrent use when Patcher is.
type Finalizer struct {
	// Name is the finalizer, such as "example.com/cleanup". Required.
	Name string
	// Patcher sends the patches to the object's resource. Required.
	Patcher JSONPatcher
}

// HasFinalizer reports whether obj lists the finalizer name.
func HasFinalizer(obj k8sapi.Object, name string) bool {
	return slices.Contains(obj.GetObjectMeta().Finalizers, name)
}

// Run does the finalizer's part of a reconcile of obj, as read from a
// cache, and says whether the caller should go on with its normal work:
//
//   - obj not being deleted, finalizer present: proceed, no write;
//   - obj not being deleted, finalizer missing: add it, then proceed, so
//     the finalizer is on the server before any external work starts;
//   - obj being deleted, finalizer present: run cleanup, and when it
//     succeeds remove the finalizer; do not proceed;
//   - obj being deleted, finalizer missing: do not proceed.
//
// A failed cleanup or patch is returned as a *reconcile.Error (the caller
// retries with back-off) and proceed is false. Run never modifies obj; the cache
// sees the patched object through its watch.
func (f *Finalizer) Run(ctx context.Context, obj k8sapi.Object, cleanup func(context.Context) error) (proceed bool, err error) {
	m := obj.GetObjectMeta()
	fail := func(op string, err error) (bool, error) {
		return false, &reconcile.Error{Op: op, Namespace: m.Namespace, Name: m.Name, Err: err}
	}
	i := slices.Index(m.Finalizers, f.Name)
	deleting := m.DeletionTimestamp != nil
	switch {
	case !deleting && i >= 0:
		return true, nil
	case deleting && i < 0:
		return false, nil
	case !deleting:
		op := patchOp{Op: "add", Path: "/metadata/finalizers/-", Value: f.Name}
		if len(m.Finalizers) == 0 {
			op = patchOp{Op: "add", Path: "/metadata/finalizers", Value: []string{f.Name}}
		}
		if err := f.patch(ctx, m, op); err != nil {
			return fail("add finalizer", err)
		}
		return true, nil
	}
	if cleanup != nil {
		if err := cleanup(ctx); err != nil {
			return fail("finalize", err)
		}
	}
	path := "/metadata/finalizers/" + strconv.Itoa(i)
	err = f.patch(ctx, m,
		patchOp{Op: "test", Path: path, Value: f.Name},
		patchOp{Op: "remove", Path: path})
	if k8sapi.IsNotFound(err) {
		// Someone else removed the finalizer while cleanup ran, and the
		// object is gone: there is nothing left to do.
		return false, nil
	}
	if err != nil {
		return fail("remove finalizer", err)
	}
	return false, nil
}

// patchOp is one operation of a JSON patch.
type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

func (f *Finalizer) patch(ctx context.Context, m *k8sapi.ObjectMeta, ops ...patchOp) error {
	if m.ResourceVersion == "" {
		return ErrNoResourceVersion
	}
	all := append([]patchOp{{Op: "test", Path: "/metadata/resourceVersion", Value: m.ResourceVersion}}, ops...)
	body, err := json.Marshal(all)
	if err != nil {
		return err
	}
	return f.Patcher.JSONPatch(ctx, m.Namespace, m.Name, body)
}
