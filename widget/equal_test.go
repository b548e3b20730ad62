package widget

import (
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/reconcile"
)

// The equality helpers decide whether the reconciler writes. Each is tested
// here on its own, field by field: a field an equality forgets is a write
// that never happens.

func TestStatusEqual(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	base := func() WidgetStatus {
		return WidgetStatus{ReadyReplicas: 2, Phase: PhaseReady, ObservedGeneration: 3,
			Conditions: []k8sapi.Condition{{Type: ConditionReady, Status: "True", ObservedGeneration: 3,
				LastTransitionTime: t0, Reason: ReasonReady, Message: "2/2 replicas ready"}}}
	}
	tests := []struct {
		name   string
		change func(*WidgetStatus)
		want   bool
	}{
		{"same", func(*WidgetStatus) {}, true},
		{"same instant in another zone", func(s *WidgetStatus) {
			s.Conditions[0].LastTransitionTime = t0.In(time.FixedZone("x", 3600))
		}, true},
		{"readyReplicas", func(s *WidgetStatus) { s.ReadyReplicas = 1 }, false},
		{"phase", func(s *WidgetStatus) { s.Phase = PhaseProgressing }, false},
		{"observedGeneration", func(s *WidgetStatus) { s.ObservedGeneration = 4 }, false},
		{"condition added", func(s *WidgetStatus) {
			s.Conditions = append(s.Conditions, k8sapi.Condition{Type: "Other"})
		}, false},
		{"conditions dropped", func(s *WidgetStatus) { s.Conditions = nil }, false},
		{"condition status", func(s *WidgetStatus) { s.Conditions[0].Status = "False" }, false},
		{"condition reason", func(s *WidgetStatus) { s.Conditions[0].Reason = "Other" }, false},
		{"condition message", func(s *WidgetStatus) { s.Conditions[0].Message = "1/2 replicas ready" }, false},
		{"condition type", func(s *WidgetStatus) { s.Conditions[0].Type = "Available" }, false},
		{"condition observedGeneration", func(s *WidgetStatus) { s.Conditions[0].ObservedGeneration = 2 }, false},
		{"condition lastTransitionTime", func(s *WidgetStatus) {
			s.Conditions[0].LastTransitionTime = t0.Add(time.Second)
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := base(), base()
			tt.change(&b)
			if got := StatusEqual(a, b); got != tt.want {
				t.Errorf("StatusEqual(a, b) = %t, want %t", got, tt.want)
			}
			if got := StatusEqual(b, a); got != tt.want {
				t.Errorf("StatusEqual(b, a) = %t, want %t", got, tt.want)
			}
		})
	}
}

func TestConditionsEqualOrder(t *testing.T) {
	a := []k8sapi.Condition{{Type: "A"}, {Type: "B"}}
	b := []k8sapi.Condition{{Type: "B"}, {Type: "A"}}
	if reconcile.ConditionsEqual(a, b) {
		t.Error("conditionsEqual ignores order; status writes keep the order they were given")
	}
	if !reconcile.ConditionsEqual(nil, []k8sapi.Condition{}) {
		t.Error("conditionsEqual(nil, empty) = false, want true")
	}
}

func TestSmallEqualities(t *testing.T) {
	one, two, one2 := int32(1), int32(2), int32(1)
	yes, no := true, false
	int32Tests := []struct {
		a, b *int32
		want bool
	}{
		{nil, nil, true}, {&one, nil, false}, {nil, &one, false}, {&one, &one2, true}, {&one, &two, false},
	}
	for _, tt := range int32Tests {
		if got := int32PtrEqual(tt.a, tt.b); got != tt.want {
			t.Errorf("int32PtrEqual(%v, %v) = %t, want %t", tt.a, tt.b, got, tt.want)
		}
	}
	// boolPtrEqual treats nil as false: the API server drops a false
	// controller or blockOwnerDeletion on the way back.
	boolTests := []struct {
		a, b *bool
		want bool
	}{
		{nil, nil, true}, {&no, nil, true}, {nil, &no, true}, {&yes, nil, false}, {nil, &yes, false}, {&yes, &yes, true}, {&yes, &no, false},
	}
	for _, tt := range boolTests {
		if got := boolPtrEqual(tt.a, tt.b); got != tt.want {
			t.Errorf("boolPtrEqual(%v, %v) = %t, want %t", tt.a, tt.b, got, tt.want)
		}
	}
	selTests := []struct {
		a, b *k8sapi.LabelSelector
		want bool
	}{
		{nil, nil, true},
		{&k8sapi.LabelSelector{}, nil, false},
		{nil, &k8sapi.LabelSelector{}, false},
		{&k8sapi.LabelSelector{MatchLabels: map[string]string{"a": "1"}}, &k8sapi.LabelSelector{MatchLabels: map[string]string{"a": "1"}}, true},
		{&k8sapi.LabelSelector{MatchLabels: map[string]string{"a": "1"}}, &k8sapi.LabelSelector{MatchLabels: map[string]string{"a": "2"}}, false},
		{&k8sapi.LabelSelector{MatchLabels: map[string]string{"a": "1"}}, &k8sapi.LabelSelector{MatchLabels: map[string]string{"a": "1", "b": "2"}}, false},
	}
	for i, tt := range selTests {
		if got := selectorEqual(tt.a, tt.b); got != tt.want {
			t.Errorf("selectorEqual case %d = %t, want %t", i, got, tt.want)
		}
	}
}

func TestMetaHolds(t *testing.T) {
	yes := true
	want := k8sapi.ObjectMeta{Labels: map[string]string{"app": "web"}, OwnerReferences: []k8sapi.OwnerReference{
		{APIVersion: "example.com/v1", Kind: "Widget", Name: "web", UID: "u1", Controller: &yes, BlockOwnerDeletion: &yes}}}
	tests := []struct {
		name   string
		change func(*k8sapi.ObjectMeta)
		want   bool
	}{
		{"same", func(*k8sapi.ObjectMeta) {}, true},
		{"extra label kept by someone else", func(m *k8sapi.ObjectMeta) { m.Labels["team"] = "a" }, true},
		{"extra owner", func(m *k8sapi.ObjectMeta) {
			m.OwnerReferences = append(m.OwnerReferences, k8sapi.OwnerReference{UID: "u2"})
		}, true},
		{"label missing", func(m *k8sapi.ObjectMeta) { delete(m.Labels, "app") }, false},
		{"label changed", func(m *k8sapi.ObjectMeta) { m.Labels["app"] = "db" }, false},
		{"owner missing", func(m *k8sapi.ObjectMeta) { m.OwnerReferences = nil }, false},
		{"owner apiVersion", func(m *k8sapi.ObjectMeta) { m.OwnerReferences[0].APIVersion = "example.com/v2" }, false},
		{"owner kind", func(m *k8sapi.ObjectMeta) { m.OwnerReferences[0].Kind = "Gadget" }, false},
		{"owner name", func(m *k8sapi.ObjectMeta) { m.OwnerReferences[0].Name = "other" }, false},
		{"owner not controller", func(m *k8sapi.ObjectMeta) { m.OwnerReferences[0].Controller = nil }, false},
		{"owner does not block deletion", func(m *k8sapi.ObjectMeta) { m.OwnerReferences[0].BlockOwnerDeletion = nil }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			have := k8sapi.ObjectMeta{Labels: map[string]string{}, OwnerReferences: append([]k8sapi.OwnerReference(nil), want.OwnerReferences...)}
			for k, v := range want.Labels {
				have.Labels[k] = v
			}
			tt.change(&have)
			if got := metaHolds(&have, &want); got != tt.want {
				t.Errorf("metaHolds = %t, want %t", got, tt.want)
			}
		})
	}
}
