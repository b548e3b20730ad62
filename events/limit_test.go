package events

import (
	"fmt"
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
	r, err := New(Config{Client: c, Controller: "x"})
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

// When the limiters are full and none is refilled, a new object makes
// room by forgetting a few at random: the others keep their spent
// budget, where clearing the map gave every object its burst back.
func TestFullLimitersForgetFew(t *testing.T) {
	c, err := k8sapi.New(&k8sapi.Config{Host: "https://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(Config{Client: c, Controller: "x"})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	for i := range maxTracked {
		for r.allow(fmt.Sprint("obj-", i), t0) {
		}
	}
	if !r.allow("new", t0) {
		t.Fatal("a new object was refused")
	}
	if n := len(r.limits); n > maxTracked || n < maxTracked-maxTracked/16 {
		t.Fatalf("%d limiters after the new object, want from %d to %d", n, maxTracked-maxTracked/16, maxTracked)
	}
	for k, b := range r.limits {
		if k != "new" && b.Allow(t0) {
			t.Fatalf("object %s kept its limiter but may write again", k)
		}
	}
}

// Some refilled limiters are forgotten before any spent one.
func TestFullLimitersForgetRefilledFirst(t *testing.T) {
	c, _ := k8sapi.New(&k8sapi.Config{Host: "https://127.0.0.1:1"})
	r, _ := New(Config{Client: c, Controller: "x"})
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	for i := range maxTracked {
		// The first 300 write once, and are full again an hour later;
		// the others spend their burst.
		for r.allow(fmt.Sprint("obj-", i), t0) && i >= 300 {
		}
	}
	later := t0.Add(time.Hour)
	r.allow("new", later)
	for i := range maxTracked {
		_, ok := r.limits[fmt.Sprint("obj-", i)]
		if ok == (i < 300) {
			t.Fatalf("after the new object, obj-%d tracked: %v", i, ok)
		}
	}
}

// Two objects of the same kind and name in two namespaces, referred to
// without a UID, have a rate limit each: one spending its burst does not
// refuse the other.
func TestRateLimitWithoutUIDPerNamespace(t *testing.T) {
	c, err := k8sapi.New(&k8sapi.Config{Host: "https://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(Config{Client: c, Controller: "x"})
	if err != nil {
		t.Fatal(err)
	}
	prod := k8sapi.ObjectReference{APIVersion: "example.com/v1", Kind: "Widget", Namespace: "prod", Name: "web"}
	staging := prod
	staging.Namespace = "staging"
	for i := range burst + 1 {
		r.Event(prod, "Warning", "Failed", fmt.Sprint("attempt ", i))
	}
	if s := r.Stats(); s.RateLimited != 1 {
		t.Fatalf("prod/web, %d events: %d rate limited, want 1 past the burst of %d", burst+1, s.RateLimited, burst)
	}
	r.Event(staging, "Warning", "Failed", "attempt 0")
	if s := r.Stats(); s.RateLimited != 1 {
		t.Errorf("staging/web's first event after prod/web spent its burst: %d rate limited, want still 1", s.RateLimited)
	}
}
