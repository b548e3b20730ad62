// Package harness runs the operator end to end for the test packages under
// e2e/: its own binary, as its own ServiceAccount bound by manifests/rbac,
// against the local control plane (a real etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and kwok). Build the plane first:
// go run ./hack/localcluster build.
//
// Each test package declares one Env and calls Main from TestMain:
//
//	var env harness.Env
//
//	func TestMain(m *testing.M) { os.Exit(env.Main(m)) }
//
// The package is for tests only; product code never imports it.
package harness

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/testenv/controlplane"
	"github.com/zerodep-k8s/widget-operator/testenv/logbuf"
	"github.com/zerodep-k8s/widget-operator/widget"
)

// The operator's identity, as manifests/rbac names it.
const (
	OperatorNamespace = "widget-system"
	OperatorSA        = "widget-operator"
	OperatorUser      = "system:serviceaccount:" + OperatorNamespace + ":" + OperatorSA
)

// Env is the environment of one test package: a shared control plane, the
// operator binary built once, and the operators started. Its methods are
// safe for concurrent use.
type Env struct {
	// Plane is the package's shared control plane.
	Plane controlplane.Shared

	bin string // the operator binary

	mu        sync.Mutex
	operators []*Operator
	shared    *Operator
	installed map[*controlplane.Plane]bool
}

// Main builds the operator, runs the tests, then stops every operator and
// the plane. It returns the exit code for os.Exit.
func (e *Env) Main(m *testing.M) int {
	dir, err := os.MkdirTemp("", "widget-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	e.bin = filepath.Join(dir, "widget-operator")
	build := exec.Command("go", "build", "-o", e.bin, "./cmd/widget-operator")
	build.Dir = RepoRoot()
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building the operator:", err)
		return 1
	}
	code := m.Run()
	e.mu.Lock()
	ops := e.operators
	e.mu.Unlock()
	for _, o := range ops {
		o.Stop()
	}
	e.Plane.Close()
	return code
}

// Binary is the path of the operator binary built by Main.
func (e *Env) Binary() string { return e.bin }

// RepoRoot is the repository's top folder.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(filepath.Dir(file)))
}

// Kubectl runs the plane's kubectl as the admin user, in the repository's
// top folder, and returns its output. A failure fails the test.
func Kubectl(t testing.TB, p *controlplane.Plane, args ...string) string {
	t.Helper()
	out, err := KubectlErr(p, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// KubectlErr is Kubectl that returns the error instead of failing.
func KubectlErr(p *controlplane.Plane, args ...string) (string, error) {
	cmd := exec.Command(p.Binaries().Kubectl, append([]string{"--kubeconfig", p.Kubeconfig()}, args...)...)
	cmd.Dir = RepoRoot()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// Install installs the namespace, the CRD, and the RBAC with the admission
// policy that fences it (manifests/rbac/) on p, once per plane.
func (e *Env) Install(t testing.TB, p *controlplane.Plane) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.installed[p] {
		return
	}
	Kubectl(t, p, "apply", "-f", "manifests/namespace.yaml", "-f", "manifests/crd.yaml", "-f", "manifests/rbac/")
	Kubectl(t, p, "wait", "--for=condition=Established", "--timeout=60s", "crd/widgets.example.com")
	if e.installed == nil {
		e.installed = map[*controlplane.Plane]bool{}
	}
	e.installed[p] = true
}

// Operator is a running operator binary.
type Operator struct {
	Cmd *exec.Cmd
	// Dir holds its kubeconfig and service-account folder.
	Dir  string
	log  *logbuf.Buffer
	done chan struct{}
}

// Stop sends SIGTERM and waits for the exit, killing the process after
// 40 seconds.
func (o *Operator) Stop() {
	if o.Exited() {
		return
	}
	_ = o.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-o.done:
	case <-time.After(40 * time.Second):
		_ = o.Cmd.Process.Kill()
		<-o.done
	}
}

// Done is closed when the process has exited.
func (o *Operator) Done() <-chan struct{} { return o.done }

// Exited reports whether the process has ended.
func (o *Operator) Exited() bool {
	select {
	case <-o.done:
		return true
	default:
		return false
	}
}

// Log returns everything the process wrote so far.
func (o *Operator) Log() string { return o.log.String() }

// WriteOperatorKubeconfig lays out a service-account folder for the
// operator's ServiceAccount in dir, and a kubeconfig that reads its token
// file, so that the operator authenticates as that ServiceAccount and is
// bound by manifests/rbac alone. It returns the kubeconfig's path.
func WriteOperatorKubeconfig(t testing.TB, p *controlplane.Plane, dir string) string {
	t.Helper()
	return WriteServiceAccountKubeconfig(t, p, dir, OperatorNamespace, OperatorSA)
}

// WriteServiceAccountKubeconfig lays out a service-account folder for
// ServiceAccount namespace/name in dir/serviceaccount (a fresh TokenRequest
// token, ca.crt and namespace, as in a pod) and writes dir/kubeconfig, which
// reads that token file; the context's namespace is the ServiceAccount's.
// It returns the kubeconfig's path.
func WriteServiceAccountKubeconfig(t testing.TB, p *controlplane.Plane, dir, namespace, name string) string {
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
`, p.Host(), filepath.Join(saDir, "ca.crt"), name, filepath.Join(saDir, "token"), name, namespace)
	path := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// StartOperator installs the manifests if needed and runs the operator
// binary as its ServiceAccount, with args after the defaults (debug logs,
// metrics and probes off, metrics over plain HTTP); a later flag wins. It
// is stopped when the package's tests end, or by the caller.
func (e *Env) StartOperator(t testing.TB, p *controlplane.Plane, args ...string) *Operator {
	t.Helper()
	e.Install(t, p)
	return e.launch(t, p, OperatorNamespace, OperatorSA, false, args)
}

// launch runs the operator binary as ServiceAccount namespace/name, in a
// folder of its own that holds its kubeconfig and service-account folder.
// stopWithTest stops it when the test ends; otherwise it may outlive the
// test (a shared operator) and Main stops it.
func (e *Env) launch(t testing.TB, p *controlplane.Plane, namespace, name string, stopWithTest bool, args []string) *Operator {
	t.Helper()
	// Not t.TempDir: a shared operator outlives the test that started it.
	dir, err := os.MkdirTemp("", "widget-e2e-op-")
	if err != nil {
		t.Fatal(err)
	}
	kc := WriteServiceAccountKubeconfig(t, p, dir, namespace, name)
	// Metrics over plain HTTP when a test turns them on: most tests read
	// them and are not about their security; those that are pass
	// --metrics-secure=true (see ScrapeTLS).
	base := []string{"--kubeconfig", kc, "--log-level", "debug",
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--metrics-secure=false"}
	o := &Operator{Cmd: exec.Command(e.bin, append(base, args...)...), Dir: dir, log: &logbuf.Buffer{}, done: make(chan struct{})}
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
		if stopWithTest {
			o.Stop()
		}
		if t.Failed() {
			t.Logf("operator (%s) log (last 4 KiB):\n%s", ServiceAccountUser(namespace, name), Tail(o.Log(), 4096))
		}
	})
	return o
}

// SharedOperator is one operator, watching all namespaces, for the tests
// of a package that only need one running. It is started on first use.
func (e *Env) SharedOperator(t testing.TB, p *controlplane.Plane) *Operator {
	t.Helper()
	e.mu.Lock()
	o := e.shared
	e.mu.Unlock()
	if o == nil || o.Exited() {
		o = e.StartOperator(t, p)
		e.mu.Lock()
		e.shared = o
		e.mu.Unlock()
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("shared operator log (last 4 KiB):\n%s", Tail(o.Log(), 4096))
		}
	})
	return o
}

// StopShared stops the shared operator if one runs, for a test that needs
// no other operator acting in all namespaces; the next SharedOperator
// starts a new one.
func (e *Env) StopShared() {
	e.mu.Lock()
	o := e.shared
	e.mu.Unlock()
	if o != nil {
		o.Stop()
	}
}

// FreeAddr returns a free loopback address, for an operator's endpoints.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Tail returns the last n bytes of s.
func Tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// Admin is a client of the plane as the admin user.
func Admin(t testing.TB, p *controlplane.Plane) *k8sapi.Client {
	t.Helper()
	cert, key := p.AdminCertificate()
	c, err := k8sapi.New(&k8sapi.Config{Host: p.Host(), CAData: p.CAData(), CertData: cert, KeyData: key, UserAgent: "widget-e2e"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Widgets is the typed Widget client of c.
func Widgets(c *k8sapi.Client) k8sapi.Typed[widget.Widget] {
	return k8sapi.For[widget.Widget](c, widget.Widgets)
}

// NewWidget returns a Widget to create.
func NewWidget(name, image string, replicas int32) *widget.Widget {
	return &widget.Widget{
		TypeMeta:   k8sapi.TypeMeta{APIVersion: widget.WidgetAPIVersion, Kind: widget.WidgetKind},
		ObjectMeta: k8sapi.ObjectMeta{Name: name},
		Spec:       widget.WidgetSpec{Image: image, Replicas: &replicas},
	}
}

// Eventually polls cond until it reports done, failing the test at the
// deadline with cond's last word.
func Eventually(t testing.TB, timeout time.Duration, cond func() (bool, string)) {
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

// Ctx is a context that ends after d or with the test.
func Ctx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// WaitReady waits until the Widget is Ready with want ready replicas at
// its current generation, and returns it.
func WaitReady(t testing.TB, c *k8sapi.Client, ns, name string, want int32, timeout time.Duration) *widget.Widget {
	t.Helper()
	var w *widget.Widget
	Eventually(t, timeout, func() (bool, string) {
		var err error
		w, err = Widgets(c).Get(Ctx(t, 10*time.Second), ns, name, k8sapi.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		st := w.Status
		return st.Phase == widget.PhaseReady && st.ReadyReplicas == want && st.ObservedGeneration == w.Generation,
			fmt.Sprintf("%s/%s: status %+v, generation %d", ns, name, st, w.Generation)
	})
	return w
}

// IsWrite reports whether an audit event is a write.
func IsWrite(e controlplane.AuditEvent) bool {
	switch e.Verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// WritesBy returns the completed write requests the operator's user made
// in namespace ns (any namespace when ns is "") since from.
func WritesBy(t testing.TB, p *controlplane.Plane, ns string, from time.Time) []controlplane.AuditEvent {
	t.Helper()
	events, err := p.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	var out []controlplane.AuditEvent
	for _, e := range events {
		if e.User != OperatorUser || (ns != "" && e.Namespace != ns) || e.Stage != "ResponseComplete" || e.Received.Before(from) {
			continue
		}
		if IsWrite(e) {
			out = append(out, e)
		}
	}
	return out
}

// Describe prints audit events one a line.
func Describe(events []controlplane.AuditEvent) string {
	var b strings.Builder
	for _, e := range events {
		fmt.Fprintf(&b, "\n  %s %s %s/%s/%s %d", e.Received.Format(time.StampMilli), e.Verb, e.Resource, e.Subresource, e.Name, e.Code)
	}
	return b.String()
}
