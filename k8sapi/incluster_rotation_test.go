package k8sapi

import (
	"os"
	"path/filepath"
	"testing"
)

// In-cluster config sets both a token and the token file it came from. The
// file must win, or a rotated service-account token would never be used.
func TestInClusterTokenFileWinsOverToken(t *testing.T) {
	dir := serviceAccountDir(t, true)
	env := fakeEnv{"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
	cfg, err := inCluster(dir, env.get)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.BearerToken == "" || cfg.BearerTokenFile == "" {
		t.Fatalf("in-cluster config should set both the token and its file: %+v", cfg)
	}
	creds, err := newCredentials(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := authHeader(t, creds); got != "Bearer sa-token" {
		t.Fatalf("first token: %q", got)
	}
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("rotated\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if !creds.refresh() {
		t.Fatal("in-cluster credentials cannot be refreshed: the static token won over the file")
	}
	if got := authHeader(t, creds); got != "Bearer rotated" {
		t.Errorf("after the kubelet rotated the token: %q, want %q", got, "Bearer rotated")
	}
}
