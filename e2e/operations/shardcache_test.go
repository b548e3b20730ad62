package operations

import (
	"fmt"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/e2e/harness"
	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/reconcile"
	"github.com/zerodep-k8s/widget-operator/testenv/controlplane"
	"github.com/zerodep-k8s/widget-operator/widget"
)

// TestShardedCaches runs two replicas with --shards 4 on a plane of its
// own whose API server serves shard selectors (the ShardedListAndWatch
// gate on): each caches only the Widgets of its shards, the two caches
// summing to every Widget, and labels each child with its owner's
// bucket; every Widget converges. Then one replica stops, and the other
// takes every shard, caches every Widget and converges a new one.
func TestShardedCaches(t *testing.T) {
	start := time.Now()
	p := controlplane.StartForTest(t, controlplane.Options{APIServerArgs: []string{"--feature-gates=ShardedListAndWatch=true"}})
	t.Logf("plane with ShardedListAndWatch started in %v", time.Since(start).Round(time.Millisecond))
	ns := p.TestNamespace(t)
	c := admin(t, p)
	ctx := ctxFor(t, 3*time.Minute)
	const shards, n = 4, 40
	type replica struct {
		o       *harness.Operator
		metrics string
	}
	run := func() *replica {
		r := &replica{metrics: freeAddr(t)}
		r.o = env.StartOperator(t, p, "--namespace", ns, "--shards", strconv.Itoa(shards),
			"--leader-election-namespace", harness.OperatorNamespace, "--metrics-bind-address", r.metrics)
		t.Cleanup(r.o.Stop)
		return r
	}
	a, b := run(), run()
	for _, r := range []*replica{a, b} {
		eventually(t, 60*time.Second, func() (bool, string) {
			_, ok := firstLog(t, r.o, "shard selectors served: each replica caches the Widgets and children of its shards only")
			return ok, "no line that shard selectors are served yet:\n" + harness.Tail(r.o.Log(), 2000)
		})
	}
	for i := range n {
		if _, err := widgets(c).Create(ctx, ns, newWidget(fmt.Sprintf("w-%02d", i), image, 1), k8sapi.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ready := func(want int) func() (bool, string) {
		return func() (bool, string) {
			l, err := widgets(c).List(ctx, ns, k8sapi.ListOptions{})
			if err != nil {
				return false, err.Error()
			}
			done := 0
			for _, w := range l.Items {
				if w.Status.Phase == widget.PhaseReady {
					done++
				}
			}
			return done == want, fmt.Sprintf("%d of %d Widgets Ready", done, want)
		}
	}
	eventually(t, 90*time.Second, ready(n))
	cached := func(r *replica, resource string) float64 {
		m, _ := scrape(t, r.metrics)
		v, _ := m.value("widget_operator_cache_objects", "resource", resource)
		return v
	}
	cachedBytes := func(r *replica) float64 {
		m, _ := scrape(t, r.metrics)
		w, _ := m.value("widget_operator_cache_bytes", "resource", "widgets")
		d, _ := m.value("widget_operator_cache_bytes", "resource", "deployments")
		return w + d
	}
	// Both replicas hold shards, each caches only its share, and the
	// shares sum to every Widget and child once the shards are settled.
	eventually(t, 60*time.Second, func() (bool, string) {
		wa, wb := cached(a, "widgets"), cached(b, "widgets")
		da, db := cached(a, "deployments"), cached(b, "deployments")
		return wa > 0 && wb > 0 && wa+wb == n && da+db == n && wa < n && wb < n,
			fmt.Sprintf("widgets cached %v + %v, deployments %v + %v, want shares of %d", wa, wb, da, db, n)
	})
	deps, err := k8sapi.For[k8sapi.Deployment](c, k8sapi.Deployments).List(ctx, ns, k8sapi.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svcs, err := k8sapi.For[k8sapi.Service](c, k8sapi.Services).List(ctx, ns, k8sapi.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var children []k8sapi.ObjectMeta
	for _, d := range deps.Items {
		children = append(children, d.ObjectMeta)
	}
	for _, s := range svcs.Items {
		children = append(children, s.ObjectMeta)
	}
	t.Logf("Widgets cached: %v and %v of %d; bytes of Widgets and Deployments: %v and %v", cached(a, "widgets"), cached(b, "widgets"), n,
		cachedBytes(a), cachedBytes(b))
	for _, m := range children {
		want := ""
		if ref := m.ControllerOf(); ref != nil {
			want = strconv.Itoa(reconcile.Bucket(string(ref.UID)))
		}
		if got := m.Labels[widget.LabelOwnerBucket]; got != want || want == "" {
			t.Errorf("child %s: label %s=%q, want %q", m.Name, widget.LabelOwnerBucket, got, want)
		}
	}
	if len(children) != 2*n {
		t.Errorf("%d children, want %d", len(children), 2*n)
	}

	// b stops: a takes its shards, lists their objects and converges a
	// new Widget.
	b.o.Signal(t, syscall.SIGTERM)
	<-b.o.Done()
	if _, err := widgets(c).Create(ctx, ns, newWidget("w-new", image, 1), k8sapi.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, ready(n+1))
	eventually(t, 30*time.Second, func() (bool, string) {
		w, d := cached(a, "widgets"), cached(a, "deployments")
		return w == n+1 && d == n+1, fmt.Sprintf("a caches %v Widgets and %v Deployments, want %d", w, d, n+1)
	})
	t.Logf("a alone: bytes of Widgets and Deployments %v", cachedBytes(a))
	t.Logf("done in %v", time.Since(start).Round(time.Millisecond))
}
