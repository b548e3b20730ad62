package operator

import (
	"context"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/reconcile"
)

// clusterAPI is the reconciler's view of the cluster: reads from the watch
// caches, writes to the API server.
type clusterAPI struct{ op *operator }

var _ reconcile.API = (*clusterAPI)(nil)

func (a *clusterAPI) GetWidget(_ context.Context, namespace, name string) (*reconcile.Widget, error) {
	w, _ := a.op.widgets.Store().Get(namespace, name)
	return w, nil
}

// GetDeployment reads the cache of labelled Deployments. On a miss it asks
// the server, because a Deployment of that name that we did not label (owned
// by someone else) is not in the cache, and must not be taken over.
func (a *clusterAPI) GetDeployment(ctx context.Context, namespace, name string) (*k8sapi.Deployment, error) {
	if d, ok := a.op.deployments.Store().Get(namespace, name); ok {
		return d, nil
	}
	d, err := k8sapi.For[k8sapi.Deployment](a.op.client, k8sapi.Deployments).Get(ctx, namespace, name, k8sapi.GetOptions{})
	if k8sapi.IsNotFound(err) {
		return nil, nil
	}
	return d, err
}

// GetService is GetDeployment for the Service.
func (a *clusterAPI) GetService(ctx context.Context, namespace, name string) (*k8sapi.Service, error) {
	if s, ok := a.op.services.Store().Get(namespace, name); ok {
		return s, nil
	}
	s, err := k8sapi.For[k8sapi.Service](a.op.client, k8sapi.Services).Get(ctx, namespace, name, k8sapi.GetOptions{})
	if k8sapi.IsNotFound(err) {
		return nil, nil
	}
	return s, err
}

var applyOpts = k8sapi.PatchOptions{FieldManager: reconcile.FieldManager, Force: true}

func (a *clusterAPI) ApplyDeployment(ctx context.Context, d *reconcile.DeploymentApply) (*k8sapi.Deployment, error) {
	return k8sapi.For[k8sapi.Deployment](a.op.client, k8sapi.Deployments).Apply(ctx, d.Namespace, d.Name, d, applyOpts)
}

func (a *clusterAPI) ApplyService(ctx context.Context, s *reconcile.ServiceApply) (*k8sapi.Service, error) {
	return k8sapi.For[k8sapi.Service](a.op.client, k8sapi.Services).Apply(ctx, s.Namespace, s.Name, s, applyOpts)
}

func (a *clusterAPI) PatchWidgetStatus(ctx context.Context, namespace, name string, patch []byte) error {
	_, err := k8sapi.For[reconcile.Widget](a.op.client, reconcile.Widgets).Patch(ctx, namespace, name, k8sapi.MergePatch, patch,
		k8sapi.PatchOptions{Subresource: "status"})
	return err
}
