package operator

import (
	"context"
	"strconv"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/reconcile"
	"github.com/zerodep-k8s/widget-operator/widget"
)

// clusterAPI is the reconciler's writes to the API server (it reads the
// watch caches themselves), and no other requests. Each write's
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
	op     *operator
	client *k8sapi.Client
}

func (a *clusterAPI) ApplyDeployment(ctx context.Context, d *widget.DeploymentApply) (*k8sapi.Deployment, error) {
	a.label(&d.ObjectMeta)
	return reconcile.ApplyChild(ctx, a.op.deployments, k8sapi.For[k8sapi.Deployment](a.client, k8sapi.Deployments),
		widget.FieldManager, d)
}

func (a *clusterAPI) ApplyService(ctx context.Context, s *widget.ServiceApply) (*k8sapi.Service, error) {
	a.label(&s.ObjectMeta)
	return reconcile.ApplyChild(ctx, a.op.services, k8sapi.For[k8sapi.Service](a.client, k8sapi.Services),
		widget.FieldManager, s)
}

// label puts on a child the bucket of its owner's uid, with split caches,
// for the child caches of its owner's shard to select it.
func (a *clusterAPI) label(m *k8sapi.ObjectMeta) {
	if ref := m.ControllerOf(); a.op.split && ref != nil {
		m.Labels[widget.LabelOwnerBucket] = strconv.Itoa(reconcile.Bucket(string(ref.UID)))
	}
}

func (a *clusterAPI) PatchWidgetStatus(ctx context.Context, namespace, name string, patch []byte) error {
	prev, _ := a.op.widgets.Get(namespace, name)
	w, err := k8sapi.For[widget.Widget](a.client, widget.Widgets).Patch(ctx, namespace, name, k8sapi.MergePatch, patch,
		k8sapi.PatchOptions{FieldManager: widget.FieldManager, Subresource: "status"})
	if err != nil {
		return err
	}
	a.op.widgets.Wrote(prev, w)
	return nil
}
