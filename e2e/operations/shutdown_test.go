package operations

import (
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/e2e/harness"
	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/k8sapi/namespaced"
	"github.com/zerodep-k8s/widget-operator/widget"
)

// TestShutdownDuringBurst sends SIGTERM to an operator in the middle of a
// burst of 200 new Widgets: it stops taking keys, lets the reconciles in
// flight finish, exits 0 within the shutdown bound, and a new operator
// converges every Widget.
func TestShutdownDuringBurst(t *testing.T) {
	const (
		count   = 200
		workers = 4
		bound   = 30 * time.Second // the default --graceful-shutdown-timeout
		// exitMargin is what a loaded machine adds to the promise (an
		// exit by the bound): cancelling the reconciles, closing the
		// watches and reaping the process. A shutdown that ignores the
		// bound waits for the 200 Widgets' writes and still fails.
		exitMargin = 10 * time.Second
	)
	p := env.Plane.Get(t)
	ns := p.TestNamespace(t)
	c := admin(t, p)
	ctx := ctxFor(t, 6*time.Minute)
	first := env.StartOperator(t, p, "--namespace", ns, "--workers", fmt.Sprint(workers))
	t.Cleanup(first.Stop)
	eventually(t, 60*time.Second, func() (bool, string) {
		_, ok := firstLog(t, first, "starting workers")
		return ok, "the operator has not started its workers"
	})

	// Create the Widgets from a few goroutines, as fast as the API
	// server takes them.
	var wg sync.WaitGroup
	errs := make(chan error, count)
	for g := range 8 {
		wg.Go(func() {
			for i := g; i < count; i += 8 {
				if _, err := widgets(c).Create(ctx, ns, newWidget(fmt.Sprintf("burst-%03d", i), image, 1), k8sapi.WriteOptions{}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	// SIGTERM once the operator is busy with the burst.
	reconciled := func() int {
		return countLogs(t, first, func(r logRecord) bool { return r.Msg == "reconciled" && r.Namespace == ns })
	}
	eventually(t, 60*time.Second, func() (bool, string) {
		n := reconciled()
		return n >= 20, fmt.Sprintf("%d reconciles so far", n)
	})
	first.Signal(t, syscall.SIGTERM)
	signalled := time.Now()
	select {
	case <-first.Done():
	case <-time.After(bound + exitMargin):
		t.Fatalf("no exit within %v of SIGTERM (the %v bound plus %v for a loaded machine)", bound+exitMargin, bound, exitMargin)
	}
	took := time.Since(signalled)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if code := first.ExitCode(); code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0", code)
	}
	t.Logf("exited 0 %v after SIGTERM, having reconciled %d times", took.Round(time.Millisecond), reconciled())

	// It stopped taking keys: after the shutdown line, only the reconciles
	// already in flight (at most one per worker) finished.
	after := 0
	shutdown := false
	for _, r := range logRecords(t, first) {
		switch {
		case r.Msg == "shutting down: finishing reconciles in flight":
			shutdown = true
		case shutdown && r.Controller == "widget":
			after++
		}
		if r.Msg == "stopped" && !shutdown {
			t.Error(`"stopped" before "shutting down"`)
		}
	}
	if !shutdown {
		t.Fatal(`no "shutting down" line`)
	}
	if after > workers {
		t.Errorf("%d reconciles ended after the shutdown began, want at most the %d in flight", after, workers)
	}
	if _, ok := firstLog(t, first, "stopped"); !ok {
		t.Error(`no "stopped" line`)
	}

	// Converged: the Widget's status is of its current generation and
	// not Failed, and its Deployment and Service exist, controlled by it.
	// (Ready needs 200 pods from the controller manager, the scheduler
	// and kwok, which takes minutes on a small shared machine; the count
	// of Ready Widgets is logged.)
	deployments := k8sapi.For[k8sapi.Deployment](c, k8sapi.Deployments)
	services := k8sapi.For[k8sapi.Service](c, k8sapi.Services)
	converged := func() (done, ready int) {
		ws, err := namespaced.In(widgets(c), ns).ListAll(ctxFor(t, 30*time.Second), k8sapi.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ds, err := namespaced.In(deployments, ns).ListAll(ctxFor(t, 30*time.Second), k8sapi.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ss, err := namespaced.In(services, ns).ListAll(ctxFor(t, 30*time.Second), k8sapi.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		owned := map[string]int{}
		for _, d := range ds.Items {
			if ref := d.ControllerOf(); ref != nil && ref.Kind == widget.WidgetKind && ref.Name == d.Name {
				owned[d.Name+"/"+ref.UID]++
			}
		}
		for _, s := range ss.Items {
			if ref := s.ControllerOf(); ref != nil && ref.Kind == widget.WidgetKind && ref.Name == s.Name {
				owned[s.Name+"/"+ref.UID]++
			}
		}
		for _, w := range ws.Items {
			st := w.Status
			if st.ObservedGeneration == w.Generation && st.Phase != "" && st.Phase != widget.PhaseFailed && owned[w.Name+"/"+w.UID] == 2 {
				done++
			}
			if st.Phase == widget.PhaseReady {
				ready++
			}
		}
		return done, ready
	}
	done, _ := converged()
	t.Logf("%d of %d Widgets had converged when the operator stopped", done, count)
	if done == count {
		t.Log("the first operator had finished the burst: the restart has nothing left to do")
	}

	second := env.StartOperator(t, p, "--namespace", ns, "--workers", fmt.Sprint(workers))
	t.Cleanup(second.Stop)
	began := time.Now()
	eventually(t, 3*time.Minute, func() (bool, string) {
		done, ready := converged()
		return done == count, fmt.Sprintf("%d of %d Widgets converged, %d Ready", done, count, ready)
	})
	_, ready := converged()
	t.Logf("all %d Widgets converged %v after the restart (%d Ready so far)", count, time.Since(began).Round(time.Second), ready)
}

// TestShutdownBound slows every reconcile down with a client rate limit
// (--qps 1), so that reconciles are in flight when the signal comes: they
// get --graceful-shutdown-timeout to finish and are then cancelled, and
// the process still exits 0; a second signal exits at once.
func TestShutdownBound(t *testing.T) {
	p := env.Plane.Get(t)
	c := admin(t, p)
	// start runs an operator over a namespace of 8 new Widgets and
	// returns it once a reconcile is in flight.
	start := func(t *testing.T, timeout time.Duration, extra ...string) *harness.Operator {
		ns := p.TestNamespace(t)
		metricsAddr := freeAddr(t)
		args := append([]string{"--namespace", ns, "--qps", "1", "--burst", "8",
			"--graceful-shutdown-timeout", timeout.String(), "--metrics-bind-address", metricsAddr}, extra...)
		o := env.StartOperator(t, p, args...)
		t.Cleanup(o.Stop)
		for i := range 8 {
			if _, err := widgets(c).Create(ctxFor(t, time.Minute), ns, newWidget(fmt.Sprintf("slow-%d", i), image, 1), k8sapi.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		eventually(t, 60*time.Second, func() (bool, string) {
			code, body, err := get("http://" + metricsAddr + "/metrics")
			if err != nil || code != 200 {
				return false, fmt.Sprintf("/metrics: %d %v", code, err)
			}
			v, _ := parseExposition(t, body).value("controller_runtime_active_workers", "controller", "widget")
			return v >= 1, fmt.Sprintf("controller_runtime_active_workers = %v", v)
		})
		return o
	}
	// Each exit bound below is the documented promise plus exitMargin,
	// for a loaded 2-core machine running control planes under -race:
	// cancelling, releasing the Lease, closing watches and reaping the
	// process take seconds there.
	const exitMargin = 5 * time.Second
	waitExit := func(t *testing.T, o *harness.Operator, within time.Duration) time.Duration {
		t.Helper()
		began := time.Now()
		select {
		case <-o.Done():
			return time.Since(began)
		case <-time.After(within):
			t.Fatalf("no exit within %v", within)
			return 0
		}
	}

	t.Run("in-flight reconciles are cut at the bound", func(t *testing.T) {
		const bound = 3 * time.Second
		o := start(t, bound)
		o.Signal(t, syscall.SIGTERM)
		// The promise: an exit at the bound. The margin here is 10s, as
		// the 8 reconciles are cut mid-request; ignoring the bound lets
		// the writes at --qps 1 run over 20s and fails.
		took := waitExit(t, o, bound+10*time.Second)
		t.Logf("exited %d %v after SIGTERM, with a %v bound", o.ExitCode(), took.Round(time.Millisecond), bound)
		if code := o.ExitCode(); code != 0 {
			t.Errorf("exit code %d, want 0", code)
		}
		// At --qps 1, the 8 Widgets' writes take over 20 s: reconciles
		// are still in flight at the bound, and must be cut there.
		if _, ok := firstLog(t, o, "shutting down: finishing reconciles in flight"); !ok {
			t.Error(`no "shutting down" line`)
		}
		if _, ok := firstLog(t, o, "shutdown timeout passed with reconciles still in flight; cancelling them"); !ok {
			t.Error("no reconcile was cut at the bound")
		} else if took < bound {
			t.Errorf("cancelled after %v, before the %v bound", took, bound)
		}
	})

	t.Run("a leader hands its lease over after the bound", func(t *testing.T) {
		// With leader election the lease is not renewed while the
		// reconciles in flight finish, so they get at most the renew
		// deadline less a retry period (8s), however long the flag
		// allows: then the lease is released, not left to expire.
		lease := fmt.Sprintf("e2e-bound-%d", time.Now().UnixNano())
		harness.GrantLease(t, p, lease, harness.OperatorSA)
		o := start(t, 30*time.Second, "--leader-elect", "--leader-election-namespace", harness.OperatorNamespace,
			"--leader-election-id", lease)
		o.Signal(t, syscall.SIGTERM)
		// The promise: the reconciles are cut at the renew deadline less
		// a retry period (8s), the lease released, the process gone.
		// The bound is at most the 15s lease less a retry period (13s),
		// past which another replica could lead while these reconciles
		// run; an exit that waits for the 30s flag fails.
		const promise = 8 * time.Second
		took := waitExit(t, o, 20*time.Second)
		t.Logf("exited %d %v after SIGTERM", o.ExitCode(), took.Round(time.Millisecond))
		if code := o.ExitCode(); code != 0 {
			t.Errorf("exit code %d, want 0", code)
		}
		if _, ok := firstLog(t, o, "leader: released the lease"); !ok {
			t.Error("the lease was not released")
		}
		if took > promise+exitMargin {
			t.Errorf("exit %v after SIGTERM, want under %v (the renew deadline less a retry period, plus %v for a loaded machine)",
				took, promise+exitMargin, exitMargin)
		}
	})

	t.Run("a second signal exits at once", func(t *testing.T) {
		o := start(t, 30*time.Second)
		o.Signal(t, syscall.SIGTERM)
		eventually(t, 10*time.Second, func() (bool, string) {
			_, ok := firstLog(t, o, "shutting down: finishing reconciles in flight")
			return ok || o.Exited(), "not shutting down yet"
		})
		if o.Exited() {
			t.Skip("the reconciles in flight finished before a second signal could be sent")
		}
		o.Signal(t, syscall.SIGINT)
		// The promise: an exit at once. Ignoring the second signal
		// waits for the 30s flag and fails.
		took := waitExit(t, o, exitMargin)
		t.Logf("exited %d %v after the second signal", o.ExitCode(), took.Round(time.Millisecond))
		if code := o.ExitCode(); code != 1 {
			t.Errorf("exit code %d after a second signal, want 1", code)
		}
		if !strings.Contains(o.Log(), "widget-operator: second signal, exiting now") {
			t.Error("no line about the second signal")
		}
	})
}
