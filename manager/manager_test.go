package manager

import (
	"context"
	"errors"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/events"
	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/queue"
	"github.com/zerodep-k8s/widget-operator/reconcile"
	"github.com/zerodep-k8s/widget-operator/watch"
)

// thing is an object of any kind: metadata only.
type thing struct {
	k8sapi.TypeMeta
	k8sapi.ObjectMeta `json:"metadata"`
}

// memSource is a fake watch.Source in memory: its list returns one
// object, and its watches stay silent until their ctx ends. It counts
// its lists, and refuses streaming lists, as a server without them does.
type memSource struct{ lists atomic.Int32 }

func (s *memSource) List(context.Context, string, k8sapi.ListOptions) (*k8sapi.List[thing], error) {
	s.lists.Add(1)
	return &k8sapi.List[thing]{Metadata: k8sapi.ListMeta{ResourceVersion: "1"},
		Items: []thing{{ObjectMeta: k8sapi.ObjectMeta{Namespace: "ns", Name: "x", ResourceVersion: "1"}}}}, nil
}

func (s *memSource) Watch(ctx context.Context, _ string, opts k8sapi.ListOptions) (watch.Stream[thing], error) {
	if opts.SendInitialEvents != nil {
		return nil, &k8sapi.APIError{Code: 422}
	}
	return silentStream{ctx}, nil
}

type silentStream struct{ ctx context.Context }

func (s silentStream) Next() (k8sapi.WatchEvent[thing], error) {
	<-s.ctx.Done()
	return k8sapi.WatchEvent[thing]{}, s.ctx.Err()
}

func (silentStream) Close() error { return nil }

// keys is a Reconciler that sends the keys it is given.
type keys chan string

func (k keys) Reconcile(_ context.Context, key string) (queue.Result, error) {
	k <- key
	return queue.Result{}, nil
}

// next returns the next key reconciled, or fails after 30s.
func (k keys) next(t *testing.T) string {
	t.Helper()
	select {
	case key := <-k:
		return key
	case <-time.After(30 * time.Second):
		t.Fatal("no reconcile in 30s")
		return ""
	}
}

// Two controllers of one manager share a cache (one list), are each
// reconciled, are measured in one registry under the operator's prefix,
// and are checked once in /readyz; the manager refuses a controller of
// a name taken or with an election of its own.
func TestManagerRunsControllers(t *testing.T) {
	client, err := k8sapi.New(&k8sapi.Config{Host: "https://apiserver.test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{Client: client}); err == nil {
		t.Error("New without a Name: no error")
	}
	cfg := Config{Name: "test-operator", Client: client, ProbeAddr: freeAddr(t), MetricsAddr: freeAddr(t), InsecureMetrics: true}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ka, kb := make(keys, 1), make(keys, 1)
	a := &reconcile.Controller{Name: "a", Reconciler: ka}
	b := &reconcile.Controller{Name: "b", Reconciler: kb}
	for _, c := range []*reconcile.Controller{a, b} {
		if err := m.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []*reconcile.Controller{{Name: "a"}, {Name: "c", LeaderElection: &reconcile.LeaderElection{}}, nil} {
		if err := m.Add(c); err == nil {
			t.Errorf("Add(%+v): no error", c)
		}
	}
	src := &memSource{}
	reconcile.WatchPrimary(a, watch.Config[thing]{Source: src, Name: "things"})
	reconcile.WatchMapped(b, watch.Config[thing]{Source: src, Name: "things"}, func(o *thing) []string { return []string{"b/" + o.Name} })

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	if keyA, keyB := ka.next(t), kb.next(t); keyA != "ns/x" || keyB != "b/x" || src.lists.Load() != 1 {
		t.Errorf("a reconciled %q, b %q, after %d lists; want ns/x, b/x and one list", keyA, keyB, src.lists.Load())
	}
	if got := checks([]Runnable{a, b}, time.Now()); len(got) != 1 || got[0].Name != "watch things" || got[0].Err != nil {
		t.Errorf("checks = %v, want watch things once, passing", got)
	}
	if code, body := get(t, "http://"+cfg.ProbeAddr+"/readyz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/readyz = %d %q", code, body)
	}
	// The reconciles are counted once they have returned.
	var body string
	for deadline := time.Now().Add(10 * time.Second); strings.Count(body, `result="success"} 1`) < 2 && time.Now().Before(deadline); {
		_, body = get(t, "http://"+cfg.MetricsAddr+"/metrics")
	}
	for _, want := range []string{`controller_runtime_reconcile_total{controller="a",result="success"} 1`,
		`controller_runtime_reconcile_total{controller="b",result="success"} 1`,
		`test_operator_watch_events_total{resource="things",type="ADDED"} 1`, "test_operator_leader 1", "test_operator_events_dropped_total 0"} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics has no %s", want)
		}
	}
	if strings.Count(body, "# TYPE controller_runtime_reconcile_total ") != 1 {
		t.Error("/metrics: controller_runtime_reconcile_total is not one family")
	}
	if err := m.Add(&reconcile.Controller{Name: "late"}); err == nil {
		t.Error("Add after Run: no error")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v after a clean shutdown", err)
	}
}

// A controller that cannot start ends Run with its error, and the others
// with it.
func TestManagerRunFailsWithController(t *testing.T) {
	client, err := k8sapi.New(&k8sapi.Config{Host: "https://apiserver.test"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(Config{Name: "test-operator", Client: client})
	if err != nil {
		t.Fatal(err)
	}
	ok := &reconcile.Controller{Name: "ok", Reconciler: make(keys, 1)}
	m.Add(ok)
	reconcile.WatchPrimary(ok, watch.Config[thing]{Source: &memSource{}, Name: "things"})
	m.Add(&reconcile.Controller{Name: "no-reconciler"})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := m.Run(ctx); err == nil || !strings.Contains(err.Error(), "Reconciler is required") || ctx.Err() != nil {
		t.Errorf("Run = %v (ctx %v), want the controller's error at once", err, ctx.Err())
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// gate is a fake Runnable: it fails its check until open is closed, then
// runs until its context ends and returns err.
type gate struct {
	open chan struct{}
	ran  atomic.Bool
	err  error
}

func (g *gate) Run(ctx context.Context) error {
	g.ran.Store(true)
	<-g.open
	<-ctx.Done()
	return g.err
}

func (g *gate) Checks(time.Time) []reconcile.Check {
	select {
	case <-g.open:
		return []reconcile.Check{{Name: "gate", Err: nil}}
	default:
		return []reconcile.Check{{Name: "gate", Err: errors.New("shut")}}
	}
}

// A Runnable of Config.Runnables runs with the controllers, /readyz
// fails while its check does, and its error is Run's.
func TestManagerRunsRunnables(t *testing.T) {
	client, err := k8sapi.New(&k8sapi.Config{Host: "https://apiserver.test"})
	if err != nil {
		t.Fatal(err)
	}
	g := &gate{open: make(chan struct{}), err: errors.New("gate failed")}
	cfg := Config{Name: "test-operator", Client: client, ProbeAddr: freeAddr(t), Runnables: []Runnable{g}}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	for deadline := time.Now().Add(10 * time.Second); !g.ran.Load() && time.Now().Before(deadline); {
		runtime.Gosched()
	}
	if code, body := get(t, "http://"+cfg.ProbeAddr+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "[-]gate failed") || !g.ran.Load() {
		t.Errorf("/readyz = %d %q, ran %v; want 503 for the gate, run", code, body, g.ran.Load())
	}
	close(g.open)
	if code, body := get(t, "http://"+cfg.ProbeAddr+"/readyz"); code != http.StatusOK {
		t.Errorf("/readyz = %d %q with the gate open", code, body)
	}
	cancel()
	if err := <-done; err != g.err {
		t.Errorf("Run = %v, want the Runnable's error", err)
	}
}

func TestNotWritten(t *testing.T) {
	st := events.Stats{Created: 1, Patched: 2, Dropped: 4, RateLimited: 8, Invalid: 16, Failed: 32}
	if got := notWritten(st); got != 4+8+32 {
		t.Errorf("notWritten(%+v) = %v, want 44", st, got)
	}
}
