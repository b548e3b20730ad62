package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/internal/controlplane"
)

// ServiceAccountUser is the user name a ServiceAccount's requests carry in
// the audit log.
func ServiceAccountUser(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

// StartOperatorIn runs the operator binary as ServiceAccount name of
// namespace (created if missing), through a kubeconfig that reads a
// TokenRequest token from a service-account folder, with args after the
// defaults of StartOperator. Unlike StartOperator it installs nothing: the
// test grants the ServiceAccount what it means to. The process is stopped
// when the test ends.
func (e *Env) StartOperatorIn(t testing.TB, p *controlplane.Plane, namespace, name string, args ...string) *Operator {
	t.Helper()
	dir := t.TempDir()
	kc := kubeconfigForServiceAccount(t, p, dir, namespace, name)
	base := []string{"--kubeconfig", kc, "--log-level", "debug",
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0"}
	o := &Operator{Cmd: exec.Command(e.bin, append(base, args...)...), Dir: dir, log: &lockedBuffer{}, done: make(chan struct{})}
	o.Cmd.Stdout, o.Cmd.Stderr = o.log, o.log
	o.Cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := o.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = o.Cmd.Wait(); close(o.done) }()
	e.mu.Lock()
	e.operators = append(e.operators, o)
	e.mu.Unlock()
	t.Cleanup(func() {
		o.Stop()
		if t.Failed() {
			t.Logf("operator (%s) log (last 4 KiB):\n%s", ServiceAccountUser(namespace, name), Tail(o.Log(), 4096))
		}
	})
	return o
}

// kubeconfigForServiceAccount lays out a service-account folder for
// namespace/name in dir and writes a kubeconfig that reads its token file;
// the context's namespace is the ServiceAccount's, as in a pod.
func kubeconfigForServiceAccount(t testing.TB, p *controlplane.Plane, dir, namespace, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	saDir := filepath.Join(dir, "serviceaccount")
	if err := p.WriteServiceAccountDir(ctx, saDir, namespace, name); err != nil {
		t.Fatal(err)
	}
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: operator
  user:
    tokenFile: %s
contexts:
- name: operator
  context:
    cluster: local
    user: operator
    namespace: %s
current-context: operator
`, p.Host(), filepath.Join(saDir, "ca.crt"), filepath.Join(saDir, "token"), namespace)
	path := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
