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

// UserOf is the audit-log user name of ServiceAccount sa of the
// operator's namespace.
func UserOf(sa string) string {
	return "system:serviceaccount:" + OperatorNamespace + ":" + sa
}

// BindLikeOperator creates ServiceAccount sa in the operator's namespace
// and binds it to the operator's ClusterRole and leader-election Role, so
// that an operator running as sa may do what the operator may, under a
// name of its own in the audit log. The bindings are deleted when the
// test ends.
func (e *Env) BindLikeOperator(t testing.TB, p *controlplane.Plane, sa string) {
	t.Helper()
	e.Install(t, p)
	subject := OperatorNamespace + ":" + sa
	Kubectl(t, p, "-n", OperatorNamespace, "create", "serviceaccount", sa)
	Kubectl(t, p, "create", "clusterrolebinding", sa, "--clusterrole", "widget-operator", "--serviceaccount", subject)
	Kubectl(t, p, "-n", OperatorNamespace, "create", "rolebinding", sa+"-leader-election",
		"--role", "widget-operator-leader-election", "--serviceaccount", subject)
	t.Cleanup(func() {
		KubectlErr(p, "delete", "--ignore-not-found", "clusterrolebinding", sa)
		KubectlErr(p, "-n", OperatorNamespace, "delete", "--ignore-not-found", "rolebinding", sa+"-leader-election")
		KubectlErr(p, "-n", OperatorNamespace, "delete", "--ignore-not-found", "serviceaccount", sa)
	})
}

// StartOperatorAs is StartOperator as ServiceAccount sa of the operator's
// namespace instead of the operator's own (see BindLikeOperator).
func (e *Env) StartOperatorAs(t testing.TB, p *controlplane.Plane, sa string, args ...string) *Operator {
	t.Helper()
	e.Install(t, p)
	dir, err := os.MkdirTemp("", "widget-e2e-op-")
	if err != nil {
		t.Fatal(err)
	}
	kc := writeKubeconfigAs(t, p, dir, sa)
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
		if t.Failed() {
			t.Logf("operator (%s) log (last 4 KiB):\n%s", sa, Tail(o.Log(), 4096))
		}
	})
	return o
}

// writeKubeconfigAs is WriteOperatorKubeconfig for ServiceAccount sa.
func writeKubeconfigAs(t testing.TB, p *controlplane.Plane, dir, sa string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	saDir := filepath.Join(dir, "serviceaccount")
	if err := p.WriteServiceAccountDir(ctx, saDir, OperatorNamespace, sa); err != nil {
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
- name: %s
  user:
    tokenFile: %s
contexts:
- name: operator
  context:
    cluster: local
    user: %s
    namespace: %s
current-context: operator
`, p.Host(), filepath.Join(saDir, "ca.crt"), sa, filepath.Join(saDir, "token"), sa, OperatorNamespace)
	path := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Token returns the ServiceAccount token the operator was started with.
func (o *Operator) Token(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(o.Dir, "serviceaccount", "token"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// ExitCode returns the exit code of a process that has exited: -1 when a
// signal ended it. It panics if the process is still running.
func (o *Operator) ExitCode() int {
	if !o.Exited() {
		panic("harness: ExitCode of a running operator")
	}
	return o.Cmd.ProcessState.ExitCode()
}

// Signal sends sig to the process; one that has exited is left alone.
func (o *Operator) Signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if o.Exited() {
		return
	}
	if err := o.Cmd.Process.Signal(sig); err != nil && !o.Exited() {
		t.Fatalf("signal %v: %v", sig, err)
	}
}
