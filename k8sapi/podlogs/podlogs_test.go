package podlogs

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// fakeKubelet is an httptest server that answers pods/log requests with
// recorded responses, and records the query of each.
func fakeKubelet(t *testing.T, h http.HandlerFunc) (*k8sapi.Client, *[]*http.Request) {
	t.Helper()
	var reqs []*http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reqs = append(reqs, r)
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	c, err := k8sapi.New(&k8sapi.Config{Host: srv.URL, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	return c, &reqs
}

func recorded(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestStreamQuery(t *testing.T) {
	logs := recorded(t, "log-timestamps.txt")
	c, reqs := fakeKubelet(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write(logs)
	})
	tail := int64(2)
	since := time.Date(2026, 11, 30, 22, 0, 0, 5e8, time.FixedZone("x", 3600))
	for _, tc := range []struct {
		opts Options
		want url.Values
	}{
		{Options{}, url.Values{}},
		{Options{Container: "app", Follow: true, Previous: true, Timestamps: true, TailLines: &tail, SinceSeconds: 30, LimitBytes: 4096},
			url.Values{"container": {"app"}, "follow": {"true"}, "previous": {"true"}, "timestamps": {"true"}, "tailLines": {"2"},
				"sinceSeconds": {"30"}, "limitBytes": {"4096"}}},
		{Options{SinceTime: since}, url.Values{"sinceTime": {"2026-11-30T21:00:00Z"}}},
	} {
		rc, err := Stream(t.Context(), c, "shop", "web-0", tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || string(b) != string(logs) {
			t.Errorf("read %q, %v", b, err)
		}
		r := (*reqs)[len(*reqs)-1]
		if r.URL.Path != "/api/v1/namespaces/shop/pods/web-0/log" || r.Method != http.MethodGet || r.Header.Get("Accept") != "*/*" {
			t.Errorf("sent %s %s accept %q", r.Method, r.URL.Path, r.Header.Get("Accept"))
		}
		if got := r.URL.Query(); len(got) != len(tc.want) || got.Encode() != tc.want.Encode() {
			t.Errorf("%+v: query %v, want %v", tc.opts, got, tc.want)
		}
	}
}

func TestStreamInvalid(t *testing.T) {
	c, reqs := fakeKubelet(t, func(w http.ResponseWriter, r *http.Request) {})
	neg := int64(-1)
	for _, tc := range []struct {
		c        *k8sapi.Client
		ns, name string
		opts     Options
	}{
		{nil, "shop", "web-0", Options{}},
		{c, "", "web-0", Options{}},
		{c, "shop", "", Options{}},
		{c, "shop", "..", Options{}},
		{c, "shop", "web-0", Options{SinceSeconds: -1}},
		{c, "shop", "web-0", Options{SinceSeconds: 1, SinceTime: time.Now()}},
		{c, "shop", "web-0", Options{TailLines: &neg}},
		{c, "shop", "web-0", Options{LimitBytes: -5}},
	} {
		if _, err := Stream(t.Context(), tc.c, tc.ns, tc.name, tc.opts); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%q %q %+v: %v, want ErrInvalidOptions", tc.ns, tc.name, tc.opts, err)
		}
	}
	if len(*reqs) != 0 {
		t.Errorf("%d requests sent for invalid calls", len(*reqs))
	}
}

// TestStreamServerErrors replays the API server's refusals, recorded by
// RECORD_TESTDATA=1 go test -run TestAPIServerLogs.
func TestStreamServerErrors(t *testing.T) {
	for _, tc := range []struct {
		file string
		code int
		is   func(error) bool
	}{
		{"status-404-pod.json", 404, k8sapi.IsNotFound},
		{"status-400-container.json", 400, func(err error) bool {
			var ae *k8sapi.APIError
			return errors.As(err, &ae) && ae.Code == 400 && ae.Status.Reason == "BadRequest"
		}},
	} {
		body := recorded(t, tc.file)
		c, _ := fakeKubelet(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(tc.code)
			w.Write(body)
		})
		rc, err := Stream(t.Context(), c, "shop", "web-0", Options{})
		if rc != nil || !tc.is(err) {
			t.Errorf("%s: %v", tc.file, err)
		}
	}
}

// TestStreamFollowEnds: a followed stream ends when its context does, and
// when it is closed, without waiting for the server.
func TestStreamFollowEnds(t *testing.T) {
	c, _ := fakeKubelet(t, func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("first line\n"))
		w.(http.Flusher).Flush()
		<-r.Context().Done() // a container that writes nothing more
	})
	for _, stop := range []string{"cancel", "close"} {
		ctx, cancel := context.WithCancel(t.Context())
		rc, err := Stream(ctx, c, "shop", "web-0", Options{Follow: true})
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 64)
		n, err := rc.Read(b)
		if err != nil || string(b[:n]) != "first line\n" {
			t.Fatalf("first read %q, %v", b[:n], err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := io.ReadAll(rc)
			done <- err
		}()
		if stop == "cancel" {
			cancel()
		} else {
			rc.Close()
		}
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("%s: read ended without an error", stop)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: read still blocked after 10s", stop)
		}
		rc.Close()
		cancel()
	}
}
