package faults

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/e2e/harness"
)

// runBinary runs the operator binary to its end, with a deadline, and
// returns its stderr and exit code.
func runBinary(t *testing.T, args ...string) (stderr string, code int) {
	t.Helper()
	cmd := exec.CommandContext(ctxFor(t, 90*time.Second), env.Binary(), args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return errb.String(), 0
	case errors.As(err, &exit):
		return errb.String(), exit.ExitCode()
	}
	t.Fatalf("run: %v", err)
	return "", 0
}

// TestBadConfiguration runs the binary with broken kubeconfigs and flags:
// each is a one-line error and a non-zero exit, without contacting any
// server.
func TestBadConfiguration(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	const good = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: https://127.0.0.1:1
users:
- name: u
  user:
    client-certificate: %s
    client-key: %s
contexts:
- name: ctx
  context: {cluster: c, user: u}
current-context: ctx
`
	garbageKey := write("garbage.key", "-----BEGIN EC PRIVATE KEY-----\nbm90IGEga2V5\n-----END EC PRIVATE KEY-----\n")
	cert := write("client.crt", selfSignedPEM(t))
	badCert := write("bad.crt", "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n")
	for _, tc := range []struct {
		name string
		args []string
		want string // in the error line
	}{
		{"missing file", []string{"--kubeconfig", filepath.Join(dir, "nope")}, "nope"},
		{"bad YAML", []string{"--kubeconfig", write("bad.yaml", "apiVersion: v1\nclusters: [\n  - {name: x\n")}, "bad.yaml"},
		{"unknown context", []string{"--kubeconfig", write("ctx.yaml", fmt.Sprintf(good, cert, garbageKey)), "--context", "elsewhere"}, "elsewhere"},
		{"missing key file", []string{"--kubeconfig", write("nokey.yaml", fmt.Sprintf(good, cert, filepath.Join(dir, "missing.key")))}, "missing.key"},
		{"unreadable key", []string{"--kubeconfig", write("badkey.yaml", fmt.Sprintf(good, cert, garbageKey))}, "key"},
		{"bad certificate", []string{"--kubeconfig", write("badcert.yaml", fmt.Sprintf(good, badCert, garbageKey))}, "certificate"},
		{"key is a folder", []string{"--kubeconfig", write("dirkey.yaml", fmt.Sprintf(good, cert, dir))}, "key"},
		{"unknown flag", []string{"--kubeconfig", "x", "--no-such-flag"}, "no-such-flag"},
		{"bad flag value", []string{"--workers", "many"}, "workers"},
		{"bad log level", []string{"--log-level", "loud"}, "loud"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stderr, code := runBinary(t, tc.args...)
			lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
			if code == 0 || len(lines) != 1 || !strings.Contains(stderr, tc.want) || !strings.HasPrefix(stderr, "widget-operator: ") {
				t.Fatalf("exit %d, stderr (%d lines), want one line naming %q:\n%s", code, len(lines), tc.want, stderr)
			}
			t.Logf("exit %d: %s", code, lines[0])
		})
	}
}

// selfSignedPEM returns a certificate, in PEM, whose key is elsewhere.
func selfSignedPEM(t *testing.T) string {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "someone"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// TestTLSVerification: without the CA, the operator refuses the server's
// certificate with a one-line error; with insecure-skip-tls-verify set
// explicitly it starts, and warns.
func TestTLSVerification(t *testing.T) {
	p := env.Plane.Get(t)
	env.Install(t, p)
	dir := t.TempDir()
	kc := harness.WriteOperatorKubeconfig(t, p, dir)
	b, err := os.ReadFile(kc)
	if err != nil {
		t.Fatal(err)
	}
	caLine := "    certificate-authority: " + filepath.Join(dir, "serviceaccount", "ca.crt") + "\n"
	if !strings.Contains(string(b), caLine) {
		t.Fatalf("kubeconfig without the expected CA line:\n%s", b)
	}
	noCA := filepath.Join(dir, "noca.yaml")
	if err := os.WriteFile(noCA, []byte(strings.Replace(string(b), caLine, "", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	insecure := filepath.Join(dir, "insecure.yaml")
	if err := os.WriteFile(insecure, []byte(strings.Replace(string(b), caLine, "    insecure-skip-tls-verify: true\n", 1)), 0o600); err != nil {
		t.Fatal(err)
	}

	t.Run("no CA: refused", func(t *testing.T) {
		stderr, code := runBinary(t, "--kubeconfig", noCA, "--metrics-bind-address", "0", "--health-probe-bind-address", "0")
		lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
		last := lines[len(lines)-1]
		if code == 0 || !strings.Contains(last, "certificate signed by unknown authority") || !strings.HasPrefix(last, "widget-operator: ") {
			t.Fatalf("exit %d, stderr:\n%s", code, stderr)
		}
		for _, l := range lines[:len(lines)-1] {
			if !strings.HasPrefix(l, "{") { // only JSON log lines before the error
				t.Fatalf("stray stderr line %q", l)
			}
		}
		t.Logf("exit %d: %s", code, last)
	})

	t.Run("insecure-skip-tls-verify: starts with a warning", func(t *testing.T) {
		ns := p.TestNamespace(t)
		o := startOp(t, p, "--kubeconfig", insecure, "--namespace", ns)
		o.waitReadyz(t, http.StatusOK, 90*time.Second)
		if o.count(`"level":"WARN"`, "TLS verification of the API server is off") != 1 {
			t.Fatalf("no warning in the log:\n%s", harness.Tail(o.Log(), 2048))
		}
	})
}

// TestEndpointsExposeOnlyMetricsAndHealth probes the metrics and health
// endpoints for anything beyond their own paths and methods.
func TestEndpointsExposeOnlyMetricsAndHealth(t *testing.T) {
	p := env.Plane.Get(t)
	ns := p.TestNamespace(t)
	o := startOp(t, p, "--namespace", ns)
	o.waitReadyz(t, http.StatusOK, 90*time.Second)
	c := &http.Client{Timeout: 5 * time.Second}
	probe := func(method, addr, path string) (int, string) {
		req, _ := http.NewRequest(method, "http://"+addr+path, nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		method, addr, path string
		want               int
	}{
		{"GET", o.MetricsAddr, "/metrics", 200},
		{"GET", o.ProbeAddr, "/healthz", 200},
		{"GET", o.ProbeAddr, "/readyz", 200},
		{"GET", o.MetricsAddr, "/", 404},
		{"GET", o.MetricsAddr, "/healthz", 404},
		{"GET", o.MetricsAddr, "/debug/pprof/", 404},
		{"GET", o.MetricsAddr, "/debug/vars", 404},
		{"GET", o.MetricsAddr, "/metrics/../config", 404},
		{"POST", o.MetricsAddr, "/metrics", 405},
		{"GET", o.ProbeAddr, "/", 404},
		{"GET", o.ProbeAddr, "/metrics", 404},
		{"GET", o.ProbeAddr, "/debug/pprof/", 404},
		{"GET", o.ProbeAddr, "/livez", 404},
		{"DELETE", o.ProbeAddr, "/readyz", 405},
	} {
		code, body := probe(tc.method, tc.addr, tc.path)
		if code == 301 || code == 307 || code == 308 {
			code = 404 // a cleaned path redirect leads nowhere else
		}
		if code != tc.want {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.path, code, tc.want)
		}
		if tc.path == "/metrics" && code == 200 {
			for _, line := range strings.Split(body, "\n") {
				if line != "" && !strings.HasPrefix(line, "#") && !strings.HasPrefix(line, "widget_operator_") &&
					!strings.HasPrefix(line, "go_") && !strings.HasPrefix(line, "process_") &&
					!strings.HasPrefix(line, "controller_runtime_") && !strings.HasPrefix(line, "workqueue_") &&
					!strings.HasPrefix(line, "rest_client_") {
					t.Errorf("unexpected metric line %q", line)
				}
			}
		}
	}
}
