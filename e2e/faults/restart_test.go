package faults

import (
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/e2e/harness"
	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

var informers = []string{"widgets", "deployments", "services"}

// TestAPIServerRestart kills kube-apiserver while 100 Widgets converge and
// starts it again 10 seconds later.
func TestAPIServerRestart(t *testing.T) {
	p := scratch.Get(t)
	ns := p.TestNamespace(t)
	c := admin(t, p)
	o := startOp(t, p, "--namespace", ns)
	o.waitReadyz(t, http.StatusOK, 90*time.Second)

	names := createWidgets(t, c, ns, "w", 100, 1)
	eventually(t, 3*time.Minute, func() (bool, string) {
		n := countReady(t, c, ns)
		return n >= 5, fmt.Sprintf("%d Ready", n)
	})
	if n := countReady(t, c, ns); n == len(names) {
		t.Logf("all %d Ready before the kill; the restart is then of a converged set", n)
	} else {
		t.Logf("%d of %d Ready at the kill", n, len(names))
	}
	p.KillAPIServer()
	killed := time.Now()
	body := o.waitReadyz(t, http.StatusServiceUnavailable, 60*time.Second)
	t.Logf("readyz 503 after %v: %q", time.Since(killed).Round(time.Millisecond), strings.TrimSpace(body))
	// The fault itself lasts 10 seconds: this is its length, not a wait
	// for a condition.
	time.Sleep(time.Until(killed.Add(10 * time.Second)))
	if err := p.StartAPIServer(ctxFor(t, 2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	o.waitReadyz(t, http.StatusOK, 2*time.Minute)
	t.Logf("readyz 200 %v after the restart", time.Since(restarted).Round(time.Millisecond))
	waitAllReady(t, c, ns, names, 5*time.Minute)
	t.Logf("all %d Widgets Ready %v after the restart", len(names), time.Since(restarted).Round(time.Second))
	o.alive(t)
	for _, r := range informers {
		relists := o.metric(t, "widget_operator_watch_relists_total", `resource="`+r+`"`)
		reconnects := o.metric(t, "widget_operator_watch_reconnects_total", `resource="`+r+`"`)
		t.Logf("%s: %v relists, %v reconnects", r, relists, reconnects)
		if relists > 1 {
			t.Errorf("%s: %v relists, want at most one per watch", r, relists)
		}
	}
}

// TestCompaction freezes the operator (SIGSTOP), so that its watches fall
// behind, then deletes a Widget, changes and adds others, compacts etcd
// past every resourceVersion the operator has seen and restarts the API
// server, so that its watch cache forgets the history too. Thawed, the
// operator must relist, converge, and forget the deleted Widget.
func TestCompaction(t *testing.T) {
	p := scratch.Get(t)
	ns := p.TestNamespace(t)
	c := admin(t, p)
	o := startOp(t, p, "--namespace", ns)
	names := createWidgets(t, c, ns, "keep", 4, 1)
	createWidgets(t, c, ns, "gone", 1, 1)
	waitAllReady(t, c, ns, append(names, "gone-0"), 3*time.Minute)
	before := o.metric(t, "widget_operator_watch_relists_total", `resource="widgets"`)

	if err := o.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	t.Cleanup(func() {
		if stopped {
			_ = o.Cmd.Process.Signal(syscall.SIGCONT)
		}
	})
	ctx := ctxFor(t, 5*time.Minute)
	if err := widgets(c).Delete(ctx, ns, "gone-0", k8sapi.DeleteOptions{PropagationPolicy: "Background"}); err != nil {
		t.Fatal(err)
	}
	if _, err := widgets(c).Patch(ctx, ns, "keep-0", k8sapi.MergePatch, []byte(`{"spec":{"replicas":2}}`), k8sapi.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	names = append(names, createWidgets(t, c, ns, "new", 2, 1)...)
	// The garbage collector removes the deleted Widget's children.
	eventually(t, 2*time.Minute, func() (bool, string) {
		_, derr := deployments(c).Get(ctx, ns, "gone-0", k8sapi.GetOptions{})
		_, serr := services(c).Get(ctx, ns, "gone-0", k8sapi.GetOptions{})
		return k8sapi.IsNotFound(derr) && k8sapi.IsNotFound(serr), fmt.Sprintf("deployment: %v; service: %v", derr, serr)
	})
	rev, err := p.CompactEtcd(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p.StopAPIServer()
	if err := p.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("compacted etcd at revision %d and restarted the API server", rev)
	thawed := time.Now()
	if err := o.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	stopped = false

	eventually(t, 2*time.Minute, func() (bool, string) {
		n := o.metric(t, "widget_operator_watch_relists_total", `resource="widgets"`)
		return n > before, fmt.Sprintf("widgets relists %v", n)
	})
	waitAllReady(t, c, ns, names, 3*time.Minute)
	t.Logf("relisted and converged %v after the thaw", time.Since(thawed).Round(time.Second))
	// The deleted Widget stays gone: nothing recreates its children over
	// a quiet stretch (an absence, so a fixed window of 10 seconds).
	time.Sleep(10 * time.Second)
	_, derr := deployments(c).Get(ctx, ns, "gone-0", k8sapi.GetOptions{})
	_, serr := services(c).Get(ctx, ns, "gone-0", k8sapi.GetOptions{})
	if !k8sapi.IsNotFound(derr) || !k8sapi.IsNotFound(serr) {
		t.Fatalf("children of the deleted Widget came back: deployment %v, service %v", derr, serr)
	}
	for _, e := range harness.WritesBy(t, p, ns, thawed) {
		if e.Name == "gone-0" || strings.HasPrefix(e.Name, "gone-0.") {
			t.Errorf("a write about the deleted Widget after the thaw: %s", harness.Describe([]controlplaneEvent{e}))
		}
	}
	if n := o.count("reconcile failed", `"name":"gone-0"`); n > 1 {
		t.Errorf("%d failed reconciles of the deleted Widget", n)
	}
	for _, r := range informers {
		t.Logf("%s: %v relists", r, o.metric(t, "widget_operator_watch_relists_total", `resource="`+r+`"`))
	}
}
