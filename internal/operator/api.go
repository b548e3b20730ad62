package operator

import (
	"context"
	"encoding/json"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/reconcile"
	"github.com/zerodep-k8s/widget-operator/watch"
)

// clusterAPI is the reconciler's view of the cluster: reads from the watch
// caches, writes to the API server, and no other requests. Each write's
// answer goes to its cache (watch.Cache.Wrote), so that a reconcile right
// after a write reads it, not the state before, and does not write again.
//
// The child caches hold only objects with the operator's label, so a miss
// does not prove that no object of that name exists: a child missing from
// the cache is created with a POST, which the server refuses when the name
// is taken, and only then is the existing object read, to tell a foreign
// object (an ownership conflict) from our own one the cache has not seen
// yet. A child in the cache is changed by server-side apply.
type clusterAPI struct {
	op *operator
}

func (a *clusterAPI) GetWidget(_ context.Context, namespace, name string) (*reconcile.Widget, error) {
	w, _ := a.op.widgets.Get(namespace, name)
	return w, nil
}

func (a *clusterAPI) GetDeployment(_ context.Context, namespace, name string) (*k8sapi.Deployment, error) {
	d, _ := a.op.deployments.Get(namespace, name)
	return d, nil
}

func (a *clusterAPI) GetService(_ context.Context, namespace, name string) (*k8sapi.Service, error) {
	s, _ := a.op.services.Get(namespace, name)
	return s, nil
}

var applyOpts = k8sapi.PatchOptions{FieldManager: reconcile.FieldManager, Force: true}

func (a *clusterAPI) ApplyDeployment(ctx context.Context, d *reconcile.DeploymentApply) (*k8sapi.Deployment, error) {
	return write(ctx, a.op.deployments, k8sapi.For[k8sapi.Deployment](a.op.client, k8sapi.Deployments),
		"Deployment", d.Namespace, d.Name, d, d.OwnerReferences)
}

func (a *clusterAPI) ApplyService(ctx context.Context, s *reconcile.ServiceApply) (*k8sapi.Service, error) {
	return write(ctx, a.op.services, k8sapi.For[k8sapi.Service](a.op.client, k8sapi.Services),
		"Service", s.Namespace, s.Name, s, s.OwnerReferences)
}

// write creates the child when the cache does not have it, and applies it
// otherwise. want is the apply configuration; owners are its
// owner references (one: the Widget, as controller).
func write[T any, P interface {
	*T
	k8sapi.Object
}](ctx context.Context, cache *watch.Cache[T], client k8sapi.Typed[T], kind, namespace, name string, want any, owners []k8sapi.OwnerReference) (*T, error) {
	known, _ := cache.Get(namespace, name)
	if known == nil {
		obj, err := asObject[T](want)
		if err != nil {
			return nil, err
		}
		created, err := client.Create(ctx, namespace, obj, k8sapi.WriteOptions{FieldManager: reconcile.FieldManager})
		if err == nil {
			cache.Wrote(nil, created)
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
		// Ours, and not in the cache yet: apply over it. To the cache the
		// write is a create (it showed nothing), so known stays nil.
	}
	applied, err := client.Apply(ctx, namespace, name, want, applyOpts)
	if err != nil {
		return nil, err
	}
	cache.Wrote(known, applied)
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
	prev, _ := a.op.widgets.Get(namespace, name)
	w, err := k8sapi.For[reconcile.Widget](a.op.client, reconcile.Widgets).Patch(ctx, namespace, name, k8sapi.MergePatch, patch,
		k8sapi.PatchOptions{FieldManager: reconcile.FieldManager, Subresource: "status"})
	if err != nil {
		return err
	}
	a.op.widgets.Wrote(prev, w)
	return nil
}
