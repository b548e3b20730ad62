package queue

import (
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	const ms = time.Millisecond
	for _, tc := range []struct {
		base, max time.Duration
		n         int
		want      time.Duration
	}{
		{0, 0, 0, 5 * ms},
		{0, 0, 1, 10 * ms},
		{0, 0, 3, 40 * ms},
		{0, 0, 17, 655360 * ms},
		{0, 0, 18, 1000 * time.Second}, // 1310.72s capped
		{0, 0, 62, 1000 * time.Second},
		{0, 0, 63, 1000 * time.Second},
		{0, 0, 1 << 30, 1000 * time.Second},
		{-1, -1, 0, 5 * ms},
		{time.Second, 4 * time.Second, 2, 4 * time.Second},
		{time.Second, 4 * time.Second, 3, 4 * time.Second},
		{time.Second, 500 * ms, 0, 500 * ms},
		{1, 1<<63 - 1, 62, 1 << 62},
	} {
		b := &ExponentialBackoff{Base: tc.base, Max: tc.max, failures: map[string]int{"k": tc.n}}
		if got := b.When("k", time.Time{}); got != tc.want {
			t.Errorf("Base %v, Max %v, retry %d: When = %v, want %v", tc.base, tc.max, tc.n+1, got, tc.want)
		}
	}
}

func TestExponentialBackoff(t *testing.T) {
	var b ExponentialBackoff
	var now time.Time
	for i, want := range []time.Duration{5, 10, 20, 40, 80} {
		if got := b.When("a", now); got != want*time.Millisecond {
			t.Fatalf("retry %d: %v, want %vms", i+1, got, want)
		}
	}
	if got := b.When("b", now); got != 5*time.Millisecond {
		t.Fatalf("another key shares the count: %v", got)
	}
	if n := b.NumRequeues("a"); n != 5 {
		t.Fatalf("NumRequeues = %d, want 5", n)
	}
	b.Forget("a")
	if n := b.NumRequeues("a"); n != 0 {
		t.Fatalf("NumRequeues after Forget = %d", n)
	}
	if got := b.When("a", now); got != 5*time.Millisecond {
		t.Fatalf("after Forget: %v", got)
	}
	for range 100 {
		b.When("c", now)
	}
	if got := b.When("c", now); got != DefaultBackoffMax {
		t.Fatalf("after many retries: %v, want the cap", got)
	}
}

func TestTokenBucket(t *testing.T) {
	tb := &TokenBucket{}
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 100 {
		if d := tb.When("k", now); d != 0 {
			t.Fatalf("burst token %d waits %v", i, d)
		}
	}
	for i, want := range []time.Duration{100, 200, 300} {
		if d := tb.When("k", now); d != want*time.Millisecond {
			t.Fatalf("beyond the burst %d: %v, want %vms", i, d, want)
		}
	}
	// 300ms later the three reservations are paid; the next waits 100ms.
	now = now.Add(300 * time.Millisecond)
	if d := tb.When("k", now); d != 100*time.Millisecond {
		t.Fatalf("after refill: %v, want 100ms", d)
	}
	// A clock going backwards refills nothing and does not panic.
	if d := tb.When("k", now.Add(-time.Hour)); d != 200*time.Millisecond {
		t.Fatalf("backwards clock: %v, want 200ms", d)
	}
	// Long idle refills to the burst, not beyond.
	now = now.Add(time.Hour)
	for i := range 100 {
		if d := tb.When("k", now); d != 0 {
			t.Fatalf("after idle, token %d waits %v", i, d)
		}
	}
	if d := tb.When("k", now); d == 0 {
		t.Fatal("bucket held more than its burst")
	}
	tb.Forget("k")
	if tb.NumRequeues("k") != 0 {
		t.Fatal("token bucket counts requeues")
	}

	small := &TokenBucket{QPS: 2, Burst: 1}
	if d := small.When("k", now); d != 0 {
		t.Fatalf("first: %v", d)
	}
	if d := small.When("k", now); d != 500*time.Millisecond {
		t.Fatalf("second at 2 qps: %v, want 500ms", d)
	}
}

func TestMaxOf(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	l := MaxOf(&ExponentialBackoff{Base: time.Second}, &TokenBucket{QPS: 1, Burst: 2})
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}
	for i, w := range want {
		if d := l.When("a", now); d != w {
			t.Fatalf("retry %d: %v, want %v (backoff is longer)", i+1, d, w)
		}
	}
	// The bucket is now 1 token in debt: a new key waits for the bucket.
	if d := l.When("b", now); d != 2*time.Second {
		t.Fatalf("new key: %v, want 2s from the bucket", d)
	}
	if n := l.NumRequeues("a"); n != 3 {
		t.Fatalf("NumRequeues = %d, want 3", n)
	}
	l.Forget("a")
	if n := l.NumRequeues("a"); n != 0 {
		t.Fatalf("NumRequeues after Forget = %d", n)
	}
	if d := MaxOf().When("a", now); d != 0 {
		t.Fatalf("empty MaxOf waits %v", d)
	}
}

// A negative field means its default, as a zero one does.
func TestLimitersNegativeMeansDefault(t *testing.T) {
	now := time.Unix(1000, 0)
	b := &ExponentialBackoff{Base: -time.Second, Max: -time.Second}
	if got := b.When("k", now); got != DefaultBackoffBase {
		t.Errorf("first wait with a negative Base = %v, want %v", got, DefaultBackoffBase)
	}
	for range 40 {
		b.When("k", now)
	}
	if got := b.When("k", now); got != DefaultBackoffMax {
		t.Errorf("wait after many retries with a negative Max = %v, want %v", got, DefaultBackoffMax)
	}
	tb := &TokenBucket{QPS: -1, Burst: -1}
	for i := range DefaultBurst {
		if got := tb.When("k", now); got != 0 {
			t.Fatalf("retry %d of a burst of %d waits %v, want 0", i+1, DefaultBurst, got)
		}
	}
	if got, want := tb.When("k", now), time.Second/DefaultQPS; got != want {
		t.Errorf("retry past the burst waits %v, want %v", got, want)
	}
}
