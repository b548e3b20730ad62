// Package e2e tests the operator end to end: its own binary, running as its
// own ServiceAccount bound by manifests/rbac, against the local control plane
// (a real etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
// kwok). Build the plane first: go run ./hack/localcluster build
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/internal/controlplane"
	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/reconcile"
)

var plane controlplane.Shared

// operatorBin is the operator binary built once for the package.
var operatorBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "widget-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	operatorBin = filepath.Join(dir, "widget-operator")
	build := exec.Command("go", "build", "-o", operatorBin, "../cmd/widget-operator")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building the operator:", err)
		os.Exit(1)
	}
	code := plane.Run(m)
	stopOperators()
	os.RemoveAll(dir)
	os.Exit(code)
}

// The operator's identity, as manifests/rbac names it.
const (
	operatorNamespace = "widget-system"
	operatorSA        = "widget-operator"
	operatorUser      = "system:serviceaccount:" + operatorNamespace + ":" + operatorSA
)

// repoRoot is the repository's top folder, for manifests/.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

// kubectl runs the plane's kubectl as the admin user.
func kubectl(t testing.TB, p *controlplane.Plane, args ...string) string {
	t.Helper()
	cmd := exec.Command(p.Binaries().Kubectl, append([]string{"--kubeconfig", p.Kubeconfig()}, args...)...)
	cmd.Dir = repoRoot()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

// installOnce installs the namespace, CRD and RBAC on the shared plane.
var installOnce sync.Once

func install(t testing.TB, p *controlplane.Plane) {
	installOnce.Do(func() {
		kubectl(t, p, "apply", "-f", "manifests/namespace.yaml", "-f", "manifests/crd.yaml", "-f", "manifests/rbac/")
		kubectl(t, p, "wait", "--for=condition=Established", "--timeout=60s", "crd/widgets.example.com")
	})
}

// operatorProc is a running operator binary.
type operatorProc struct {
	cmd  *exec.Cmd
	log  *lockedBuffer
	done chan struct{}
}

var (
	operatorsMu sync.Mutex
	operators   []*operatorProc
	sharedOp    *operatorProc
)

func stopOperators() {
	operatorsMu.Lock()
	defer operatorsMu.Unlock()
	for _, o := range operators {
		o.stop()
	}
}

func (o *operatorProc) stop() {
	select {
	case <-o.done:
		return
	default:
	}
	_ = o.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-o.done:
	case <-time.After(40 * time.Second):
		_ = o.cmd.Process.Kill()
		<-o.done
	}
}

// exited reports whether the process has ended.
func (o *operatorProc) exited() bool {
	select {
	case <-o.done:
		return true
	default:
		return false
	}
}

// lockedBuffer collects a process's output.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// writeOperatorKubeconfig lays out a service-account folder for the
// operator's ServiceAccount and a kubeconfig that reads its token file, so
// the operator authenticates as that ServiceAccount and is bound by
// manifests/rbac alone.
func writeOperatorKubeconfig(t testing.TB, p *controlplane.Plane, dir string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	saDir := filepath.Join(dir, "serviceaccount")
	if err := p.WriteServiceAccountDir(ctx, saDir, operatorNamespace, operatorSA); err != nil {
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
current-context: operator
`, p.Host(), filepath.Join(saDir, "ca.crt"), filepath.Join(saDir, "token"))
	path := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startOperator runs the operator binary with args added to a kubeconfig
// for its ServiceAccount. It is stopped when the package's tests end, or
// by the caller.
func startOperator(t testing.TB, p *controlplane.Plane, args ...string) *operatorProc {
	t.Helper()
	install(t, p)
	dir, err := os.MkdirTemp("", "widget-e2e-op-")
	if err != nil {
		t.Fatal(err)
	}
	kc := writeOperatorKubeconfig(t, p, dir)
	base := []string{"--kubeconfig", kc, "--log-level", "debug",
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0"}
	o := &operatorProc{cmd: exec.Command(operatorBin, append(base, args...)...), log: &lockedBuffer{}, done: make(chan struct{})}
	o.cmd.Stdout, o.cmd.Stderr = o.log, o.log
	o.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := o.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = o.cmd.Wait(); close(o.done) }()
	operatorsMu.Lock()
	operators = append(operators, o)
	operatorsMu.Unlock()
	return o
}

// sharedOperator is one operator, watching all namespaces, for the tests
// that only need one running.
func sharedOperator(t testing.TB, p *controlplane.Plane) *operatorProc {
	t.Helper()
	operatorsMu.Lock()
	o := sharedOp
	operatorsMu.Unlock()
	if o == nil || o.exited() {
		o = startOperator(t, p)
		operatorsMu.Lock()
		sharedOp = o
		operatorsMu.Unlock()
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("operator log (last 4 KiB):\n%s", tail(o.log.String(), 4096))
		}
	})
	return o
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// admin is a client of the plane as the admin user.
func admin(t testing.TB, p *controlplane.Plane) *k8sapi.Client {
	t.Helper()
	cert, key := p.AdminCertificate()
	c, err := k8sapi.New(&k8sapi.Config{Host: p.Host(), CAData: p.CAData(), CertData: cert, KeyData: key, UserAgent: "widget-e2e"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func widgets(c *k8sapi.Client) k8sapi.Typed[reconcile.Widget] {
	return k8sapi.For[reconcile.Widget](c, reconcile.Widgets)
}

func newWidget(name, image string, replicas int32) *reconcile.Widget {
	return &reconcile.Widget{
		TypeMeta:   k8sapi.TypeMeta{APIVersion: reconcile.WidgetAPIVersion, Kind: reconcile.WidgetKind},
		ObjectMeta: k8sapi.ObjectMeta{Name: name},
		Spec:       reconcile.WidgetSpec{Image: image, Replicas: &replicas},
	}
}

// eventually polls cond until it reports done, failing the test at the
// deadline with cond's last word.
func eventually(t testing.TB, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", timeout, why)
		}
		<-tick.C
	}
}

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// writesBy counts the write requests the operator's user made in namespace
// ns since from.
func writesBy(t testing.TB, p *controlplane.Plane, ns string, from time.Time) []controlplane.AuditEvent {
	t.Helper()
	events, err := p.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	var out []controlplane.AuditEvent
	for _, e := range events {
		if e.User != operatorUser || e.Namespace != ns || e.Stage != "ResponseComplete" || e.Received.Before(from) {
			continue
		}
		switch e.Verb {
		case "create", "update", "patch", "delete", "deletecollection":
			out = append(out, e)
		}
	}
	return out
}

func describe(events []controlplane.AuditEvent) string {
	var b strings.Builder
	for _, e := range events {
		fmt.Fprintf(&b, "\n  %s %s %s/%s/%s %d", e.Received.Format(time.StampMilli), e.Verb, e.Resource, e.Subresource, e.Name, e.Code)
	}
	return b.String()
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
