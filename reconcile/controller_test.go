package reconcile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/metrics"
	"github.com/zerodep-k8s/widget-operator/queue"
	"github.com/zerodep-k8s/widget-operator/reconcile/internal/leader"
	"github.com/zerodep-k8s/widget-operator/testenv/logbuf"
	"github.com/zerodep-k8s/widget-operator/watch"
)

// obj is an object of any kind: metadata only.
type obj struct {
	k8sapi.TypeMeta
	k8sapi.ObjectMeta `json:"metadata"`
}

// memSource is a fake watch.Source in memory: its list returns items,
// and its watches deliver what is sent on events.
type memSource struct {
	items  []obj
	events chan k8sapi.WatchEvent[obj]
}

func newMemSource(items ...obj) *memSource {
	return &memSource{items: items, events: make(chan k8sapi.WatchEvent[obj])}
}

func (s *memSource) List(context.Context, string, k8sapi.ListOptions) (*k8sapi.List[obj], error) {
	return &k8sapi.List[obj]{Metadata: k8sapi.ListMeta{ResourceVersion: "1"}, Items: slices.Clone(s.items)}, nil
}

func (s *memSource) Watch(ctx context.Context, _ string, opts k8sapi.ListOptions) (watch.Stream[obj], error) {
	if opts.SendInitialEvents != nil { // a server without streaming lists
		return nil, &k8sapi.APIError{Code: 422}
	}
	ctx, cancel := context.WithCancel(ctx)
	return &memStream{ctx: ctx, cancel: cancel, events: s.events}, nil
}

type memStream struct {
	ctx    context.Context
	cancel context.CancelFunc
	events chan k8sapi.WatchEvent[obj]
}

func (s *memStream) Next() (k8sapi.WatchEvent[obj], error) {
	select {
	case ev := <-s.events:
		return ev, nil
	case <-s.ctx.Done():
		return k8sapi.WatchEvent[obj]{}, s.ctx.Err()
	}
}

func (s *memStream) Close() error { s.cancel(); return nil }

func object(ns, name, rv string) obj {
	return obj{ObjectMeta: k8sapi.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: rv}}
}

// child is ns/name, controlled by the owner of apiVersion, kind and name.
func child(ns, name, apiVersion, kind, owner string) obj {
	o := object(ns, name, "1")
	o.OwnerReferences = []k8sapi.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: owner, UID: "uid-" + owner, Controller: new(true)}}
	return o
}

var thingsRes = k8sapi.Resource{Group: "example.com", Version: "v1", Resource: "things", Namespaced: true, Kind: "Thing"}

// recorder is a Reconciler that records the keys it is given.
type recorder struct {
	mu   sync.Mutex
	keys []string
}

func (r *recorder) Reconcile(_ context.Context, key string) (queue.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.keys = append(r.keys, key)
	return queue.Result{}, nil
}

func (r *recorder) sorted() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(slices.Values(r.keys))
}

// sample returns the value of the series line of reg that starts with
// prefix, such as `x_total{controller="t"}`, or "" when there is none.
func sample(t *testing.T, reg *metrics.Registry, prefix string) string {
	t.Helper()
	var b bytes.Buffer
	reg.WriteTo(&b)
	for l := range strings.Lines(b.String()) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), prefix+" "); ok {
			return v
		}
	}
	return ""
}

// settle lets the bubble's clock pass the controller's sync poll, then
// waits for every goroutine to block.
func settle() {
	time.Sleep(time.Second)
	synctest.Wait()
}

// Primary objects queue their own key, owned ones their controller
// owner's (of the right kind only; a cluster-scoped owner by name), mapped
// ones what the function says, and Enqueue any key.
func TestControllerWiring(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := metrics.NewRegistry()
		var logs logbuf.Buffer
		c := &Controller{Name: "test", Workers: 2, Metrics: reg, MetricsPrefix: "test_operator", Logger: slog.New(slog.NewTextHandler(&logs, nil))}
		prim := newMemSource(object("ns", "a", "5"))
		own := newMemSource(
			child("ns", "a-child", "example.com/v1", "Thing", "b"),
			child("ns", "other-kind", "example.com/v1", "Other", "c"),
			child("ns", "other-version", "example.com/v2", "Thing", "d"),
			object("ns", "no-owner", "1"),
		)
		clustered := newMemSource(child("ns", "q", "v1", "Namespace", "team"))
		mapped := newMemSource(object("ns", "m", "1"))
		prims := WatchPrimary(c, watch.Config[obj]{Source: prim, Name: "prims"})
		WatchOwned(c, watch.Config[obj]{Source: own, Name: "owned"}, thingsRes)
		WatchOwned(c, watch.Config[obj]{Source: clustered, Name: "clustered"}, k8sapi.Namespaces)
		WatchMapped(c, watch.Config[obj]{Source: mapped, Name: "mapped"}, func(o *obj) []string { return []string{"mapped/" + o.Name, "also"} })
		c.Enqueue("early/key")
		for _, ch := range c.Checks(time.Now()) {
			if !errors.Is(ch.Err, errNotSynced) {
				t.Errorf("before Run: check %s: %v, want not synced", ch.Name, ch.Err)
			}
		}
		rec := &recorder{}
		c.Reconciler = rec
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- c.Run(ctx) }()
		settle()

		want := []string{"also", "early/key", "mapped/m", "ns/a", "ns/b", "team"}
		if got := rec.sorted(); !slices.Equal(got, want) {
			t.Errorf("reconciled %q, want %q", got, want)
		}
		var names []string
		for _, ch := range c.Checks(time.Now()) {
			names = append(names, ch.Name)
			if ch.Err != nil {
				t.Errorf("synced: check %s: %v", ch.Name, ch.Err)
			}
		}
		if want := []string{"watch prims", "watch owned", "watch clustered", "watch mapped"}; !slices.Equal(names, want) {
			t.Errorf("checks %q, want %q", names, want)
		}
		if !c.IsLeader() {
			t.Error("without leader election, IsLeader is false")
		}

		// A change after the sync: the owner is reconciled again.
		upd := child("ns", "a-child", "example.com/v1", "Thing", "b")
		upd.ResourceVersion = "2"
		own.events <- k8sapi.WatchEvent[obj]{Type: k8sapi.Modified, Object: upd}
		synctest.Wait()
		if got := rec.sorted(); len(got) != len(want)+1 || !slices.Contains(got[len(want)-2:], "ns/b") {
			t.Errorf("after an update of a child: reconciled %q, want ns/b once more", got)
		}
		if v := sample(t, reg, `controller_runtime_reconcile_total{controller="test",result="success"}`); v != "7" {
			t.Errorf("successful reconciles counted: %q, want 7", v)
		}
		if v := sample(t, reg, `test_operator_watch_events_total{resource="owned",type="MODIFIED"}`); v != "1" {
			t.Errorf("watch events of owned counted: %q, want 1", v)
		}
		if v := sample(t, reg, `workqueue_adds_total{name="test",controller="test"}`); v == "" || v == "0" {
			t.Errorf("workqueue adds: %q", v)
		}
		if rv := c.primaryRV("ns", "a"); rv != "5" {
			t.Errorf("primary resourceVersion %q, want 5", rv)
		}
		if _, ok := prims.Get("ns", "a"); !ok {
			t.Error("the primary cache does not hold ns/a")
		}

		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run after ctx ended: %v", err)
		}
		// A stop is no failure: the watches end without an error line.
		if strings.Contains(logs.String(), "level=ERROR") {
			t.Errorf("error logged by a clean run and stop:\n%s", logs.String())
		}
	})
}

// Each class of failure tells the queue what to do, and only the terminal
// ones count as such.
func TestReconcileKeyByClass(t *testing.T) {
	apiErr := func(code int, msg string, causes ...k8sapi.StatusCause) error {
		e := &k8sapi.APIError{Op: "create", Resource: "deployments", Code: code, Status: k8sapi.Status{Message: msg}}
		if len(causes) > 0 {
			e.Status.Details = &k8sapi.StatusDetails{Causes: causes}
		}
		return e
	}
	wait := queue.Result{RequeueAfter: 10 * time.Second}
	for _, tt := range []struct {
		name        string
		res         queue.Result
		err         error
		wantRes     queue.Result
		wantErr     bool   // retried with the queue's backoff
		wantResult  string // the result label counted, "" for none
		wantTermnal string
	}{
		{"success", queue.Result{}, nil, queue.Result{}, false, "success", "0"},
		{"requeue after", wait, nil, wait, false, "requeue_after", "0"},
		{"terminal", queue.Result{}, &TerminalError{Err: errors.New("no")}, queue.Result{}, false, "error", "1"},
		{"invalid key", queue.Result{}, &Error{Op: "split key", Name: "a/b/c", Err: k8sapi.ErrInvalidKey}, queue.Result{}, false, "error", "1"},
		{"rejected", queue.Result{}, apiErr(422, "invalid"), queue.Result{}, false, "error", "1"},
		{"quota", wait, apiErr(403, "exceeded quota: q"), wait, false, "error", "0"},
		{"forbidden without a wait", queue.Result{}, apiErr(403, "forbidden"), queue.Result{}, true, "error", "0"},
		{"transient", wait, apiErr(500, "etcd"), queue.Result{}, true, "error", "0"},
		{"namespace terminating", queue.Result{}, apiErr(403, "terminating", k8sapi.StatusCause{Type: "NamespaceTerminating"}), queue.Result{}, false, "", "0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			reg := metrics.NewRegistry()
			c := &Controller{Name: "t", Metrics: reg, Reconciler: ReconcilerFunc(func(context.Context, string) (queue.Result, error) {
				return tt.res, tt.err
			})}
			if err := c.init(); err != nil {
				t.Fatal(err)
			}
			res, err := c.reconcileKey(t.Context(), "default/web")
			if res != tt.wantRes || (err != nil) != tt.wantErr {
				t.Errorf("reconcileKey = %+v, %v; want %+v, error %v", res, err, tt.wantRes, tt.wantErr)
			}
			for _, r := range []string{"success", "error", "requeue_after"} {
				want := "0"
				if r == tt.wantResult {
					want = "1"
				}
				if v := sample(t, reg, fmt.Sprintf(`controller_runtime_reconcile_total{controller="t",result=%q}`, r)); v != want {
					t.Errorf("result %s counted %q, want %s", r, v, want)
				}
			}
			if v := sample(t, reg, `controller_runtime_terminal_reconcile_errors_total{controller="t"}`); v != tt.wantTermnal {
				t.Errorf("terminal errors counted %q, want %s", v, tt.wantTermnal)
			}
		})
	}
}

// A Controller's own Classify decides the class of its errors, and is not
// asked about a success.
func TestReconcileKeyOwnClassify(t *testing.T) {
	errMine := errors.New("wait for the cloud")
	for _, tt := range []struct {
		err      error
		wantErr  bool // retried with backoff
		terminal string
	}{
		{nil, false, "0"},
		{errMine, false, "1"},                   // Permanent by its Classify
		{apiErr(422, "Invalid", ""), true, "0"}, // Transient by its Classify, Permanent by Classify
	} {
		reg := metrics.NewRegistry()
		c := &Controller{Name: "t", Metrics: reg,
			Reconciler: ReconcilerFunc(func(context.Context, string) (queue.Result, error) { return queue.Result{}, tt.err }),
			Classify: func(err error) Class {
				if err == nil {
					t.Error("Classify(nil) called")
				}
				if errors.Is(err, errMine) {
					return Permanent
				}
				return Transient
			}}
		c.init()
		if _, err := c.reconcileKey(t.Context(), "ns/a"); (err != nil) != tt.wantErr {
			t.Errorf("%v: reconcileKey = %v, want retried %v", tt.err, err, tt.wantErr)
		}
		if v := sample(t, reg, `controller_runtime_terminal_reconcile_errors_total{controller="t"}`); v != tt.terminal {
			t.Errorf("%v: terminal errors counted %q, want %s", tt.err, v, tt.terminal)
		}
	}
}

// ReconcileTimeout cancels a reconcile's ctx and counts it; one that ends
// in time, or is cancelled by its parent, is not counted.
func TestReconcileTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := metrics.NewRegistry()
		var took time.Duration
		c := &Controller{Name: "t", Metrics: reg, ReconcileTimeout: 5 * time.Second,
			Reconciler: ReconcilerFunc(func(ctx context.Context, key string) (queue.Result, error) {
				start := time.Now()
				defer func() { took = time.Since(start) }()
				if key == "ns/quick" {
					return queue.Result{}, nil
				}
				<-ctx.Done()
				return queue.Result{}, ctx.Err()
			})}
		c.init()
		count := func() string { return sample(t, reg, `controller_runtime_reconcile_timeouts_total{controller="t"}`) }
		if _, err := c.reconcileKey(t.Context(), "ns/slow"); !errors.Is(err, context.DeadlineExceeded) || took != 5*time.Second || count() != "1" {
			t.Errorf("slow: %v after %v, %s timeouts counted; want the deadline at 5s, counted once", err, took, count())
		}
		if _, err := c.reconcileKey(t.Context(), "ns/quick"); err != nil || count() != "1" {
			t.Errorf("quick: %v, %s timeouts counted; want 1", err, count())
		}
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(time.Second, cancel)
		if _, err := c.reconcileKey(ctx, "ns/slow"); !errors.Is(err, context.Canceled) || took != time.Second || count() != "1" {
			t.Errorf("cancelled: %v after %v, %s timeouts counted; want cancelled at 1s, not counted", err, took, count())
		}
	})
}

// The Controller's RateLimiter decides the wait of a failed key.
func TestOwnRateLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var at []time.Duration // of each reconcile, since the start
		start := time.Now()
		c := &Controller{Name: "t", RateLimiter: &queue.ExponentialBackoff{Base: time.Minute},
			Reconciler: ReconcilerFunc(func(context.Context, string) (queue.Result, error) {
				mu.Lock()
				defer mu.Unlock()
				at = append(at, time.Since(start))
				return queue.Result{}, errors.New("fails")
			})}
		WatchPrimary(c, watch.Config[obj]{Source: newMemSource(object("ns", "a", "1"))})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- c.Run(ctx) }()
		time.Sleep(3*time.Minute + time.Second)
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		// After the first sync poll (50ms): retried 1 then 2 minutes on.
		if len(at) != 3 || at[1]-at[0] != time.Minute || at[2]-at[1] != 2*time.Minute {
			t.Errorf("reconciled at %v, want 3 times, 1 and 2 minutes apart", at)
		}
	})
}

// A panic is counted, and passed on to the queue's runner.
func TestReconcileKeyPanic(t *testing.T) {
	reg := metrics.NewRegistry()
	c := &Controller{Name: "t", Metrics: reg, Reconciler: ReconcilerFunc(func(context.Context, string) (queue.Result, error) {
		panic("boom")
	})}
	c.init()
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Errorf("recovered %v, want the panic passed on", r)
			}
		}()
		c.reconcileKey(t.Context(), "ns/x")
	}()
	if v := sample(t, reg, `controller_runtime_reconcile_panics_total{controller="t"}`); v != "1" {
		t.Errorf("panics counted %q, want 1", v)
	}
	if v := sample(t, reg, `controller_runtime_active_workers{controller="t"}`); v != "0" {
		t.Errorf("active workers after the panic %q, want 0", v)
	}
}

func TestDrainTimeout(t *testing.T) {
	for _, tc := range []struct {
		shutdown time.Duration
		elect    bool
		want     time.Duration
	}{
		{0, false, DefaultShutdownTimeout},
		{30 * time.Second, false, 30 * time.Second},
		{3 * time.Second, false, 3 * time.Second},
		// With leader election, in-flight work ends within the renew
		// deadline less a retry period, and then the Lease is released.
		{30 * time.Second, true, leader.RenewDeadline - leader.RetryPeriod},
		{3 * time.Second, true, 3 * time.Second},
	} {
		c := &Controller{ShutdownTimeout: tc.shutdown}
		if tc.elect {
			c.LeaderElection = &LeaderElection{}
		}
		if got := c.drainTimeout(); got != tc.want {
			t.Errorf("ShutdownTimeout %v, leader election %v: drain %v, want %v", tc.shutdown, tc.elect, got, tc.want)
		}
	}
}

// blocking is a Reconciler that runs until release is closed or its ctx
// ends, and says which came first on ended.
type blocking struct {
	started chan struct{}
	release chan struct{}
	ended   chan error
}

func newBlocking() *blocking {
	return &blocking{started: make(chan struct{}, 1), release: make(chan struct{}), ended: make(chan error, 1)}
}

func (b *blocking) Reconcile(ctx context.Context, _ string) (queue.Result, error) {
	b.started <- struct{}{}
	select {
	case <-b.release:
		b.ended <- nil
	case <-ctx.Done():
		b.ended <- ctx.Err()
	}
	return queue.Result{}, nil
}

// startBlocked runs a controller whose one key is being reconciled by b.
func startBlocked(t *testing.T, b *blocking, shutdown time.Duration) (cancel func(), done chan error) {
	c := &Controller{Name: "t", Reconciler: b, ShutdownTimeout: shutdown}
	WatchPrimary(c, watch.Config[obj]{Source: newMemSource(object("ns", "a", "1"))})
	ctx, cancel := context.WithCancel(t.Context())
	done = make(chan error)
	go func() { done <- c.Run(ctx) }()
	<-b.started
	return cancel, done
}

// On shutdown, a reconcile in flight may finish within ShutdownTimeout,
// and is cancelled after it.
func TestShutdownDrains(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBlocking()
		cancel, done := startBlocked(t, b, 5*time.Second)
		cancel()
		go func() {
			time.Sleep(2 * time.Second) // the reconcile's own work
			close(b.release)
		}()
		start := time.Now()
		if err := <-done; err != nil || <-b.ended != nil || time.Since(start) != 2*time.Second {
			t.Errorf("Run returned %v after %v; want nil after the reconcile finished (2s), uncut", err, time.Since(start))
		}
	})
	synctest.Test(t, func(t *testing.T) {
		b := newBlocking()
		cancel, done := startBlocked(t, b, 5*time.Second)
		cancel()
		start := time.Now()
		if err := <-done; err != nil || <-b.ended == nil || time.Since(start) != 5*time.Second {
			t.Errorf("Run returned %v after %v; want nil after the reconcile was cut at the timeout (5s)", err, time.Since(start))
		}
	})
}

// Background functions run with the caches: their ctx ends only once the
// reconciles in flight have finished, and Run returns after they have.
func TestBackgroundOutlivesWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBlocking()
		c := &Controller{Name: "t", Reconciler: b, ShutdownTimeout: 5 * time.Second}
		WatchPrimary(c, watch.Config[obj]{Source: newMemSource(object("ns", "a", "1"))})
		var stopped time.Time // written by the background function, read after Run
		c.Background = []func(context.Context){func(ctx context.Context) {
			<-ctx.Done()
			stopped = time.Now()
		}}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- c.Run(ctx) }()
		<-b.started
		start := time.Now()
		cancel()
		go func() {
			time.Sleep(2 * time.Second) // the reconcile's own work
			close(b.release)
		}()
		if err := <-done; err != nil || stopped.IsZero() || stopped.Sub(start) != 2*time.Second {
			t.Errorf("Run returned %v; background stopped %v after the cancel (zero: not run or not waited for), want 2s, once the reconcile finished",
				err, stopped.Sub(start))
		}
	})
}

func TestRunRefusesIncompleteConfig(t *testing.T) {
	client, err := k8sapi.New(&k8sapi.Config{Host: "https://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	reg := metrics.NewRegistry()
	(&Controller{Name: "first", Metrics: reg}).init()
	r := &recorder{}
	for _, tt := range []struct {
		c    *Controller
		want string
	}{
		{&Controller{Reconciler: r}, "Name is required"},
		{&Controller{Name: "t"}, "Reconciler is required"},
		{&Controller{Name: "second", Reconciler: r, Metrics: reg}, "already used"},
		{&Controller{Name: "t", Reconciler: r, LeaderElection: &LeaderElection{Client: client}}, "Name is required"},
	} {
		if err := tt.c.Run(t.Context()); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Run = %v, want an error with %q", err, tt.want)
		}
	}
}

// An owner resource that owner references cannot match fails Run, naming
// the field it lacks, rather than dropping every child event.
func TestRunRefusesInconsistentOwner(t *testing.T) {
	for _, tt := range []struct {
		owner k8sapi.Resource
		want  string
	}{
		{k8sapi.Resource{Group: "example.com", Version: "v1", Resource: "things", Namespaced: true}, "has no Kind"},
		{k8sapi.Resource{Group: "example.com", Resource: "things", Kind: "Thing"}, "has no Version"},
		{k8sapi.Resource{Version: "v1", Kind: "Namespace"}, "has no Resource"},
	} {
		c := &Controller{Name: "t", Reconciler: &recorder{}}
		WatchPrimary(c, watch.Config[obj]{Source: newMemSource(), Name: "prims"})
		WatchOwned(c, watch.Config[obj]{Source: newMemSource(), Name: "good"}, thingsRes)
		WatchOwned(c, watch.Config[obj]{Source: newMemSource(), Name: "bad"}, tt.owner)
		ctx, cancel := context.WithCancel(t.Context())
		cancel() // Run fails before it waits for anything
		err := c.Run(ctx)
		if err == nil || !strings.Contains(err.Error(), "WatchOwned bad: ") || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Run with owner %+v = %v, want an error naming the cache and with %q", tt.owner, err, tt.want)
		}
	}
}

// With leader election, a key is reconciled only while its shard is held,
// under a context that ends with the shard; taking a shard queues its
// keys; and giving a shard up (or losing it) waits for its reconciles in
// flight, which it cuts at once.
func TestShardFencing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A reconcile that takes a second to stop once cut, so that
		// returning before it would show.
		started, ended := make(chan string, 1), make(chan error, 1)
		var cut time.Time // when the reconcile's ctx ended
		slow := ReconcilerFunc(func(ctx context.Context, key string) (queue.Result, error) {
			started <- key
			<-ctx.Done()
			cut = time.Now()
			time.Sleep(time.Second)
			ended <- ctx.Err()
			return queue.Result{}, nil
		})
		c := &Controller{Name: "t", Reconciler: slow}
		var items []obj
		for i := range 8 {
			items = append(items, object("ns", fmt.Sprintf("w%d", i), "1"))
		}
		cache := WatchPrimary(c, watch.Config[obj]{Source: newMemSource(items...), Name: "prims"})
		// What initShards sets up around leader.Shards, for two shards.
		c.election.shardCtx, c.election.inFlight = make([]context.Context, 2), make([]sync.WaitGroup, 2)
		go cache.Run(t.Context())
		settle()
		var keys [2][]string
		for _, k := range cache.Store().Keys() {
			s := leader.ShardOf(k, 2)
			keys[s] = append(keys[s], k)
		}
		if len(keys[0]) == 0 || len(keys[1]) == 0 {
			t.Fatalf("keys by shard %v: want some in each", keys)
		}

		// Not held: dropped, not reconciled.
		if _, err := c.election.reconcile(t.Context(), c, keys[1][0]); err != nil || len(started) != 0 {
			t.Fatalf("a key of a shard not held: err %v, reconciled %d", err, len(started))
		}

		// Taking shard 1 queues its keys, and only those. The cache's
		// first list queued every key: empty the queue first.
		for c.queue.Len() > 0 {
			k, _ := c.queue.Get()
			c.queue.Done(k)
		}
		shard, giveUp := context.WithCancel(t.Context())
		held := make(chan struct{})
		go func() { defer close(held); c.election.holdShard(shard, 1) }()
		synctest.Wait()
		var queued []string
		for c.queue.Len() > 0 {
			k, _ := c.queue.Get()
			queued = append(queued, k)
			c.queue.Done(k)
		}
		slices.Sort(queued)
		if want := slices.Sorted(slices.Values(keys[1])); !slices.Equal(queued, want) {
			t.Errorf("queued %q on taking shard 1, want %q", queued, want)
		}

		// A reconcile in flight is cut when the shard is given up, and
		// holdShard returns only after it.
		reconciled := make(chan struct{})
		go func() { defer close(reconciled); c.election.reconcile(t.Context(), c, keys[1][0]) }()
		<-started
		gaveUp := time.Now()
		giveUp()
		<-held
		// The reconcile has ended by then (its goroutine may not yet have
		// closed reconciled: that comes after).
		select {
		case err := <-ended:
			if !errors.Is(err, context.Canceled) || !cut.Equal(gaveUp) {
				t.Errorf("the reconcile in flight ended with %v, cut %v after the shard was given up; want it cut at once", err, cut.Sub(gaveUp))
			}
		default:
			t.Fatal("holdShard returned before the shard's reconcile in flight")
		}
		<-reconciled
		if _, err := c.election.reconcile(t.Context(), c, keys[1][0]); err != nil || len(started) != 0 {
			t.Errorf("a key of a shard given up: err %v, reconciled %d", err, len(started))
		}
	})
}

// <MetricsPrefix>_leader (by default operator_leader) is 1 while the controller may reconcile: always
// without leader election, and with it only while a Lease is held.
func TestLeaderGauge(t *testing.T) {
	client, err := k8sapi.New(&k8sapi.Config{Host: "https://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		le   *LeaderElection
		want string
	}{
		{nil, "1"},
		{&LeaderElection{Client: client, Name: "l"}, "0"}, // not running: no Lease held
	} {
		reg := metrics.NewRegistry()
		c := &Controller{Name: "t", Metrics: reg, LeaderElection: tc.le}
		if err := c.init(); err != nil {
			t.Fatal(err)
		}
		if v := sample(t, reg, "operator_leader"); v != tc.want {
			t.Errorf("leader election %v: operator_leader %q, want %s", tc.le != nil, v, tc.want)
		}
	}
}

// fakeCache is a cache whose sync and health the test sets.
type fakeCache struct {
	synced bool
	err    error
}

func (f *fakeCache) Run(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
func (f *fakeCache) HasSynced() bool               { return f.synced }
func (f *fakeCache) Healthy(time.Time) error       { return f.err }

// Checks logs the reasons of failing checks when the set of failing
// checks changes, and once a minute while it stays the same.
func TestChecksLogReasonsOnChange(t *testing.T) {
	var logs logbuf.Buffer
	c := &Controller{Name: "t", Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	widgets, services := &fakeCache{synced: true}, &fakeCache{synced: true}
	c.caches = []named{{widgets, "widgets", nil, nil}, {services, "services", nil, nil}}
	lines := func() int { return strings.Count(logs.String(), "\n") }
	now := time.Unix(1000, 0)
	c.Checks(now)
	if lines() != 0 {
		t.Fatalf("logged while ready: %s", logs.String())
	}
	services.err = errors.New("watch: failing for 1s: forbidden")
	c.Checks(now)
	c.Checks(now.Add(10 * time.Second)) // same checks: not again
	if lines() != 1 || !strings.Contains(logs.String(), `msg="readyz: checks failing" failed="watch services" reasons="watch services: watch: failing for 1s: forbidden"`) {
		t.Fatalf("want one line with the reason, got:\n%s", logs.String())
	}
	widgets.synced = false
	c.Checks(now.Add(11 * time.Second)) // another check fails: at once
	if lines() != 2 || !strings.Contains(logs.String(), `failed="watch widgets, watch services" reasons="watch widgets: not synced; watch services`) {
		t.Fatalf("want a line for the new set, got:\n%s", logs.String())
	}
	c.Checks(now.Add(72 * time.Second)) // a minute on: again
	widgets.synced, services.err = true, nil
	checks := c.Checks(now.Add(73 * time.Second))
	if lines() != 4 || !strings.Contains(logs.String(), `msg="readyz: every check passes again"`) {
		t.Fatalf("want a reminder and a recovery line, got:\n%s", logs.String())
	}
	if want := []Check{{"watch widgets", nil}, {"watch services", nil}}; !slices.Equal(checks, want) {
		t.Errorf("checks %v, want %v", checks, want)
	}
}

// A garbage collector deletes the children after their owner, and the
// owner's cache may not have seen the owner's deletion when a child's
// arrives. The reconcile that the child's deletion queues checks the
// owner with the server first: gone there, it is gone from the cache's
// reads; still there, the reconcile reads it as before.
func TestChildDeletedBeforeItsOwner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &Controller{Name: "test"}
		owner := object("ns", "b", "5")
		owner.UID = "uid-b"
		prim := newMemSource(owner)
		own := newMemSource(child("ns", "b-child", "example.com/v1", "Thing", "b"))
		prims := WatchPrimary(c, watch.Config[obj]{Source: prim, Name: "prims"})
		kids := WatchOwned(c, watch.Config[obj]{Source: own, Name: "owned"}, thingsRes)
		var found []bool // whether each reconcile read its owner
		var mu sync.Mutex
		c.Reconciler = ReconcilerFunc(func(_ context.Context, key string) (queue.Result, error) {
			_, ok := prims.Get("ns", "b")
			mu.Lock()
			defer mu.Unlock()
			found = append(found, ok)
			return queue.Result{}, nil
		})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go func() { _ = c.Run(ctx) }()
		settle()

		// A user deletes the child: the server still has the owner.
		own.events <- k8sapi.WatchEvent[obj]{Type: k8sapi.Deleted, Object: child("ns", "b-child", "example.com/v1", "Thing", "b")}
		synctest.Wait()
		// The owner is deleted, and the child made again is; the owner's
		// watch has not said so yet. A deletion the controller made itself
		// is not checked; one by someone else is.
		for _, mine := range []bool{true, false} {
			own.events <- k8sapi.WatchEvent[obj]{Type: k8sapi.Added, Object: child("ns", "b-child", "example.com/v1", "Thing", "b")}
			synctest.Wait()
			prim.items = nil
			if kid, ok := kids.Get("ns", "b-child"); ok && mine {
				kids.Deleted(kid)
			}
			own.events <- k8sapi.WatchEvent[obj]{Type: k8sapi.Deleted, Object: child("ns", "b-child", "example.com/v1", "Thing", "b")}
			synctest.Wait()
		}
		mu.Lock()
		defer mu.Unlock()
		if want := []bool{true, true, true, true, true, false}; !slices.Equal(found, want) {
			t.Errorf("owner read by each reconcile: %v, want %v", found, want)
		}
	})
}
