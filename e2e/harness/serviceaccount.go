package harness

import (
	"testing"

	"github.com/zerodep-k8s/widget-operator/testenv/controlplane"
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
	return e.launch(t, p, namespace, name, true, args)
}
