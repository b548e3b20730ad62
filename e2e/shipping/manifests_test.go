package shipping

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/e2e/harness"
	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/widget"
)

// operatorDeployment is the part of the operator's Deployment the test
// checks, as the API server stored it.
type operatorDeployment struct {
	Spec struct {
		Template struct {
			Spec struct {
				ServiceAccountName           string `json:"serviceAccountName"`
				AutomountServiceAccountToken *bool  `json:"automountServiceAccountToken"`
				SecurityContext              struct {
					RunAsNonRoot   *bool  `json:"runAsNonRoot"`
					RunAsUser      *int64 `json:"runAsUser"`
					RunAsGroup     *int64 `json:"runAsGroup"`
					SeccompProfile *struct {
						Type string `json:"type"`
					} `json:"seccompProfile"`
				} `json:"securityContext"`
				Containers []struct {
					Image string   `json:"image"`
					Args  []string `json:"args"`
					Env   []struct {
						Name      string `json:"name"`
						ValueFrom struct {
							ResourceFieldRef *struct {
								Resource string `json:"resource"`
							} `json:"resourceFieldRef"`
						} `json:"valueFrom"`
					} `json:"env"`
					Ports []struct {
						Name          string `json:"name"`
						ContainerPort int32  `json:"containerPort"`
					} `json:"ports"`
					LivenessProbe  *probe `json:"livenessProbe"`
					ReadinessProbe *probe `json:"readinessProbe"`
					Resources      struct {
						Requests map[string]string `json:"requests"`
						Limits   map[string]string `json:"limits"`
					} `json:"resources"`
					SecurityContext struct {
						AllowPrivilegeEscalation *bool `json:"allowPrivilegeEscalation"`
						ReadOnlyRootFilesystem   *bool `json:"readOnlyRootFilesystem"`
						Capabilities             struct {
							Drop []string `json:"drop"`
						} `json:"capabilities"`
					} `json:"securityContext"`
				} `json:"containers"`
			} `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
	Status struct {
		AvailableReplicas int32 `json:"availableReplicas"`
	} `json:"status"`
}

type probe struct {
	HTTPGet struct {
		Path string          `json:"path"`
		Port json.RawMessage `json:"port"`
	} `json:"httpGet"`
}

// TestKustomizeInstallsEverything applies manifests/ with the real
// kubectl (strict field validation on the server), then reads back what
// was made. The operator's pod runs under kwok, so only its
// specification is checked here; TestImageRunsInPodman runs the image.
func TestKustomizeInstallsEverything(t *testing.T) {
	p := env.Plane.Get(t)
	out := harness.Kubectl(t, p, "apply", "-k", "manifests/", "--validate=strict")
	t.Logf("kubectl apply -k manifests/:\n%s", out)
	for _, want := range []string{
		"namespace/widget-system",
		"customresourcedefinition.apiextensions.k8s.io/widgets.example.com",
		"serviceaccount/widget-operator",
		"role.rbac.authorization.k8s.io/widget-operator-leader-election",
		"clusterrole.rbac.authorization.k8s.io/widget-operator",
		"rolebinding.rbac.authorization.k8s.io/widget-operator-leader-election",
		"clusterrolebinding.rbac.authorization.k8s.io/widget-operator",
		"clusterrole.rbac.authorization.k8s.io/widget-operator-metrics-auth",
		"clusterrolebinding.rbac.authorization.k8s.io/widget-operator-metrics-auth",
		"clusterrole.rbac.authorization.k8s.io/widget-operator-metrics-reader",
		"validatingadmissionpolicy.admissionregistration.k8s.io/widget-operator-children",
		"validatingadmissionpolicybinding.admissionregistration.k8s.io/widget-operator-children",
		"deployment.apps/widget-operator",
		"networkpolicy.networking.k8s.io/widget-operator",
	} {
		if !strings.Contains(out, want+" ") {
			t.Errorf("kubectl apply -k did not make %s", want)
		}
	}
	harness.Kubectl(t, p, "wait", "--for=condition=Established", "--timeout=60s", "crd/widgets.example.com")
	// kwok plays the kubelet: the pod is scheduled and reported ready.
	harness.Kubectl(t, p, "-n", harness.OperatorNamespace, "rollout", "status", "deployment/widget-operator", "--timeout=90s")

	var d operatorDeployment
	if err := json.Unmarshal([]byte(harness.Kubectl(t, p, "-n", harness.OperatorNamespace, "get", "deployment/widget-operator", "-o", "json")), &d); err != nil {
		t.Fatal(err)
	}
	ps := d.Spec.Template.Spec
	sc := ps.SecurityContext
	check := func(ok bool, what string) {
		t.Helper()
		if !ok {
			t.Errorf("operator Deployment: want %s", what)
		}
	}
	check(ps.ServiceAccountName == harness.OperatorSA, "serviceAccountName widget-operator")
	check(ps.AutomountServiceAccountToken != nil && *ps.AutomountServiceAccountToken, "automountServiceAccountToken: true")
	check(sc.RunAsNonRoot != nil && *sc.RunAsNonRoot, "runAsNonRoot")
	check(sc.RunAsUser != nil && *sc.RunAsUser == 65532 && sc.RunAsGroup != nil && *sc.RunAsGroup == 65532, "user and group 65532")
	check(sc.SeccompProfile != nil && sc.SeccompProfile.Type == "RuntimeDefault", "the RuntimeDefault seccomp profile")
	if len(ps.Containers) != 1 {
		t.Fatalf("operator Deployment: %d containers", len(ps.Containers))
	}
	c := ps.Containers[0]
	csc := c.SecurityContext
	check(c.Image == "widget-operator:dev", "image widget-operator:dev")
	check(csc.AllowPrivilegeEscalation != nil && !*csc.AllowPrivilegeEscalation, "allowPrivilegeEscalation: false")
	check(csc.ReadOnlyRootFilesystem != nil && *csc.ReadOnlyRootFilesystem, "readOnlyRootFilesystem: true")
	check(len(csc.Capabilities.Drop) == 1 && csc.Capabilities.Drop[0] == "ALL", "capabilities: drop ALL")
	check(c.LivenessProbe != nil && c.LivenessProbe.HTTPGet.Path == "/healthz" && string(c.LivenessProbe.HTTPGet.Port) == `"health"`, "liveness /healthz on port health")
	check(c.ReadinessProbe != nil && c.ReadinessProbe.HTTPGet.Path == "/readyz" && string(c.ReadinessProbe.HTTPGet.Port) == `"health"`, "readiness /readyz on port health")
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	check(ports["metrics"] == 8443 && ports["health"] == 8081, "ports metrics 8443 and health 8081")
	args := strings.Join(c.Args, " ")
	check(strings.Contains(args, "--leader-elect") && strings.Contains(args, "--health-probe-bind-address=:8081") &&
		strings.Contains(args, "--metrics-bind-address=:8443"), "args with --leader-elect and the two endpoints")
	check(!strings.Contains(args, "--metrics-secure=false"), "secure metrics")
	var memEnv bool
	for _, e := range c.Env {
		if rf := e.ValueFrom.ResourceFieldRef; e.Name == "CONTAINER_MEMORY_LIMIT" && rf != nil && rf.Resource == "limits.memory" {
			memEnv = true
		}
	}
	check(memEnv, "CONTAINER_MEMORY_LIMIT from the downward API's limits.memory")
	for _, r := range []string{"cpu", "memory"} {
		check(c.Resources.Requests[r] != "", "a "+r+" request")
	}
	check(c.Resources.Limits["memory"] != "", "a memory limit")

	// The NetworkPolicy admits the metrics port, and only it, to the
	// operator's pods: the kubelet's probes come from the node, which a
	// NetworkPolicy always admits.
	var np struct {
		Spec struct {
			PodSelector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"podSelector"`
			PolicyTypes []string `json:"policyTypes"`
			Ingress     []struct {
				From  []json.RawMessage `json:"from"`
				Ports []struct {
					Port json.RawMessage `json:"port"`
				} `json:"ports"`
			} `json:"ingress"`
		} `json:"spec"`
	}
	if err := json.Unmarshal([]byte(harness.Kubectl(t, p, "-n", harness.OperatorNamespace, "get", "networkpolicy/widget-operator", "-o", "json")), &np); err != nil {
		t.Fatal(err)
	}
	var npPorts []string
	for _, in := range np.Spec.Ingress {
		for _, port := range in.Ports {
			npPorts = append(npPorts, string(port.Port))
		}
	}
	check(np.Spec.PodSelector.MatchLabels["app.kubernetes.io/name"] == "widget-operator", "a NetworkPolicy selecting the operator's pods")
	check(strings.Join(np.Spec.PolicyTypes, ",") == "Ingress", "a NetworkPolicy of type Ingress")
	check(strings.Join(npPorts, ",") == "8443", "a NetworkPolicy admitting port 8443 only")

	// The leader-election Role names the default Lease, and the shard and
	// membership Leases of --shards up to 6, and nothing else.
	leases := []string{"widget-operator.example.com"}
	for _, kind := range []string{"shard", "member"} {
		for k := range 6 {
			leases = append(leases, fmt.Sprintf("widget-operator.example.com-%s-%d", kind, k))
		}
	}
	for _, r := range loadRBAC(t, "leader_election.yaml")[0].Rules {
		for _, v := range r.Verbs {
			named := strings.Join(r.ResourceNames, ",") == strings.Join(leases, ",")
			check(v == "create" && len(r.ResourceNames) == 0 || v != "create" && named,
				fmt.Sprintf("lease %s limited to %s (create cannot be)", v, strings.Join(leases, ", ")))
		}
	}
}

// TestSchemaRejectsInvalidWidgets creates invalid Widgets as the admin:
// the API server must answer 422 Invalid naming the field.
func TestSchemaRejectsInvalidWidgets(t *testing.T) {
	p := env.Plane.Get(t)
	env.Install(t, p)
	ns := p.TestNamespace(t)
	c := harness.Admin(t, p)
	raw := k8sapi.For[json.RawMessage](c, widget.Widgets)
	for _, tc := range []struct {
		name, spec string
		field, msg string
	}{
		{"empty-image", `{"image":""}`, "spec.image", "at least 1 chars long"},
		{"no-image", `{"replicas":1}`, "spec.image", "Required value"},
		{"replicas-0", `{"image":"nginx","replicas":0}`, "spec.replicas", "greater than or equal to 1"},
		{"replicas-11", `{"image":"nginx","replicas":11}`, "spec.replicas", "less than or equal to 10"},
		{"image-600", fmt.Sprintf(`{"image":%q}`, strings.Repeat("a", 600)), "spec.image", "Too long"},
		{"image-space", `{"image":"nginx latest"}`, "spec.image", "image must not contain whitespace"},
		{"image-tab", `{"image":"nginx\tlatest"}`, "spec.image", "image must not contain whitespace"},
		{"image-nbsp", `{"image":"nginx\u00a0latest"}`, "spec.image", "image must not contain whitespace"},
		{"port-0", `{"image":"nginx","port":0}`, "spec.port", "greater than or equal to 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := json.RawMessage(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"` + tc.name + `"},"spec":` + tc.spec + `}`)
			_, err := raw.Create(ctxFor(t, 30*time.Second), ns, &body, k8sapi.WriteOptions{})
			var ae *k8sapi.APIError
			if !errors.As(err, &ae) || ae.Code != 422 || !k8sapi.IsInvalid(err) {
				t.Fatalf("create: %v; want 422 Invalid", err)
			}
			var causes []string
			found := false
			if ae.Status.Details != nil {
				for _, c := range ae.Status.Details.Causes {
					causes = append(causes, c.Field+": "+c.Message)
					if c.Field == tc.field && strings.Contains(c.Message, tc.msg) {
						found = true
					}
				}
			}
			if !found {
				t.Fatalf("causes %q; want %s: ...%s...", causes, tc.field, tc.msg)
			}
		})
	}

	t.Run("kubectl apply names the field", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "bad.yaml")
		bad := "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: spaced\nspec:\n  image: \"nginx latest\"\n"
		if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := harness.KubectlErr(p, "-n", ns, "apply", "-f", path)
		if err == nil || !strings.Contains(out, `"spaced" is invalid`) ||
			!strings.Contains(out, "spec.image") || !strings.Contains(out, "image must not contain whitespace") {
			t.Fatalf("kubectl apply of a Widget with a space in its image: %v\n%s", err, out)
		}
	})
}

// TestSamplesPassServerDryRun sends manifests/samples/ through the API
// server's validation and admission without storing them.
func TestSamplesPassServerDryRun(t *testing.T) {
	p := env.Plane.Get(t)
	env.Install(t, p)
	ns := p.TestNamespace(t)
	out := harness.Kubectl(t, p, "-n", ns, "apply", "--dry-run=server", "--validate=strict", "-f", "manifests/samples/")
	if !strings.Contains(out, "widget.example.com/sample created (server dry run)") {
		t.Fatalf("kubectl apply --dry-run=server:\n%s", out)
	}
	c := harness.Admin(t, p)
	if _, err := harness.Widgets(c).Get(ctxFor(t, 10*time.Second), ns, "sample", k8sapi.GetOptions{}); !k8sapi.IsNotFound(err) {
		t.Fatalf("the dry run stored the sample: %v", err)
	}
}
