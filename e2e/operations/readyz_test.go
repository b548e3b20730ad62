package operations

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/testenv/controlplane"
)

// TestReadyzFollowsAPIServer stops the API server under a running
// operator: /readyz turns 503 naming each failing watch, its reason
// withheld (and logged), while /healthz stays 200, and both are 200 again
// once the API server is back. The outage is logged once per watch, not
// once per retry. It uses a plane of its own
// (etcd and kube-apiserver only), since it stops the API server.
func TestReadyzFollowsAPIServer(t *testing.T) {
	p := controlplane.StartForTest(t, controlplane.Options{Bare: true})
	c := admin(t, p)
	probeAddr, metricsAddr := freeAddr(t), freeAddr(t)
	o := env.StartOperator(t, p, "--health-probe-bind-address", probeAddr, "--metrics-bind-address", metricsAddr)
	t.Cleanup(o.Stop)
	readyz, healthz := "http://"+probeAddr+"/readyz", "http://"+probeAddr+"/healthz"
	waitStatus(t, readyz, http.StatusOK, 60*time.Second)

	outage := time.Now()
	p.StopAPIServer()
	body := waitStatus(t, readyz, http.StatusServiceUnavailable, 60*time.Second)
	t.Logf("/readyz 503 %s after the API server was stopped:\n%s", time.Since(outage).Round(time.Millisecond), body)
	// One line per check, the failing ones with their reasons withheld,
	// as the API server's own /readyz answers.
	lines := strings.Split(strings.TrimSpace(body), "\n")
	for _, l := range lines {
		name, ok := strings.CutPrefix(l, "[-]")
		if ok {
			name, ok = strings.CutSuffix(name, " failed: reason withheld")
		} else if name, ok = strings.CutPrefix(l, "[+]"); ok {
			name, ok = strings.CutSuffix(name, " ok")
		}
		if !ok && l != "readyz check failed" || ok && name != "watch widgets" && name != "watch deployments" && name != "watch services" {
			t.Errorf("/readyz line %q is not a check of a watch", l)
		}
	}
	if lines[len(lines)-1] != "readyz check failed" {
		t.Errorf("/readyz does not end with %q", "readyz check failed")
	}
	if code, _, err := get(healthz); err != nil || code != http.StatusOK {
		t.Errorf("/healthz during the outage: %d %v", code, err)
	}
	// Every watch fails within a few retries; /readyz lists all three.
	eventually(t, 60*time.Second, func() (bool, string) {
		code, b, err := get(readyz)
		if err != nil {
			return false, err.Error()
		}
		return code == http.StatusServiceUnavailable && strings.Count(b, "[-]watch ") == 3, fmt.Sprintf("%d %q", code, b)
	})
	// The reasons are in the log, not in the answer.
	if n := countLogs(t, o, func(r logRecord) bool { return r.Msg == "readyz: checks failing" }); n == 0 {
		t.Errorf("no \"readyz: checks failing\" line in the log")
	}
	if _, b, _ := get(readyz); strings.Contains(b, "connect") || strings.Contains(b, "failing for") {
		t.Errorf("/readyz gives a reason away: %q", b)
	}
	// Keep the server down until every watch has retried a few times.
	retries := func(inf string) int {
		return countLogs(t, o, func(r logRecord) bool {
			return r.Informer == inf && strings.HasPrefix(r.Msg, "watch: ") && r.Level == "DEBUG"
		})
	}
	eventually(t, 60*time.Second, func() (bool, string) {
		w, d, s := retries("widgets"), retries("deployments"), retries("services")
		return min(w, d, s) >= 3, fmt.Sprintf("debug retry lines: widgets %d, deployments %d, services %d", w, d, s)
	})

	if err := p.StartAPIServer(ctxFor(t, 2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	waitStatus(t, readyz, http.StatusOK, 90*time.Second)
	t.Logf("/readyz 200 %s after the API server was back", time.Since(back).Round(time.Millisecond))
	if code, _, err := get(healthz); err != nil || code != http.StatusOK {
		t.Errorf("/healthz after the outage: %d %v", code, err)
	}

	// One warning per watch for the whole outage; its retries are debug
	// lines only.
	for _, inf := range []string{"widgets", "deployments", "services"} {
		warn := countLogs(t, o, func(r logRecord) bool {
			return r.Informer == inf && strings.HasPrefix(r.Msg, "watch: ") && (r.Level == "WARN" || r.Level == "ERROR")
		})
		if warn != 1 {
			t.Errorf("watch %s: %d warnings for one outage of %d retries, want 1", inf, warn, retries(inf))
		}
	}
	m, _ := scrape(t, metricsAddr)
	if v, _ := m.value("widget_operator_watch_reconnects_total", "resource", "widgets"); v < 1 {
		t.Errorf("widget_operator_watch_reconnects_total{resource=widgets} = %v, want >= 1", v)
	}

	// And the operator works again: a new Widget gets its Deployment and
	// a status (no pods on this bare plane).
	ns := p.TestNamespace(t)
	if _, err := widgets(c).Create(ctxFor(t, time.Minute), ns, newWidget("after", image, 1), k8sapi.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, func() (bool, string) {
		w, err := widgets(c).Get(ctxFor(t, 10*time.Second), ns, "after", k8sapi.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return w.Status.Phase != "" && w.Status.ObservedGeneration == w.Generation, fmt.Sprintf("status %+v", w.Status)
	})
	if _, err := k8sapi.For[k8sapi.Deployment](c, k8sapi.Deployments).Get(ctxFor(t, 10*time.Second), ns, "after", k8sapi.GetOptions{}); err != nil {
		t.Errorf("no Deployment after the outage: %v", err)
	}
}
