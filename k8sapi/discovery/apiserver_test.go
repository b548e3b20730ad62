package discovery

// Tests against a real kube-apiserver, started by testenv/controlplane.
// Build its binaries first: go run ./hack/localcluster build

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/testenv/controlplane"
)

// plane is a bare one: discovery needs the API server alone.
var plane = controlplane.Shared{Options: controlplane.Options{Bare: true}}

func TestMain(m *testing.M) { os.Exit(plane.Run(m)) }

func adminClient(t *testing.T, p *controlplane.Plane) *k8sapi.Client {
	t.Helper()
	cert, key := p.AdminCertificate()
	c, err := k8sapi.New(&k8sapi.Config{Host: p.Host(), CAData: p.CAData(), CertData: cert, KeyData: key})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// repoRoot is the module's top folder.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// TestAPIServerResolve resolves built-in names, then the Widget CRD's
// names once it is installed, with the same Resolver: its miss refreshes
// the cache. With RECORD_TESTDATA=1 it records testdata/api.json and
// testdata/apis.json, which the unit tests replay, before the CRD exists.
func TestAPIServerResolve(t *testing.T) {
	p := plane.Get(t)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	c := adminClient(t, p)
	if os.Getenv("RECORD_TESTDATA") != "" {
		for _, path := range []string{"/api", "/apis"} {
			body, err := c.Stream(ctx, path, nil, accept)
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(body)
			body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join("testdata", path[1:]+".json"), append(bytes.TrimSpace(b), '\n'), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	r, err := New(Config{Client: c})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]k8sapi.Resource{
		"deploy":                     k8sapi.Deployments,
		"Deployment":                 k8sapi.Deployments,
		"po":                         k8sapi.Pods,
		"ns":                         k8sapi.Namespaces,
		"events":                     {Version: "v1", Resource: "events", Namespaced: true, Kind: "Event"},
		"leases.coordination.k8s.io": k8sapi.Leases,
		"crd":                        k8sapi.CustomResourceDefinitions,
	} {
		if m, err := r.Resolve(ctx, name); err != nil || m.Resource != want {
			t.Errorf("Resolve(%q) = %+v, %v; want %+v", name, m.Resource, err, want)
		}
	}
	if _, err := r.Resolve(ctx, "widgets.example.com"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("before the CRD: %v, want ErrNotFound", err)
	}

	kubectl := exec.CommandContext(ctx, p.Binaries().Kubectl, "--kubeconfig", p.Kubeconfig(),
		"apply", "-f", filepath.Join(repoRoot(), "manifests", "crd.yaml"))
	if out, err := kubectl.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	widgets := k8sapi.Resource{Group: "example.com", Version: "v1", Resource: "widgets", Namespaced: true, Kind: "Widget"}
	// The CRD reaches aggregated discovery shortly after it is
	// established: ask until it does, each miss reading discovery again.
	for {
		m, err := r.Resolve(ctx, "widgets.example.com")
		if err == nil {
			if m.Resource != widgets || m.Kind != "Widget" || m.Singular != "widget" {
				t.Fatalf("widgets.example.com = %+v", m)
			}
			break
		}
		if !errors.Is(err, ErrNotFound) {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("widgets never resolved: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
	}
	for _, name := range []string{"wg", "Widget", "widget", "widgets", "widgets.v1.example.com"} {
		if m, err := r.Resolve(ctx, name); err != nil || m.Resource != widgets {
			t.Errorf("Resolve(%q) = %+v, %v; want widgets", name, m.Resource, err)
		}
	}
}
