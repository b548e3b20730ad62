package reconcile

import (
	"slices"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

var (
	t0      = time.Date(2025, 3, 1, 10, 0, 0, 500_000_000, time.UTC) // the clock's "now"
	t0Trunc = t0.Truncate(time.Second)
	tOld    = time.Date(2025, 2, 1, 8, 0, 0, 0, time.UTC)
)

func TestSetCondition(t *testing.T) {
	ready := func(status, reason string, at time.Time) k8sapi.Condition {
		return k8sapi.Condition{Type: "Ready", Status: status, Reason: reason, Message: "m", ObservedGeneration: 1, LastTransitionTime: at}
	}
	other := k8sapi.Condition{Type: "Other", Status: "True", Reason: "R", LastTransitionTime: tOld}
	explicit := time.Date(2024, 1, 2, 3, 4, 5, 600, time.FixedZone("X", 3600))
	tests := []struct {
		name        string
		conds       []k8sapi.Condition
		set         k8sapi.Condition
		want        []k8sapi.Condition
		wantChanged bool
	}{
		{"add to nil", nil, ready("True", "A", time.Time{}),
			[]k8sapi.Condition{ready("True", "A", t0Trunc)}, true},
		{"add keeps others", []k8sapi.Condition{other}, ready("True", "A", time.Time{}),
			[]k8sapi.Condition{other, ready("True", "A", t0Trunc)}, true},
		{"same everything", []k8sapi.Condition{ready("True", "A", tOld), other}, ready("True", "A", time.Time{}),
			[]k8sapi.Condition{ready("True", "A", tOld), other}, false},
		{"same status, new reason keeps time", []k8sapi.Condition{ready("True", "A", tOld)}, ready("True", "B", time.Time{}),
			[]k8sapi.Condition{ready("True", "B", tOld)}, true},
		{"same status ignores a given time", []k8sapi.Condition{ready("True", "A", tOld)}, ready("True", "A", explicit),
			[]k8sapi.Condition{ready("True", "A", tOld)}, false},
		{"status change moves time", []k8sapi.Condition{other, ready("True", "A", tOld)}, ready("False", "A", time.Time{}),
			[]k8sapi.Condition{other, ready("False", "A", t0Trunc)}, true},
		{"status change uses a given time, truncated, in UTC", []k8sapi.Condition{ready("True", "A", tOld)}, ready("Unknown", "A", explicit),
			[]k8sapi.Condition{ready("Unknown", "A", time.Date(2024, 1, 2, 2, 4, 5, 0, time.UTC))}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.conds)
			got, changed := SetCondition(in, tt.set, t0)
			if !ConditionsEqual(got, tt.want) || changed != tt.wantChanged {
				t.Errorf("SetCondition = %+v, %v\nwant %+v, %v", got, changed, tt.want, tt.wantChanged)
			}
			if !ConditionsEqual(in, tt.conds) {
				t.Errorf("input modified: %+v", in)
			}
			for _, c := range got {
				if c.LastTransitionTime.Location() != time.UTC && c.Type == "Ready" && tt.wantChanged {
					t.Errorf("time not in UTC: %v", c.LastTransitionTime)
				}
			}
		})
	}
}

func TestFindRemoveCondition(t *testing.T) {
	conds := []k8sapi.Condition{{Type: "A", Status: "True"}, {Type: "B", Status: "False"}}
	if c, ok := FindCondition(conds, "B"); !ok || c.Status != "False" {
		t.Errorf("FindCondition B = %+v, %v", c, ok)
	}
	if _, ok := FindCondition(conds, "C"); ok {
		t.Error("FindCondition C found")
	}
	if !IsConditionTrue(conds, "A") || IsConditionTrue(conds, "B") || IsConditionTrue(nil, "A") {
		t.Error("IsConditionTrue wrong")
	}
	got, removed := RemoveCondition(conds, "A")
	if !removed || len(got) != 1 || got[0].Type != "B" || conds[0].Type != "A" {
		t.Errorf("RemoveCondition = %+v, %v (input now %+v)", got, removed, conds)
	}
	if _, removed := RemoveCondition(conds, "C"); removed {
		t.Error("RemoveCondition C removed something")
	}
}
