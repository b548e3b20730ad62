package k8sapi

import (
	"os"
	"path/filepath"
	"testing"
)

// In-cluster config names the token file and holds no token of its own:
// the credentials read the file, and read it again once the kubelet
// rotated it, or a rotated service-account token would never be used.
func TestInClusterTokenFileRotated(t *testing.T) {
	dir := serviceAccountDir(t, true)
	fakeEnv{"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}.set(t)
	cfg, err := inCluster(dir)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.BearerToken != "" || cfg.BearerTokenFile != filepath.Join(dir, "token") {
		t.Fatalf("in-cluster config should name the token file and hold no token: %+v", cfg)
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
		t.Fatal("in-cluster credentials cannot be refreshed")
	}
	if got := authHeader(t, creds); got != "Bearer rotated" {
		t.Errorf("after the kubelet rotated the token: %q, want %q", got, "Bearer rotated")
	}
}
