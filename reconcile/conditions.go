package reconcile

import (
	"slices"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// The helpers below treat a condition slice as a value: they never write
// to the slice they are given, so it may come straight from a cache.

// FindCondition returns a copy of the condition of type t, and whether
// there is one.
func FindCondition(conds []k8sapi.Condition, t string) (k8sapi.Condition, bool) {
	i := slices.IndexFunc(conds, isType(t))
	if i < 0 {
		return k8sapi.Condition{}, false
	}
	return conds[i], true
}

// IsConditionTrue reports whether the condition of type t exists and has
// status "True".
func IsConditionTrue(conds []k8sapi.Condition, t string) bool {
	c, ok := FindCondition(conds, t)
	return ok && c.Status == "True"
}

// SetCondition returns a new slice holding conds with c set in place of
// the condition of the same type (or appended), and whether anything
// changed. The new condition's LastTransitionTime is:
//   - the old one, when a condition of that type exists with the same status;
//   - otherwise c.LastTransitionTime, or now when that is zero.
//
// Times are stored in UTC truncated to whole seconds, the precision the API
// server keeps, so that a status read back compares equal to the one
// written.
func SetCondition(conds []k8sapi.Condition, c k8sapi.Condition, now time.Time) ([]k8sapi.Condition, bool) {
	i := slices.IndexFunc(conds, isType(c.Type))
	switch {
	case i >= 0 && conds[i].Status == c.Status:
		c.LastTransitionTime = conds[i].LastTransitionTime
	case c.LastTransitionTime.IsZero():
		c.LastTransitionTime = now.UTC().Truncate(time.Second)
	default:
		c.LastTransitionTime = c.LastTransitionTime.UTC().Truncate(time.Second)
	}
	if i < 0 {
		return append(slices.Clip(conds), c), true
	}
	out := slices.Clone(conds)
	out[i] = c
	return out, !conditionEqual(conds[i], c)
}

// RemoveCondition returns a new slice holding conds without the condition
// of type t, and whether there was one.
func RemoveCondition(conds []k8sapi.Condition, t string) ([]k8sapi.Condition, bool) {
	out := slices.DeleteFunc(slices.Clone(conds), isType(t))
	return out, len(out) != len(conds)
}

// isType returns a test of a condition's type.
func isType(t string) func(k8sapi.Condition) bool {
	return func(c k8sapi.Condition) bool { return c.Type == t }
}

func conditionEqual(a, b k8sapi.Condition) bool {
	return a.Type == b.Type && a.Status == b.Status && a.ObservedGeneration == b.ObservedGeneration &&
		a.Reason == b.Reason && a.Message == b.Message && a.LastTransitionTime.Equal(b.LastTransitionTime)
}

// ConditionsEqual reports whether a and b hold the same conditions in the
// same order, comparing times with time.Time.Equal.
func ConditionsEqual(a, b []k8sapi.Condition) bool {
	return slices.EqualFunc(a, b, conditionEqual)
}
