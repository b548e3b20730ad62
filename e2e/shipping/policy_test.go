package shipping

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/e2e/harness"
	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/testenv/controlplane"
	"github.com/zerodep-k8s/widget-operator/widget"
)

// The policy's name, and the words the API server puts before the
// message of the check that refused a request.
const (
	childrenPolicy = "widget-operator-children"
	policyDenied   = "ValidatingAdmissionPolicy '" + childrenPolicy + "' with binding '" + childrenPolicy + "' denied request: "
)

// object is a Deployment or a Service as a JSON tree, for the tests to
// widen one field at a time.
type object = map[string]any

// childOf returns the Deployment or the Service (kind) that the operator
// makes for a Widget named name in namespace ns, as a JSON tree.
func childOf(t testing.TB, kind, ns, name string) object {
	t.Helper()
	w := harness.NewWidget(name, pauseImage, 1)
	w.Namespace, w.UID = ns, "00000000-0000-4000-8000-000000000029"
	var body any = widget.DesiredDeployment(w)
	if kind == "Service" {
		body = widget.DesiredService(w)
	}
	data, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	var o object
	if err := json.Unmarshal(data, &o); err != nil {
		t.Fatal(err)
	}
	return o
}

// at walks o down the keys (a number indexes a list) and returns the map
// there.
func at(o object, keys ...any) object {
	var cur any = o
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			cur = cur.(object)[k]
		case int:
			cur = cur.([]any)[k]
		}
	}
	return cur.(object)
}

func podSpec(o object) object   { return at(o, "spec", "template", "spec") }
func container(o object) object { return at(podSpec(o), "containers", 0) }
func metadata(o object) object  { return at(o, "metadata") }

// policyCase is one child the policy refuses to the operator's token: the
// Widget's child, widened by edit.
type policyCase struct {
	name string
	kind string // "Deployment" or "Service"
	ns   string // empty: the test's namespace
	edit func(o object)
	msg  string // the end of the policy's message
}

var policyCases = []policyCase{
	{"privileged-hostpid-hostnetwork-node-root-in-kube-system", "Deployment", "kube-system", func(o object) {
		ps := podSpec(o)
		ps["hostNetwork"], ps["hostPID"] = true, true
		ps["volumes"] = []any{object{"name": "node", "hostPath": object{"path": "/"}}}
		c := container(o)
		c["securityContext"] = object{"privileged": true}
		c["volumeMounts"] = []any{object{"name": "node", "mountPath": "/host"}}
	}, "no hostNetwork, hostPID or hostIPC"},
	{"hostNetwork", "Deployment", "", func(o object) { podSpec(o)["hostNetwork"] = true }, "no hostNetwork, hostPID or hostIPC"},
	{"hostPID", "Deployment", "", func(o object) { podSpec(o)["hostPID"] = true }, "no hostNetwork, hostPID or hostIPC"},
	{"hostIPC", "Deployment", "", func(o object) { podSpec(o)["hostIPC"] = true }, "no hostNetwork, hostPID or hostIPC"},
	{"privileged", "Deployment", "", func(o object) { container(o)["securityContext"] = object{"privileged": true} },
		"no privileged, privilege-escalating or host-process container, no added capabilities"},
	{"allowPrivilegeEscalation", "Deployment", "", func(o object) { container(o)["securityContext"] = object{"allowPrivilegeEscalation": true} },
		"no privileged, privilege-escalating or host-process container, no added capabilities"},
	{"privileged-init-container", "Deployment", "", func(o object) {
		podSpec(o)["initContainers"] = []any{object{"name": "init", "image": pauseImage, "securityContext": object{"privileged": true}}}
	}, "no privileged, privilege-escalating or host-process container, no added capabilities"},
	{"added-capability", "Deployment", "", func(o object) {
		container(o)["securityContext"] = object{"capabilities": object{"add": []any{"NET_ADMIN"}}}
	}, "no privileged, privilege-escalating or host-process container, no added capabilities"},
	{"seccomp-unconfined", "Deployment", "", func(o object) {
		podSpec(o)["securityContext"] = object{"seccompProfile": object{"type": "Unconfined"}}
	}, "no unconfined seccomp or AppArmor profile, no SELinux options, no unmasked /proc"},
	{"apparmor-unconfined", "Deployment", "", func(o object) {
		container(o)["securityContext"] = object{"appArmorProfile": object{"type": "Unconfined"}}
	}, "no unconfined seccomp or AppArmor profile, no SELinux options, no unmasked /proc"},
	{"selinux-type", "Deployment", "", func(o object) {
		podSpec(o)["securityContext"] = object{"seLinuxOptions": object{"type": "spc_t"}}
	}, "no unconfined seccomp or AppArmor profile, no SELinux options, no unmasked /proc"},
	{"unmasked-proc", "Deployment", "", func(o object) {
		podSpec(o)["hostUsers"] = false
		container(o)["securityContext"] = object{"procMount": "Unmasked"}
	}, "no unconfined seccomp or AppArmor profile, no SELinux options, no unmasked /proc"},
	{"hostPath", "Deployment", "", func(o object) {
		podSpec(o)["volumes"] = []any{object{"name": "etc", "hostPath": object{"path": "/etc"}}}
	}, "no volumes (hostPath, Secret or any other)"},
	{"secret-volume", "Deployment", "", func(o object) {
		podSpec(o)["volumes"] = []any{object{"name": "s", "secret": object{"secretName": "any"}}}
	}, "no volumes (hostPath, Secret or any other)"},
	{"hostPort", "Deployment", "", func(o object) { at(container(o), "ports", 0)["hostPort"] = 8080 }, "no hostPort, no environment from a Secret"},
	{"env-from-secret", "Deployment", "", func(o object) {
		container(o)["env"] = []any{object{"name": "X", "valueFrom": object{"secretKeyRef": object{"name": "any", "key": "k"}}}}
	}, "no hostPort, no environment from a Secret"},
	{"serviceAccountName", "Deployment", "", func(o object) { podSpec(o)["serviceAccountName"] = "kube-proxy" },
		"no ServiceAccount but the namespace's default, and automountServiceAccountToken not true"},
	{"deprecated-serviceAccount", "Deployment", "", func(o object) { podSpec(o)["serviceAccount"] = "kube-proxy" },
		"no ServiceAccount but the namespace's default, and automountServiceAccountToken not true"},
	{"automountServiceAccountToken", "Deployment", "", func(o object) { podSpec(o)["automountServiceAccountToken"] = true },
		"no ServiceAccount but the namespace's default, and automountServiceAccountToken not true"},
	{"no-widget-controller", "Deployment", "", func(o object) { delete(metadata(o), "ownerReferences") },
		"a controller owner reference to the Widget (example.com/v1) of the object's name"},
	{"controller-of-another-kind", "Deployment", "", func(o object) {
		ref := at(metadata(o), "ownerReferences", 0)
		ref["apiVersion"], ref["kind"] = "apps/v1", "ReplicaSet"
		delete(ref, "blockOwnerDeletion") // else OwnerReferencesPermissionEnforcement refuses it first
	},
		"a controller owner reference to the Widget (example.com/v1) of the object's name"},
	{"no-managed-by-label", "Deployment", "", func(o object) { delete(at(metadata(o), "labels"), widget.LabelManagedBy) },
		"the labels app.kubernetes.io/managed-by=widget-operator, app.kubernetes.io/name=widget and app.kubernetes.io/instance=<the object's name>"},
	{"instance-label-of-another-widget", "Deployment", "", func(o object) { at(metadata(o), "labels")[widget.LabelInstance] = "other" },
		"the labels app.kubernetes.io/managed-by=widget-operator, app.kubernetes.io/name=widget and app.kubernetes.io/instance=<the object's name>"},
	{"controller-named-otherwise", "Service", "", func(o object) { at(metadata(o), "ownerReferences", 0)["name"] = "other" },
		"a controller owner reference to the Widget (example.com/v1) of the object's name"},
	{"deployment-selects-other-pods", "Deployment", "", func(o object) {
		at(o, "spec", "selector", "matchLabels")["app.kubernetes.io/instance"] = "other"
		at(o, "spec", "template", "metadata", "labels")["app.kubernetes.io/instance"] = "other"
	}, "the selector app.kubernetes.io/name=widget, app.kubernetes.io/instance=<the object's name>"},
	{"NodePort", "Service", "", func(o object) { at(o, "spec")["type"] = "NodePort" }, "a Service of type ClusterIP, without externalIPs"},
	{"LoadBalancer", "Service", "", func(o object) { at(o, "spec")["type"] = "LoadBalancer" }, "a Service of type ClusterIP, without externalIPs"},
	{"ExternalName", "Service", "", func(o object) {
		s := at(o, "spec")
		s["type"], s["externalName"] = "ExternalName", "example.com"
	}, "a Service of type ClusterIP, without externalIPs"},
	{"externalIPs", "Service", "", func(o object) { at(o, "spec")["externalIPs"] = []any{"203.0.113.7"} },
		"a Service of type ClusterIP, without externalIPs"},
	{"service-selects-other-pods", "Service", "", func(o object) { at(o, "spec", "selector")["app.kubernetes.io/instance"] = "other" },
		"the selector app.kubernetes.io/name=widget, app.kubernetes.io/instance=<the object's name>"},
	{"service-without-widget-labels", "Service", "", func(o object) { delete(metadata(o), "labels") },
		"the labels app.kubernetes.io/managed-by=widget-operator, app.kubernetes.io/name=widget and app.kubernetes.io/instance=<the object's name>"},
}

var (
	admissionPolicies = k8sapi.Resource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"}
	policyBindings    = k8sapi.Resource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicybindings"}
)

// tokenClient is a client of p that authenticates with a bearer token.
func tokenClient(t testing.TB, p *controlplane.Plane, token string) *k8sapi.Client {
	t.Helper()
	c, err := k8sapi.New(&k8sapi.Config{Host: p.Host(), CAData: p.CAData(), BearerToken: token, UserAgent: "widget-e2e"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func rawClient(c *k8sapi.Client, kind string) k8sapi.Typed[object] {
	if kind == "Service" {
		return k8sapi.For[object](c, k8sapi.Services)
	}
	return k8sapi.For[object](c, k8sapi.Deployments)
}

// policyRefusal returns the message of the policy's refusal in err, or
// why err is not one.
func policyRefusal(err error) (string, error) {
	var ae *k8sapi.APIError
	if !errors.As(err, &ae) {
		return "", fmt.Errorf("not an API error: %v", err)
	}
	_, msg, ok := strings.Cut(ae.Status.Message, policyDenied)
	if ae.Code != 422 || ae.Status.Reason != "Invalid" || !ok {
		return "", fmt.Errorf("%d %s: %s; want 422 Invalid from the policy", ae.Code, ae.Status.Reason, ae.Status.Message)
	}
	return msg, nil
}

// waitPolicyActive waits until the API server enforces the policy on
// op's requests: a server dry run of a child without its labels is
// refused. The policy is installed with the RBAC, and the API server
// starts enforcing it a moment after it sees it.
func waitPolicyActive(t testing.TB, op *k8sapi.Client, ns string) {
	t.Helper()
	o := childOf(t, "Service", ns, "probe")
	delete(metadata(o), "labels")
	eventually(t, 60*time.Second, func() (bool, string) {
		_, err := rawClient(op, "Service").Create(ctxFor(t, 10*time.Second), ns, &o, k8sapi.WriteOptions{DryRun: true, FieldManager: widget.FieldManager})
		if err == nil {
			return false, "a Service without labels is admitted"
		}
		_, why := policyRefusal(err)
		return why == nil, fmt.Sprint(why)
	})
}

// TestPolicyFencesOperatorToken takes the operator's ServiceAccount token.
// With the policy's binding deleted, the token runs the audit's pod in
// kube-system: privileged, in the node's network and PID namespaces, with
// the node's / mounted. With the binding back, the token creates each
// child of policyCases: that pod again, then a Widget's Deployment or
// Service widened one field at a time. The API server refuses each with
// the policy's message and stores nothing; the Widget's own children pass,
// and the admin may still create every refused one.
func TestPolicyFencesOperatorToken(t *testing.T) {
	p := env.Plane.Get(t)
	env.Install(t, p)
	ns := p.TestNamespace(t)
	op := tokenClient(t, p, harness.ServiceAccountToken(t, p, harness.OperatorNamespace, harness.OperatorSA))
	admin := harness.Admin(t, p)
	write := k8sapi.WriteOptions{FieldManager: widget.FieldManager}

	// The audit's attack, without the policy's binding: the privileged
	// pod runs in kube-system.
	t.Run("without the policy", func(t *testing.T) {
		bindings := k8sapi.For[object](admin, policyBindings)
		if err := bindings.Delete(ctxFor(t, 30*time.Second), "", childrenPolicy, k8sapi.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { harness.Kubectl(t, p, "apply", "-f", "manifests/rbac/children_policy.yaml") })
		o := childOf(t, "Deployment", "kube-system", "node-root")
		policyCases[0].edit(o)
		delete(metadata(o), "ownerReferences") // no owner for the garbage collector to miss
		deployments := rawClient(op, "Deployment")
		eventually(t, 60*time.Second, func() (bool, string) {
			_, err := deployments.Create(ctxFor(t, 30*time.Second), "kube-system", &o, write)
			return err == nil, fmt.Sprintf("create with the operator's token: %v", err)
		})
		t.Cleanup(func() {
			_ = rawClient(admin, "Deployment").Delete(ctxFor(t, 30*time.Second), "kube-system", "node-root", k8sapi.DeleteOptions{PropagationPolicy: "Background"})
		})
		pods := k8sapi.For[struct {
			Status struct{ Phase string } `json:"status"`
		}](admin, k8sapi.Pods)
		eventually(t, readyDeadline, func() (bool, string) {
			list, err := pods.List(ctxFor(t, 10*time.Second), "kube-system", k8sapi.ListOptions{LabelSelector: widget.LabelInstance + "=node-root"})
			if err != nil {
				return false, err.Error()
			}
			for _, pod := range list.Items {
				if pod.Status.Phase == "Running" {
					return true, ""
				}
			}
			return false, fmt.Sprintf("%d pods, none Running", len(list.Items))
		})
	})

	waitPolicyActive(t, op, ns)

	// Each validation reads only fields of both kinds, or one kind's
	// through a variable, so the API server's type check of the policy
	// against Deployments and Services finds nothing to warn about.
	t.Run("the type check warns of nothing", func(t *testing.T) {
		type status struct {
			Metadata struct{ Generation int64 } `json:"metadata"`
			Status   struct {
				ObservedGeneration int64 `json:"observedGeneration"`
				TypeChecking       *struct {
					ExpressionWarnings []struct{ FieldRef, Warning string } `json:"expressionWarnings"`
				} `json:"typeChecking"`
			} `json:"status"`
		}
		policies := k8sapi.For[status](admin, admissionPolicies)
		eventually(t, 60*time.Second, func() (bool, string) {
			vap, err := policies.Get(ctxFor(t, 10*time.Second), "", childrenPolicy, k8sapi.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			st := vap.Status
			// The type checker writes the status, with the generation
			// it checked.
			if st.ObservedGeneration != vap.Metadata.Generation {
				return false, fmt.Sprintf("generation %d not type-checked yet (%+v)", vap.Metadata.Generation, st)
			}
			if st.TypeChecking != nil && len(st.TypeChecking.ExpressionWarnings) > 0 {
				t.Fatalf("type-check warnings: %+v", st.TypeChecking.ExpressionWarnings)
			}
			return true, ""
		})
	})

	t.Run("the Widget's children pass", func(t *testing.T) {
		for _, kind := range []string{"Deployment", "Service"} {
			o := childOf(t, kind, ns, "plain")
			if _, err := rawClient(op, kind).Create(ctxFor(t, 30*time.Second), ns, &o, k8sapi.WriteOptions{DryRun: true, FieldManager: widget.FieldManager}); err != nil {
				t.Errorf("%s of a Widget, with the operator's token: %v", kind, err)
			}
		}
	})

	for i, tc := range policyCases {
		t.Run(tc.name, func(t *testing.T) {
			where := cmp.Or(tc.ns, ns)
			name := fmt.Sprintf("fenced-%d", i)
			o := childOf(t, tc.kind, where, name)
			tc.edit(o)
			_, err := rawClient(op, tc.kind).Create(ctxFor(t, 30*time.Second), where, &o, write)
			msg, why := policyRefusal(err)
			if err == nil {
				why = errors.New("admitted")
			}
			if why != nil {
				t.Fatalf("%s %s/%s with the operator's token: %v", tc.kind, where, name, why)
			}
			if !strings.HasSuffix(msg, tc.msg) {
				t.Errorf("the policy's message %q; want it to end with %q", msg, tc.msg)
			}
			if _, err := rawClient(admin, tc.kind).Get(ctxFor(t, 10*time.Second), where, name, k8sapi.GetOptions{}); !k8sapi.IsNotFound(err) {
				t.Errorf("after the refusal, get %s %s/%s: %v; want 404", tc.kind, where, name, err)
			}

			// Not matched for anyone else: the admin creates it.
			if _, err := rawClient(admin, tc.kind).Create(ctxFor(t, 30*time.Second), where, &o, write); err != nil {
				t.Fatalf("the same %s as the admin: %v", tc.kind, err)
			}
			t.Cleanup(func() {
				err := rawClient(admin, tc.kind).Delete(ctxFor(t, 30*time.Second), where, name, k8sapi.DeleteOptions{PropagationPolicy: "Background"})
				if err != nil && !k8sapi.IsNotFound(err) {
					t.Errorf("delete %s %s/%s: %v", tc.kind, where, name, err)
				}
			})
		})
	}

	t.Run("an apply that widens a child", func(t *testing.T) {
		d := childOf(t, "Deployment", ns, "widened")
		if _, err := rawClient(admin, "Deployment").Create(ctxFor(t, 30*time.Second), ns, &d, write); err != nil {
			t.Fatal(err)
		}
		podSpec(d)["hostNetwork"] = true
		_, err := rawClient(op, "Deployment").Apply(ctxFor(t, 30*time.Second), ns, "widened", d, k8sapi.PatchOptions{FieldManager: widget.FieldManager, Force: true})
		if msg, why := policyRefusal(err); err == nil || why != nil || !strings.HasSuffix(msg, "no hostNetwork, hostPID or hostIPC") {
			t.Fatalf("apply of hostNetwork with the operator's token: %v", err)
		}
	})
}

// BenchmarkPolicyCost times a server dry run of a Widget's Deployment
// with the operator's token, and as the admin, with the children policy
// bound and without: the difference is what the policy costs each write
// of the operator's, and of another user's.
func BenchmarkPolicyCost(b *testing.B) {
	p := env.Plane.Get(b)
	env.Install(b, p)
	ns := p.TestNamespace(b)
	op := tokenClient(b, p, harness.ServiceAccountToken(b, p, harness.OperatorNamespace, harness.OperatorSA))
	admin := harness.Admin(b, p)
	o := childOf(b, "Deployment", ns, "timed")
	dryRun := k8sapi.WriteOptions{DryRun: true, FieldManager: widget.FieldManager}
	run := func(c *k8sapi.Client) func(b *testing.B) {
		return func(b *testing.B) {
			for b.Loop() {
				if _, err := rawClient(c, "Deployment").Create(ctxFor(b, 30*time.Second), ns, &o, dryRun); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	waitPolicyActive(b, op, ns)
	b.Run("operator-with", run(op))
	b.Run("admin-with", run(admin))
	if err := k8sapi.For[object](admin, policyBindings).Delete(ctxFor(b, 30*time.Second), "", childrenPolicy, k8sapi.DeleteOptions{}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { harness.Kubectl(b, p, "apply", "-f", "manifests/rbac/children_policy.yaml") })
	probe := childOf(b, "Service", ns, "probe")
	delete(metadata(probe), "labels")
	eventually(b, 60*time.Second, func() (bool, string) {
		_, err := rawClient(op, "Service").Create(ctxFor(b, 10*time.Second), ns, &probe, dryRun)
		return err == nil, fmt.Sprintf("with the binding deleted: %v", err)
	})
	b.Run("operator-without", run(op))
	b.Run("admin-without", run(admin))
}
