package harness

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/testenv/controlplane"
)

// MetricsReaderSA is a ServiceAccount of the operator's namespace bound to
// the metrics-reader ClusterRole of manifests/rbac, for scrapes of the
// secure metrics endpoint (see MetricsReaderToken).
const MetricsReaderSA = "widget-e2e-metrics-reader"

// MetricsReaderToken makes MetricsReaderSA and its binding on p, if
// missing, and returns a fresh token of it.
func (e *Env) MetricsReaderToken(t testing.TB, p *controlplane.Plane) string {
	t.Helper()
	e.Install(t, p)
	objs := fmt.Sprintf(`apiVersion: v1
kind: ServiceAccount
metadata: {name: %[1]s, namespace: %[2]s}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: %[1]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: widget-operator-metrics-reader}
subjects: [{kind: ServiceAccount, name: %[1]s, namespace: %[2]s}]
`, MetricsReaderSA, OperatorNamespace)
	file := filepath.Join(t.TempDir(), "metrics-reader.yaml")
	if err := os.WriteFile(file, []byte(objs), 0o600); err != nil {
		t.Fatal(err)
	}
	Kubectl(t, p, "apply", "-f", file)
	return ServiceAccountToken(t, p, OperatorNamespace, MetricsReaderSA)
}

// ServiceAccountToken returns a fresh TokenRequest token of ServiceAccount
// namespace/name, valid for an hour.
func ServiceAccountToken(t testing.TB, p *controlplane.Plane, namespace, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tok, err := p.ServiceAccountToken(ctx, namespace, name, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// ScrapeTLS sends GET /metrics over HTTPS to addr with token as a bearer
// token (none when empty), and returns the status code and body. It does
// not verify the certificate: the operator makes a self-signed one.
func ScrapeTLS(addr, token string) (int, string, error) {
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
	}}
	defer c.CloseIdleConnections()
	req, err := http.NewRequest("GET", "https://"+addr+"/metrics", nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	return resp.StatusCode, string(b), err
}

// MetricsTLS is Metrics over HTTPS with a bearer token (see ScrapeTLS).
func MetricsTLS(addr, token string) (map[string]float64, error) {
	code, body, err := ScrapeTLS(addr, token)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %d %s", code, http.StatusText(code))
	}
	return parseMetrics(strings.NewReader(body))
}

// GrantLease lets ServiceAccount sa of the operator's namespace get and
// update Lease lease there, for tests that elect a leader under a Lease
// name of their own: manifests/rbac/leader_election.yaml grants only the
// default name. It returns the name of the Role and RoleBinding it makes,
// which are deleted when the test ends.
func GrantLease(t testing.TB, p *controlplane.Plane, lease, sa string) string {
	t.Helper()
	name := "widget-e2e-lease-" + lease + "-" + sa
	Kubectl(t, p, "-n", OperatorNamespace, "create", "role", name, "--verb=get,update",
		"--resource=leases.coordination.k8s.io", "--resource-name="+lease)
	Kubectl(t, p, "-n", OperatorNamespace, "create", "rolebinding", name, "--role", name,
		"--serviceaccount", OperatorNamespace+":"+sa)
	t.Cleanup(func() {
		KubectlErr(p, "-n", OperatorNamespace, "delete", "--ignore-not-found", "rolebinding/"+name, "role/"+name)
	})
	return name
}
