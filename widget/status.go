package widget

import (
	"fmt"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/reconcile"
)

// Problem is a reason the operator cannot run a Widget as it stands. It
// makes the phase Failed and becomes the Ready condition's reason and
// message.
type Problem struct {
	Reason  string // a CamelCase reason such as ReasonInvalidSpec
	Message string // what exactly is wrong
}

// StatusFor works out the status of w from its Deployment d (nil when there
// is none, or when it is not w's) and problem (nil when there is none). It
// starts from w.Status.Conditions, which it does not modify, and sets the
// Ready condition with SetCondition, so that its lastTransitionTime moves
// to now only when its status changes. It is a pure function.
//
// The phase is, in order: Failed when there is a problem; Pending when
// there is no Deployment or its controller has not looked at it yet;
// Progressing while the Deployment controller has not observed its latest
// generation; Failed when the Deployment's Progressing condition says
// ProgressDeadlineExceeded; Ready when the wanted replicas are all updated
// and ready and the Deployment is Available; Progressing otherwise.
func StatusFor(w *Widget, d *k8sapi.Deployment, problem *Problem, now time.Time) WidgetStatus {
	st := WidgetStatus{ObservedGeneration: w.Generation}
	if d != nil {
		st.ReadyReplicas = d.Status.ReadyReplicas
	}
	phase, cond := readiness(w, d, problem)
	cond.Type = ConditionReady
	cond.ObservedGeneration = w.Generation
	st.Phase = phase
	st.Conditions, _ = reconcile.SetCondition(w.Status.Conditions, cond, now)
	return st
}

func readiness(w *Widget, d *k8sapi.Deployment, problem *Problem) (string, k8sapi.Condition) {
	notReady := func(phase, reason, format string, args ...any) (string, k8sapi.Condition) {
		return phase, k8sapi.Condition{Status: "False", Reason: reason, Message: fmt.Sprintf(format, args...)}
	}
	key := k8sapi.Key(w.Namespace, w.Name)
	switch {
	case problem != nil:
		return notReady(PhaseFailed, problem.Reason, "%s", problem.Message)
	case d == nil:
		return notReady(PhasePending, ReasonPending, "waiting for Deployment %s to be created", key)
	case d.Status.ObservedGeneration == 0:
		return notReady(PhasePending, ReasonPending, "waiting for the Deployment controller to observe Deployment %s", key)
	case d.Status.ObservedGeneration < d.Generation:
		return notReady(PhaseProgressing, ReasonProgressing, "Deployment %s: generation %d not yet observed (observed %d)",
			key, d.Generation, d.Status.ObservedGeneration)
	}
	if c, _ := reconcile.FindCondition(d.Status.Conditions, "Progressing"); c.Status == "False" && c.Reason == "ProgressDeadlineExceeded" {
		return notReady(PhaseFailed, ReasonProgressDeadlineExceeded, "Deployment %s: %s", key, reconcile.TrimMessage(c.Message))
	}
	want := w.Spec.ReplicasOrDefault()
	ds := d.Status
	available := reconcile.IsConditionTrue(d.Status.Conditions, "Available")
	if ds.ReadyReplicas >= want && ds.UpdatedReplicas >= want && available {
		return PhaseReady, k8sapi.Condition{Status: "True", Reason: ReasonReady,
			Message: fmt.Sprintf("%d/%d replicas ready", ds.ReadyReplicas, want)}
	}
	return notReady(PhaseProgressing, ReasonProgressing, "%d/%d replicas ready, %d updated, available: %t",
		ds.ReadyReplicas, want, ds.UpdatedReplicas, available)
}

// StatusEqual reports whether two statuses are the same, comparing times
// with time.Time.Equal.
func StatusEqual(a, b WidgetStatus) bool {
	return a.ReadyReplicas == b.ReadyReplicas && a.Phase == b.Phase &&
		a.ObservedGeneration == b.ObservedGeneration && reconcile.ConditionsEqual(a.Conditions, b.Conditions)
}
