package widget

import (
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/reconcile"
)

func TestStatusFor(t *testing.T) {
	deploy := func(gen, observed int64, ready, updated int32, conds ...k8sapi.Condition) *k8sapi.Deployment {
		d := &k8sapi.Deployment{}
		d.Generation = gen
		d.Status = k8sapi.DeploymentStatus{ObservedGeneration: observed, ReadyReplicas: ready, UpdatedReplicas: updated, Conditions: conds}
		return d
	}
	available := k8sapi.Condition{Type: "Available", Status: "True"}
	unavailable := k8sapi.Condition{Type: "Available", Status: "False"}
	deadline := k8sapi.Condition{Type: "Progressing", Status: "False", Reason: "ProgressDeadlineExceeded", Message: "timed out"}
	tests := []struct {
		name        string
		d           *k8sapi.Deployment
		problem     *Problem
		wantPhase   string
		wantReady   int32
		wantStatus  string
		wantReason  string
		wantMessage string
	}{
		{"problem wins", deploy(1, 1, 3, 3, available), &Problem{ReasonInvalidSpec, "spec.port: 0 is out of range 1..65535"},
			PhaseFailed, 3, "False", ReasonInvalidSpec, "spec.port: 0 is out of range 1..65535"},
		{"no deployment", nil, nil, PhasePending, 0, "False", ReasonPending, "waiting for Deployment default/web to be created"},
		{"never observed", deploy(1, 0, 0, 0), nil, PhasePending, 0, "False", ReasonPending,
			"waiting for the Deployment controller to observe Deployment default/web"},
		{"new generation", deploy(3, 2, 3, 3, available), nil, PhaseProgressing, 3, "False", ReasonProgressing,
			"Deployment default/web: generation 3 not yet observed (observed 2)"},
		{"deadline exceeded", deploy(2, 2, 1, 3, unavailable, deadline), nil, PhaseFailed, 1, "False", ReasonProgressDeadlineExceeded,
			"Deployment default/web: timed out"},
		{"deadline message escaped", deploy(2, 2, 1, 3, unavailable, k8sapi.Condition{Type: "Progressing", Status: "False", Reason: "ProgressDeadlineExceeded", Message: "timed\x1b[2J out"}),
			nil, PhaseFailed, 1, "False", ReasonProgressDeadlineExceeded, `Deployment default/web: timed\u001b[2J out`},
		{"deadline of an old generation is not reported", deploy(3, 2, 1, 3, unavailable, deadline), nil, PhaseProgressing, 1, "False", ReasonProgressing,
			"Deployment default/web: generation 3 not yet observed (observed 2)"},
		{"some ready", deploy(1, 1, 2, 3, available), nil, PhaseProgressing, 2, "False", ReasonProgressing,
			"2/3 replicas ready, 3 updated, available: true"},
		{"old pods ready, new ones not", deploy(2, 2, 3, 1, available), nil, PhaseProgressing, 3, "False", ReasonProgressing,
			"3/3 replicas ready, 1 updated, available: true"},
		{"ready but not available", deploy(1, 1, 3, 3, unavailable), nil, PhaseProgressing, 3, "False", ReasonProgressing,
			"3/3 replicas ready, 3 updated, available: false"},
		{"no conditions yet", deploy(1, 1, 3, 3), nil, PhaseProgressing, 3, "False", ReasonProgressing,
			"3/3 replicas ready, 3 updated, available: false"},
		{"ready", deploy(1, 1, 3, 3, available), nil, PhaseReady, 3, "True", ReasonReady, "3/3 replicas ready"},
		{"surplus while scaling down", deploy(1, 1, 4, 4, available), nil, PhaseReady, 4, "True", ReasonReady, "4/3 replicas ready"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := widget()
			w.Generation = 7
			st := StatusFor(w, tt.d, tt.problem, t0)
			want := WidgetStatus{ReadyReplicas: tt.wantReady, Phase: tt.wantPhase, ObservedGeneration: 7,
				Conditions: []k8sapi.Condition{{Type: ConditionReady, Status: tt.wantStatus, ObservedGeneration: 7,
					LastTransitionTime: t0Trunc, Reason: tt.wantReason, Message: tt.wantMessage}}}
			if !StatusEqual(st, want) {
				t.Errorf("StatusFor =\n %+v\nwant\n %+v", st, want)
			}
		})
	}
}

func TestStatusForKeepsTransitionTime(t *testing.T) {
	w := widget()
	w.Status = readyStatus(w, tOld)
	w.Status.Conditions = append(w.Status.Conditions, k8sapi.Condition{Type: "Other", Status: "True", LastTransitionTime: tOld, Reason: "X"})
	before := w.Status.Conditions[0]
	d := ownedDeployment(t, w, 3)

	st := StatusFor(w, d, nil, t0)
	if !StatusEqual(st, w.Status) {
		t.Errorf("unchanged world changed the status:\n %+v\n %+v", st, w.Status)
	}

	// Scaling from 3 ready to 2 ready keeps Ready False once it is False.
	d.Status.ReadyReplicas = 2
	st = StatusFor(w, d, nil, t0)
	c, _ := reconcile.FindCondition(st.Conditions, ConditionReady)
	if c.Status != "False" || !c.LastTransitionTime.Equal(t0Trunc) {
		t.Errorf("Ready = %+v, want False since %v", c, t0Trunc)
	}
	if o, ok := reconcile.FindCondition(st.Conditions, "Other"); !ok || !o.LastTransitionTime.Equal(tOld) {
		t.Errorf("other condition lost: %+v", st.Conditions)
	}
	w.Status = st
	d.Status.ReadyReplicas = 1
	later := t0.Add(time.Hour)
	st = StatusFor(w, d, nil, later)
	c, _ = reconcile.FindCondition(st.Conditions, ConditionReady)
	if !c.LastTransitionTime.Equal(t0Trunc) || c.Message != "1/3 replicas ready, 3 updated, available: true" {
		t.Errorf("Ready = %+v, want the message updated and the time kept", c)
	}
	if w.Status.Conditions[0] == before {
		t.Fatal("test setup: status was not replaced")
	}
}
