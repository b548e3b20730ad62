package shipping

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/e2e/harness"
	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/testenv/controlplane"
	"github.com/zerodep-k8s/widget-operator/widget"
)

// The RBAC tests run the operator as a ServiceAccount named like the
// operator's, in a namespace of the test's own (its "operator namespace",
// where its Lease lives too), granted exactly what manifests/rbac/ grants,
// with the namespaces rewritten. Each identity is its own audit-log user,
// so one shared plane serves every variant.

// identity is one operator ServiceAccount and the namespace it runs in.
type identity struct {
	namespace string
	user      string
}

// newIdentity makes an operator namespace with the ServiceAccount of
// manifests/rbac/service_account.yaml and the leader-election Role of
// manifests/rbac/leader_election.yaml in it. drop, when not nil, edits
// the Lease rules first.
func newIdentity(t *testing.T, p *controlplane.Plane, drop func([]policyRule) []policyRule) identity {
	t.Helper()
	ns := p.TestNamespace(t)
	var objs []rbacObject
	for _, o := range append(loadRBAC(t, "service_account.yaml"), loadRBAC(t, "leader_election.yaml")...) {
		o.Metadata.Namespace = ns
		retargetSubjects(&o, ns)
		if o.Kind == "Role" && drop != nil {
			o.Rules = drop(o.Rules)
		}
		objs = append(objs, o)
	}
	applyObjects(t, p, objs)
	return identity{namespace: ns, user: harness.ServiceAccountUser(ns, harness.OperatorSA)}
}

// retargetSubjects points the operator's ServiceAccount subjects at ns.
func retargetSubjects(o *rbacObject, ns string) {
	for i := range o.Subjects {
		if o.Subjects[i].Kind == "ServiceAccount" && o.Subjects[i].Name == harness.OperatorSA {
			o.Subjects[i].Namespace = ns
		}
	}
}

// namespaceRBAC is manifests/rbac/role.yaml granted in watched to id, its
// rules edited by drop when that is not nil.
func namespaceRBAC(t *testing.T, id identity, watched string, drop func([]policyRule) []policyRule) []rbacObject {
	t.Helper()
	objs := loadRBAC(t, "role.yaml")
	for i := range objs {
		objs[i].Metadata.Namespace = watched
		retargetSubjects(&objs[i], id.namespace)
		if objs[i].Kind == "Role" && drop != nil {
			objs[i].Rules = drop(objs[i].Rules)
		}
	}
	return objs
}

// clusterRBAC is manifests/rbac/cluster_role.yaml granted to id, under
// names of id's own, deleted when the test ends.
func clusterRBAC(t *testing.T, p *controlplane.Plane, id identity) []rbacObject {
	t.Helper()
	objs := loadRBAC(t, "cluster_role.yaml")
	name := "widget-operator-" + id.namespace
	for i := range objs {
		objs[i].Metadata.Name = name
		if objs[i].RoleRef != nil {
			objs[i].RoleRef.Name = name
		}
		retargetSubjects(&objs[i], id.namespace)
	}
	t.Cleanup(func() {
		harness.KubectlErr(p, "delete", "--ignore-not-found", "clusterrolebinding/"+name, "clusterrole/"+name)
	})
	return objs
}

// grant is one (API group, resource, verb) a rule allows.
type grant struct{ group, resource, verb string }

func grantsOf(rules []policyRule) []grant {
	var out []grant
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					out = append(out, grant{g, res, v})
				}
			}
		}
	}
	return out
}

// notSeenInAudit are the grants the scenario does not exercise as a
// request of that verb: get of a child, which the operator sends only when
// its create was refused (an ownership conflict), and update of
// widgets/finalizers, which the API server checks when an owner reference
// sets blockOwnerDeletion. The ablation test proves them.
var notSeenInAudit = map[grant]bool{
	{"apps", "deployments", "get"}:                  true,
	{"", "services", "get"}:                         true,
	{"example.com", "widgets/finalizers", "update"}: true,
}

// TestRBACNamespaceMode runs the whole Widget scenario with --namespace
// and only the Role of role.yaml (in the watched namespace) and the
// leader-election Role: no 403, and every granted verb used.
func TestRBACNamespaceMode(t *testing.T) {
	p := env.Plane.Get(t)
	env.Install(t, p) // the CRD
	id := newIdentity(t, p, nil)
	watched := p.TestNamespace(t)
	objs := namespaceRBAC(t, id, watched, nil)
	applyObjects(t, p, objs)
	tail := newAuditTail(t, p)
	o := env.StartOperatorIn(t, p, id.namespace, harness.OperatorSA,
		"--namespace", watched, "--leader-elect", "--leader-election-namespace", id.namespace)
	widgetScenario(t, p, watched)
	checkAudit(t, tail, id, append(objs[0].Rules, loadRBAC(t, "leader_election.yaml")[0].Rules...))
	if o.Exited() {
		t.Fatalf("the operator exited:\n%s", harness.Tail(o.Log(), 2048))
	}
}

// TestRBACClusterMode is TestRBACNamespaceMode for all namespaces with
// the ClusterRole.
func TestRBACClusterMode(t *testing.T) {
	p := env.Plane.Get(t)
	env.Install(t, p)
	id := newIdentity(t, p, nil)
	objs := clusterRBAC(t, p, id)
	applyObjects(t, p, objs)
	watched := p.TestNamespace(t)
	tail := newAuditTail(t, p)
	o := env.StartOperatorIn(t, p, id.namespace, harness.OperatorSA,
		"--leader-elect", "--leader-election-namespace", id.namespace)
	widgetScenario(t, p, watched)
	checkAudit(t, tail, id, append(objs[0].Rules, loadRBAC(t, "leader_election.yaml")[0].Rules...))
	if o.Exited() {
		t.Fatalf("the operator exited:\n%s", harness.Tail(o.Log(), 2048))
	}
}

// widgetScenario creates a Widget, waits for Ready with its Deployment,
// Service and an Event, changes it twice (a repeated Event), has the
// Service edited behind its back, and deletes it.
func widgetScenario(t *testing.T, p *controlplane.Plane, ns string) {
	t.Helper()
	c := harness.Admin(t, p)
	ctx := ctxFor(t, 5*time.Minute)
	if _, err := harness.Widgets(c).Create(ctx, ns, harness.NewWidget("web", pauseImage, 2), k8sapi.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	w := harness.WaitReady(t, c, ns, "web", 2, readyDeadline)
	d, err := k8sapi.For[k8sapi.Deployment](c, k8sapi.Deployments).Get(ctx, ns, "web", k8sapi.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ref := d.ControllerOf(); ref == nil || ref.UID != w.UID || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
		t.Fatalf("deployment owners %+v", d.OwnerReferences)
	}
	if _, err := k8sapi.For[k8sapi.Service](c, k8sapi.Services).Get(ctx, ns, "web", k8sapi.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, c, ns, widget.ReasonCreated, 1)

	// Two changes that each bring the Deployment in line: the same Event
	// twice, the second a patch of its series. The second change waits
	// for the first one's Event: sent together, both could be seen by
	// one reconcile, which records one Event.
	for i, patch := range []string{`{"spec":{"image":"registry.k8s.io/pause:3.9"}}`, `{"spec":{"replicas":3}}`} {
		if _, err := harness.Widgets(c).Patch(ctx, ns, "web", k8sapi.MergePatch, []byte(patch), k8sapi.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		waitEvent(t, c, ns, widget.ReasonUpdated, int32(i+1))
	}
	harness.WaitReady(t, c, ns, "web", 3, readyDeadline)
	waitEvent(t, c, ns, widget.ReasonUpdated, 2)

	// Someone edits the Service: the operator brings it back by apply.
	services := k8sapi.For[k8sapi.Service](c, k8sapi.Services)
	edit := `{"spec":{"selector":{"app.kubernetes.io/instance":"other"}}}`
	if _, err := services.Patch(ctx, ns, "web", k8sapi.MergePatch, []byte(edit), k8sapi.PatchOptions{FieldManager: "someone"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, readyDeadline, func() (bool, string) {
		s, err := services.Get(ctx, ns, "web", k8sapi.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return s.Spec.Selector["app.kubernetes.io/instance"] == "web", fmt.Sprintf("selector %v", s.Spec.Selector)
	})

	if err := harness.Widgets(c).Delete(ctx, ns, "web", k8sapi.DeleteOptions{PropagationPolicy: "Background"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, readyDeadline, func() (bool, string) {
		_, derr := k8sapi.For[k8sapi.Deployment](c, k8sapi.Deployments).Get(ctx, ns, "web", k8sapi.GetOptions{})
		_, serr := k8sapi.For[k8sapi.Service](c, k8sapi.Services).Get(ctx, ns, "web", k8sapi.GetOptions{})
		return k8sapi.IsNotFound(derr) && k8sapi.IsNotFound(serr), fmt.Sprintf("deployment: %v; service: %v", derr, serr)
	})
}

// waitEvent waits for an Event about Widget web with reason, counted at
// least count times (a series counts its repeats).
func waitEvent(t *testing.T, c *k8sapi.Client, ns, reason string, count int32) {
	t.Helper()
	eventually(t, 60*time.Second, func() (bool, string) {
		list, err := k8sapi.For[k8sapi.Event](c, k8sapi.Events).List(ctxFor(t, 10*time.Second), ns, k8sapi.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range list.Items {
			n := int32(1)
			if e.Series != nil {
				n = e.Series.Count
			}
			if e.Regarding.Name == "web" && e.Reason == reason && n >= count {
				return true, ""
			}
			seen = append(seen, fmt.Sprintf("%s %s x%d", e.Regarding.Name, e.Reason, n))
		}
		return false, fmt.Sprintf("no Event %s x%d about web; have %v", reason, count, seen)
	})
}

// checkAudit reads the operator's requests since the tail was made: none
// may be refused, and every granted verb (bar notSeenInAudit) must be
// used, so that the rules hold nothing the code does not need. It waits a
// little for verbs that come with time, such as the Lease's renewal. A
// list counts as used when a watch of its resource was: the operator's
// lists are streamed, which is a watch, and list is the grant of their
// fallback to a paginated list.
func checkAudit(t *testing.T, tail *auditTail, id identity, rules []policyRule) {
	t.Helper()
	used := map[grant]bool{}
	var refused []controlplane.AuditEvent
	requests := 0
	unused := func() []string {
		var out []string
		for _, g := range grantsOf(rules) {
			streamed := g.verb == "list" && used[grant{g.group, g.resource, "watch"}]
			if !used[g] && !notSeenInAudit[g] && !streamed {
				out = append(out, fmt.Sprintf("%s %s %s", g.group, g.resource, g.verb))
			}
		}
		return out
	}
	read := func() {
		events, err := tail.next()
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range events {
			if e.User != id.user || e.Stage != "ResponseComplete" && e.Stage != "ResponseStarted" {
				continue
			}
			requests++
			if e.Code == 403 || e.Code == 401 {
				refused = append(refused, e)
				continue
			}
			res := e.Resource
			if e.Subresource != "" {
				res += "/" + e.Subresource
			}
			used[grant{e.APIGroup, res, e.Verb}] = true
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for read(); len(unused()) > 0 && time.Now().Before(deadline); read() {
		<-tick.C
	}
	if len(refused) > 0 {
		t.Errorf("%d requests refused:%s", len(refused), harness.Describe(refused))
	}
	if u := unused(); len(u) > 0 {
		var have []string
		for g := range used {
			have = append(have, fmt.Sprintf("%s %s %s", g.group, g.resource, g.verb))
		}
		slices.Sort(have)
		t.Errorf("granted but never used: %v\nused: %v", u, have)
	}
	t.Logf("%d requests by %s, none refused; %d grants used", requests, id.user, len(used))
}

// ablation is one grant taken away: a whole rule of a Role, or one verb.
type ablation struct {
	name  string
	file  string // role.yaml or leader_election.yaml
	drop  func([]policyRule) []policyRule
	where []string // resources a 403 is expected on
}

func withoutRule(i int) func([]policyRule) []policyRule {
	return func(rules []policyRule) []policyRule { return slices.Delete(slices.Clone(rules), i, i+1) }
}

func withoutVerb(resource, verb string) func([]policyRule) []policyRule {
	return func(rules []policyRule) []policyRule {
		out := slices.Clone(rules)
		for i, r := range out {
			if slices.Contains(r.Resources, resource) {
				out[i].Verbs = slices.DeleteFunc(slices.Clone(r.Verbs), func(v string) bool { return v == verb })
			}
		}
		return out
	}
}

// TestRBACEveryRuleIsNeeded takes each rule of role.yaml and
// leader_election.yaml away in turn (and the create verbs, which the
// audit log cannot show in use), runs the operator with --leader-elect,
// creates a Widget and waits for the first 403 to the operator: each must
// be refused something, or fail to make the Widget Ready.
func TestRBACEveryRuleIsNeeded(t *testing.T) {
	p := env.Plane.Get(t)
	env.Install(t, p)
	var cases []ablation
	for i, r := range loadRBAC(t, "role.yaml")[0].Rules {
		where := slices.Clone(r.Resources)
		if slices.Contains(r.Resources, "widgets/finalizers") {
			// Refused by OwnerReferencesPermissionEnforcement on the
			// children that name the Widget with blockOwnerDeletion.
			where = []string{"deployments", "services"}
		}
		cases = append(cases, ablation{name: "role-" + r.String(), file: "role.yaml", drop: withoutRule(i), where: where})
	}
	for i, r := range loadRBAC(t, "leader_election.yaml")[0].Rules {
		cases = append(cases, ablation{name: "lease-" + r.String(), file: "leader_election.yaml", drop: withoutRule(i), where: r.Resources})
	}
	cases = append(cases,
		ablation{name: "verb-deployments-create", file: "role.yaml", drop: withoutVerb("deployments", "create"), where: []string{"deployments"}},
		ablation{name: "verb-services-create", file: "role.yaml", drop: withoutVerb("services", "create"), where: []string{"services"}},
	)
	for _, ab := range cases {
		t.Run(strings.NewReplacer(" ", "_", ",", "+", "/", "_").Replace(ab.name), func(t *testing.T) {
			t.Parallel()
			var leaseDrop, roleDrop func([]policyRule) []policyRule
			if ab.file == "leader_election.yaml" {
				leaseDrop = ab.drop
			} else {
				roleDrop = ab.drop
			}
			id := newIdentity(t, p, leaseDrop)
			watched := p.TestNamespace(t)
			applyObjects(t, p, namespaceRBAC(t, id, watched, roleDrop))
			tail := newAuditTail(t, p)
			o := env.StartOperatorIn(t, p, id.namespace, harness.OperatorSA,
				"--namespace", watched, "--leader-elect", "--leader-election-namespace", id.namespace)
			c := harness.Admin(t, p)
			if _, err := harness.Widgets(c).Create(ctxFor(t, 30*time.Second), watched, harness.NewWidget("w", pauseImage, 1), k8sapi.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				// Gone before its namespace, so that no operator on
				// this plane meets it while the namespace terminates.
				_ = harness.Widgets(c).Delete(ctxFor(t, 30*time.Second), watched, "w", k8sapi.DeleteOptions{})
			})
			refused, ready := waitRefusal(t, tail, id, c, watched, o)
			switch {
			case len(refused) > 0:
				var on []string
				for _, e := range refused {
					on = append(on, strings.TrimSuffix(e.Resource+"/"+e.Subresource, "/"))
				}
				if !slices.ContainsFunc(on, func(r string) bool { return slices.Contains(ab.where, r) }) {
					t.Errorf("refused on %v, want one of %v:%s", on, ab.where, harness.Describe(refused))
				}
				t.Logf("without it: %s", strings.TrimPrefix(harness.Describe(refused[:1]), "\n  "))
			case ready:
				t.Errorf("without it the operator made the Widget Ready and was refused nothing: the rule is not needed")
			default:
				t.Logf("without it the Widget did not become Ready (no 403 seen)")
			}
		})
	}
}

// waitRefusal polls the audit log for the first 403 to id and returns the
// refusals seen then, or, at the deadline, none and whether the Widget w
// became Ready. An operator that exits (a refused start) is waited for
// too: its 403 is in the log by then.
func waitRefusal(t *testing.T, tail *auditTail, id identity, c *k8sapi.Client, ns string, o *harness.Operator) ([]controlplane.AuditEvent, bool) {
	t.Helper()
	const deadline = 60 * time.Second
	end := time.Now().Add(deadline)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		events, err := tail.next()
		if err != nil {
			t.Fatal(err)
		}
		var refused []controlplane.AuditEvent
		for _, e := range events {
			if e.User == id.user && e.Code == 403 {
				refused = append(refused, e)
			}
		}
		if len(refused) > 0 {
			return refused, false
		}
		if time.Now().After(end) {
			w, err := harness.Widgets(c).Get(ctxFor(t, 10*time.Second), ns, "w", k8sapi.GetOptions{})
			ready := err == nil && w.Status.Phase == widget.PhaseReady
			if o.Exited() {
				t.Logf("the operator exited:\n%s", harness.Tail(o.Log(), 1024))
			}
			return nil, ready
		}
		<-tick.C
	}
}
