package k8sapi

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"
)

func TestTokenBucket(t *testing.T) {
	t0 := time.Date(2025, 3, 14, 9, 0, 0, 0, time.UTC)
	type step struct {
		at   time.Duration // since t0
		want time.Duration // wait reserve returns
	}
	tests := []struct {
		name  string
		qps   float64
		burst int
		steps []step
	}{
		{"burst then paced", 10, 2, []step{{0, 0}, {0, 0}, {0, 100 * time.Millisecond}, {0, 200 * time.Millisecond}}},
		{"refills over time", 10, 2, []step{{0, 0}, {0, 0}, {time.Second, 0}, {time.Second, 0}, {time.Second, 100 * time.Millisecond}}},
		{"burst 0 means 1", 2, 0, []step{{0, 0}, {0, 500 * time.Millisecond}}},
		{"refill caps at burst", 1, 1, []step{{0, 0}, {time.Hour, 0}, {time.Hour, time.Second}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewTokenBucket(tt.qps, tt.burst)
			for i, s := range tt.steps {
				if got := b.Reserve(t0.Add(s.at)); got != s.want {
					t.Errorf("step %d: wait %v, want %v", i, got, s.want)
				}
			}
		})
	}
	if c, err := New(&Config{Host: "https://127.0.0.1:1", QPS: -1}); err != nil || c.limiter != nil {
		t.Error("QPS <= 0 should mean no limiter")
	}
	b := NewTokenBucket(1, 1)
	b.Reserve(t0)
	if d := b.Reserve(t0); d != time.Second {
		t.Fatalf("wait %v", d)
	}
	b.Cancel(t0)
	if d := b.Reserve(t0); d != time.Second {
		t.Errorf("after cancel: wait %v, want the token back", d)
	}
}

func TestTokenBucketAllow(t *testing.T) {
	t0 := time.Date(2025, 3, 14, 9, 0, 0, 0, time.UTC)
	b := NewTokenBucket(1.0/60, 2) // one token a minute
	tests := []struct {
		at    time.Duration // since t0
		full  bool          // Full, before Allow
		allow bool
	}{
		{0, true, true},
		{0, false, true},
		{0, false, false}, // empty: refused, and nothing owed
		{30 * time.Second, false, false},
		{time.Minute, false, true},
		{time.Hour, true, true}, // refilled to the burst, no more
		{time.Hour, false, true},
		{time.Hour, false, false},
		{time.Hour - time.Minute, false, false}, // time going back refills nothing
		{time.Hour + time.Minute, false, true},
		{3 * time.Hour, true, true},
	}
	for i, tt := range tests {
		now := t0.Add(tt.at)
		if got := b.Full(now); got != tt.full {
			t.Errorf("step %d (%v): Full = %v, want %v", i, tt.at, got, tt.full)
		}
		if got := b.Allow(now); got != tt.allow {
			t.Errorf("step %d (%v): Allow = %v, want %v", i, tt.at, got, tt.allow)
		}
	}
}

func TestBackoffDelay(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		b    Backoff
		n    int
		want time.Duration
	}{
		{Backoff{5 * ms, 1000 * time.Second}, 0, 5 * ms},
		{Backoff{5 * ms, 1000 * time.Second}, 3, 40 * ms},
		{Backoff{5 * ms, 1000 * time.Second}, 18, 1000 * time.Second}, // 1310.72s capped
		{Backoff{time.Second, 4 * time.Second}, 2, 4 * time.Second},
		{Backoff{time.Second, 500 * ms}, 0, 500 * ms},
		{Backoff{800 * ms, 30 * time.Second}, 5, 25600 * ms},
		{Backoff{800 * ms, 30 * time.Second}, 6, 30 * time.Second},
		{Backoff{1, 1<<63 - 1}, 62, 1 << 62},
		{Backoff{1, 1<<63 - 1}, 63, 1<<63 - 1},
		{Backoff{ms, time.Second}, 1 << 30, time.Second},
		{Backoff{ms, time.Second}, -1, time.Second},
		// Base = Max>>n, with Max odd: Base·2^n is just under Max, not capped.
		{Backoff{5, 11}, 1, 10},
	}
	for _, tt := range tests {
		if got := tt.b.Delay(tt.n); got != tt.want {
			t.Errorf("%+v.Delay(%d) = %v, want %v", tt.b, tt.n, got, tt.want)
		}
	}
}

// fakeClock is a clock tests move by hand.
type fakeClock struct{ now time.Time }

func (f *fakeClock) Now() time.Time { return f.now }

func TestClientRateLimit(t *testing.T) {
	srv := newAPIServer(t, serveFile(t, 200, "deployment.json"))
	c, rs := newTestClient(t, srv, func(c *Config) { c.QPS, c.Burst = 5, 2 })
	clock := &fakeClock{now: time.Date(2025, 3, 14, 9, 0, 0, 0, time.UTC)}
	c.now = clock.Now
	d := For[Deployment](c, Deployments)
	for i := 0; i < 4; i++ {
		if _, err := d.Get(t.Context(), "shop", "web", GetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	want := []time.Duration{200 * time.Millisecond, 400 * time.Millisecond}
	if got := rs.recorded(); !reflect.DeepEqual(got, want) {
		t.Errorf("waits %v, want %v", got, want)
	}

	// A wait that would outlast the context's deadline fails at once.
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	_, err := d.Get(ctx, "shop", "web", GetOptions{})
	if !errors.Is(err, context.DeadlineExceeded) || len(rs.recorded()) != 2 {
		t.Errorf("got %v, waits %v", err, rs.recorded())
	}
	// A wait the context ends gives the token back.
	ctx, cancel = context.WithCancel(t.Context())
	c.sleep = func(context.Context, time.Duration) error { cancel(); return context.Canceled }
	if _, err := d.Get(ctx, "shop", "web", GetOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("got %v", err)
	}
	if n := len(srv.requests()); n != 4 {
		t.Errorf("%d requests sent, want 4", n)
	}
	if _, err := d.Get(t.Context(), "nope", "", GetOptions{}); err == nil {
		t.Error("bad arguments should not take a token nor succeed")
	}
}
