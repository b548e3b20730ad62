package harness

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/zerodep-k8s/widget-operator/testenv/controlplane"
)

// UserOf is the audit-log user name of ServiceAccount sa of the
// operator's namespace.
func UserOf(sa string) string { return ServiceAccountUser(OperatorNamespace, sa) }

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
	return e.launch(t, p, OperatorNamespace, sa, false, args)
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
