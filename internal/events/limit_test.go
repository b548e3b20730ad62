package events

import (
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// A quiet object earns its burst back and no more: after an hour of
// silence it may write Burst Events at once, then waits a Refill again.
func TestRefillCappedAtBurst(t *testing.T) {
	c, err := k8sapi.New(&k8sapi.Config{Host: "https://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(Config{Client: c, Burst: 3, Refill: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	take := func(now time.Time) (n int) {
		for r.allow("prod/web", now) {
			if n++; n > 100 {
				break
			}
		}
		return n
	}
	if n := take(t0); n != 3 {
		t.Fatalf("first burst: %d Events allowed, want 3", n)
	}
	if n := take(t0.Add(30 * time.Second)); n != 0 {
		t.Fatalf("half a refill later: %d allowed, want 0", n)
	}
	if n := take(t0.Add(time.Hour)); n != 3 {
		t.Fatalf("an hour later: %d allowed, want the burst of 3 (60 refills must not pile up)", n)
	}
	if n := take(t0.Add(time.Hour + time.Minute)); n != 1 {
		t.Fatalf("one refill after that: %d allowed, want 1", n)
	}
}
