package controlplane

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Component names, as used by [Plane.LogTail] and [Plane.LogPath].
const (
	Etcd                  = "etcd"
	KubeAPIServer         = "kube-apiserver"
	KubeControllerManager = "kube-controller-manager"
	KubeScheduler         = "kube-scheduler"
	Kwok                  = "kwok"
)

// NodeName is the name of the fake Node that kwok manages.
const NodeName = "kwok-node-0"

// Options say how [Start] starts a plane. The zero value starts a full
// plane from the binaries in [DefaultDir], in a temporary folder that
// [Plane.Stop] removes.
type Options struct {
	// Bare starts etcd and kube-apiserver only: no controllers, no
	// scheduler, no Node. Deployments then never get Pods. For benchmarks
	// and for tests of the API alone.
	Bare bool
	// Dir is the plane's data folder: certificates, etcd data, logs and
	// kubeconfigs. Empty means a new temporary folder that Stop removes
	// (unless KeepDir); a given folder is created if needed and kept.
	Dir string
	// KeepDir keeps a temporary Dir after Stop, for a look at the logs.
	KeepDir bool
	// Binaries are the programs to run. Nil means [FindBinaries]("").
	Binaries *Binaries
	// ReadyTimeout bounds the whole start. Zero means 2 minutes.
	ReadyTimeout time.Duration
	// Log receives progress lines. Nil means they are dropped.
	Log io.Writer
	// APIServerArgs are extra kube-apiserver flags, appended last so that
	// they override the defaults.
	APIServerArgs []string
}

// Plane is a running control plane. See the package documentation for its
// concurrency rules.
type Plane struct {
	opts    Options
	bins    *Binaries
	dir     string
	tempDir bool
	pki     *pki
	logw    io.Writer

	etcdURL    string
	host       string
	kubeconfig string
	auditLog   string
	client     *http.Client
	apiArgs    []string
	kubelet    *kubelet // nil for a bare plane

	mu      sync.Mutex
	procs   map[string]*process
	stopped bool
}

// Start starts a plane and waits until it is ready. On error nothing it
// started is left running.
func Start(ctx context.Context, opts Options) (*Plane, error) {
	timeout := opts.ReadyTimeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// The free ports are found by binding and releasing them, so another
	// program may take one before etcd or the apiserver binds it. Such a
	// start is retried with new ports.
	for attempt := 1; ; attempt++ {
		p, err := startOnce(ctx, opts)
		if err == nil {
			return p, nil
		}
		if attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			return nil, err
		}
		fmt.Fprintf(cmp.Or[io.Writer](opts.Log, io.Discard), "controlplane: a port was taken; starting again\n")
	}
}

func startOnce(ctx context.Context, opts Options) (p *Plane, err error) {
	began := time.Now()
	bins := opts.Binaries
	if bins == nil {
		if bins, err = FindBinaries(""); err != nil {
			return nil, err
		}
	}
	p = &Plane{opts: opts, bins: bins, logw: opts.Log, procs: map[string]*process{}}
	if p.logw == nil {
		p.logw = io.Discard
	}
	if opts.Dir == "" {
		sweepStale(os.TempDir())
		if p.dir, err = os.MkdirTemp("", "controlplane-"); err != nil {
			return nil, fmt.Errorf("controlplane: %w", err)
		}
		p.tempDir = true
		if err := os.WriteFile(filepath.Join(p.dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
			os.RemoveAll(p.dir)
			return nil, fmt.Errorf("controlplane: %w", err)
		}
	} else {
		p.dir = opts.Dir
		if err := os.MkdirAll(p.dir, 0o755); err != nil {
			return nil, fmt.Errorf("controlplane: %w", err)
		}
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w\n%s", err, p.logTails(30))
			p.Stop()
		}
	}()

	if p.pki, err = newPKI(p.dir); err != nil {
		return p, err
	}
	ports, err := freePorts(4)
	if err != nil {
		return p, err
	}
	p.etcdURL = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	p.host = fmt.Sprintf("https://127.0.0.1:%d", ports[2])
	if err := p.setupClient(); err != nil {
		return p, err
	}

	if err := p.start(Etcd, p.bins.Etcd,
		"--name=default",
		"--data-dir="+filepath.Join(p.dir, "etcd"),
		"--listen-client-urls="+p.etcdURL,
		"--advertise-client-urls="+p.etcdURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=default="+peerURL,
		"--unsafe-no-fsync",
		"--log-level=warn",
	); err != nil {
		return p, err
	}
	if err := p.waitHTTP(ctx, Etcd, &http.Client{}, p.etcdURL+"/health"); err != nil {
		return p, err
	}
	fmt.Fprintf(p.logw, "controlplane: etcd ready at %s after %s\n", p.etcdURL, time.Since(began).Round(time.Millisecond))

	if err := p.writeFiles(); err != nil {
		return p, err
	}
	if !opts.Bare {
		if err := p.setupKubelet(ports[3]); err != nil {
			return p, err
		}
	}
	p.apiArgs = p.apiServerArgs(ports[2])
	if !opts.Bare {
		p.apiArgs = append(p.apiArgs, p.kubeletAPIServerArgs()...)
	}
	p.apiArgs = append(p.apiArgs, opts.APIServerArgs...)
	if err := p.StartAPIServer(ctx); err != nil {
		return p, err
	}
	fmt.Fprintf(p.logw, "controlplane: kube-apiserver ready at %s after %s\n", p.host, time.Since(began).Round(time.Millisecond))
	if opts.Bare {
		return p, nil
	}

	if err := p.start(KubeControllerManager, p.bins.KubeControllerManager,
		"--kubeconfig="+filepath.Join(p.dir, "controller-manager.kubeconfig"),
		"--leader-elect=false",
		"--secure-port=0",
		"--controllers=*,-node-ipam-controller",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file="+p.pki.saKey,
		"--root-ca-file="+p.pki.caCert,
		"--cluster-signing-cert-file="+p.pki.caCert,
		"--cluster-signing-key-file="+p.pki.caKey,
		"--v=1",
	); err != nil {
		return p, err
	}
	if err := p.start(KubeScheduler, p.bins.KubeScheduler,
		"--kubeconfig="+filepath.Join(p.dir, "scheduler.kubeconfig"),
		"--leader-elect=false",
		"--secure-port=0",
		"--v=1",
	); err != nil {
		return p, err
	}
	if err := p.start(Kwok, p.bins.Kwok, append([]string{
		"--kubeconfig=" + filepath.Join(p.dir, "kwok.kubeconfig"),
		"--config=" + p.bins.KwokStages,
		"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--node-lease-duration-seconds=40",
	}, p.kubelet.kwokArgs()...)...); err != nil {
		return p, err
	}
	if err := p.createNode(ctx); err != nil {
		return p, err
	}
	if err := p.waitFor(ctx, "Node "+NodeName+" Ready", p.nodeReady); err != nil {
		return p, err
	}
	if err := p.waitFor(ctx, "ServiceAccount default/default", func(ctx context.Context) (bool, error) {
		return p.exists(ctx, "/api/v1/namespaces/default/serviceaccounts/default")
	}); err != nil {
		return p, err
	}
	fmt.Fprintf(p.logw, "controlplane: ready after %s (folder %s)\n", time.Since(began).Round(time.Millisecond), p.dir)
	return p, nil
}

func (p *Plane) apiServerArgs(port int) []string {
	return []string{
		"--etcd-servers=" + p.etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(p.dir, "apiserver-certs"),
		"--tls-cert-file=" + p.pki.serverCert,
		"--tls-private-key-file=" + p.pki.key,
		"--client-ca-file=" + p.pki.caCert,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + p.pki.saPub,
		"--service-account-signing-key-file=" + p.pki.saKey,
		"--service-cluster-ip-range=10.96.0.0/16",
		"--authorization-mode=RBAC,Node",
		// As hardened clusters do: setting blockOwnerDeletion on an
		// ownerReference needs update on the owner's finalizers, so tests
		// prove that an operator's RBAC grants it.
		"--enable-admission-plugins=OwnerReferencesPermissionEnforcement",
		// As kubeadm and kind do: privileged containers are the cluster's
		// to allow, so that tests see what admission, not this flag,
		// refuses.
		"--allow-privileged=true",
		"--endpoint-reconciler-type=none",
		"--audit-policy-file=" + filepath.Join(p.dir, "audit-policy.yaml"),
		"--audit-log-path=" + p.auditLog,
		"--audit-log-format=json",
		"--audit-log-mode=blocking",
		"--audit-log-maxsize=0",
		"--profiling=false",
		"--v=1",
	}
}

// start starts one component, with HOME set to the data folder so that
// nothing reads the user's configuration.
func (p *Plane) start(name, bin string, args ...string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return fmt.Errorf("controlplane: start %s: plane stopped", name)
	}
	if old := p.procs[name]; old != nil {
		if exited, _ := old.exitErr(); !exited {
			return fmt.Errorf("controlplane: start %s: already running", name)
		}
	}
	env := []string{"HOME=" + p.dir, "PATH=" + os.Getenv("PATH")}
	if tmp := os.Getenv("TMPDIR"); tmp != "" {
		env = append(env, "TMPDIR="+tmp)
	}
	proc, err := startProcess(name, bin, args, env, p.dir, p.LogPath(name))
	if err != nil {
		return err
	}
	p.procs[name] = proc
	return nil
}

// Stop ends every process the plane started and, for a temporary folder
// without KeepDir, removes the folder. It is safe to call more than once.
func (p *Plane) Stop() error {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return nil
	}
	p.stopped = true
	procs := p.procs
	p.mu.Unlock()

	// A temporary plane's data is thrown away, so there is nothing to shut
	// down gently.
	grace := 5 * time.Second
	remove := p.tempDir && !p.opts.KeepDir
	if remove {
		grace = 0
	}
	for _, name := range []string{Kwok, KubeScheduler, KubeControllerManager, KubeAPIServer, Etcd} {
		if proc := procs[name]; proc != nil {
			proc.stop(grace)
		}
	}
	if p.client != nil {
		p.client.CloseIdleConnections()
	}
	p.kubelet.close()
	if remove {
		if err := os.RemoveAll(p.dir); err != nil {
			return fmt.Errorf("controlplane: %w", err)
		}
	}
	return nil
}

// StopAPIServer stops kube-apiserver gently (SIGTERM, then SIGKILL after
// 10 seconds). etcd and the other components keep running.
func (p *Plane) StopAPIServer() { p.stopComponent(KubeAPIServer, 10*time.Second) }

// KillAPIServer kills kube-apiserver with SIGKILL, as a crash would.
func (p *Plane) KillAPIServer() { p.stopComponent(KubeAPIServer, 0) }

func (p *Plane) stopComponent(name string, grace time.Duration) {
	p.mu.Lock()
	proc := p.procs[name]
	p.mu.Unlock()
	if proc != nil {
		proc.stop(grace)
	}
	p.client.CloseIdleConnections()
}

// StartAPIServer starts kube-apiserver again, on the same port and over
// the same etcd data, and waits for its /readyz. Start calls it the first
// time.
func (p *Plane) StartAPIServer(ctx context.Context) error {
	if err := p.start(KubeAPIServer, p.bins.KubeAPIServer, p.apiArgs...); err != nil {
		return err
	}
	return p.waitHTTP(ctx, KubeAPIServer, p.client, p.host+"/readyz")
}

// Dir returns the plane's data folder.
func (p *Plane) Dir() string { return p.dir }

// Host returns the apiserver's URL, such as "https://127.0.0.1:40123".
func (p *Plane) Host() string { return p.host }

// EtcdURL returns etcd's client URL (plain HTTP on loopback).
func (p *Plane) EtcdURL() string { return p.etcdURL }

// Kubeconfig returns the path of a kubeconfig for the admin user, who is
// in system:masters.
func (p *Plane) Kubeconfig() string { return p.kubeconfig }

// CAData returns the PEM certificate of the CA that signed the serving
// certificate and every client certificate.
func (p *Plane) CAData() []byte { return p.pki.caPEM }

// CAFile returns the path of the CA certificate.
func (p *Plane) CAFile() string { return p.pki.caCert }

// AdminCertificate returns the admin client certificate and key as PEM.
func (p *Plane) AdminCertificate() (certPEM, keyPEM []byte) {
	pair := p.pki.clientPEM["admin"]
	return pair[0], pair[1]
}

// Binaries returns the programs the plane runs.
func (p *Plane) Binaries() *Binaries { return p.bins }

// HTTPClient returns an HTTP client that trusts the plane's CA and
// authenticates as the admin user.
func (p *Plane) HTTPClient() *http.Client { return p.client }

// LogPath returns the log file of a component.
func (p *Plane) LogPath(component string) string {
	return filepath.Join(p.dir, component+".log")
}

// LogTail returns the last n lines of a component's log.
func (p *Plane) LogTail(component string, n int) string {
	return tailFile(p.LogPath(component), n)
}

// logTails returns the end of the etcd and apiserver logs, and of any
// component that has exited.
func (p *Plane) logTails(n int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var b strings.Builder
	for _, name := range []string{Etcd, KubeAPIServer, KubeControllerManager, KubeScheduler, Kwok} {
		proc := p.procs[name]
		if proc == nil {
			continue
		}
		exited, _ := proc.exitErr()
		if !exited && name != Etcd && name != KubeAPIServer {
			continue
		}
		fmt.Fprintf(&b, "--- last %d lines of %s\n%s\n", n, proc.logPath, tailFile(proc.logPath, n))
	}
	return b.String()
}

func (p *Plane) setupClient() error {
	pool := x509.NewCertPool()
	pool.AddCert(p.pki.ca)
	pair := p.pki.clientPEM["admin"]
	cert, err := tls.X509KeyPair(pair[0], pair[1])
	if err != nil {
		return fmt.Errorf("controlplane: admin certificate: %w", err)
	}
	p.client = &http.Client{
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
			ForceAttemptHTTP2: true,
			IdleConnTimeout:   30 * time.Second,
		},
		Timeout: 30 * time.Second,
	}
	return nil
}

// writeFiles writes the audit policy and the kubeconfigs.
func (p *Plane) writeFiles() error {
	policy := `apiVersion: audit.k8s.io/v1
kind: Policy
# One event when the response is complete (and one when a watch starts).
omitStages: ["RequestReceived"]
rules:
- level: Metadata
`
	if err := os.WriteFile(filepath.Join(p.dir, "audit-policy.yaml"), []byte(policy), 0o644); err != nil {
		return fmt.Errorf("controlplane: %w", err)
	}
	p.auditLog = filepath.Join(p.dir, "audit.log")
	p.kubeconfig = filepath.Join(p.dir, "admin.kubeconfig")
	for _, u := range clientUsers {
		pair := p.pki.clientPEM[u.name]
		data := kubeconfigYAML(p.host, p.pki.caPEM, pair[0], pair[1], u.cn)
		if err := os.WriteFile(filepath.Join(p.dir, u.name+".kubeconfig"), data, 0o600); err != nil {
			return fmt.Errorf("controlplane: %w", err)
		}
	}
	return nil
}

// kubeconfigYAML returns a kubeconfig with one cluster, user and context,
// everything embedded.
func kubeconfigYAML(host string, caPEM, certPEM, keyPEM []byte, user string) []byte {
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: widget-local
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %s
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: widget-local
  context:
    cluster: widget-local
    user: %s
    namespace: default
current-context: widget-local
`, host, b64(caPEM), user, b64(certPEM), b64(keyPEM), user)
}

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("controlplane: free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// waitHTTP polls url until it answers 200, the component exits, or ctx
// ends.
func (p *Plane) waitHTTP(ctx context.Context, component string, c *http.Client, url string) error {
	var last string
	err := p.waitFor(ctx, component+" "+url, func(ctx context.Context) (bool, error) {
		p.mu.Lock()
		proc := p.procs[component]
		p.mu.Unlock()
		if proc != nil {
			if exited, err := proc.exitErr(); exited {
				return false, err
			}
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := c.Do(req)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		resp.Body.Close()
		last = fmt.Sprintf("%d %s", resp.StatusCode, body)
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil && last != "" {
		return fmt.Errorf("%w (last answer: %s)", err, last)
	}
	return err
}

// waitFor calls cond until it returns true or an error, or ctx ends. It
// polls quickly at first and then every half second.
func (p *Plane) waitFor(ctx context.Context, what string, cond func(context.Context) (bool, error)) error {
	delay := 20 * time.Millisecond
	for {
		ok, err := cond(ctx)
		if err != nil {
			return fmt.Errorf("controlplane: waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("controlplane: waiting for %s: %w", what, context.Cause(ctx))
		case <-t.C:
		}
		delay = min(delay*2, 500*time.Millisecond)
	}
}

// errStopped is returned by helpers called after Stop.
var errStopped = errors.New("controlplane: plane stopped")
