package main

import (
	"context"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/widget"
)

// fieldOwner is the field manager of every write.
const fieldOwner = client.FieldOwner("widget-operator-cr")

// WidgetReconciler does the Widget job the conventional way: read the
// Widget from the cache, server-side apply the Deployment and the Service,
// and merge-patch the status when it changed.
type WidgetReconciler struct {
	client.Client
}

func (r *WidgetReconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&Widget{}).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(r)
}

func (r *WidgetReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var w Widget
	if err := r.Get(ctx, req.NamespacedName, &w); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !w.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}

	var problem *widget.Problem
	var dep *appsv1ac.DeploymentApplyConfiguration
	if msg := widget.Validate(w.Spec); msg != "" {
		problem = &widget.Problem{Reason: widget.ReasonInvalidSpec, Message: msg}
	} else {
		dep = desiredDeployment(&w)
		if err := r.Apply(ctx, dep, fieldOwner, client.ForceOwnership); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.Apply(ctx, desiredService(&w), fieldOwner, client.ForceOwnership); err != nil {
			return ctrl.Result{}, err
		}
	}

	st := widget.StatusFor(widgetView(&w), deploymentView(dep), problem, time.Now())
	if widget.StatusEqual(st, w.Status) {
		return ctrl.Result{}, nil
	}
	patch := client.MergeFrom(w.DeepCopy())
	w.Status = st
	return ctrl.Result{}, r.Status().Patch(ctx, &w, patch)
}

func ownerRef(w *Widget) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(widget.WidgetAPIVersion).WithKind(widget.WidgetKind).
		WithName(w.Name).WithUID(w.UID).
		WithController(true).WithBlockOwnerDeletion(true)
}

func desiredDeployment(w *Widget) *appsv1ac.DeploymentApplyConfiguration {
	return appsv1ac.Deployment(w.Name, w.Namespace).
		WithLabels(widget.Labels(w.Name)).
		WithOwnerReferences(ownerRef(w)).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(w.Spec.ReplicasOrDefault()).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(widget.SelectorLabels(w.Name))).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(widget.Labels(w.Name)).
				WithSpec(corev1ac.PodSpec().WithContainers(corev1ac.Container().
					WithName(widget.ContainerName).
					WithImage(w.Spec.Image).
					WithPorts(corev1ac.ContainerPort().
						WithName(widget.PortName).
						WithContainerPort(w.Spec.PortOrDefault()).
						WithProtocol(corev1.ProtocolTCP))))))
}

func desiredService(w *Widget) *corev1ac.ServiceApplyConfiguration {
	return corev1ac.Service(w.Name, w.Namespace).
		WithLabels(widget.Labels(w.Name)).
		WithOwnerReferences(ownerRef(w)).
		WithSpec(corev1ac.ServiceSpec().
			WithSelector(widget.SelectorLabels(w.Name)).
			WithPorts(corev1ac.ServicePort().
				WithName(widget.PortName).
				WithProtocol(corev1.ProtocolTCP).
				WithPort(widget.ServicePort).
				WithTargetPort(intstr.FromString(widget.PortName))))
}

// widgetView and deploymentView hand the fields StatusFor reads to the
// shared pure status logic.
func widgetView(w *Widget) *widget.Widget {
	return &widget.Widget{
		ObjectMeta: k8sapi.ObjectMeta{Name: w.Name, Namespace: w.Namespace, Generation: w.Generation},
		Spec:       w.Spec,
		Status:     w.Status,
	}
}

func deploymentView(d *appsv1ac.DeploymentApplyConfiguration) *k8sapi.Deployment {
	if d == nil {
		return nil
	}
	var out k8sapi.Deployment
	if d.Generation != nil {
		out.Generation = *d.Generation
	}
	if s := d.Status; s != nil {
		out.Status.ObservedGeneration = deref(s.ObservedGeneration)
		out.Status.Replicas = deref(s.Replicas)
		out.Status.UpdatedReplicas = deref(s.UpdatedReplicas)
		out.Status.ReadyReplicas = deref(s.ReadyReplicas)
		out.Status.AvailableReplicas = deref(s.AvailableReplicas)
		for _, c := range s.Conditions {
			out.Status.Conditions = append(out.Status.Conditions, k8sapi.Condition{
				Type: string(deref(c.Type)), Status: string(deref(c.Status)),
				Reason: deref(c.Reason), Message: deref(c.Message),
			})
		}
	}
	return &out
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
