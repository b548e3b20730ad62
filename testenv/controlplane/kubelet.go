package controlplane

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// EchoPort is the container port that kwok forwards, for every Pod on the
// fake Node, to the plane's TCP echo server ([Plane.EchoAddr]). Any other
// port has no forward: kwok refuses it.
const EchoPort = 7

// kubelet is kwok's kubelet endpoint: the streaming API (logs, exec,
// attach, port-forward) of the fake Node, over TLS on loopback.
//
// The apiserver verifies kwok's serving certificate with the plane's CA and
// reaches the Node by its InternalIP, 127.0.0.1. kwok does not check the
// apiserver's client certificate: anyone on loopback who knows the port can
// ask it to run a command, which is why it listens on loopback alone.
type kubelet struct {
	addr   string // host:port kwok serves on
	port   int
	cert   string // serving pair files
	key    string
	config string // kwok configuration file of the streaming rules
	podLog string // CRI log file that every container's log reads
	echo   net.Listener
	logMu  sync.Mutex // serializes AppendPodLog
}

// kwokArgs are kwok's flags for the endpoint.
func (k *kubelet) kwokArgs() []string {
	return []string{
		"--server-address=" + k.addr,
		"--node-ip=127.0.0.1",
		"--node-port=" + strconv.Itoa(k.port),
		"--tls-cert-file=" + k.cert,
		"--tls-private-key-file=" + k.key,
		"--config=" + k.config,
	}
}

// apiServerArgs are the apiserver's flags to reach the endpoint and verify
// it.
func (p *Plane) kubeletAPIServerArgs() []string {
	pair := p.pki.clientPairs["apiserver-kubelet-client"]
	return []string{
		"--kubelet-certificate-authority=" + p.pki.caCert,
		"--kubelet-client-certificate=" + pair[0],
		"--kubelet-client-key=" + pair[1],
		"--kubelet-preferred-address-types=InternalIP",
	}
}

// setupKubelet issues kwok's serving certificate, writes its streaming
// rules and the empty Pod log, and starts the echo server.
func (p *Plane) setupKubelet(port int) error {
	dir := filepath.Join(p.dir, "kubelet")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("controlplane: %w", err)
	}
	k := &kubelet{
		addr:   net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		port:   port,
		cert:   filepath.Join(dir, "kubelet.crt"),
		key:    filepath.Join(dir, "kubelet.key"),
		config: filepath.Join(dir, "kwok-streaming.yaml"),
		podLog: filepath.Join(dir, "pod.log"),
	}
	certPEM, keyPEM, err := p.pki.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: NodeName},
		DNSNames:    []string{NodeName, "localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, time.Now())
	if err != nil {
		return err
	}
	if err := writePEM(k.cert, certPEM); err != nil {
		return err
	}
	if err := writePEM(k.key, keyPEM); err != nil {
		return err
	}
	if err := os.WriteFile(k.podLog, nil, 0o644); err != nil {
		return fmt.Errorf("controlplane: %w", err)
	}
	if k.echo, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return fmt.Errorf("controlplane: echo server: %w", err)
	}
	go k.serveEcho()
	p.kubelet = k
	if err := os.WriteFile(k.config, []byte(k.streamingRules()), 0o644); err != nil {
		return fmt.Errorf("controlplane: %w", err)
	}
	return nil
}

// streamingRules are kwok's rules for every Pod on the fake Node: exec
// runs the command on this machine, logs and attach read the Pod log
// file, and port EchoPort reaches the echo server.
func (k *kubelet) streamingRules() string {
	echo := k.echo.Addr().(*net.TCPAddr)
	return fmt.Sprintf(`apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterExec
metadata:
  name: local
spec:
  execs:
  - local: {}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterLogs
metadata:
  name: pod-log
spec:
  logs:
  - logsFile: %[1]q
    follow: true
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterAttach
metadata:
  name: pod-log
spec:
  attaches:
  - logsFile: %[1]q
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterPortForward
metadata:
  name: echo
spec:
  forwards:
  - ports: [%[2]d]
    target:
      address: %[3]q
      port: %[4]d
`, k.podLog, EchoPort, echo.IP.String(), echo.Port)
}

// serveEcho writes back whatever each connection sends, until the
// listener closes.
func (k *kubelet) serveEcho() {
	for {
		c, err := k.echo.Accept()
		if err != nil {
			return
		}
		go func() {
			io.Copy(c, c)
			c.Close()
		}()
	}
}

// close stops the echo server. Connections still open end when kwok,
// their only client, stops.
func (k *kubelet) close() {
	if k != nil && k.echo != nil {
		k.echo.Close()
	}
}

// KubeletAddr returns the address of kwok's kubelet endpoint, such as
// "127.0.0.1:40125", or "" for a bare plane.
func (p *Plane) KubeletAddr() string {
	if p.kubelet == nil {
		return ""
	}
	return p.kubelet.addr
}

// EchoAddr returns the address of the plane's TCP echo server, which a
// port-forward to [EchoPort] of any Pod on the fake Node reaches, or "" for
// a bare plane.
func (p *Plane) EchoAddr() string {
	if p.kubelet == nil {
		return ""
	}
	return p.kubelet.echo.Addr().String()
}

// PodLogPath returns the CRI log file that kwok serves as the log of every
// container on the fake Node, and that attach follows. It is empty when
// the plane starts; [Plane.AppendPodLog] adds lines.
func (p *Plane) PodLogPath() string {
	if p.kubelet == nil {
		return ""
	}
	return p.kubelet.podLog
}

// ResetPodLog empties the Pod log file, for a test that reads a whole
// log: the file is one for every pod of the plane, so such tests must not
// run in parallel.
func (p *Plane) ResetPodLog() error {
	if p.kubelet == nil {
		return fmt.Errorf("controlplane: a bare plane has no Pod log")
	}
	p.kubelet.logMu.Lock()
	defer p.kubelet.logMu.Unlock()
	if err := os.Truncate(p.kubelet.podLog, 0); err != nil {
		return fmt.Errorf("controlplane: %w", err)
	}
	return nil
}

// AppendPodLog appends lines to the Pod log file, in the CRI format, as
// written on stream ("stdout" or "stderr") at time at. Each line is one
// full log entry; a line must not contain a newline.
func (p *Plane) AppendPodLog(at time.Time, stream string, lines ...string) error {
	if p.kubelet == nil {
		return fmt.Errorf("controlplane: a bare plane has no Pod log")
	}
	var b strings.Builder
	for _, l := range lines {
		if strings.ContainsAny(l, "\r\n") {
			return fmt.Errorf("controlplane: Pod log line %q has a newline", l)
		}
		fmt.Fprintf(&b, "%s %s F %s\n", at.UTC().Format(time.RFC3339Nano), stream, l)
	}
	p.kubelet.logMu.Lock()
	defer p.kubelet.logMu.Unlock()
	f, err := os.OpenFile(p.kubelet.podLog, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("controlplane: %w", err)
	}
	if _, err := f.WriteString(b.String()); err != nil {
		f.Close()
		return fmt.Errorf("controlplane: %w", err)
	}
	return f.Close()
}

// RunPod creates a Pod of one container, "main", bound to the fake Node,
// and waits until kwok reports it Running. A Pod of that name that exists
// already is fine.
func (p *Plane) RunPod(ctx context.Context, namespace, name string) error {
	pod := map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": objectMeta{Name: name, Namespace: namespace},
		"spec": map[string]any{
			"nodeName":    NodeName,
			"tolerations": []map[string]string{{"operator": "Exists"}},
			"containers":  []map[string]string{{"name": "main", "image": "busybox"}},
		},
	}
	path := "/api/v1/namespaces/" + url.PathEscape(namespace) + "/pods"
	if err := p.createOK(ctx, path, pod); err != nil {
		return err
	}
	return p.waitFor(ctx, "Pod "+namespace+"/"+name+" Running", func(ctx context.Context) (bool, error) {
		var got struct {
			Status struct{ Phase string } `json:"status"`
		}
		if err := p.Do(ctx, http.MethodGet, path+"/"+url.PathEscape(name), nil, &got); err != nil {
			return false, err
		}
		return got.Status.Phase == "Running", nil
	})
}

// GrantedToken creates the ServiceAccount name in namespace, a Role of
// the same name that grants verbs on resources of the core group (such
// as "pods/exec") and the RoleBinding of the account to it, and returns a
// token of the account valid for an hour. For tests of RBAC.
func (p *Plane) GrantedToken(ctx context.Context, namespace, name string, resources, verbs []string) (string, error) {
	base := "/apis/rbac.authorization.k8s.io/v1/namespaces/" + url.PathEscape(namespace)
	role := map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": objectMeta{Name: name},
		"rules": []map[string]any{{"apiGroups": []string{""}, "resources": resources, "verbs": verbs}},
	}
	binding := map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": objectMeta{Name: name},
		"roleRef":  map[string]string{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
		"subjects": []map[string]string{{"kind": "ServiceAccount", "name": name, "namespace": namespace}},
	}
	if err := p.CreateServiceAccount(ctx, namespace, name); err != nil {
		return "", err
	}
	if err := p.createOK(ctx, base+"/roles", role); err != nil {
		return "", err
	}
	if err := p.createOK(ctx, base+"/rolebindings", binding); err != nil {
		return "", err
	}
	return p.ServiceAccountToken(ctx, namespace, name, time.Hour)
}
