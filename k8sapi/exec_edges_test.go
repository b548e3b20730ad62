package k8sapi

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// A plugin's stdout is kept up to its limit: output that fills it exactly
// is whole; one byte more is an overflow, reported once, and what does not
// fit is dropped while every write still succeeds.
func TestBoundedBuffer(t *testing.T) {
	calls := 0
	w := &boundedBuffer{max: 4, overflow: func() { calls++ }}
	for _, p := range []string{"ab", "cd"} {
		if n, err := w.Write([]byte(p)); n != len(p) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", p, n, err)
		}
	}
	if string(w.b) != "abcd" || w.n > 4 || calls != 0 {
		t.Fatalf("at the limit: %q, over %v, %d overflow calls", w.b, w.n > 4, calls)
	}
	for _, p := range []string{"e", "fgh"} {
		if n, err := w.Write([]byte(p)); n != len(p) || err != nil {
			t.Fatalf("Write(%q) past the limit = %d, %v", p, n, err)
		}
		if string(w.b) != "abcd" || w.n <= 4 || calls != 1 {
			t.Fatalf("after Write(%q) past the limit: %q, over %v, %d overflow calls, want 1", p, w.b, w.n > 4, calls)
		}
	}

	w = &boundedBuffer{max: 4}
	w.Write([]byte("abc"))
	w.Write([]byte("de"))
	if string(w.b) != "abcd" || w.n <= 4 {
		t.Fatalf("a write across the limit: %q, over %v; want what fits kept", w.b, w.n > 4)
	}
}

// A credential with a short life is refreshed a quarter of its life before
// it expires, not a whole minute before.
func TestExecRefreshShortLife(t *testing.T) {
	clock := newCredClock()
	creds, count := expiringExec(t, clock, 2*time.Minute)
	runsAfter := func(d time.Duration) int {
		t.Helper()
		clock.advance(d)
		if got := authHeader(t, creds); got != "Bearer tok" {
			t.Fatalf("header %q", got)
		}
		return runCount(t, count)
	}
	if n := runsAfter(0); n != 1 {
		t.Fatalf("plugin ran %d times, want 1", n)
	}
	if n := runsAfter(89 * time.Second); n != 1 {
		t.Fatalf("31s before the expiry of a 2-minute credential: plugin ran %d times, want 1 (cached)", n)
	}
	if n := runsAfter(time.Second); n != 2 {
		t.Fatalf("30s before the expiry of a 2-minute credential: plugin ran %d times, want 2 (refreshed)", n)
	}
}

// An exec plugin that returns a token and no certificate: over TLS the
// token is sent and no client certificate is presented.
func TestExecTokenOverTLS(t *testing.T) {
	srv := newHeaderServer(t, true)
	cfg := &Config{Host: srv.URL, CAData: certPEMOf(srv.Server), Exec: helperExec(execV1, "token", "HELPER_TOKEN=exec-tok")}
	getOnce(t, cfg)
	if a := srv.last(t).Get("Authorization"); a != "Bearer exec-tok" {
		t.Errorf("Authorization %q, want the plugin's token", a)
	}
}

// A plugin that fails when its credential is due for refresh: callers
// get the failure, not the old credential, and the plugin is not run
// again for every request: the failure is held, as when there was no
// credential.
func TestExecRefreshFailureHeld(t *testing.T) {
	clock := newCredClock()
	expiry := clock.now().Add(10 * time.Minute).Format(time.RFC3339)
	var runs atomic.Int32
	e := &execCredentials{cfg: ExecConfig{Command: "flaky", APIVersion: execV1}, now: clock.now}
	e.run = func(context.Context) ([]byte, error) {
		if runs.Add(1) > 1 {
			return nil, errors.New("broken")
		}
		return []byte(`{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"tok","expirationTimestamp":"` + expiry + `"}}`), nil
	}
	authHeader(t, e)
	clock.advance(9*time.Minute + 30*time.Second) // due for refresh
	req, _ := http.NewRequest("GET", "https://h/", nil)
	for range 5 {
		if err := e.authorize(context.Background(), req); err == nil || err.Error() != `k8sapi: exec plugin "flaky": broken` {
			t.Fatalf("authorize: %v, want the plugin's failure", err)
		}
	}
	if n := runs.Load(); n != 2 {
		t.Errorf("plugin ran %d times within the hold, want 2", n)
	}
	clock.advance(execFailureHold)
	e.authorize(context.Background(), req)
	if n := runs.Load(); n != 3 {
		t.Errorf("plugin ran %d times after the hold, want 3", n)
	}
}
