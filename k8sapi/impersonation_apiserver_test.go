package k8sapi_test

// Impersonation against a real kube-apiserver: the Impersonate-* headers a
// Config or a kubeconfig's as* fields set, with RBAC that allows them and
// RBAC that does not.

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/testenv/controlplane"
)

// selfSubjectReview is authentication.k8s.io/v1 SelfSubjectReview: the
// server says who the request is from.
type selfSubjectReview struct {
	k8sapi.TypeMeta
	Status struct {
		UserInfo struct {
			Username string              `json:"username"`
			UID      string              `json:"uid"`
			Groups   []string            `json:"groups"`
			Extra    map[string][]string `json:"extra"`
		} `json:"userInfo"`
	} `json:"status"`
}

var selfSubjectReviews = k8sapi.Resource{Group: "authentication.k8s.io", Version: "v1", Resource: "selfsubjectreviews"}

// whoAmI asks the server who c's requests are from.
func whoAmI(ctx context.Context, c *k8sapi.Client) (*selfSubjectReview, error) {
	return k8sapi.For[selfSubjectReview](c, selfSubjectReviews).Create(ctx, "", &selfSubjectReview{
		TypeMeta: k8sapi.TypeMeta{APIVersion: "authentication.k8s.io/v1", Kind: "SelfSubjectReview"},
	}, k8sapi.WriteOptions{})
}

// allowImpersonation lets ServiceAccount sa in ns impersonate the user
// "alice-<ns>" with UID "uid-1", the group "readers" and the extra
// reason=audit, and lets alice list ConfigMaps in ns. It removes the
// cluster-wide objects when the test ends.
func allowImpersonation(t *testing.T, p *controlplane.Plane, ns, sa string) (user string) {
	t.Helper()
	ctx := testContext(t)
	user = "alice-" + ns
	name := ns + "-impersonator"
	rbac := "/apis/rbac.authorization.k8s.io/v1/"
	objects := []struct {
		path string
		body any
	}{
		{rbac + "clusterroles", map[string]any{
			"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
			"metadata": map[string]any{"name": name},
			"rules": []any{
				map[string]any{"apiGroups": []string{""}, "resources": []string{"users"}, "verbs": []string{"impersonate"}, "resourceNames": []string{user}},
				map[string]any{"apiGroups": []string{""}, "resources": []string{"groups"}, "verbs": []string{"impersonate"}, "resourceNames": []string{"readers"}},
				map[string]any{"apiGroups": []string{"authentication.k8s.io"}, "resources": []string{"uids"}, "verbs": []string{"impersonate"}, "resourceNames": []string{"uid-1"}},
				map[string]any{"apiGroups": []string{"authentication.k8s.io"}, "resources": []string{"userextras/reason"}, "verbs": []string{"impersonate"}, "resourceNames": []string{"audit"}},
			},
		}},
		{rbac + "clusterrolebindings", map[string]any{
			"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
			"metadata": map[string]any{"name": name},
			"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
			"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": sa, "namespace": ns}},
		}},
		{rbac + "namespaces/" + ns + "/roles", map[string]any{
			"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
			"metadata": map[string]any{"name": "cm-reader"},
			"rules":    []any{map[string]any{"apiGroups": []string{""}, "resources": []string{"configmaps"}, "verbs": []string{"list"}}},
		}},
		{rbac + "namespaces/" + ns + "/rolebindings", map[string]any{
			"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
			"metadata": map[string]any{"name": "cm-reader"},
			"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm-reader"},
			"subjects": []any{map[string]any{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user}},
		}},
	}
	for _, obj := range objects {
		if err := p.Do(ctx, http.MethodPost, obj.path, obj.body, nil); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		p.Do(ctx, http.MethodDelete, rbac+"clusterrolebindings/"+name, nil, nil)
		p.Do(ctx, http.MethodDelete, rbac+"clusterroles/"+name, nil, nil)
	})
	return user
}

func TestAPIServerImpersonation(t *testing.T) {
	p := plane.Get(t)
	ns := p.TestNamespace(t)
	ctx := testContext(t)
	token, err := p.ServiceAccountToken(ctx, ns, "impersonator", 0)
	if err != nil {
		t.Fatal(err)
	}
	user := allowImpersonation(t, p, ns, "impersonator")
	client := func(im k8sapi.Impersonation) *k8sapi.Client {
		t.Helper()
		c, err := k8sapi.New(&k8sapi.Config{Host: p.Host(), CAData: p.CAData(), BearerToken: token, Impersonate: im, MaxRetries: -1})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	// Allowed: the server sees the impersonated user, UID, group and
	// extra, and authorizes the request as that user.
	alice := client(k8sapi.Impersonation{UserName: user, UID: "uid-1", Groups: []string{"readers"}, Extra: map[string][]string{"reason": {"audit"}}})
	who, err := whoAmI(ctx, alice)
	if err != nil {
		t.Fatal(err)
	}
	ui := who.Status.UserInfo
	if ui.Username != user || ui.UID != "uid-1" || !slices.Contains(ui.Groups, "readers") || !slices.Equal(ui.Extra["reason"], []string{"audit"}) {
		t.Errorf("the server sees %+v, want %s with uid-1, readers and reason=audit", ui, user)
	}
	if _, err := k8sapi.For[configMap](alice, k8sapi.ConfigMaps).List(ctx, ns, k8sapi.ListOptions{}); err != nil {
		t.Errorf("list as the impersonated user: %v", err)
	}
	// Without impersonation the service account itself may not list.
	if _, err := k8sapi.For[configMap](client(k8sapi.Impersonation{}), k8sapi.ConfigMaps).List(ctx, ns, k8sapi.ListOptions{}); !k8sapi.IsForbidden(err) {
		t.Errorf("list as the service account: %v, want Forbidden", err)
	}

	// Denied: a user, a group or an extra value RBAC does not allow.
	for _, im := range []k8sapi.Impersonation{
		{UserName: "bob-" + ns},
		{UserName: user, Groups: []string{"system:masters"}},
		{UserName: user, Extra: map[string][]string{"reason": {"curiosity"}}},
		{UserName: user, UID: "uid-2"},
	} {
		_, err := whoAmI(ctx, client(im))
		if !k8sapi.IsForbidden(err) || !strings.Contains(err.Error(), "impersonate") {
			t.Errorf("impersonating %+v: %v, want Forbidden to impersonate", im, err)
		}
	}
}

// TestAPIServerKubeconfigImpersonation loads the as* fields of a
// kubeconfig and sends them to the server.
func TestAPIServerKubeconfigImpersonation(t *testing.T) {
	p := plane.Get(t)
	ns := p.TestNamespace(t)
	ctx := testContext(t)
	token, err := p.ServiceAccountToken(ctx, ns, "impersonator", 0)
	if err != nil {
		t.Fatal(err)
	}
	user := allowImpersonation(t, p, ns, "impersonator")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), p.CAData(), 0o600); err != nil {
		t.Fatal(err)
	}
	kubeconfig := `apiVersion: v1
clusters:
- cluster:
    certificate-authority: ca.crt
    server: ` + p.Host() + `
  name: plane
contexts:
- context:
    cluster: plane
    namespace: ` + ns + `
    user: as-alice
  name: as-alice
- context:
    cluster: plane
    user: as-bob
  name: as-bob
current-context: as-alice
kind: Config
preferences: {}
users:
- name: as-alice
  user:
    as: ` + user + `
    as-groups:
    - readers
    as-uid: uid-1
    as-user-extra:
      reason:
      - audit
    token: ` + token + `
- name: as-bob
  user:
    as: bob-` + ns + `
    token: ` + token + `
`
	path := filepath.Join(dir, "config")
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		context string
		allowed bool
	}{{"as-alice", true}, {"as-bob", false}} {
		cfg, err := k8sapi.LoadKubeconfig([]string{path}, tt.context)
		if err != nil {
			t.Fatal(err)
		}
		cfg.MaxRetries = -1
		c, err := k8sapi.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		who, err := whoAmI(ctx, c)
		switch {
		case !tt.allowed:
			if !k8sapi.IsForbidden(err) {
				t.Errorf("%s: %v, want Forbidden", tt.context, err)
			}
		case err != nil:
			t.Errorf("%s: %v", tt.context, err)
		default:
			ui := who.Status.UserInfo
			if ui.Username != user || ui.UID != "uid-1" || !slices.Contains(ui.Groups, "readers") || !slices.Equal(ui.Extra["reason"], []string{"audit"}) {
				t.Errorf("%s: the server sees %+v", tt.context, ui)
			}
		}
	}
}
