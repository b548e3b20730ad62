package operator

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/reconcile"
	"github.com/zerodep-k8s/widget-operator/watch"
)

// clusterAPI is the reconciler's view of the cluster: reads from the watch
// caches, writes to the API server, and no other requests.
//
// The child caches hold only objects with the operator's label, so a miss
// does not prove that no object of that name exists: a child missing from
// the cache is created with a POST, which the server refuses when the name
// is taken, and only then is the existing object read, to tell a foreign
// object (an ownership conflict) from our own one the cache has not seen
// yet. A child in the cache is changed by server-side apply.
//
// The caches lag the server: an object the operator has just written may
// come back from the cache as it was before. So that a reconcile right
// after a write does not write again, each write's result is kept in an
// overlay (see recent) until the informer delivers an event for that object
// or the cache shows a version other than the one the write replaced.
type clusterAPI struct {
	op *operator

	widgetWrites     recent[reconcile.Widget]
	deploymentWrites recent[k8sapi.Deployment]
	serviceWrites    recent[k8sapi.Service]
}

var _ reconcile.API = (*clusterAPI)(nil)

func (a *clusterAPI) GetWidget(_ context.Context, namespace, name string) (*reconcile.Widget, error) {
	return a.widgetWrites.get(a.op.widgets.Store(), namespace, name), nil
}

func (a *clusterAPI) GetDeployment(_ context.Context, namespace, name string) (*k8sapi.Deployment, error) {
	return a.deploymentWrites.get(a.op.deployments.Store(), namespace, name), nil
}

func (a *clusterAPI) GetService(_ context.Context, namespace, name string) (*k8sapi.Service, error) {
	return a.serviceWrites.get(a.op.services.Store(), namespace, name), nil
}

var applyOpts = k8sapi.PatchOptions{FieldManager: reconcile.FieldManager, Force: true}

func (a *clusterAPI) ApplyDeployment(ctx context.Context, d *reconcile.DeploymentApply) (*k8sapi.Deployment, error) {
	return write(ctx, &a.deploymentWrites, a.op.deployments.Store(), k8sapi.For[k8sapi.Deployment](a.op.client, k8sapi.Deployments),
		"Deployment", d.Namespace, d.Name, d, d.OwnerReferences)
}

func (a *clusterAPI) ApplyService(ctx context.Context, s *reconcile.ServiceApply) (*k8sapi.Service, error) {
	return write(ctx, &a.serviceWrites, a.op.services.Store(), k8sapi.For[k8sapi.Service](a.op.client, k8sapi.Services),
		"Service", s.Namespace, s.Name, s, s.OwnerReferences)
}

// write creates the child when neither the cache nor the overlay has it,
// and applies it otherwise. want is the apply configuration; owners are its
// owner references (one: the Widget, as controller).
func write[T any, P interface {
	*T
	k8sapi.Object
}](ctx context.Context, writes *recent[T], store *watch.Store[T], client k8sapi.Typed[T], kind, namespace, name string, want any, owners []k8sapi.OwnerReference) (*T, error) {
	known := writes.get(store, namespace, name)
	prevRV := ""
	if known != nil {
		prevRV = P(known).GetObjectMeta().ResourceVersion
	} else {
		obj, err := asObject[T](want)
		if err != nil {
			return nil, err
		}
		created, err := client.Create(ctx, namespace, obj, k8sapi.WriteOptions{FieldManager: reconcile.FieldManager})
		if err == nil {
			writes.put(namespace, name, "", created)
			return created, nil
		}
		if !k8sapi.IsAlreadyExists(err) {
			return nil, err
		}
		existing, err := client.Get(ctx, namespace, name, k8sapi.GetOptions{})
		if err != nil {
			return nil, err
		}
		meta := P(existing).GetObjectMeta()
		if len(owners) == 0 || !reconcile.IsControlledBy(meta, owners[0].UID) {
			return nil, &reconcile.NotControlledError{Kind: kind, Existing: *meta}
		}
		// Ours, and not in the cache yet: apply over it.
		prevRV = meta.ResourceVersion
	}
	applied, err := client.Apply(ctx, namespace, name, want, applyOpts)
	if err != nil {
		return nil, err
	}
	writes.put(namespace, name, prevRV, applied)
	return applied, nil
}

// asObject turns an apply configuration into the object to create.
func asObject[T any](want any) (*T, error) {
	b, err := json.Marshal(want)
	if err != nil {
		return nil, err
	}
	obj := new(T)
	if err := json.Unmarshal(b, obj); err != nil {
		return nil, err
	}
	return obj, nil
}

func (a *clusterAPI) PatchWidgetStatus(ctx context.Context, namespace, name string, patch []byte) error {
	prevRV := ""
	if w := a.widgetWrites.get(a.op.widgets.Store(), namespace, name); w != nil {
		prevRV = w.ResourceVersion
	}
	w, err := k8sapi.For[reconcile.Widget](a.op.client, reconcile.Widgets).Patch(ctx, namespace, name, k8sapi.MergePatch, patch,
		k8sapi.PatchOptions{FieldManager: reconcile.FieldManager, Subresource: "status"})
	if err != nil {
		return err
	}
	a.widgetWrites.put(namespace, name, prevRV, w)
	return nil
}

// recent is the overlay of the operator's own writes on a cache. An entry
// says: the write replaced version prevRV ("" when it created the object)
// with obj. While the cache still shows prevRV (or, for a create, nothing),
// reads return obj; once the cache shows anything else, the entry is
// dropped and the cache is the truth again. Entries live only between a
// write and the watch event that reports it. Safe for concurrent use.
type recent[T any] struct {
	mu sync.Mutex
	m  map[string]recentWrite[T] // by namespace/name
}

type recentWrite[T any] struct {
	prevRV string
	obj    *T
}

func (r *recent[T]) put(namespace, name, prevRV string, obj *T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]recentWrite[T]{}
	}
	r.m[k8sapi.Key(namespace, name)] = recentWrite[T]{prevRV: prevRV, obj: obj}
}

// forget drops the entry of namespace/name: the informer has delivered an
// event for it, so the cache has moved.
func (r *recent[T]) forget(namespace, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, k8sapi.Key(namespace, name))
}

// get reads namespace/name from store, or from the overlay while the store
// has not caught up with the operator's last write of it.
func (r *recent[T]) get(store *watch.Store[T], namespace, name string) *T {
	cached, _ := store.Get(namespace, name)
	key := k8sapi.Key(namespace, name)
	r.mu.Lock()
	defer r.mu.Unlock()
	w, ok := r.m[key]
	if !ok {
		return cached
	}
	if cached == nil && w.prevRV == "" || cached != nil && w.prevRV != "" && rvOf(cached) == w.prevRV {
		return w.obj
	}
	delete(r.m, key)
	return cached
}

// rvOf reads an object's resourceVersion.
func rvOf[T any](obj *T) string {
	if o, ok := any(obj).(k8sapi.Object); ok {
		return o.GetObjectMeta().ResourceVersion
	}
	return ""
}
