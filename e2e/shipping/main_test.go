// Package shipping tests what ships: the manifests installed with the real
// kubectl, the RBAC rules proven needed and sufficient against a real API
// server, the binary's build (reproducible, cross-compiled, standard
// library only) and the container image built from the Dockerfile and run
// in a real container runtime (podman).
package shipping

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/e2e/harness"
	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/testenv/controlplane"
)

var env harness.Env

func TestMain(m *testing.M) { os.Exit(env.Main(m)) }

// auditTail reads the audit log from where it was when the tail was made,
// so that polling it costs what was written since, not the whole log.
// It is not safe for concurrent use.
type auditTail struct {
	path string
	off  int64
}

func newAuditTail(t testing.TB, p *controlplane.Plane) *auditTail {
	t.Helper()
	st, err := os.Stat(p.AuditLogPath())
	if err != nil {
		t.Fatal(err)
	}
	return &auditTail{path: p.AuditLogPath(), off: st.Size()}
}

// next returns the events completed since the last call.
func (a *auditTail) next() ([]controlplane.AuditEvent, error) {
	f, err := os.Open(a.path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(a.off, io.SeekStart); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	// A half-written last line waits for the next call.
	data = data[:bytes.LastIndexByte(data, '\n')+1]
	a.off += int64(len(data))
	return controlplane.ParseAuditLog(bytes.NewReader(data))
}

// rbacObject is the part of a Role, ClusterRole, RoleBinding,
// ClusterRoleBinding or ServiceAccount that the tests read and rewrite.
type rbacObject struct {
	APIVersion string       `json:"apiVersion"`
	Kind       string       `json:"kind"`
	Metadata   rbacMeta     `json:"metadata"`
	Rules      []policyRule `json:"rules,omitempty"`
	RoleRef    *roleRef     `json:"roleRef,omitempty"`
	Subjects   []subject    `json:"subjects,omitempty"`
}

type rbacMeta struct {
	Name      string            `json:"name"`
	Namespace string            `json:"namespace,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
}

type policyRule struct {
	APIGroups       []string `json:"apiGroups,omitempty"`
	Resources       []string `json:"resources,omitempty"`
	ResourceNames   []string `json:"resourceNames,omitempty"`
	NonResourceURLs []string `json:"nonResourceURLs,omitempty"`
	Verbs           []string `json:"verbs"`
}

func (r policyRule) String() string {
	return fmt.Sprintf("%s %s %s", strings.Join(r.APIGroups, ","), strings.Join(r.Resources, ","), strings.Join(r.Verbs, ","))
}

type roleRef struct {
	APIGroup string `json:"apiGroup"`
	Kind     string `json:"kind"`
	Name     string `json:"name"`
}

type subject struct {
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
}

// loadRBAC reads the objects of a file under manifests/rbac/, as the
// plane's kubectl reads them.
func loadRBAC(t testing.TB, file string) []rbacObject {
	t.Helper()
	path := filepath.Join(harness.RepoRoot(), "manifests", "rbac", file)
	out := harness.Kubectl(t, env.Plane.Get(t), "create", "--dry-run=client", "-o", "json", "-f", path)
	// kubectl prints each object in turn.
	var objs []rbacObject
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	for dec.More() {
		var o rbacObject
		if err := dec.Decode(&o); err != nil {
			t.Fatalf("%s object %d: %v", file, len(objs)+1, err)
		}
		objs = append(objs, o)
	}
	return objs
}

// applyObjects applies objects with the plane's kubectl, as one List.
func applyObjects(t testing.TB, p *controlplane.Plane, objs []rbacObject) {
	t.Helper()
	list := struct {
		APIVersion string       `json:"apiVersion"`
		Kind       string       `json:"kind"`
		Items      []rbacObject `json:"items"`
	}{"v1", "List", objs}
	data, err := json.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "rbac.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	harness.Kubectl(t, p, "apply", "-f", path)
	waitGranted(t, p, objs)
}

// accessReview is the part of an authorization.k8s.io/v1
// SubjectAccessReview the tests send and read.
type accessReview struct {
	k8sapi.TypeMeta
	Spec struct {
		User               string `json:"user"`
		ResourceAttributes struct {
			Namespace string `json:"namespace,omitempty"`
			Verb      string `json:"verb"`
			Group     string `json:"group"`
			Resource  string `json:"resource"`
			// Subresource is split from a rule's "widgets/status".
			Subresource string `json:"subresource,omitempty"`
			Name        string `json:"name,omitempty"`
		} `json:"resourceAttributes"`
	} `json:"spec"`
	Status struct {
		Allowed bool `json:"allowed"`
	} `json:"status"`
}

// waitGranted waits until the API server's authorizer allows every
// ServiceAccount that a binding among objs names each verb of the rules
// of its role among objs. Its caches of Roles and bindings follow a watch,
// and on loaded machines they trail the apply by long enough for an
// operator started at once to be refused what the test granted it.
func waitGranted(t testing.TB, p *controlplane.Plane, objs []rbacObject) {
	t.Helper()
	reviews := k8sapi.For[accessReview](harness.Admin(t, p), k8sapi.Resource{Group: "authorization.k8s.io", Version: "v1", Resource: "subjectaccessreviews"})
	var pending []accessReview
	for _, b := range objs {
		if b.RoleRef == nil {
			continue
		}
		for _, role := range objs {
			if role.Kind != b.RoleRef.Kind || role.Metadata.Name != b.RoleRef.Name || role.Metadata.Namespace != b.Metadata.Namespace {
				continue
			}
			for _, s := range b.Subjects {
				if s.Kind == "ServiceAccount" {
					pending = append(pending, reviewsFor(harness.ServiceAccountUser(s.Namespace, s.Name), b.Metadata.Namespace, role.Rules)...)
				}
			}
		}
	}
	eventually(t, 30*time.Second, func() (bool, string) {
		for len(pending) > 0 {
			got, err := reviews.Create(ctxFor(t, 10*time.Second), "", &pending[0], k8sapi.WriteOptions{})
			if err != nil || !got.Status.Allowed {
				a := pending[0].Spec.ResourceAttributes
				return false, fmt.Sprintf("%s may not %s %s/%s in %q (%v)", pending[0].Spec.User, a.Verb, a.Resource, a.Subresource, a.Namespace, err)
			}
			pending = pending[1:]
		}
		return true, ""
	})
}

// reviewsFor is one access review for each verb on each resource of rules,
// for user in namespace ns (the first of a rule's resourceNames, if any).
func reviewsFor(user, ns string, rules []policyRule) []accessReview {
	var out []accessReview
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					var rv accessReview
					rv.TypeMeta = k8sapi.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview"}
					rv.Spec.User = user
					a := &rv.Spec.ResourceAttributes
					a.Namespace, a.Verb, a.Group = ns, v, g
					a.Resource, a.Subresource, _ = strings.Cut(res, "/")
					if len(r.ResourceNames) > 0 {
						a.Name = r.ResourceNames[0]
					}
					out = append(out, rv)
				}
			}
		}
	}
	return out
}

// eventually is harness.Eventually.
var eventually = harness.Eventually

// ctxFor is harness.Ctx.
var ctxFor = harness.Ctx

const (
	pauseImage    = "registry.k8s.io/pause:3.10"
	readyDeadline = 90 * time.Second
)
