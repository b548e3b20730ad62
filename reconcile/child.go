package reconcile

import (
	"context"
	"encoding/json"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// CacheView reads the objects of a cache and records the writes made to
// them, so that the next read sees them: a *watch.Cache, or a
// [*ShardedCache].
type CacheView[T any] interface {
	Get(namespace, name string) (*T, bool)
	Wrote(prev, obj *T)
}

// ApplyChild writes want, a child object of client's resource and its
// controller owner reference, with fieldManager:
// when cache does not hold the child, it creates it; otherwise it
// server-side applies want (forced). The object the server returned goes
// to cache.Wrote, so that the next read sees it, and is returned.
//
// It writes nothing over an object that want's controller owner (by UID)
// does not control, and returns a [*NotControlledError] instead: one the
// cache holds is checked before the apply. A cache filtered by a label
// selector may miss an object of the child's name that it does not
// select: when the create is refused because the name is taken, the
// existing object is read and checked alike, and applied over if it is
// the owner's.
//
// want is marshalled as the apply body, and, for a create, into a T.
func ApplyChild[T any, P Object[T]](ctx context.Context, cache CacheView[T], client k8sapi.Typed[T], fieldManager string, want k8sapi.Object) (*T, error) {
	meta := want.GetObjectMeta()
	known, _ := cache.Get(meta.Namespace, meta.Name)
	existing := known
	if known == nil {
		obj, err := asObject[T](want)
		if err != nil {
			return nil, err
		}
		created, err := client.Create(ctx, meta.Namespace, obj, k8sapi.WriteOptions{FieldManager: fieldManager})
		if err == nil {
			cache.Wrote(nil, created)
			return created, nil
		}
		if !k8sapi.IsAlreadyExists(err) {
			return nil, err
		}
		// To the cache, an apply over it is a create (it showed
		// nothing), so known stays nil.
		if existing, err = client.Get(ctx, meta.Namespace, meta.Name, k8sapi.GetOptions{}); err != nil {
			return nil, err
		}
	}
	em := P(existing).GetObjectMeta()
	if owner := meta.ControllerOf(); owner == nil || !IsControlledBy(em, owner.UID) {
		return nil, &NotControlledError{Kind: client.Resource.Kind, Existing: *em}
	}
	applied, err := client.Apply(ctx, meta.Namespace, meta.Name, want, k8sapi.PatchOptions{FieldManager: fieldManager, Force: true})
	if err != nil {
		return nil, err
	}
	cache.Wrote(known, applied)
	return applied, nil
}

// asObject turns an apply configuration into the object to create.
func asObject[T any](want any) (*T, error) {
	obj := new(T)
	b, err := json.Marshal(want)
	if err == nil {
		err = json.Unmarshal(b, obj)
	}
	return obj, err
}
