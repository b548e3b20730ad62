package k8sapi

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"time"
)

// The ExecCredential API versions a plugin may speak.
const (
	execV1      = "client.authentication.k8s.io/v1"
	execV1beta1 = "client.authentication.k8s.io/v1beta1"
)

const (
	// execTimeout bounds one plugin run.
	execTimeout = time.Minute
	// execMaxStdout bounds the plugin's output; a plugin that writes more
	// is stopped.
	execMaxStdout = 1 << 20
	// execFailureHold is how long a failed run's error is returned before
	// the plugin is run again, so that a broken plugin is not run for every
	// request.
	execFailureHold = 5 * time.Second
	// execRefreshBefore is how long before a credential expires it is no
	// longer used, and callers wait for a new one: at most this, and at
	// most a quarter of its lifetime.
	execRefreshBefore = time.Minute
)

// execCall is one plugin run that callers wait on together, and the
// credential it returned or its error. Its fields are set before done is
// closed and never change after; ended is set under e.mu.
type execCall struct {
	done  chan struct{}
	err   error
	ended time.Time // when the run ended; zero while it is in flight

	token     string
	cert      *tls.Certificate // empty when the plugin gave no certificate
	refreshAt time.Time        // zero when the credential does not expire
}

// stale reports whether c has ended and is due to be replaced at now: a
// credential at its refreshAt, a failure once it has been held for
// execFailureHold. The caller holds e.mu.
func (c *execCall) stale(now time.Time) bool {
	switch {
	case c.ended.IsZero():
		return false // in flight
	case c.err != nil:
		return now.Sub(c.ended) >= execFailureHold || now.Before(c.ended)
	}
	return !c.refreshAt.IsZero() && !now.Before(c.refreshAt)
}

// execCredentials runs an exec credential plugin and caches what it
// returns until shortly before it expires; then callers wait for a new
// run. Concurrent callers share one run. Safe for concurrent use.
type execCredentials struct {
	// cfg is the plugin, its Env the whole environment it runs in.
	cfg ExecConfig
	now func() time.Time
	// run runs the plugin once and returns its stdout: runPlugin, but for
	// tests.
	run func(ctx context.Context) (stdout []byte, err error)

	mu   sync.Mutex
	call *execCall // the run in flight or the last one; nil before the first and after refresh
}

// execInfo is the KUBERNETES_EXEC_INFO a plugin reads.
type execInfo struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Spec       struct {
		Cluster     *execCluster `json:"cluster,omitempty"`
		Interactive bool         `json:"interactive"`
	} `json:"spec"`
}

type execCluster struct {
	Server                   string `json:"server"`
	TLSServerName            string `json:"tls-server-name,omitempty"`
	InsecureSkipTLSVerify    bool   `json:"insecure-skip-tls-verify,omitempty"`
	CertificateAuthorityData []byte `json:"certificate-authority-data,omitempty"`
	ProxyURL                 string `json:"proxy-url,omitempty"`
}

// execCredential is the part of a plugin's ExecCredential output the
// client reads.
type execCredential struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Status     *struct {
		Token                 string     `json:"token"`
		ClientCertificateData string     `json:"clientCertificateData"`
		ClientKeyData         string     `json:"clientKeyData"`
		ExpirationTimestamp   *time.Time `json:"expirationTimestamp"`
	} `json:"status"`
}

// newExecCredentials returns the credentials of c.Exec, which c.check
// accepted.
func newExecCredentials(c *Config) *execCredentials {
	x := c.Exec
	info := execInfo{APIVersion: x.APIVersion, Kind: "ExecCredential"}
	if x.ProvideClusterInfo {
		info.Spec.Cluster = &execCluster{
			Server:                   c.Host,
			TLSServerName:            c.ServerName,
			InsecureSkipTLSVerify:    c.Insecure,
			CertificateAuthorityData: c.CAData,
			ProxyURL:                 c.ProxyURL,
		}
	}
	infoJSON, _ := json.Marshal(info) // strings, bools and bytes: it cannot fail
	e := &execCredentials{cfg: *x, now: time.Now}
	e.cfg.Env = append(append(os.Environ(), x.Env...), "KUBERNETES_EXEC_INFO="+string(infoJSON))
	e.run = e.runPlugin
	return e
}

// check reports an ExecConfig that cannot run, whatever its source. An
// empty InteractiveMode is IfAvailable.
func (x *ExecConfig) check() error {
	switch {
	case x.APIVersion == "":
		return errors.New("apiVersion is missing")
	case x.APIVersion != execV1 && x.APIVersion != execV1beta1:
		return fmt.Errorf("apiVersion %q is not supported; use %s or %s", x.APIVersion, execV1, execV1beta1)
	case x.Command == "":
		return errors.New("command is missing")
	case x.InteractiveMode == "Always":
		return errors.New("interactiveMode Always needs a terminal, which the client never gives a plugin")
	case x.InteractiveMode != "" && x.InteractiveMode != "Never" && x.InteractiveMode != "IfAvailable":
		return fmt.Errorf("interactiveMode %q is not Never, IfAvailable or Always", x.InteractiveMode)
	}
	return nil
}

func (e *execCredentials) authorize(ctx context.Context, req *http.Request) error {
	r, err := e.get(ctx)
	if err != nil {
		return err
	}
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	return nil
}

// refresh drops the cached credential or failure, so that the next
// caller runs the plugin again; a run in flight is kept, for its callers
// to share.
func (e *execCredentials) refresh() bool {
	e.mu.Lock()
	if e.call != nil && !e.call.ended.IsZero() {
		e.call = nil
	}
	e.mu.Unlock()
	return true
}

func (e *execCredentials) clientCertificate(ctx context.Context) (*tls.Certificate, error) {
	r, err := e.get(ctx)
	if err != nil {
		return nil, err
	}
	return r.cert, nil
}

// get returns a valid credential, running the plugin if there is none or
// the current one is due for refresh.
func (e *execCredentials) get(ctx context.Context) (*execCall, error) {
	e.mu.Lock()
	c := e.call
	if c == nil || c.stale(e.now()) {
		c = &execCall{done: make(chan struct{})}
		e.call = c
		go e.fetch(c)
	}
	e.mu.Unlock()
	select {
	case <-c.done:
		return c, c.err
	case <-ctx.Done():
		return nil, fmt.Errorf("k8sapi: exec plugin %q: %w", e.cfg.Command, ctx.Err())
	}
}

// fetch runs the plugin for call c, detached from any one caller's context
// so that a caller giving up does not fail the others.
func (e *execCredentials) fetch(c *execCall) {
	ctx, cancel := context.WithTimeout(context.Background(), execTimeout)
	defer cancel()
	out, err := e.run(ctx)
	if err == nil {
		err = e.parse(c, out)
	}
	if err != nil {
		c.err = fmt.Errorf("k8sapi: exec plugin %q: %w", e.cfg.Command, err)
	}
	e.mu.Lock()
	c.ended = e.now()
	e.mu.Unlock()
	close(c.done)
}

// parse reads the plugin's ExecCredential into c. Its errors describe the
// problem without quoting the output, which holds the credential; fetch
// adds the package and the plugin.
func (e *execCredentials) parse(c *execCall, out []byte) error {
	var ec execCredential
	if err := json.Unmarshal(out, &ec); err != nil {
		if se, ok := errors.AsType[*json.SyntaxError](err); ok {
			return fmt.Errorf("output is not JSON (at byte %d)", se.Offset)
		}
		return errors.New("output is not a valid ExecCredential")
	}
	if ec.Kind != "ExecCredential" {
		return errors.New("output kind is not ExecCredential")
	}
	if ec.APIVersion != e.cfg.APIVersion {
		return fmt.Errorf("output apiVersion %.80q, want %q", ec.APIVersion, e.cfg.APIVersion)
	}
	st := ec.Status
	if st == nil {
		return errors.New("output has no status")
	}
	if err := checkHeaderValue(st.Token); err != nil {
		return fmt.Errorf("token %w", err)
	}
	c.token, c.cert = st.Token, &tls.Certificate{}
	switch {
	case st.ClientCertificateData != "" && st.ClientKeyData != "":
		cert, err := tls.X509KeyPair([]byte(st.ClientCertificateData), []byte(st.ClientKeyData))
		if err != nil {
			return fmt.Errorf("client certificate: %w", err)
		}
		c.cert = &cert
	case st.ClientCertificateData != "" || st.ClientKeyData != "":
		return errors.New("status has a client certificate or key without the other")
	case st.Token == "":
		return errors.New("status has neither a token nor a client certificate")
	}
	if exp := st.ExpirationTimestamp; exp != nil && !exp.IsZero() {
		life := exp.Sub(e.now())
		c.refreshAt = exp.Add(-min(execRefreshBefore, max(life/4, 0)))
	}
	return nil
}

// runPlugin runs the plugin once without a terminal and returns its
// stdout. Its errors lack the package and the plugin, which fetch adds.
func (e *execCredentials) runPlugin(ctx context.Context) ([]byte, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.cfg.Command, e.cfg.Args...)
	cmd.Env = e.cfg.Env
	cmd.WaitDelay = 5 * time.Second
	stdout := &boundedBuffer{max: execMaxStdout, overflow: cancel}
	// The plugin's stderr is counted, never kept. A plugin writes whatever
	// it likes there, secrets included (a token it was refused,
	// "password=..."), and no filter can tell a secret from prose; so the
	// text itself never leaves the process: an error gives only its size,
	// for someone to run the plugin by hand.
	stderr := &boundedBuffer{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err := runInGroup(cmd)
	switch {
	case stdout.n > execMaxStdout:
		return nil, fmt.Errorf("output larger than %d KiB", execMaxStdout>>10)
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return nil, fmt.Errorf("no answer within %v", execTimeout)
	case errors.Is(err, exec.ErrNotFound):
		return nil, fmt.Errorf("command not found: %w", exec.ErrNotFound)
	case err != nil && stderr.n > 0:
		return nil, fmt.Errorf("%w: stderr withheld (%d bytes; it may hold secrets)", err, stderr.n)
	}
	return stdout.b, err
}

// boundedBuffer keeps at most max bytes and counts them all; past max it
// calls overflow once and drops the rest.
type boundedBuffer struct {
	b        []byte
	n        int64 // bytes written
	max      int
	overflow func()
}

// Write keeps what fits and reports the whole of p written, so that the
// plugin is not stopped by a write error before overflow cancels it.
func (w *boundedBuffer) Write(p []byte) (int, error) {
	over := w.n > int64(w.max)
	w.n += int64(len(p))
	if w.n > int64(w.max) && !over && w.overflow != nil {
		w.overflow()
	}
	w.b = append(w.b, p[:min(len(p), w.max-len(w.b))]...)
	return len(p), nil
}
