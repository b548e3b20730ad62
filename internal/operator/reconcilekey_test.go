package operator

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/zerodep-k8s/widget-operator/internal/metrics"
	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/queue"
	"github.com/zerodep-k8s/widget-operator/reconcile"
	"github.com/zerodep-k8s/widget-operator/watch"
)

// refusingAPI is a fake reconcile.API holding one Widget, default/web,
// and no children, whose Deployment writes fail with err.
type refusingAPI struct{ err error }

func (a refusingAPI) GetWidget(context.Context, string, string) (*reconcile.Widget, error) {
	return &reconcile.Widget{
		ObjectMeta: k8sapi.ObjectMeta{Namespace: "default", Name: "web", UID: "uid-web", Generation: 1},
		Spec:       reconcile.WidgetSpec{Image: "nginx"},
	}, nil
}
func (refusingAPI) GetDeployment(context.Context, string, string) (*k8sapi.Deployment, error) {
	return nil, nil
}
func (refusingAPI) GetService(context.Context, string, string) (*k8sapi.Service, error) {
	return nil, nil
}
func (a refusingAPI) ApplyDeployment(context.Context, *reconcile.DeploymentApply) (*k8sapi.Deployment, error) {
	return nil, a.err
}
func (refusingAPI) ApplyService(context.Context, *reconcile.ServiceApply) (*k8sapi.Service, error) {
	return nil, errors.New("not reached")
}
func (refusingAPI) PatchWidgetStatus(context.Context, string, string, []byte) error { return nil }

// reconcileKey turns each class of failure into what the queue should do,
// and counts the terminal ones.
func TestReconcileKeyByClass(t *testing.T) {
	status := func(code int, msg string, causes ...k8sapi.StatusCause) error {
		e := &k8sapi.APIError{Op: "create", Resource: "deployments", Code: code, Status: k8sapi.Status{Message: msg}}
		if len(causes) > 0 {
			e.Status.Details = &k8sapi.StatusDetails{Causes: causes}
		}
		return e
	}
	for _, tt := range []struct {
		name         string
		err          error
		wantErr      bool // retried with the queue's backoff
		wantAfter    bool // retried after a wait
		wantTerminal float64
	}{
		{"rejected", status(422, "invalid"), false, false, 1},
		{"quota", status(403, `deployments.apps "web" is forbidden: exceeded quota: q`), false, true, 0},
		{"transient", status(500, "etcd"), true, false, 0},
		{"namespace terminating", status(403, "terminating", k8sapi.StatusCause{Type: "NamespaceTerminating"}), false, false, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cm := metrics.NewControllerMetrics()
			op := &operator{
				log:        slog.New(slog.DiscardHandler),
				series:     cm.Controller(ControllerName, 1),
				widgets:    watch.NewCache(watch.Config[reconcile.Widget]{}),
				reconciler: &reconcile.WidgetReconciler{Client: refusingAPI{tt.err}},
			}
			res, err := op.reconcileKey(context.Background(), "default/web")
			if (err != nil) != tt.wantErr || (res.RequeueAfter > 0) != tt.wantAfter || (tt.wantAfter && res.RequeueAfter != reconcile.FirstWait) {
				t.Errorf("reconcileKey = %+v, %v", res, err)
			}
			if res != (queue.Result{}) && !tt.wantAfter {
				t.Errorf("result %+v, want none", res)
			}
			if got := cm.TerminalReconcileErrors.WithLabelValues(ControllerName).Value(); got != tt.wantTerminal {
				t.Errorf("terminal errors counted: %v, want %v", got, tt.wantTerminal)
			}
		})
	}
}
