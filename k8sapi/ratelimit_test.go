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
			b := newTokenBucket(tt.qps, tt.burst)
			for i, s := range tt.steps {
				if got := b.reserve(t0.Add(s.at)); got != s.want {
					t.Errorf("step %d: wait %v, want %v", i, got, s.want)
				}
			}
		})
	}
	if newTokenBucket(0, 10) != nil || newTokenBucket(-1, 10) != nil {
		t.Error("QPS <= 0 should mean no limiter")
	}
	b := newTokenBucket(1, 1)
	b.reserve(t0)
	if d := b.reserve(t0); d != time.Second {
		t.Fatalf("wait %v", d)
	}
	b.cancel(t0)
	if d := b.reserve(t0); d != time.Second {
		t.Errorf("after cancel: wait %v, want the token back", d)
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
