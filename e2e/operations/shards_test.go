package operations

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/e2e/harness"
	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/testenv/controlplane"
)

// TestSharding runs replicas with --shards 6 as one ServiceAccount, told
// apart by the identity each puts in its User-Agent: one replica alone
// takes every shard; three share them two each and converge 300 Widgets
// together; a SIGKILLed replica's shards are taken once their Leases
// expire; a replica stopped with SIGTERM hands its shards over at once; a
// shard Lease deleted by hand is recovered. Over the whole run no Widget
// is written by two replicas within one lease duration of each other.
func TestSharding(t *testing.T) {
	p := env.Plane.Get(t)
	ns := p.TestNamespace(t)
	c := admin(t, p)
	ctx := ctxFor(t, 10*time.Minute)
	const (
		shards        = 6
		leaseDuration = 15 * time.Second // the documented default
		retryPeriod   = 2 * time.Second
		margin        = 6 * time.Second // a loaded 2-core machine running control planes under -race
	)
	prefix := "e2e-" + ns
	var names []string
	for k := range shards {
		names = append(names, fmt.Sprintf("%s-shard-%d", prefix, k), fmt.Sprintf("%s-member-%d", prefix, k))
	}
	env.Install(t, p)
	role := "widget-e2e-shards-" + ns
	kubectl(t, p, append([]string{"-n", harness.OperatorNamespace, "create", "role", role, "--verb=get,update",
		"--resource=leases.coordination.k8s.io"}, prefixEach("--resource-name=", names)...)...)
	kubectl(t, p, "-n", harness.OperatorNamespace, "create", "rolebinding", role, "--role", role,
		"--serviceaccount", harness.OperatorNamespace+":"+harness.OperatorSA)
	t.Cleanup(func() {
		harness.KubectlErr(p, "-n", harness.OperatorNamespace, "delete", "--ignore-not-found", "rolebinding/"+role, "role/"+role)
	})

	type replica struct {
		name, id, metrics string
		o                 *harness.Operator
	}
	start := func(name string) *replica {
		r := &replica{name: name, metrics: freeAddr(t)}
		r.o = env.StartOperator(t, p, "--namespace", ns, "--shards", strconv.Itoa(shards),
			"--leader-election-namespace", harness.OperatorNamespace, "--leader-election-id", prefix,
			"--metrics-bind-address", r.metrics)
		t.Cleanup(r.o.Stop)
		eventually(t, 60*time.Second, func() (bool, string) {
			rec, ok := firstLog(t, r.o, "sharding")
			r.id = rec.Identity
			return ok && r.id != "", name + ": no \"sharding\" line yet"
		})
		return r
	}
	leases := k8sapi.For[k8sapi.Lease](c, k8sapi.Leases)
	// holders counts the live shard Leases by holder identity.
	holders := func() map[string]int {
		out := map[string]int{}
		for k := range shards {
			l, err := leases.Get(ctx, harness.OperatorNamespace, fmt.Sprintf("%s-shard-%d", prefix, k), k8sapi.GetOptions{})
			if err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
				out[*l.Spec.HolderIdentity]++
			}
		}
		return out
	}
	spread := func(want map[string]int) func() (bool, string) {
		return func() (bool, string) {
			h := holders()
			for id, n := range want {
				if h[id] != n {
					return false, fmt.Sprintf("shard holders %v, want %v", h, want)
				}
			}
			return true, ""
		}
	}
	create := func(from, n int) {
		for i := from; i < from+n; i++ {
			if _, err := widgets(c).Create(ctx, ns, newWidget(fmt.Sprintf("w-%03d", i), image, 1), k8sapi.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// converged waits for n Widgets Ready: settled, so that no write for
	// them is due when the replicas change next.
	converged := func(n int) func() (bool, string) {
		return func() (bool, string) {
			l, err := widgets(c).List(ctx, ns, k8sapi.ListOptions{})
			if err != nil {
				return false, err.Error()
			}
			done := 0
			for _, w := range l.Items {
				if w.Status.Phase == "Ready" {
					done++
				}
			}
			return done >= n, fmt.Sprintf("%d of %d Widgets Ready", done, n)
		}
	}

	from := time.Now()
	a := start("replica a")
	if _, ok := firstLog(t, a.o, "shard selectors not served: each replica caches every Widget and child"); !ok {
		t.Errorf("no line that shard selectors are not served, on a plane without ShardedListAndWatch")
	}
	eventually(t, 60*time.Second, spread(map[string]int{a.id: shards}))
	create(0, 30)
	eventually(t, 2*time.Minute, converged(30))

	b, rc := start("replica b"), start("replica c")
	eventually(t, 90*time.Second, spread(map[string]int{a.id: 2, b.id: 2, rc.id: 2}))
	create(30, 270)
	eventually(t, 4*time.Minute, converged(300))
	// Every replica wrote: the work is shared.
	by := writers(t, p, ns, from)
	for _, r := range []*replica{a, b, rc} {
		if by[r.id] == 0 {
			t.Errorf("%s (%s) made no write; writes by identity: %v", r.name, r.id, by)
		}
	}

	// SIGKILL: nothing is released; a and b take c's shards once its
	// Leases have not changed for a lease duration, at their next try.
	rc.o.Signal(t, syscall.SIGKILL)
	killed := time.Now()
	eventually(t, leaseDuration+2*retryPeriod+margin, spread(map[string]int{a.id: 3, b.id: 3}))
	t.Logf("c's shards taken %v after its SIGKILL", time.Since(killed).Round(time.Millisecond))
	create(300, 30)
	eventually(t, 2*time.Minute, converged(330))

	// SIGTERM: b releases its shards, and a takes them at its next try.
	b.o.Signal(t, syscall.SIGTERM)
	stopped := time.Now()
	eventually(t, retryPeriod+margin, spread(map[string]int{a.id: shards}))
	t.Logf("b's shards taken %v after its SIGTERM", time.Since(stopped).Round(time.Millisecond))

	// A shard Lease deleted by hand comes back, held.
	if err := leases.Delete(ctx, harness.OperatorNamespace, prefix+"-shard-0", k8sapi.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, leaseDuration+margin, spread(map[string]int{a.id: shards}))
	create(330, 10)
	eventually(t, 2*time.Minute, converged(340))

	// a's metrics: all shards held, and every move counted (6 taken at
	// start, 4 given to b and c, 4 taken from them, 1 lost and retaken).
	m, _ := scrape(t, a.metrics)
	if v, ok := m.value("widget_operator_shards_held"); !ok || v != shards {
		t.Errorf("widget_operator_shards_held = %v (found %v), want %d", v, ok, shards)
	}
	if v, ok := m.value("widget_operator_shard_transitions_total"); !ok || v < 15 {
		t.Errorf("widget_operator_shard_transitions_total = %v (found %v), want at least 15", v, ok)
	}

	// No Widget written by two replicas within one lease duration.
	type write struct {
		at time.Time
		id string
	}
	byWidget := map[string][]write{}
	events, err := p.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if e.Namespace != ns || e.Stage != "ResponseComplete" || !harness.IsWrite(e) || e.Received.Before(from) {
			continue
		}
		if id := identityOf(e.UserAgent); id != "" && (e.Resource == "widgets" || e.Resource == "deployments" || e.Resource == "services") {
			byWidget[e.Name] = append(byWidget[e.Name], write{e.Received, id})
		}
	}
	for name, ws := range byWidget {
		sort.Slice(ws, func(i, j int) bool { return ws[i].at.Before(ws[j].at) })
		for i := 1; i < len(ws); i++ {
			if ws[i].id != ws[i-1].id && ws[i].at.Sub(ws[i-1].at) < leaseDuration {
				t.Errorf("Widget %s written by %s and by %s %v apart", name, ws[i-1].id, ws[i].id, ws[i].at.Sub(ws[i-1].at))
			}
		}
	}
}

// writers counts the writes in ns since from by replica identity.
func writers(t *testing.T, p *controlplane.Plane, ns string, from time.Time) map[string]int {
	t.Helper()
	events, err := p.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, e := range events {
		if e.Namespace == ns && e.Stage == "ResponseComplete" && harness.IsWrite(e) && !e.Received.Before(from) {
			if id := identityOf(e.UserAgent); id != "" {
				out[id]++
			}
		}
	}
	return out
}

// identityOf returns the replica identity an operator puts in its
// User-Agent, "widget-operator/<version> (<identity>)"; "" for any other.
func identityOf(ua string) string {
	rest, ok := strings.CutPrefix(ua, "widget-operator/")
	if !ok {
		return ""
	}
	_, id, ok := strings.Cut(rest, " (")
	if !ok || !strings.HasSuffix(id, ")") {
		return ""
	}
	return strings.TrimSuffix(id, ")")
}

func prefixEach(prefix string, ss []string) []string {
	out := slices.Clone(ss)
	for i := range out {
		out[i] = prefix + out[i]
	}
	return out
}
