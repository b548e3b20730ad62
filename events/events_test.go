package events

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/testenv/logbuf"
)

// seen is one request the eventServer received.
type seen struct {
	method, path, contentType string
	body                      []byte
}

// eventServer is a fake API server for Events only, served in-process
// through the client's Transport seam: it stores created Events by name,
// applies series merge patches, and reports every request on a channel.
// With forbid set it answers every request 403.
type eventServer struct {
	forbid atomic.Bool
	reqs   chan seen
	mu     sync.Mutex
	stored map[string]k8sapi.Event
}

func (s *eventServer) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	s.serve(rec, r)
	return rec.Result(), nil
}

// roundTripFunc is an http.RoundTripper made of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func (s *eventServer) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	defer func() { s.reqs <- seen{r.Method, r.URL.Path, r.Header.Get("Content-Type"), body} }()
	w.Header().Set("Content-Type", "application/json")
	status := func(code int, reason string) {
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(k8sapi.Status{Status: "Failure", Reason: reason, Code: int32(code), Message: reason})
	}
	if s.forbid.Load() {
		status(http.StatusForbidden, "Forbidden")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	const prefix = "/apis/events.k8s.io/v1/namespaces/"
	ns, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, prefix), "/")
	switch {
	case r.Method == http.MethodPost && rest == "events":
		var ev k8sapi.Event
		if err := json.Unmarshal(body, &ev); err != nil || ev.Namespace != ns {
			status(http.StatusBadRequest, "BadRequest")
			return
		}
		s.stored[ev.Name] = ev
		w.WriteHeader(http.StatusCreated)
		w.Write(body)
	case r.Method == http.MethodPatch && strings.HasPrefix(rest, "events/"):
		ev, ok := s.stored[strings.TrimPrefix(rest, "events/")]
		if !ok {
			status(http.StatusNotFound, "NotFound")
			return
		}
		var p struct{ Series *k8sapi.EventSeries }
		json.Unmarshal(body, &p)
		ev.Series = p.Series
		s.stored[ev.Name] = ev
		json.NewEncoder(w).Encode(ev)
	default:
		status(http.StatusNotFound, "NotFound")
	}
}

// next returns the next request, failing the test after a deadline.
func (s *eventServer) next(t *testing.T) seen {
	t.Helper()
	select {
	case r := <-s.reqs:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no request within 10s")
		return seen{}
	}
}

// harness builds a Recorder on a real k8sapi.Client whose requests go to
// an eventServer, and starts Run. Call it in a synctest bubble, whose clock
// starts at 2000-01-01 00:00:00 UTC: tests move time with time.Sleep and
// wait for a write to finish with synctest.Wait.
func harness(t *testing.T, cfg Config) (*Recorder, *eventServer) {
	t.Helper()
	srv := &eventServer{reqs: make(chan seen, 100), stored: map[string]k8sapi.Event{}}
	c, err := k8sapi.New(&k8sapi.Config{Host: "https://apiserver.test", Transport: srv, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Client, cfg.Controller, cfg.Instance = c, "example.com/test-operator", "pod-1"
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return r, srv
}

var widget = k8sapi.ObjectReference{APIVersion: "example.com/v1", Kind: "Widget", Namespace: "prod", Name: "web", UID: "uid-1"}

func TestCreateThenPatchSeries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, srv := harness(t, Config{})
		start := time.Now()
		r.Event(widget, "Warning", "DeployFailed", "quota exceeded")
		create := srv.next(t)
		synctest.Wait()
		if create.method != http.MethodPost || create.path != "/apis/events.k8s.io/v1/namespaces/prod/events" {
			t.Fatalf("first request %s %s", create.method, create.path)
		}
		var ev k8sapi.Event
		if err := json.Unmarshal(create.body, &ev); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(ev.Name, "web.") || len(ev.Name) != len("web.")+16 || ev.Series != nil ||
			ev.ReportingController != "example.com/test-operator" || ev.ReportingInstance != "pod-1" || ev.Action != "Reconcile" ||
			ev.Type != "Warning" || ev.Reason != "DeployFailed" || ev.Note != "quota exceeded" || ev.Regarding != widget ||
			!ev.EventTime.Equal(start) || ev.APIVersion != "events.k8s.io/v1" || ev.Kind != "Event" {
			t.Errorf("created event %+v", ev)
		}
		if !bytes.Contains(create.body, []byte(`"eventTime":"2000-01-01T00:00:00.000000Z"`)) {
			t.Errorf("eventTime not in MicroTime form: %s", create.body)
		}

		for i, want := range []string{
			`{"series":{"count":2,"lastObservedTime":"2000-01-01T00:01:00.000000Z"}}`,
			`{"series":{"count":3,"lastObservedTime":"2000-01-01T00:11:00.000000Z"}}`,
		} {
			// The second repeat comes exactly one window after the first:
			// still the same series.
			time.Sleep([]time.Duration{time.Minute, 10 * time.Minute}[i])
			r.Event(widget, "Warning", "DeployFailed", "quota exceeded")
			p := srv.next(t)
			synctest.Wait()
			if p.method != http.MethodPatch || p.path != "/apis/events.k8s.io/v1/namespaces/prod/events/"+ev.Name ||
				p.contentType != "application/merge-patch+json" || string(p.body) != want {
				t.Errorf("repeat %d: %s %s %s %s", i+1, p.method, p.path, p.contentType, p.body)
			}
		}

		// A different note is a new Event; so is a repeat past the window.
		r.Event(widget, "Warning", "DeployFailed", "image missing")
		if p := srv.next(t); p.method != http.MethodPost {
			t.Errorf("different note: %s", p.method)
		}
		synctest.Wait()
		time.Sleep(10*time.Minute + time.Second)
		r.Event(widget, "Warning", "DeployFailed", "quota exceeded")
		if p := srv.next(t); p.method != http.MethodPost {
			t.Errorf("repeat after the window: %s", p.method)
		}
		synctest.Wait()
		if s := r.Stats(); s.Created != 3 || s.Patched != 2 || s.Failed != 0 {
			t.Errorf("stats %+v", s)
		}
	})
}

func TestPatchOfVanishedEventCreates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, srv := harness(t, Config{})
		r.Event(widget, "Normal", "Ready", "all good")
		srv.next(t)
		synctest.Wait()
		srv.mu.Lock()
		clear(srv.stored) // the API server's TTL removed it
		srv.mu.Unlock()
		time.Sleep(time.Minute)
		r.Event(widget, "Normal", "Ready", "all good")
		if p := srv.next(t); p.method != http.MethodPatch {
			t.Fatalf("want a patch first, got %s", p.method)
		}
		if p := srv.next(t); p.method != http.MethodPost || bytes.Contains(p.body, []byte("series")) {
			t.Fatalf("want a fresh create, got %s %s", p.method, p.body)
		}
		synctest.Wait()
		if s := r.Stats(); s.Created != 2 || s.Failed != 0 {
			t.Errorf("stats %+v", s)
		}
	})
}

func TestRateLimitPerObject(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, srv := harness(t, Config{})
		for i := range 30 {
			r.Event(widget, "Warning", "Failed", "attempt "+string(rune('A'+i)))
		}
		if s := r.Stats(); s.RateLimited != 5 {
			t.Errorf("rate limited %d, want 5 past the burst of 25", s.RateLimited)
		}
		// Another object has its own bucket.
		other := widget
		other.UID, other.Name = "uid-2", "other"
		r.Event(other, "Normal", "Created", "hello")
		for range 26 {
			srv.next(t)
			synctest.Wait()
		}
		// Four minutes later: still no token; at five: one.
		time.Sleep(4 * time.Minute)
		r.Event(widget, "Warning", "Failed", "later")
		time.Sleep(time.Minute)
		r.Event(widget, "Warning", "Failed", "later still")
		r.Event(widget, "Warning", "Failed", "and again")
		if p := srv.next(t); !bytes.Contains(p.body, []byte(`"note":"later still"`)) {
			t.Errorf("after refill: %s", p.body)
		}
		synctest.Wait()
		if s := r.Stats(); s.RateLimited != 7 || s.Created != 27 {
			t.Errorf("stats %+v", s)
		}
		select {
		case p := <-srv.reqs:
			t.Errorf("unexpected request %s %s", p.method, p.body)
		default:
		}
	})
}

func TestForbiddenLoggedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs logbuf.Buffer
		r, srv := harness(t, Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		srv.forbid.Store(true)
		for i := range 3 {
			r.Event(widget, "Warning", "Failed", "n"+string(rune('0'+i)))
			srv.next(t)
			synctest.Wait()
		}
		if lines := strings.Count(logs.String(), "\n"); lines != 1 || !strings.Contains(logs.String(), "not allowed to write Events") {
			t.Errorf("want one log line about permission, got %d:\n%s", lines, logs.String())
		}
		if s := r.Stats(); s.Failed != 3 || s.Created != 0 {
			t.Errorf("stats %+v", s)
		}
		// Once writes work again, the next failure streak is logged anew.
		srv.forbid.Store(false)
		r.Event(widget, "Warning", "Failed", "ok")
		srv.next(t)
		synctest.Wait()
		srv.forbid.Store(true)
		r.Event(widget, "Warning", "Failed", "no again")
		srv.next(t)
		synctest.Wait()
		if lines := strings.Count(logs.String(), "\n"); lines != 2 {
			t.Errorf("want a second line after recovery, got %d:\n%s", lines, logs.String())
		}
	})
}

// TestStopCutsWriteQuietly stops Run while a write hangs: the write is
// counted as dropped, not failed, and nothing is logged, so a clean
// shutdown leaves no warning behind.
func TestStopCutsWriteQuietly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		arrived := make(chan struct{}, 1)
		hang := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			arrived <- struct{}{}
			<-req.Context().Done()
			return nil, req.Context().Err()
		})
		c, err := k8sapi.New(&k8sapi.Config{Host: "https://apiserver.test", Transport: hang, MaxRetries: -1})
		if err != nil {
			t.Fatal(err)
		}
		var logs logbuf.Buffer
		r, err := New(Config{Client: c, Controller: "x", Instance: "x", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { r.Run(ctx); close(done) }()
		r.Event(widget, "Normal", "Created", "Created Deployment prod/web")
		<-arrived
		cancel()
		<-done
		if s := r.Stats(); s.Failed != 0 || s.Dropped != 1 {
			t.Errorf("stats %+v, want one dropped, none failed", s)
		}
		if logs.String() != "" {
			t.Errorf("logged on a clean stop:\n%s", logs.String())
		}
	})
}

func TestQueueFullDrops(t *testing.T) {
	c, err := k8sapi.New(&k8sapi.Config{Host: "https://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(Config{Client: c, Controller: "x", Instance: "x"})
	if err != nil {
		t.Fatal(err)
	}
	// Each event about an object of its own, so that no rate limit
	// refuses it. Run is not started: nothing drains.
	for i := range queueSize + 1 {
		obj := widget
		obj.UID = fmt.Sprint("uid-", i)
		r.Event(obj, "Normal", "R", "n")
	}
	if s := r.Stats(); s.Dropped != 1 || s.RateLimited != 0 || len(r.queue) != queueSize {
		t.Errorf("stats %+v, queued %d", s, len(r.queue))
	}
}

func TestInvalidEvents(t *testing.T) {
	c, _ := k8sapi.New(&k8sapi.Config{Host: "https://127.0.0.1:1"})
	r, _ := New(Config{Client: c, Controller: "x", Instance: "x"})
	r.Event(widget, "Error", "R", "bad type")
	r.Event(widget, "Normal", "", "no reason")
	r.Event(k8sapi.ObjectReference{}, "Normal", "R", "no object")
	if s := r.Stats(); s.Invalid != 3 || len(r.queue) != 0 {
		t.Errorf("stats %+v, queued %d", s, len(r.queue))
	}
	if _, err := New(Config{Controller: "x"}); err == nil || !strings.HasPrefix(err.Error(), "events: ") {
		t.Errorf("New without client: %v", err)
	}
	if _, err := New(Config{Client: c, Instance: "x"}); err == nil || !strings.Contains(err.Error(), "Controller") {
		t.Errorf("New without controller: %v", err)
	}
}

// A note is queued as one line, with what a terminal would act on
// escaped.
func TestNoteEscaped(t *testing.T) {
	c, _ := k8sapi.New(&k8sapi.Config{Host: "https://127.0.0.1:1"})
	r, _ := New(Config{Client: c, Controller: "x", Instance: "x"})
	r.Event(widget, "Warning", "R", "refused: \x1b]0;owned\a\x1b[2J\u009b\n  again")
	if it := <-r.queue; it.note != `refused: \u001b]0;owned\u0007\u001b[2J\u009b again` {
		t.Errorf("queued note %q", it.note)
	}
}

func TestNewEventLimits(t *testing.T) {
	c, _ := k8sapi.New(&k8sapi.Config{Host: "https://127.0.0.1:1"})
	r, _ := New(Config{Client: c, Controller: "x", Instance: "x"})
	long := strings.Repeat("é", 600) // 1200 bytes
	ev := r.newEvent(item{regarding: k8sapi.ObjectReference{Name: strings.Repeat("n", 300)}, eventType: "Normal", reason: "R", note: k8sapi.Printable(long, maxNoteBytes)})
	if len(ev.Name) > 253 || ev.Namespace != "default" || len(ev.Note) != 1024 || !strings.HasSuffix(ev.Note, "é") {
		t.Errorf("name %d bytes, namespace %q, note %d bytes", len(ev.Name), ev.Namespace, len(ev.Note))
	}
}

func TestExpireAtCapacity(t *testing.T) {
	m := map[int]bool{}
	for i := range maxTracked - 1 {
		m[i] = i%2 == 0
	}
	expire(m, func(stale bool) bool { return stale })
	if len(m) != maxTracked-1 {
		t.Fatalf("below capacity: %d entries left of %d", len(m), maxTracked-1)
	}
	m[maxTracked] = false
	expire(m, func(bool) bool { return false })
	if want := maxTracked - maxTracked/16; len(m) != want {
		t.Errorf("at capacity, nothing stale: %d entries left, want %d", len(m), want)
	}
	m = map[int]bool{}
	for i := range maxTracked {
		m[i] = i%2 == 0
	}
	expire(m, func(stale bool) bool { return stale })
	if len(m) != maxTracked/2 {
		t.Errorf("at capacity, half stale: %d entries left, want %d", len(m), maxTracked/2)
	}
}
