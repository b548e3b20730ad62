// Package faults runs the operator binary, as its ServiceAccount, through
// the faults it must survive: a restarted API server, a compacted etcd,
// cut and silent connections, throttling and server errors, conflicting
// writers, a rotated token, a killed leader, out-of-band deletes, bad
// input, a hostile API server and bad configuration.
//
// Most tests share the package's plane and work in a namespace of their
// own, each with an operator of its own. Tests that disturb the whole
// plane (restart the API server, compact etcd, loosen the CRD) share a
// second plane, scratch, one after the other. No test runs in parallel:
// the machine has two cores.
package faults

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/e2e/harness"
	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/testenv/controlplane"
	"github.com/zerodep-k8s/widget-operator/widget"
)

var (
	env harness.Env
	// scratch is the plane of the tests that disturb a whole plane.
	scratch controlplane.Shared
)

func TestMain(m *testing.M) {
	code := env.Main(m)
	scratch.Close()
	os.Exit(code)
}

const image = "registry.k8s.io/pause:3.10"

var (
	eventually = harness.Eventually
	ctxFor     = harness.Ctx
	widgets    = harness.Widgets
	admin      = harness.Admin
)

// op is an operator started by a test, with its endpoints on.
type op struct {
	*harness.Operator
	MetricsAddr, ProbeAddr string

	mu      sync.Mutex
	secrets []string // must never appear in its log or metrics
}

// startOp runs the operator binary on p with its metrics and probe
// endpoints on free ports, and args after the defaults. When the test ends
// it is stopped, and its whole log (at debug level) and its metrics are
// checked for the credentials it was given.
func startOp(t *testing.T, p *controlplane.Plane, args ...string) *op {
	t.Helper()
	o := &op{MetricsAddr: harness.FreeAddr(t), ProbeAddr: harness.FreeAddr(t)}
	args = append([]string{"--metrics-bind-address", o.MetricsAddr, "--health-probe-bind-address", o.ProbeAddr}, args...)
	o.Operator = env.StartOperator(t, p, args...)
	o.addTokenOf(t, filepath.Join(o.Dir, "serviceaccount"))
	t.Cleanup(func() {
		// The metrics first, while the process runs.
		var metrics string
		if !o.Exited() {
			if m, err := harness.Metrics(o.MetricsAddr); err == nil {
				metrics = fmt.Sprint(m)
			}
		}
		o.Stop()
		log := o.Log()
		o.mu.Lock()
		defer o.mu.Unlock()
		for _, s := range o.secrets {
			if strings.Contains(log, s) {
				t.Errorf("the operator's log holds a credential (%d bytes)", len(s))
			}
			if strings.Contains(metrics, s) {
				t.Errorf("the operator's metrics hold a credential (%d bytes)", len(s))
			}
		}
	})
	return o
}

// addTokenOf adds the token in a service-account folder to the secrets.
func (o *op) addTokenOf(t *testing.T, saDir string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(saDir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	o.addSecret(strings.TrimSpace(string(b)))
}

func (o *op) addSecret(s string) {
	if s == "" {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.secrets = append(o.secrets, s)
	// The token's signature alone is enough to leak it.
	if i := strings.LastIndexByte(s, '.'); i > 0 && len(s)-i > 20 {
		o.secrets = append(o.secrets, s[i+1:])
	}
}

// metric returns the sum of the samples of family name whose labels
// contain every one of labels (such as `resource="widgets"`).
func (o *op) metric(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	m, err := harness.Metrics(o.MetricsAddr)
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	return sumMetric(m, name, labels...)
}

func sumMetric(m map[string]float64, name string, labels ...string) float64 {
	var sum float64
next:
	for k, v := range m {
		if k != name && !strings.HasPrefix(k, name+"{") {
			continue
		}
		for _, l := range labels {
			if !strings.Contains(k, l) {
				continue next
			}
		}
		sum += v
	}
	return sum
}

// waitReadyz waits until /readyz answers want.
func (o *op) waitReadyz(t *testing.T, want int, timeout time.Duration) string {
	t.Helper()
	var body string
	eventually(t, timeout, func() (bool, string) {
		if o.Exited() {
			t.Fatalf("the operator exited:\n%s", harness.Tail(o.Log(), 2048))
		}
		code, b, err := harness.Readyz(o.ProbeAddr)
		body = b
		return err == nil && code == want, fmt.Sprintf("readyz %d %q %v", code, b, err)
	})
	return body
}

// alive fails the test if the operator has exited.
func (o *op) alive(t *testing.T) {
	t.Helper()
	if o.Exited() {
		t.Fatalf("the operator exited: %v\n%s", o.Cmd.ProcessState, harness.Tail(o.Log(), 4096))
	}
}

// count returns the number of log lines holding every one of subs.
func (o *op) count(subs ...string) int {
	n := 0
next:
	for _, line := range strings.Split(o.Log(), "\n") {
		for _, s := range subs {
			if !strings.Contains(line, s) {
				continue next
			}
		}
		n++
	}
	return n
}

// createWidgets creates n Widgets named prefix-0 ... in ns, eight at a
// time, and returns their names.
func createWidgets(t *testing.T, c *k8sapi.Client, ns, prefix string, n int, replicas int32) []string {
	t.Helper()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	forEach(t, names, 8, func(name string) error {
		_, err := widgets(c).Create(ctxFor(t, time.Minute), ns, harness.NewWidget(name, image, replicas), k8sapi.WriteOptions{})
		return err
	})
	return names
}

// forEach runs f on every item, width at a time, and fails the test on
// the first error.
func forEach[T any](t *testing.T, items []T, width int, f func(T) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(items))
	sem := make(chan struct{}, width)
	for _, it := range items {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := f(it); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// ready reports whether a Widget is Ready at its generation with its
// replicas.
func ready(w *widget.Widget) bool {
	st := w.Status
	return st.Phase == widget.PhaseReady && st.ObservedGeneration == w.Generation &&
		st.ReadyReplicas == w.Spec.ReplicasOrDefault()
}

// waitAllReady waits until every Widget named is Ready, listing them.
func waitAllReady(t *testing.T, c *k8sapi.Client, ns string, names []string, timeout time.Duration) {
	t.Helper()
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	eventually(t, timeout, func() (bool, string) {
		list, err := widgets(c).List(ctxFor(t, 30*time.Second), ns, k8sapi.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		n := 0
		var notReady string
		for i := range list.Items {
			w := &list.Items[i]
			if !want[w.Name] {
				continue
			}
			if ready(w) {
				n++
			} else if notReady == "" {
				notReady = fmt.Sprintf("%s: %+v", w.Name, w.Status)
			}
		}
		return n == len(want), fmt.Sprintf("%d of %d Ready; e.g. %s", n, len(want), notReady)
	})
}

// countReady returns how many Widgets in ns are Ready.
func countReady(t *testing.T, c *k8sapi.Client, ns string) int {
	t.Helper()
	list, err := widgets(c).List(ctxFor(t, 30*time.Second), ns, k8sapi.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := range list.Items {
		if ready(&list.Items[i]) {
			n++
		}
	}
	return n
}

// deployments and services are typed clients.
func deployments(c *k8sapi.Client) k8sapi.Typed[k8sapi.Deployment] {
	return k8sapi.For[k8sapi.Deployment](c, k8sapi.Deployments)
}

func services(c *k8sapi.Client) k8sapi.Typed[k8sapi.Service] {
	return k8sapi.For[k8sapi.Service](c, k8sapi.Services)
}

// writesPerSecond returns the largest number of requests in any one
// second of reqs' times.
func maxPerSecond(times []time.Time) int {
	best := 0
	j := 0
	for i := range times {
		for times[i].Sub(times[j]) >= time.Second {
			j++
		}
		best = max(best, i-j+1)
	}
	return best
}

func bg() context.Context { return context.Background() }

type controlplaneEvent = controlplane.AuditEvent
