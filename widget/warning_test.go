package widget

import (
	"context"
	"strings"
	"testing"
)

// A Failed Widget gets a Warning Event when what is wrong changes, even
// if the reason stays the same, and none when only its generation moved.
func TestWarningEventFollowsTheMessage(t *testing.T) {
	atT0(t, func(t *testing.T) {
		c := newRecordingClient()
		w := widget()
		w.Spec.Replicas = ptr(int32(50))
		c.widgets["default/web"] = w
		r := c.reconciler(&Reconciler{Client: c, Recorder: c})
		warnings := func(step string, spec func(*Widget)) []string {
			t.Helper()
			next := *c.widgets["default/web"]
			next.Generation++
			spec(&next)
			c.widgets["default/web"], c.calls = &next, nil
			if _, err := r.Reconcile(context.Background(), "default/web"); err != nil {
				t.Fatalf("%s: %v", step, err)
			}
			var out []string
			for _, call := range c.calls {
				if strings.HasPrefix(call, "Event Warning") {
					out = append(out, call)
				}
			}
			return out
		}
		const first = "Event Warning InvalidSpec default/web: spec.replicas: 50 is out of range 1..10"
		if got := warnings("first failure", func(*Widget) {}); len(got) != 1 || got[0] != first {
			t.Fatalf("first failure: warnings %q, want [%q]", got, first)
		}
		const second = "Event Warning InvalidSpec default/web: spec.replicas: 60 is out of range 1..10"
		if got := warnings("same reason, new message", func(w *Widget) { w.Spec.Replicas = ptr(int32(60)) }); len(got) != 1 || got[0] != second {
			t.Fatalf("same reason, new message: warnings %q, want [%q]", got, second)
		}
		if got := warnings("same reason and message", func(w *Widget) { w.Spec.Image = "nginx:2" }); len(got) != 0 {
			t.Fatalf("same reason and message: warnings %q, want none", got)
		}
	})
}
