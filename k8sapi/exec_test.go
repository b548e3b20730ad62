package k8sapi

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestExecHelperProcess is not a test: it is the exec credential plugin
// the tests below run, by re-executing the test binary with
// GO_WANT_HELPER_PROCESS=1. The mode follows "--" in its arguments.
func TestExecHelperProcess(t *testing.T) {
	if os.Getenv("GO_WANT_HELPER_PROCESS") != "1" {
		return
	}
	mode := os.Args[len(os.Args)-1]
	if f := os.Getenv("HELPER_COUNT"); f != "" {
		fh, err := os.OpenFile(f, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err == nil {
			fh.WriteString("run\n")
			fh.Close()
		}
	}
	if f := os.Getenv("HELPER_RECORD"); f != "" {
		cwd, _ := os.Getwd()
		rec, _ := json.Marshal(map[string]string{"info": os.Getenv("KUBERNETES_EXEC_INFO"), "cwd": cwd, "region": os.Getenv("REGION")})
		os.WriteFile(f, rec, 0o600)
	}
	var info struct {
		APIVersion string `json:"apiVersion"`
	}
	json.Unmarshal([]byte(os.Getenv("KUBERNETES_EXEC_INFO")), &info)
	token := os.Getenv("HELPER_TOKEN")
	status := map[string]any{"token": token}
	if exp := os.Getenv("HELPER_EXPIRY"); exp != "" {
		status["expirationTimestamp"] = exp
	}
	switch mode {
	case "token":
	case "cert":
		cert, _ := os.ReadFile(os.Getenv("HELPER_CERT"))
		key, _ := os.ReadFile(os.Getenv("HELPER_KEY"))
		status = map[string]any{"clientCertificateData": string(cert), "clientKeyData": string(key)}
	case "bad-cert":
		status = map[string]any{"clientCertificateData": "junk", "clientKeyData": "-----BEGIN PRIVATE KEY-----\n" + token + "\n-----END PRIVATE KEY-----\n"}
	case "half-cert":
		status = map[string]any{"token": token, "clientKeyData": token}
	case "wrong-version":
		info.APIVersion = "client.authentication.k8s.io/v1alpha1"
	case "empty":
		status = map[string]any{}
	case "stderr":
		io.WriteString(os.Stderr, unescape(os.Getenv("HELPER_STDERR")))
		os.Exit(1)
	case "fail":
		fmt.Fprintf(os.Stderr, "error: could not refresh credentials\ncached token %s was rejected; run 'cloud login' again\n", token)
		os.Exit(3)
	case "garbage":
		fmt.Fprintf(os.Stdout, "token=%s\n", token)
		os.Exit(0)
	case "flood":
		chunk := strings.Repeat(token+" ", 1024)
		for range 1 << 20 {
			if _, err := io.WriteString(os.Stdout, chunk); err != nil {
				os.Exit(0)
			}
		}
		os.Exit(0)
	}
	json.NewEncoder(os.Stdout).Encode(map[string]any{"apiVersion": info.APIVersion, "kind": "ExecCredential", "status": status})
	os.Exit(0)
}

// helperExec returns an ExecConfig that runs TestExecHelperProcess in mode.
func helperExec(version, mode string, env ...string) *ExecConfig {
	return &ExecConfig{
		APIVersion:      version,
		Command:         os.Args[0],
		Args:            []string{"-test.run=^TestExecHelperProcess$", "--", mode},
		Env:             append([]string{"GO_WANT_HELPER_PROCESS=1"}, env...),
		InteractiveMode: "Never",
	}
}

// runCount reads how many times the helper ran, from its HELPER_COUNT file.
func runCount(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "run\n")
}

// TestExecClusterInfoCAFile: a CA that the Config names by file reaches
// a plugin given the cluster's information as data, and New leaves the
// Config as it was.
func TestExecClusterInfoCAFile(t *testing.T) {
	ca, _ := selfSignedPair(t, "cluster-ca")
	dir := writeFiles(t, t.TempDir(), map[string]string{"ca.crt": string(ca)})
	rec := filepath.Join(dir, "record.json")
	cfg := &Config{Host: "https://h:6443", CAFile: filepath.Join(dir, "ca.crt"),
		Exec: helperExec(execV1, "token", "HELPER_TOKEN=tok", "HELPER_RECORD="+rec)}
	cfg.Exec.ProvideClusterInfo = true
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := authHeader(t, c.creds); got != "Bearer tok" {
		t.Errorf("header %q", got)
	}
	b, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	var r struct{ Info string }
	var info execInfo
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(r.Info), &info); err != nil {
		t.Fatal(err)
	}
	if info.Spec.Cluster == nil || !bytes.Equal(info.Spec.Cluster.CertificateAuthorityData, ca) {
		t.Errorf("KUBERNETES_EXEC_INFO %s, want the CA file's content", r.Info)
	}
	if cfg.CAData != nil {
		t.Error("New set the Config's CAData")
	}
}

func TestExecPluginVersions(t *testing.T) {
	for _, version := range []string{execV1, execV1beta1} {
		for _, provide := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/cluster-info=%v", version, provide), func(t *testing.T) {
				dir := t.TempDir()
				rec := filepath.Join(dir, "record.json")
				cfg := &Config{Host: "https://h:6443", CAData: []byte("CA"), ServerName: "api", ProxyURL: "http://p:3128",
					Exec: helperExec(version, "token", "HELPER_TOKEN=tok-"+version, "HELPER_RECORD="+rec, "REGION=eu-1")}
				cfg.Exec.ProvideClusterInfo = provide
				creds, err := newCredentials(cfg)
				if err != nil {
					t.Fatal(err)
				}
				if got := authHeader(t, creds); got != "Bearer tok-"+version {
					t.Errorf("header %q", got)
				}
				b, err := os.ReadFile(rec)
				if err != nil {
					t.Fatal(err)
				}
				var r struct{ Info, Cwd, Region string }
				if err := json.Unmarshal(b, &r); err != nil {
					t.Fatal(err)
				}
				if cwd, _ := os.Getwd(); r.Cwd != cwd || r.Region != "eu-1" {
					t.Errorf("plugin ran in %q with REGION %q", r.Cwd, r.Region)
				}
				want := `{"apiVersion":"` + version + `","kind":"ExecCredential","spec":{"interactive":false}}`
				if provide {
					want = `{"apiVersion":"` + version + `","kind":"ExecCredential","spec":{"cluster":{"server":"https://h:6443","tls-server-name":"api","certificate-authority-data":"Q0E=","proxy-url":"http://p:3128"},"interactive":false}}`
				}
				if r.Info != want {
					t.Errorf("KUBERNETES_EXEC_INFO\n%s\nwant\n%s", r.Info, want)
				}
			})
		}
	}
}

// A plugin a kubeconfig names by a relative path is found relative to the
// kubeconfig's folder, and runs in the process's working directory, as
// kubectl runs it, not in that folder.
func TestKubeconfigExecRunsInProcessDirectory(t *testing.T) {
	self, err := filepath.Abs(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rec := filepath.Join(dir, "record.json")
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(self, filepath.Join(dir, "bin", "plugin")); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, map[string]string{"kubeconfig": `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://h:6443"}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
users:
- name: u
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      interactiveMode: Never
      command: ./bin/plugin
      args: ["-test.run=^TestExecHelperProcess$", "--", "token"]
      env:
      - {name: GO_WANT_HELPER_PROCESS, value: "1"}
      - {name: HELPER_TOKEN, value: tok}
      - {name: HELPER_RECORD, value: "` + rec + `"}
`})
	cfg, err := LoadKubeconfig([]string{filepath.Join(dir, "kubeconfig")}, "")
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := authHeader(t, c.creds); got != "Bearer tok" {
		t.Fatalf("header %q", got)
	}
	b, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	var r struct{ Cwd string }
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if cwd, _ := os.Getwd(); r.Cwd != cwd {
		t.Errorf("plugin ran in %q, want the process's working directory %q", r.Cwd, cwd)
	}
}

// expiringExec returns exec credentials, on clock, from a plugin whose
// token expires after life, and the file that counts the plugin's runs.
func expiringExec(t *testing.T, clock *credClock, life time.Duration) (*execCredentials, string) {
	t.Helper()
	count := filepath.Join(t.TempDir(), "count")
	expiry := clock.now().Add(life)
	cfg := &Config{Host: "https://h", Exec: helperExec(execV1, "token", "HELPER_TOKEN=tok", "HELPER_COUNT="+count,
		"HELPER_EXPIRY="+expiry.Format(time.RFC3339))}
	creds := newExecCredentials(cfg)
	creds.now = clock.now
	return creds, count
}

func TestExecCachesUntilExpiry(t *testing.T) {
	clock := newCredClock()
	creds, count := expiringExec(t, clock, 10*time.Minute)

	check := func(wantRuns int) {
		t.Helper()
		if got := authHeader(t, creds); got != "Bearer tok" {
			t.Fatalf("header %q", got)
		}
		if n := runCount(t, count); n != wantRuns {
			t.Fatalf("plugin ran %d times, want %d", n, wantRuns)
		}
	}
	check(1)
	clock.advance(5 * time.Minute)
	check(1) // cached
	// Within a minute of expiry the token is no longer used: callers wait
	// for a new run.
	clock.advance(4*time.Minute + 30*time.Second)
	check(2)
	// Past the expiry (the helper returns the same expiry again), callers
	// wait for a new run.
	clock.advance(time.Minute)
	check(3)
	// Back where the token is fresh, it is cached until refresh drops it.
	clock.advance(-9 * time.Minute)
	check(3)
	if !creds.refresh() {
		t.Error("refresh reported no change possible")
	}
	check(4)
	check(4)
}

func TestExecNoExpiryCachedUntilRefresh(t *testing.T) {
	clock := newCredClock()
	count := filepath.Join(t.TempDir(), "count")
	creds := newExecCredentials(&Config{Exec: helperExec(execV1beta1, "token", "HELPER_TOKEN=t", "HELPER_COUNT="+count)})
	creds.now = clock.now
	authHeader(t, creds)
	clock.advance(100 * time.Hour)
	authHeader(t, creds)
	if n := runCount(t, count); n != 1 {
		t.Errorf("ran %d times", n)
	}
}

// gatedRun is a plugin stand-in that counts its runs and blocks each until
// the gate is closed.
type gatedRun struct {
	runs    atomic.Int32
	started chan struct{}
	gate    chan struct{}
	out     string
}

func (g *gatedRun) run(ctx context.Context) ([]byte, error) {
	if g.runs.Add(1) == 1 {
		close(g.started)
	}
	select {
	case <-g.gate:
		return []byte(g.out), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func TestExecConcurrentCallersShareOneRun(t *testing.T) {
	g := &gatedRun{started: make(chan struct{}), gate: make(chan struct{}),
		out: `{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"shared"}}`}
	e := &execCredentials{cfg: ExecConfig{Command: "gated", APIVersion: execV1}, now: time.Now, run: g.run}

	// A caller that gives up gets its context's error; the run goes on.
	ctx, cancel := context.WithCancel(context.Background())
	giveUp := make(chan error, 1)
	go func() {
		_, err := e.get(ctx)
		giveUp <- err
	}()
	<-g.started
	cancel()
	if err := <-giveUp; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled caller: %v", err)
	}
	e.refresh() // keeps the run in flight, for the callers below to share

	var wg sync.WaitGroup
	results := make(chan string, 10)
	for range 10 {
		wg.Go(func() {
			req, _ := http.NewRequest("GET", "https://h/", nil)
			if err := e.authorize(context.Background(), req); err != nil {
				t.Error(err)
			}
			results <- req.Header.Get("Authorization")
		})
	}
	close(g.gate)
	wg.Wait()
	close(results)
	for h := range results {
		if h != "Bearer shared" {
			t.Errorf("header %q", h)
		}
	}
	if n := g.runs.Load(); n != 1 {
		t.Errorf("plugin ran %d times, want 1", n)
	}
}

func TestExecFailureHeld(t *testing.T) {
	clock := newCredClock()
	count := filepath.Join(t.TempDir(), "count")
	creds := newExecCredentials(&Config{Exec: helperExec(execV1, "fail", "HELPER_TOKEN=x", "HELPER_COUNT="+count)})
	creds.now = clock.now
	req, _ := http.NewRequest("GET", "https://h/", nil)
	for range 3 {
		if err := creds.authorize(context.Background(), req); err == nil {
			t.Fatal("no error from a failing plugin")
		}
	}
	if n := runCount(t, count); n != 1 {
		t.Errorf("failing plugin ran %d times within the hold, want 1", n)
	}
	clock.advance(execFailureHold)
	creds.authorize(context.Background(), req)
	if n := runCount(t, count); n != 2 {
		t.Errorf("failing plugin ran %d times after the hold, want 2", n)
	}
}

func TestExecErrors(t *testing.T) {
	const tok = "k8s-secret-token-value-0123456789"
	tests := []struct {
		mode string
		msg  string
	}{
		{"fail", "exit status 3: stderr withheld (122 bytes; it may hold secrets)"},
		{"garbage", "output is not JSON"},
		{"wrong-version", `output apiVersion "client.authentication.k8s.io/v1alpha1", want "client.authentication.k8s.io/v1"`},
		{"empty", "status has neither a token nor a client certificate"},
		{"half-cert", "a client certificate or key without the other"},
		{"bad-cert", "client certificate: tls: failed to find any PEM data in certificate input"},
		{"flood", "output larger than 1024 KiB"},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			creds := newExecCredentials(&Config{Exec: helperExec(execV1, tt.mode, "HELPER_TOKEN="+tok)})
			_, err := creds.get(context.Background())
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.HasPrefix(err.Error(), "k8sapi: exec plugin ") || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q\nwant %q", err, tt.msg)
			}
			if strings.Contains(err.Error(), tok) {
				t.Errorf("error %q holds the token", err)
			}
		})
	}

	_, err := (&execCredentials{cfg: ExecConfig{Command: filepath.Join(t.TempDir(), "no-such-plugin")}}).runPlugin(context.Background())
	if err == nil {
		t.Error("missing plugin: no error")
	}
	creds := newExecCredentials(&Config{Exec: &ExecConfig{APIVersion: execV1, Command: "widget-operator-no-such-plugin"}})
	if _, err := creds.get(context.Background()); !errors.Is(err, exec.ErrNotFound) {
		t.Errorf("plugin not in PATH: %v", err)
	}
	for _, x := range []*ExecConfig{{APIVersion: execV1}, {APIVersion: "v9", Command: "x"}, {APIVersion: execV1, Command: "x", InteractiveMode: "Always"}} {
		if _, err := newCredentials(&Config{Exec: x}); err == nil {
			t.Errorf("%+v accepted", x)
		}
	}
}

// TestExecStderrWithheld runs plugins that fail with hostile stderr and
// checks that none of it reaches the error: only its size does.
func TestExecStderrWithheld(t *testing.T) {
	tests := []struct {
		name, stderr string
		secrets      []string
	}{
		{"key=value", "login failed: pw=hunter2 user=alice", []string{"hunter2", "alice", "pw="}},
		{"short token", "token abc123 was rejected", []string{"abc123"}},
		{"password prose", "your password is swordfish\n", []string{"swordfish"}},
		{"bearer header", "sent Authorization: Bearer eyJhbGciOiJSUzI1NiJ9.e30.sig", []string{"eyJ", "Bearer"}},
		{"json", `{"token":"t0k","refresh_token":"r3fresh"}`, []string{"t0k", "r3fresh"}},
		{"url with password", "dial https://bob:s3cr3t@idp.example.com failed", []string{"s3cr3t", "bob"}},
		{"escape sequences", "\x1b]0;title\x07\x1b[31mpin 4711\x1b[0m", []string{"4711", "\x1b"}},
		{"invalid utf-8", "key \xff\xfe k3y", []string{"k3y"}},
		{"newlines", "line1\nsecret: x9\r\nline3", []string{"x9", "line1"}},
		{"pem", "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----", []string{"MIIE", "PRIVATE"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stderr := tt.stderr
			creds := newExecCredentials(&Config{Exec: helperExec(execV1, "stderr", "HELPER_STDERR="+stderr)})
			_, err := creds.get(context.Background())
			if err == nil {
				t.Fatal("no error")
			}
			want := fmt.Sprintf("exit status 1: stderr withheld (%d bytes; it may hold secrets)", len(unescape(stderr)))
			if !strings.HasSuffix(err.Error(), want) {
				t.Errorf("error %q\nwant suffix %q", err, want)
			}
			// The command's path, a random temporary folder, may hold a
			// secret's digits by chance.
			msg := strings.ReplaceAll(err.Error(), creds.cfg.Command, "")
			for _, s := range tt.secrets {
				if strings.Contains(msg, s) {
					t.Errorf("error %q holds %q", err, s)
				}
			}
		})
	}
}

// unescape turns the \n, \r, \xNN escapes of the stderr table into bytes,
// as the helper process does.
func unescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case 'n':
			b.WriteByte('\n')
			i++
		case 'r':
			b.WriteByte('\r')
			i++
		case 'x':
			var c byte
			fmt.Sscanf(s[i+2:i+4], "%02x", &c)
			b.WriteByte(c)
			i += 3
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

func TestExecClientCertificateOverTLS(t *testing.T) {
	certPEM, keyPEM := selfSignedPair(t, "exec-client")
	dir := writeFiles(t, t.TempDir(), map[string]string{"c.pem": string(certPEM), "k.pem": string(keyPEM)})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TLS.PeerCertificates) == 0 {
			http.Error(w, "no client certificate", http.StatusUnauthorized)
			return
		}
		fmt.Fprint(w, r.TLS.PeerCertificates[0].Subject.CommonName)
	}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAnyClientCert}
	srv.StartTLS()
	defer srv.Close()

	cfg := &Config{Host: srv.URL, Exec: helperExec(execV1, "cert",
		"HELPER_CERT="+filepath.Join(dir, "c.pem"), "HELPER_KEY="+filepath.Join(dir, "k.pem"))}
	cfg.CAData = certPEMOf(srv)
	creds, err := newCredentials(cfg)
	if err != nil {
		t.Fatal(err)
	}
	client, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Stream(context.Background(), "/", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Close()
	body, _ := io.ReadAll(resp)
	if string(body) != "exec-client" {
		t.Errorf("server saw %q", body)
	}
	// Without a token, authorize sets no header.
	if h := authHeader(t, creds); h != "" {
		t.Errorf("header %q", h)
	}
}
