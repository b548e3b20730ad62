package events

import (
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// A quiet object earns its burst back and no more: after a day of silence
// it may write burst Events at once, then waits a refill again.
func TestRefillCappedAtBurst(t *testing.T) {
	c, err := k8sapi.New(&k8sapi.Config{Host: "https://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(Config{Client: c})
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
	if n := take(t0); n != burst {
		t.Fatalf("first burst: %d Events allowed, want %d", n, burst)
	}
	if n := take(t0.Add(refill / 2)); n != 0 {
		t.Fatalf("half a refill later: %d allowed, want 0", n)
	}
	day := t0.Add(24 * time.Hour)
	if n := take(day); n != burst {
		t.Fatalf("a day later: %d allowed, want the burst of %d (288 refills must not pile up)", n, burst)
	}
	if n := take(day.Add(refill)); n != 1 {
		t.Fatalf("one refill after that: %d allowed, want 1", n)
	}
}
