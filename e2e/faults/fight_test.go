package faults

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/e2e/harness"
	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/testenv/controlplane"
)

// TestFieldManagerFight has another field manager take the Deployment's
// replicas by forced apply, five rounds, and add a label and annotation.
// The operator takes replicas back with a write or two per round, leaves
// the other manager's fields alone, and goes quiet when the fight stops.
func TestFieldManagerFight(t *testing.T) {
	p := env.Plane.Get(t)
	ns := p.TestNamespace(t)
	c := admin(t, p)
	startOp(t, p, "--namespace", ns)
	waitAllReady(t, c, ns, createWidgets(t, c, ns, "fought", 1, 2), 2*time.Minute)
	raw := k8sapi.For[json.RawMessage](c, k8sapi.Deployments)
	ctx := ctxFor(t, 5*time.Minute)
	const rounds = 5
	for i := range rounds {
		from := time.Now()
		body := json.RawMessage(fmt.Sprintf(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"fought-0",
			"labels":{"example.com/fighter":"yes"},"annotations":{"example.com/round":"%d"}},"spec":{"replicas":5}}`, i))
		if _, err := raw.Apply(ctx, ns, "fought-0", &body, k8sapi.PatchOptions{FieldManager: "fighter", Force: true}); err != nil {
			t.Fatal(err)
		}
		eventually(t, time.Minute, func() (bool, string) {
			d, err := deployments(c).Get(ctx, ns, "fought-0", k8sapi.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return *d.Spec.Replicas == 2, fmt.Sprintf("replicas %d", *d.Spec.Replicas)
		})
		var writes []controlplaneEvent
		for _, e := range harness.WritesBy(t, p, ns, from) {
			if e.Resource == "deployments" && e.Name == "fought-0" {
				writes = append(writes, e)
			}
		}
		t.Logf("round %d: %d operator writes to the Deployment", i, len(writes))
		if len(writes) > 2 {
			t.Errorf("round %d: %d writes to take replicas back:%s", i, len(writes), harness.Describe(writes))
		}
	}
	d, err := deployments(c).Get(ctx, ns, "fought-0", k8sapi.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Labels["example.com/fighter"] != "yes" || d.Annotations["example.com/round"] != fmt.Sprint(rounds-1) {
		t.Errorf("the other manager's fields were touched: labels %v annotations %v", d.Labels, d.Annotations)
	}
	// The fight is over: no more writes. An absence, over 10 seconds.
	from := time.Now()
	time.Sleep(10 * time.Second)
	// Status writes follow the pods as they scale back; the Deployment
	// itself must see none.
	var after []controlplaneEvent
	for _, e := range harness.WritesBy(t, p, ns, from) {
		if e.Resource == "deployments" {
			after = append(after, e)
		}
	}
	if len(after) != 0 {
		t.Errorf("%d writes to the Deployment after the fight:%s", len(after), harness.Describe(after))
	}
}

// TestTokenRotation replaces the token in the operator's service-account
// folder with a new one, after invalidating the old one by deleting and
// recreating the ServiceAccount. The same process keeps working.
func TestTokenRotation(t *testing.T) {
	p := env.Plane.Get(t)
	ns := p.TestNamespace(t)
	c := admin(t, p)
	o := startOp(t, p, "--namespace", ns)
	waitAllReady(t, c, ns, createWidgets(t, c, ns, "before", 1, 1), 2*time.Minute)
	pid := o.Cmd.Process.Pid
	ctx := ctxFor(t, 3*time.Minute)
	saPath := "/api/v1/namespaces/" + harness.OperatorNamespace + "/serviceaccounts/" + harness.OperatorSA
	if err := p.Do(ctx, http.MethodDelete, saPath, nil, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() (bool, string) {
		err := p.Do(ctx, http.MethodGet, saPath, nil, nil)
		return err != nil && strings.Contains(err.Error(), "404"), fmt.Sprint(err)
	})
	if err := p.CreateServiceAccount(ctx, harness.OperatorNamespace, harness.OperatorSA); err != nil {
		t.Fatal(err)
	}
	saDir := filepath.Join(o.Dir, "serviceaccount")
	oldToken, err := os.ReadFile(filepath.Join(saDir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	// The old token must be refused before the test goes on.
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(p.CAData())
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	eventually(t, time.Minute, func() (bool, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.Host()+"/apis/example.com/v1/namespaces/"+ns+"/widgets", nil)
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(oldToken)))
		resp, err := hc.Do(req)
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusUnauthorized, "old token answered " + resp.Status
	})
	if err := p.WriteServiceAccountDir(ctx, saDir, harness.OperatorNamespace, harness.OperatorSA); err != nil {
		t.Fatal(err)
	}
	o.addTokenOf(t, saDir)
	rotated := time.Now()
	names := createWidgets(t, c, ns, "after", 2, 1)
	waitAllReady(t, c, ns, names, time.Minute)
	t.Logf("new Widgets Ready %v after the rotation", time.Since(rotated).Round(time.Second))
	o.alive(t)
	if o.Cmd.Process.Pid != pid {
		t.Fatal("the operator restarted")
	}
	// The watches, opened with the old token, are reopened with the new
	// one when they end; a change of a Widget made afterwards must still
	// arrive.
	if _, err := widgets(c).Patch(ctx, ns, "before-0", k8sapi.MergePatch, []byte(`{"spec":{"replicas":2}}`), k8sapi.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAllReady(t, c, ns, []string{"before-0"}, time.Minute)
	t.Logf("401s logged: %d", o.count("401"))
}

// TestLeaderLoss runs two replicas under two ServiceAccounts bound to the
// same roles, kills the leader with 200 Widgets in flight, and checks that
// the follower takes over, every Widget converges, and the two never write
// in the same second.
func TestLeaderLoss(t *testing.T) {
	p := env.Plane.Get(t)
	ns := p.TestNamespace(t)
	c := admin(t, p)
	env.Install(t, p)
	const saB = "widget-operator-b"
	userB := "system:serviceaccount:" + harness.OperatorNamespace + ":" + saB
	bindings := fmt.Sprintf(`apiVersion: v1
kind: ServiceAccount
metadata: {name: %[1]s, namespace: %[2]s}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: %[1]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: widget-operator}
subjects: [{kind: ServiceAccount, name: %[1]s, namespace: %[2]s}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: %[1]s-leader-election, namespace: %[2]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: widget-operator-leader-election}
subjects: [{kind: ServiceAccount, name: %[1]s, namespace: %[2]s}]
`, saB, harness.OperatorNamespace)
	file := filepath.Join(t.TempDir(), "b.yaml")
	if err := os.WriteFile(file, []byte(bindings), 0o600); err != nil {
		t.Fatal(err)
	}
	harness.Kubectl(t, p, "apply", "-f", file)

	lease := "faults-" + ns[len(ns)-6:]
	harness.GrantLease(t, p, lease, harness.OperatorSA)
	harness.GrantLease(t, p, lease, saB)
	args := []string{"--namespace", ns, "--leader-elect", "--leader-election-id", lease}
	began := time.Now()
	a := startOp(t, p, args...)
	eventually(t, time.Minute, func() (bool, string) {
		a.alive(t)
		m, err := harness.Metrics(a.MetricsAddr)
		return err == nil && sumMetric(m, "widget_operator_leader") == 1, fmt.Sprint("A not leading yet ", err)
	})
	dirB := t.TempDir()
	kcB := harness.WriteOperatorKubeconfig(t, p, dirB)
	if err := p.WriteServiceAccountDir(ctxFor(t, 30*time.Second), filepath.Join(dirB, "serviceaccount"), harness.OperatorNamespace, saB); err != nil {
		t.Fatal(err)
	}
	b := startOp(t, p, append([]string{"--kubeconfig", kcB}, args...)...)
	b.addTokenOf(t, filepath.Join(dirB, "serviceaccount"))
	b.waitReadyz(t, http.StatusOK, 90*time.Second)
	if b.metric(t, "widget_operator_leader") != 0 {
		t.Fatal("B leads while A does")
	}

	ctx := ctxFor(t, 10*time.Minute)
	// The leader dies with Widgets in flight: 50 created, some of them
	// reconciled, then the kill, then 150 more while no one leads.
	names := createWidgets(t, c, ns, "w", 50, 1)
	eventually(t, 2*time.Minute, func() (bool, string) {
		ds, err := deployments(c).List(ctx, ns, k8sapi.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(ds.Items) >= 5, fmt.Sprintf("%d Deployments", len(ds.Items))
	})
	if err := a.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	<-a.Done()
	ds, err := deployments(c).List(ctx, ns, k8sapi.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d of 50 Widgets had a Deployment at the kill", len(ds.Items))
	names = append(names, createWidgets(t, c, ns, "late", 150, 1)...)
	eventually(t, time.Minute, func() (bool, string) {
		b.alive(t)
		return b.metric(t, "widget_operator_leader") == 1, "B not leading"
	})
	t.Logf("B leads %v after the kill", time.Since(killed).Round(time.Second))
	// The fake Node holds 110 pods, so 200 Widgets cannot all be Ready:
	// converged here means every Widget's status is written for its
	// generation, and its Deployment and Service exist.
	eventually(t, 6*time.Minute, func() (bool, string) {
		list, err := widgets(c).List(ctx, ns, k8sapi.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		n := 0
		for _, w := range list.Items {
			if w.Status.ObservedGeneration == w.Generation && w.Status.Phase != "" && w.Status.Phase != "Failed" {
				n++
			}
		}
		ds, err := deployments(c).List(ctx, ns, k8sapi.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		ss, err := services(c).List(ctx, ns, k8sapi.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return n == len(names) && len(ds.Items) == len(names) && len(ss.Items) == len(names),
			fmt.Sprintf("%d of %d observed; %d Deployments, %d Services", n, len(names), len(ds.Items), len(ss.Items))
	})
	t.Logf("all %d converged %v after the kill (%d Ready)", len(names), time.Since(killed).Round(time.Second), countReady(t, c, ns))

	events, err := p.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	bySecond := map[int64]map[string]bool{}
	var lastA, firstB time.Time
	for _, e := range events {
		if !harness.IsWrite(e) || e.Stage != "ResponseComplete" || e.Received.Before(began) {
			continue
		}
		if e.User != harness.OperatorUser && e.User != userB {
			continue
		}
		if e.Resource == "leases" && e.Name != lease {
			continue
		}
		if e.Namespace != ns && e.Resource != "leases" {
			continue
		}
		s := e.Received.Unix()
		if bySecond[s] == nil {
			bySecond[s] = map[string]bool{}
		}
		bySecond[s][e.User] = true
		switch {
		case e.User == harness.OperatorUser && e.Received.After(lastA):
			lastA = e.Received
		case e.User == userB && (firstB.IsZero() || e.Received.Before(firstB)):
			firstB = e.Received
		}
	}
	for s, users := range bySecond {
		if len(users) > 1 {
			t.Errorf("both replicas wrote in the second %s", time.Unix(s, 0).Format(time.TimeOnly))
		}
	}
	t.Logf("A's last write %v after the kill; B's first write (the lease) %v after it",
		lastA.Sub(killed).Round(time.Millisecond), firstB.Sub(killed).Round(time.Millisecond))
	if !firstB.After(lastA) {
		t.Errorf("B wrote before A's last write")
	}
}

// TestOutOfBandDeletes deletes children, Widgets and a whole namespace
// while the operator reconciles them.
func TestOutOfBandDeletes(t *testing.T) {
	p := env.Plane.Get(t)
	ns1 := p.TestNamespace(t)
	ns2 := p.TestNamespace(t)
	c := admin(t, p)
	o := startOp(t, p) // all namespaces
	o.waitReadyz(t, http.StatusOK, 90*time.Second)
	ctx := ctxFor(t, 5*time.Minute)

	kept := createWidgets(t, c, ns1, "kept", 5, 1)
	doomed := createWidgets(t, c, ns1, "doomed", 5, 1)
	createWidgets(t, c, ns2, "w", 10, 1)
	// Children of the kept Widgets are deleted as soon as they appear,
	// twice each; the doomed Widgets and the second namespace go at once.
	forEach(t, doomed, 5, func(name string) error {
		return widgets(c).Delete(ctx, ns1, name, k8sapi.DeleteOptions{PropagationPolicy: "Background"})
	})
	if err := p.DeleteNamespace(ctx, ns2); err != nil {
		t.Fatal(err)
	}
	forEach(t, kept, 5, func(name string) error {
		var last string
		for range 2 {
			var uid string
			for deadline := time.Now().Add(time.Minute); uid == "" || uid == last; {
				if time.Now().After(deadline) {
					return fmt.Errorf("no new Deployment %s", name)
				}
				if d, err := deployments(c).Get(ctx, ns1, name, k8sapi.GetOptions{}); err == nil {
					uid = string(d.UID)
				}
			}
			last = uid
			if err := deployments(c).Delete(ctx, ns1, name, k8sapi.DeleteOptions{}); err != nil && !k8sapi.IsNotFound(err) {
				return err
			}
			if err := services(c).Delete(ctx, ns1, name, k8sapi.DeleteOptions{}); err != nil && !k8sapi.IsNotFound(err) {
				return err
			}
		}
		return nil
	})
	waitAllReady(t, c, ns1, kept, 3*time.Minute)
	eventually(t, 3*time.Minute, func() (bool, string) {
		err := p.Do(ctx, http.MethodGet, "/api/v1/namespaces/"+ns2, nil, nil)
		return err != nil && strings.Contains(err.Error(), "404"), fmt.Sprint("namespace still there: ", err)
	})
	// No orphans: every labelled child in ns1 belongs to a kept Widget.
	defer func() {
		if t.Failed() {
			for _, line := range strings.Split(o.Log(), "\n") {
				if strings.Contains(line, ns1) {
					t.Log(line)
				}
			}
		}
	}()
	eventually(t, 2*time.Minute, func() (bool, string) {
		ds, err := deployments(c).List(ctx, ns1, k8sapi.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		ss, err := services(c).List(ctx, ns1, k8sapi.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var orphans, names []string
		for _, d := range ds.Items {
			names = append(names, "deployment/"+d.Name)
			if strings.HasPrefix(d.Name, "doomed") {
				orphans = append(orphans, "deployment/"+d.Name)
			}
		}
		for _, s := range ss.Items {
			names = append(names, "service/"+s.Name)
			if strings.HasPrefix(s.Name, "doomed") {
				orphans = append(orphans, "service/"+s.Name)
			}
		}
		return len(orphans) == 0 && len(ds.Items) == len(kept) && len(ss.Items) == len(kept), fmt.Sprintf("orphans %v; children %v, want a Deployment and a Service for each of %v", orphans, names, kept)
	})
	// No error loop: over a quiet 10 seconds (an absence), no reconcile
	// fails.
	failed := o.count("reconcile failed")
	time.Sleep(10 * time.Second)
	if n := o.count("reconcile failed"); n != failed {
		t.Errorf("%d reconciles failed in a quiet 10 seconds", n-failed)
	}
	t.Logf("%d failed reconciles in all; %d in ns2", failed, o.count("reconcile failed", ns2))
	if n := o.count("reconcile failed", ns2); n > 20 {
		t.Errorf("%d failed reconciles in the deleted namespace", n)
	}
	o.alive(t)
}

var _ = controlplane.AuditEvent{}
