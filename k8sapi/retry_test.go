package k8sapi

import (
	"context"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"reflect"
	"sync/atomic"
	"testing"
	"time"
)

// failingThenOK answers the first n requests with code and body (and a
// Retry-After header if retryAfter is set), then with deployment.json.
func failingThenOK(t *testing.T, n int32, code int, file, retryAfter string) http.HandlerFunc {
	fail, ok := testdata(t, file), testdata(t, "deployment.json")
	var count atomic.Int32
	return func(w http.ResponseWriter, r *http.Request) {
		if count.Add(1) <= n {
			if retryAfter != "" {
				w.Header().Set("Retry-After", retryAfter)
			}
			w.WriteHeader(code)
			w.Write(fail)
			return
		}
		w.Write(ok)
	}
}

func TestRetryAfterHonoured(t *testing.T) {
	tests := []struct {
		name       string
		code       int
		file       string
		header     string
		method     string // "get" or "create"
		requests   int
		waits      []time.Duration
		wantFailed bool
	}{
		{"429 header on create", 429, "error-500.html", "3", "create", 3, []time.Duration{3 * time.Second, 3 * time.Second}, false},
		{"429 status details", 429, "status-429-toomanyrequests.json", "1", "get", 3, []time.Duration{7 * time.Second, 7 * time.Second}, false},
		{"429 capped at a minute", 429, "error-500.html", "3600", "create", 3, []time.Duration{time.Minute, time.Minute}, false},
		{"503 get backs off", 503, "error-500.html", "", "get", 3, []time.Duration{150 * time.Millisecond, 300 * time.Millisecond}, false},
		{"500 create not retried", 500, "status-500-servertimeout.json", "", "create", 1, nil, true},
		{"501 get not retried", 501, "error-500.html", "", "get", 1, nil, true},
		{"409 not retried", 409, "status-409-conflict.json", "", "get", 1, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newAPIServer(t, failingThenOK(t, 2, tt.code, tt.file, tt.header))
			c, rs := newTestClient(t, srv, nil)
			d := For[Deployment](c, Deployments)
			var err error
			if tt.method == "get" {
				_, err = d.Get(t.Context(), "shop", "web", GetOptions{})
			} else {
				_, err = d.Create(t.Context(), "shop", &Deployment{}, WriteOptions{})
			}
			if (err != nil) != tt.wantFailed {
				t.Fatalf("err = %v, want failure %v", err, tt.wantFailed)
			}
			if n := len(srv.requests()); n != tt.requests {
				t.Errorf("%d requests, want %d", n, tt.requests)
			}
			if got := rs.recorded(); !reflect.DeepEqual(got, tt.waits) {
				t.Errorf("waits %v, want %v", got, tt.waits)
			}
		})
	}
}

func TestRetriesBounded(t *testing.T) {
	srv := newAPIServer(t, failingThenOK(t, 1000, 429, "status-429-toomanyrequests.json", ""))
	c, rs := newTestClient(t, srv, func(c *Config) { c.MaxRetries = 3 })
	_, err := For[Deployment](c, Deployments).Get(t.Context(), "shop", "web", GetOptions{})
	if !IsTooManyRequests(err) {
		t.Fatalf("got %v, want 429", err)
	}
	if n, w := len(srv.requests()), len(rs.recorded()); n != 4 || w != 3 {
		t.Errorf("%d requests and %d waits, want 4 and 3", n, w)
	}
}

func TestRetryWaitEndsWithContext(t *testing.T) {
	srv := newAPIServer(t, failingThenOK(t, 1000, 429, "status-429-toomanyrequests.json", ""))
	c, _ := newTestClient(t, srv, nil)
	ctx, cancel := context.WithCancel(t.Context())
	c.sleep = func(context.Context, time.Duration) error { cancel(); return context.Canceled }
	_, err := For[Deployment](c, Deployments).Get(ctx, "shop", "web", GetOptions{})
	if !IsTooManyRequests(err) || len(srv.requests()) != 1 {
		t.Fatalf("got %v after %d requests, want the 429 after 1", err, len(srv.requests()))
	}
	// The real sleep returns as soon as the context ends.
	if err := sleepCtx(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("sleepCtx: %v", err)
	}
}

// TestSleepWaits: a positive wait on a live context waits (here, until the
// context's deadline); it does not return at once as a zero one does.
func TestSleepWaits(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := sleepCtx(ctx, time.Hour); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("sleepCtx(1h) = %v before the context's deadline, want %v", err, context.DeadlineExceeded)
	}
	if err := sleepCtx(t.Context(), 0); err != nil {
		t.Errorf("sleepCtx(0) = %v, want nil at once", err)
	}
}

func TestUnauthorizedRefresh(t *testing.T) {
	tests := []struct {
		name         string
		failures     int32
		refreshHelps bool
		requests     int
		refreshes    int32
		wantErr      bool
	}{
		{"refresh helps", 1, true, 2, 1, false},
		{"refresh cannot help", 1, false, 1, 1, true},
		{"refreshed once only", 5, true, 2, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newAPIServer(t, failingThenOK(t, tt.failures, 401, "status-401-unauthorized.json", ""))
			c, rs := newTestClient(t, srv, nil)
			creds := &countingCredentials{token: "tok", refreshHelps: tt.refreshHelps}
			c.creds = creds
			_, err := For[Deployment](c, Deployments).Get(t.Context(), "shop", "web", GetOptions{})
			if (err != nil) != tt.wantErr || (err != nil && !IsUnauthorized(err)) {
				t.Fatalf("got %v", err)
			}
			reqs := srv.requests()
			if len(reqs) != tt.requests || creds.refreshes.Load() != tt.refreshes || len(rs.recorded()) != 0 {
				t.Errorf("%d requests, %d refreshes, waits %v", len(reqs), creds.refreshes.Load(), rs.recorded())
			}
			if reqs[0].Auth != "Bearer tok-0" || (len(reqs) > 1 && reqs[1].Auth != "Bearer tok-1") {
				t.Errorf("tokens sent: %q", reqs)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	tests := []struct {
		attempt int
		jitter  float64
		want    time.Duration
	}{
		{0, 0, 100 * time.Millisecond},
		{0, 0.999999, 199999900 * time.Nanosecond},
		{1, 0, 200 * time.Millisecond},
		{3, 0.5, 1200 * time.Millisecond},
		{10, 0, 15 * time.Second},
		{100, 1, 30 * time.Second},
	}
	for _, tt := range tests {
		if got := retryBackoff.Jittered(tt.attempt, tt.jitter); got != tt.want {
			t.Errorf("backoff(%d, %v) = %v, want %v", tt.attempt, tt.jitter, got, tt.want)
		}
	}
}

func TestRetryableError(t *testing.T) {
	dial := &net.OpError{Op: "dial", Err: errors.New("connection refused")}
	read := &net.OpError{Op: "read", Err: errors.New("connection reset")}
	tests := []struct {
		method string
		err    error
		want   bool
	}{
		{"GET", read, true},
		{"POST", read, false},
		{"POST", dial, true},
		{"PATCH", &net.DNSError{Err: "no such host"}, true},
		{"GET", context.Canceled, false},
		{"GET", context.DeadlineExceeded, false},
		{"GET", x509.UnknownAuthorityError{}, false},
		{"GET", ErrBodyTooLarge, false},
	}
	for _, tt := range tests {
		if got := retryableError(tt.method, tt.err); got != tt.want {
			t.Errorf("retryableError(%s, %v) = %v", tt.method, tt.err, got)
		}
	}
}

// A 429 is retried for any method; a 5xx other than 501 only for a GET,
// the one idempotent method the client sends; nothing else is.
func TestRetryableStatus(t *testing.T) {
	tests := []struct {
		method string
		code   int
		want   bool
	}{
		{"POST", 429, true},
		{"GET", 500, true},
		{"GET", 599, true},
		{"GET", 501, false},
		{"GET", 499, false},
		{"GET", 404, false},
		{"POST", 500, false},
		{"PUT", 503, false},
	}
	for _, tt := range tests {
		if got := retryableStatus(tt.method, tt.code); got != tt.want {
			t.Errorf("retryableStatus(%s, %d) = %v, want %v", tt.method, tt.code, got, tt.want)
		}
	}
}
