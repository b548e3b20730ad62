package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"example.com/examples/netpol"
	"github.com/zerodep-k8s/widget-operator/e2e/harness"
	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/reconcile"
	"github.com/zerodep-k8s/widget-operator/testenv/controlplane"
)

// TestOperator runs the whole process, its two controllers on one
// Namespace cache, against the local control plane, and checks what an
// operator of another module gets from the kit: both controllers
// converge, one list and one watch of Namespaces serve them both,
// /readyz, /metrics under its own prefix behind TokenReview and
// SubjectAccessReview, one elected leader, and Events reported as itself
// (a policy created and deleted, an unknown size, a policy it does not
// control).
func TestOperator(t *testing.T) {
	p := plane.Get(t)
	start := time.Now()
	ctx := harness.Ctx(t, 3*time.Minute)
	c := harness.Admin(t, p)
	small, medium, typo, foreign := p.TestNamespace(t), p.TestNamespace(t), p.TestNamespace(t), p.TestNamespace(t)
	namespaces := k8sapi.For[namespace](c, k8sapi.Namespaces)
	label := func(ns string, value any) {
		t.Helper()
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{sizeLabel: value}}})
		if _, err := namespaces.Patch(ctx, "", ns, k8sapi.MergePatch, patch, k8sapi.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	reader, stranger := metricsTokens(t, p, c)

	probe, metricsAddr := harness.FreeAddr(t), harness.FreeAddr(t)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- run(runCtx, []string{"-kubeconfig", p.Kubeconfig(), "-probe-addr", probe, "-metrics-addr", metricsAddr,
			"-lease-namespace", "default"}, t.Output())
	}()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()

	policies := k8sapi.For[netpol.Policy](c, netpol.NetworkPolicies)
	// A policy of the name that the operator does not control is left
	// alone.
	ingressOnly := &netpol.Policy{ObjectMeta: k8sapi.ObjectMeta{Name: netpol.Name}, Spec: netpol.PolicySpec{PolicyTypes: []string{"Ingress"}}}
	if _, err := policies.Create(ctx, foreign, ingressOnly, k8sapi.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	label(small, "small")
	label(medium, "medium")
	label(typo, "huge")
	label(foreign, "small")
	quotas := k8sapi.For[object[quotaSpec]](c, k8sapi.Resource{Version: "v1", Resource: "resourcequotas", Namespaced: true})
	limitRanges := k8sapi.For[object[limitRangeSpec]](c, k8sapi.Resource{Version: "v1", Resource: "limitranges", Namespaced: true})
	// children says which of its three children ns has.
	children := func(ns string) string {
		var have []string
		if _, err := quotas.Get(ctx, ns, childName, k8sapi.GetOptions{}); err == nil {
			have = append(have, "quota")
		}
		if _, err := limitRanges.Get(ctx, ns, childName, k8sapi.GetOptions{}); err == nil {
			have = append(have, "limits")
		}
		if _, err := policies.Get(ctx, ns, netpol.Name, k8sapi.GetOptions{}); err == nil {
			have = append(have, "policy")
		}
		return strings.Join(have, " ")
	}
	for _, ns := range []string{small, medium} {
		harness.Eventually(t, time.Minute, func() (bool, string) { got := children(ns); return got == "quota limits policy", ns + ": " + got })
	}
	pol, err := policies.Get(ctx, small, netpol.Name, k8sapi.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns, err := namespaces.Get(ctx, "", small, k8sapi.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !reconcile.IsControlledBy(&pol.ObjectMeta, ns.UID) || fmt.Sprint(pol.Spec.PolicyTypes) != "[Ingress Egress]" || len(pol.Spec.PodSelector.MatchLabels) != 0 {
		t.Errorf("policy: owners %+v, spec %+v", pol.OwnerReferences, pol.Spec)
	}
	label(small, nil)
	harness.Eventually(t, time.Minute, func() (bool, string) { got := children(small); return got == "", small + ": " + got })

	code, body, err := harness.Readyz(probe)
	if err != nil || code != http.StatusOK {
		t.Errorf("/readyz: %d %q %v", code, body, err)
	}
	checkMetrics(t, metricsAddr, reader, stranger)
	checkEvents(t, ctx, c, map[string]string{small: "quota-example Normal Isolated, quota-example Normal Unisolated",
		typo: "quota-example Normal Isolated, quota-example Warning UnknownSize", foreign: "quota-example Warning NotControlled"})
	if pol, err := policies.Get(ctx, foreign, netpol.Name, k8sapi.GetOptions{}); err != nil || fmt.Sprint(pol.Spec.PolicyTypes) != "[Ingress]" {
		t.Errorf("the policy the operator does not control: %+v %v", pol, err)
	}
	checkLeader(t, ctx, c)
	checkOneWatch(t, p, start)
}

// metricsTokens returns the tokens of two ServiceAccounts: one that may
// get /metrics, one that may not.
func metricsTokens(t *testing.T, p *controlplane.Plane, c *k8sapi.Client) (reader, stranger string) {
	t.Helper()
	ctx := harness.Ctx(t, time.Minute)
	rbac := func(resource string) k8sapi.Typed[json.RawMessage] {
		return k8sapi.For[json.RawMessage](c, k8sapi.Resource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: resource})
	}
	role := json.RawMessage(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"quota-example-metrics-reader"},
		"rules":[{"nonResourceURLs":["/metrics"],"verbs":["get"]}]}`)
	binding := json.RawMessage(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding","metadata":{"name":"quota-example-metrics-reader"},
		"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"quota-example-metrics-reader"},
		"subjects":[{"kind":"ServiceAccount","name":"metrics-reader","namespace":"default"}]}`)
	for _, obj := range []struct {
		resource string
		body     *json.RawMessage
	}{{"clusterroles", &role}, {"clusterrolebindings", &binding}} {
		if _, err := rbac(obj.resource).Create(ctx, "", obj.body, k8sapi.WriteOptions{}); err != nil && !k8sapi.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	return harness.ServiceAccountToken(t, p, "default", "metrics-reader"), harness.ServiceAccountToken(t, p, "default", "stranger")
}

// checkMetrics checks that /metrics answers the reader (once the
// authorizer has seen its binding) with the operator's own series, and
// refuses a request without a token and one of a user without the right.
func checkMetrics(t *testing.T, addr, reader, stranger string) {
	t.Helper()
	var body string
	harness.Eventually(t, 30*time.Second, func() (bool, string) {
		code, b, err := harness.ScrapeTLS(addr, reader)
		body = b
		return code == http.StatusOK, fmt.Sprintf("/metrics with the reader's token: %d %v", code, err)
	})
	for _, want := range []string{"quota_example_leader 1", `controller_runtime_reconcile_total{controller="default-deny",result="success"}`,
		`controller_runtime_reconcile_total{controller="quota",result="success"}`, "quota_example_watch_events_total"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, harness.Tail(body, 4000))
		}
	}
	for token, want := range map[string]int{"": http.StatusUnauthorized, stranger: http.StatusForbidden} {
		if code, _, err := harness.ScrapeTLS(addr, token); err != nil || code != want {
			t.Errorf("/metrics with token %.10q: %d %v, want %d", token, code, err, want)
		}
	}
}

// checkEvents checks the Events about each Namespace of want: their
// reporting controller, type and reason, sorted.
func checkEvents(t *testing.T, ctx context.Context, c *k8sapi.Client, want map[string]string) {
	t.Helper()
	events := k8sapi.For[k8sapi.Event](c, k8sapi.Resource{Group: "events.k8s.io", Version: "v1", Resource: "events", Namespaced: true})
	harness.Eventually(t, 30*time.Second, func() (bool, string) {
		list, err := events.List(ctx, "default", k8sapi.ListOptions{}) // of cluster-scoped objects
		if err != nil {
			return false, err.Error()
		}
		seen := map[string][]string{}
		for _, e := range list.Items {
			if e.Regarding.Kind == "Namespace" {
				seen[e.Regarding.Name] = append(seen[e.Regarding.Name], e.ReportingController+" "+e.Type+" "+e.Reason)
			}
		}
		for ns, w := range want {
			slices.Sort(seen[ns])
			if got := strings.Join(seen[ns], ", "); got != w {
				return false, "Events about " + ns + ": " + got + ", want " + w
			}
		}
		return true, ""
	})
}

// checkLeader checks that the process holds its Lease.
func checkLeader(t *testing.T, ctx context.Context, c *k8sapi.Client) {
	t.Helper()
	lease, err := k8sapi.For[k8sapi.Lease](c, k8sapi.Leases).Get(ctx, "default", "quota-example", k8sapi.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		t.Errorf("Lease quota-example has no holder: %+v", lease.Spec)
	}
}

// checkOneWatch checks in the audit log that the operator, since start,
// read the Namespaces with one streaming list, which goes on as the watch,
// for its two controllers: one request of their initial state, and no
// list. A read of one Namespace by name is not the cache's: a controller
// makes one to confirm an owner when a child's deletion it did not record
// itself reaches the cache first (see reconcile.Controller).
func checkOneWatch(t *testing.T, p *controlplane.Plane, start time.Time) {
	t.Helper()
	events, err := p.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	count := func(verb, query string) int {
		return controlplane.CountRequests(events, func(e controlplane.AuditEvent) bool {
			return e.UserAgent == fieldManager && e.Resource == "namespaces" && e.Verb == verb && e.Subresource == "" &&
				strings.Contains(e.RequestURI, query) && !strings.Contains(e.RequestURI, "fieldSelector=metadata.name") && !e.Received.Before(start)
		})
	}
	lists, watches, streams := count("list", ""), count("watch", ""), count("watch", "sendInitialEvents=true")
	t.Logf("audit log: the operator's requests of Namespaces, for its two controllers: %d list, %d watch (%d streaming lists)", lists, watches, streams)
	if lists != 0 || watches != 1 || streams != 1 {
		t.Errorf("want no list and 1 watch of Namespaces, a streaming list")
	}
}
