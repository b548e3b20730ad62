package controlplane_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/testenv/controlplane"
)

var shared controlplane.Shared

func TestMain(m *testing.M) { os.Exit(shared.Run(m)) }

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// waitUntil polls cond every 100ms until it holds or the deadline passes.
func waitUntil(t *testing.T, ctx context.Context, what string, timeout time.Duration, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, timeout)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func TestVersions(t *testing.T) {
	p := shared.Get(t)
	ctx := testContext(t)
	var v struct {
		GitVersion string `json:"gitVersion"`
		Major      string `json:"major"`
		Minor      string `json:"minor"`
	}
	if err := p.Do(ctx, http.MethodGet, "/version", nil, &v); err != nil {
		t.Fatal(err)
	}
	if v.GitVersion != controlplane.KubernetesVersion || v.Major != "1" || v.Minor == "" {
		t.Fatalf("apiserver version %+v, want %s", v, controlplane.KubernetesVersion)
	}
	// kubectl reports both sides, which fails on a v0.0.0 build.
	cmd := exec.CommandContext(ctx, p.Binaries().Kubectl, "--kubeconfig="+p.Kubeconfig(), "version", "-o", "json")
	cmd.Env = []string{"HOME=" + t.TempDir()}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl version: %v\n%s", err, out)
	}
	if strings.Count(string(out), `"gitVersion": "`+controlplane.KubernetesVersion+`"`) != 2 {
		t.Fatalf("kubectl version:\n%s", out)
	}
}

// TestDeploymentBecomesReady runs a Deployment through the controller
// manager, the scheduler and kwok's fake kubelet.
func TestDeploymentBecomesReady(t *testing.T) {
	p := shared.Get(t)
	ns := p.TestNamespace(t)
	ctx := testContext(t)
	dep := map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web"},
		"spec": map[string]any{
			"replicas": 2,
			"selector": map[string]any{"matchLabels": map[string]string{"app": "web"}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]string{"app": "web"}},
				"spec": map[string]any{"containers": []any{map[string]any{
					"name": "web", "image": "example.invalid/web:1",
				}}},
			},
		},
	}
	if err := p.Do(ctx, http.MethodPost, "/apis/apps/v1/namespaces/"+ns+"/deployments", dep, nil); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, ctx, "deployment readyReplicas=2", 60*time.Second, func() (bool, error) {
		var d struct {
			Status struct {
				ReadyReplicas int `json:"readyReplicas"`
			} `json:"status"`
		}
		err := p.Do(ctx, http.MethodGet, "/apis/apps/v1/namespaces/"+ns+"/deployments/web", nil, &d)
		return d.Status.ReadyReplicas == 2, err
	})
	var pods struct {
		Items []struct {
			Spec struct {
				NodeName string `json:"nodeName"`
			} `json:"spec"`
			Status struct {
				Phase string `json:"phase"`
			} `json:"status"`
		} `json:"items"`
	}
	if err := p.Do(ctx, http.MethodGet, "/api/v1/namespaces/"+ns+"/pods", nil, &pods); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 2 {
		t.Fatalf("%d pods, want 2", len(pods.Items))
	}
	for _, pod := range pods.Items {
		if pod.Spec.NodeName != controlplane.NodeName || pod.Status.Phase != "Running" {
			t.Errorf("pod on %q in phase %q, want Running on %s", pod.Spec.NodeName, pod.Status.Phase, controlplane.NodeName)
		}
	}
}

func TestServiceAccountDir(t *testing.T) {
	p := shared.Get(t)
	ns := p.TestNamespace(t)
	ctx := testContext(t)
	dir := filepath.Join(t.TempDir(), "serviceaccount")
	if err := p.WriteServiceAccountDir(ctx, dir, ns, "operator"); err != nil {
		t.Fatal(err)
	}
	token, err := os.ReadFile(filepath.Join(dir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "namespace")); string(got) != ns {
		t.Errorf("namespace file %q, want %q", got, ns)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "ca.crt")); string(got) != string(p.CAData()) {
		t.Error("ca.crt is not the plane's CA")
	}
	// The token authenticates as the ServiceAccount.
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.Host()+"/apis/authentication.k8s.io/v1/selfsubjectreviews",
		strings.NewReader(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+string(token))
	tr := p.HTTPClient().Transport.(*http.Transport).Clone()
	tr.TLSClientConfig.Certificates = nil
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Status struct {
			UserInfo struct {
				Username string `json:"username"`
			} `json:"userInfo"`
		} `json:"status"`
	}
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		t.Fatalf("self subject review: %s", resp.Status)
	}
	if err := decodeJSON(resp, &out); err != nil {
		t.Fatal(err)
	}
	if want := "system:serviceaccount:" + ns + ":operator"; out.Status.UserInfo.Username != want {
		t.Fatalf("token user %q, want %q", out.Status.UserInfo.Username, want)
	}
	// Writing again rotates the token.
	if err := p.WriteServiceAccountDir(ctx, dir, ns, "operator"); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(filepath.Join(dir, "token")); string(again) == string(token) {
		t.Error("token not rotated")
	}
}

// TestFaults restarts the apiserver over the same data and compacts etcd,
// on a plane of its own.
func TestFaults(t *testing.T) {
	p := controlplane.StartForTest(t, controlplane.Options{Bare: true})
	ctx := testContext(t)
	cm := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "survivor"}}
	if err := p.Do(ctx, http.MethodPost, "/api/v1/namespaces/default/configmaps", cm, nil); err != nil {
		t.Fatal(err)
	}

	for _, stop := range []struct {
		name string
		f    func()
	}{{"stop", p.StopAPIServer}, {"kill", p.KillAPIServer}} {
		stop.f()
		err := p.Do(ctx, http.MethodGet, "/readyz", nil, nil)
		if err == nil || !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("after %s: %v, want connection refused", stop.name, err)
		}
		if err := p.StartAPIServer(ctx); err != nil {
			t.Fatal(err)
		}
		if err := p.Do(ctx, http.MethodGet, "/api/v1/namespaces/default/configmaps/survivor", nil, nil); err != nil {
			t.Fatalf("after %s and restart: %v", stop.name, err)
		}
	}

	before, err := p.EtcdRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rev, err := p.CompactEtcd(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rev < before {
		t.Fatalf("compacted at %d, before %d", rev, before)
	}
	// Compacting twice at the same revision is refused by etcd.
	if _, err := p.CompactEtcd(ctx); err == nil {
		t.Log("second compaction at the same revision accepted")
	}
}

func TestAuditLogCountsUser(t *testing.T) {
	p := shared.Get(t)
	ctx := testContext(t)
	for range 3 {
		if err := p.Do(ctx, http.MethodGet, "/api/v1/namespaces/kube-system", nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, ctx, "3 audited gets of namespace kube-system by admin", 10*time.Second, func() (bool, error) {
		events, err := p.AuditEvents()
		n := controlplane.CountRequests(events, func(e controlplane.AuditEvent) bool {
			return e.User == "admin" && e.Verb == "get" && e.Resource == "namespaces" && e.Name == "kube-system" && e.Code == 200
		})
		return n >= 3, err
	})
}

func TestStopLeavesNothing(t *testing.T) {
	p, err := controlplane.Start(context.Background(), controlplane.Options{Bare: true})
	if err != nil {
		t.Fatal(err)
	}
	dir := p.Dir()
	host := p.Host()
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("data folder left behind: %v", err)
	}
	resp, err := http.Get(strings.Replace(host, "https", "http", 1) + "/readyz")
	if err == nil {
		resp.Body.Close()
		t.Errorf("apiserver still answers after Stop")
	}
}

func decodeJSON(resp *http.Response, out any) error {
	return json.NewDecoder(resp.Body).Decode(out)
}
