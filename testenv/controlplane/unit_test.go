package controlplane

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestVersionsMatchToolsModules checks that the version constants are the
// ones the tools modules pin, so that the cache folder's name tells the
// truth.
func TestVersionsMatchToolsModules(t *testing.T) {
	for _, tc := range []struct {
		sub, module, version string
	}{
		{"", "k8s.io/kubernetes", KubernetesVersion},
		{"etcd", "go.etcd.io/etcd/server/v3", EtcdVersion},
		{"kwok", "sigs.k8s.io/kwok", KwokVersion},
	} {
		data, err := os.ReadFile(filepath.Join("..", "..", "hack", "controlplane", tc.sub, "go.mod"))
		if err != nil {
			t.Fatal(err)
		}
		if got := requiredVersion(string(data), tc.module); got != tc.version {
			t.Errorf("hack/controlplane/%s/go.mod requires %s %q, want %q", tc.sub, tc.module, got, tc.version)
		}
		if _, err := os.Stat(filepath.Join("..", "..", "hack", "controlplane", tc.sub, "go.sum")); err != nil {
			t.Errorf("tools module %q has no go.sum: %v", tc.sub, err)
		}
	}
}

// requiredVersion returns the version of module in a go.mod's require
// lines.
func requiredVersion(gomod, module string) string {
	for line := range strings.Lines(gomod) {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
		if len(f) >= 2 && f[0] == module {
			return f[1]
		}
	}
	return ""
}

func TestKubernetesStagingReplacesMatchVersion(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "hack", "controlplane", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	want := "v0." + strings.TrimPrefix(KubernetesVersion, "v1.")
	n := 0
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) == 4 && f[1] == "=>" && strings.HasPrefix(f[0], "k8s.io/") {
			n++
			if f[2] != f[0] || f[3] != want {
				t.Errorf("replace line %q: want %s => %s %s", strings.TrimSpace(line), f[0], f[0], want)
			}
		}
	}
	if n == 0 {
		t.Error("no k8s.io staging replace lines in hack/controlplane/go.mod")
	}
}

func TestModulePath(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"module example.com/a\n\ngo 1.26\n", "example.com/a"},
		{"// comment\nmodule \"example.com/b\"\n", "example.com/b"},
		{"go 1.26\n", ""},
		{"", ""},
	} {
		if got := modulePath([]byte(tc.in)); got != tc.want {
			t.Errorf("modulePath(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestDefaultDir(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", "/x/cache")
	got, err := DefaultDir()
	if err != nil {
		t.Fatal(err)
	}
	want := "/x/cache/widget-operator/controlplane/kubernetes-" + KubernetesVersion + "_etcd-" + EtcdVersion + "_kwok-" + KwokVersion
	if got != want {
		t.Errorf("DefaultDir() = %q, want %q", got, want)
	}
}

func TestFindBinariesNotBuilt(t *testing.T) {
	_, err := FindBinaries(t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "go run ./hack/localcluster build") {
		t.Fatalf("FindBinaries(empty) = %v, want ErrNotBuilt with the build command", err)
	}
}

func TestStampChangesWithGoSum(t *testing.T) {
	dir := t.TempDir()
	for _, sub := range []string{"", "etcd", "kwok"} {
		os.MkdirAll(filepath.Join(dir, sub), 0o755)
		os.WriteFile(filepath.Join(dir, sub, "go.mod"), []byte("module x\n"), 0o644)
		os.WriteFile(filepath.Join(dir, sub, "go.sum"), []byte("a v1 h1:x\n"), 0o644)
	}
	s1, err := stamp(dir)
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := stamp(dir)
	if s1 != s2 {
		t.Fatal("stamp is not stable")
	}
	os.WriteFile(filepath.Join(dir, "etcd", "go.sum"), []byte("a v2 h1:y\n"), 0o644)
	if s3, _ := stamp(dir); s3 == s1 {
		t.Fatal("stamp did not change with etcd/go.sum")
	}
	os.Remove(filepath.Join(dir, "kwok", "go.sum"))
	if _, err := stamp(dir); err == nil {
		t.Fatal("stamp without kwok/go.sum: no error")
	}
}

func TestPKI(t *testing.T) {
	dir := t.TempDir()
	p, err := newPKI(dir)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(p.caPEM) {
		t.Fatal("CA PEM does not parse")
	}
	srv, err := tls.LoadX509KeyPair(p.serverCert, p.key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(srv.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"127.0.0.1", "localhost", "kubernetes.default.svc"} {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: pool}); err != nil {
			t.Errorf("serving certificate for %s: %v", name, err)
		}
	}
	for _, u := range clientUsers {
		pair := p.clientPEM[u.name]
		c, err := tls.X509KeyPair(pair[0], pair[1])
		if err != nil {
			t.Fatalf("%s: %v", u.name, err)
		}
		cert, _ := x509.ParseCertificate(c.Certificate[0])
		if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Errorf("%s client certificate: %v", u.name, err)
		}
		if cert.Subject.CommonName != u.cn || !slices.Equal(cert.Subject.Organization, u.groups) {
			t.Errorf("%s subject = %v, want CN=%s O=%v", u.name, cert.Subject, u.cn, u.groups)
		}
	}
	for _, f := range []string{p.saKey, p.saPub, p.caKey} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := pem.Decode(data); b == nil {
			t.Errorf("%s: no PEM block", f)
		}
		if st, _ := os.Stat(f); st.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s: mode %v, want private", f, st.Mode())
		}
	}
}

const auditSample = `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a1","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/ns1/configmaps/cm","verb":"get","user":{"username":"system:serviceaccount:ns1:op","groups":["system:serviceaccounts","system:authenticated"]},"sourceIPs":["127.0.0.1"],"userAgent":"widget-operator/dev","objectRef":{"resource":"configmaps","namespace":"ns1","name":"cm","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":404},"requestReceivedTimestamp":"2026-01-02T03:04:05.000001Z","stageTimestamp":"2026-01-02T03:04:05.000900Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"w1","stage":"ResponseStarted","requestURI":"/apis/apps/v1/deployments?watch=true","verb":"watch","user":{"username":"admin","groups":["system:masters"]},"objectRef":{"resource":"deployments","apiGroup":"apps","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2026-01-02T03:04:06Z","stageTimestamp":"2026-01-02T03:04:06Z"}

{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"w1","stage":"ResponseComplete","requestURI":"/apis/apps/v1/deployments?watch=true","verb":"watch","user":{"username":"admin","groups":["system:masters"]},"objectRef":{"resource":"deployments","apiGroup":"apps","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2026-01-02T03:04:06Z","stageTimestamp":"2026-01-02T03:05:06Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"h1","stage":"ResponseComplete","requestURI":"/readyz","verb":"get","user":{"username":"admin"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-01-02T03:04:07Z","stageTimestamp":"2026-01-02T03:04:07Z"}
`

func TestParseAuditLog(t *testing.T) {
	events, err := ParseAuditLog(strings.NewReader(auditSample))
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 4 {
		t.Fatalf("got %d events, want 4", len(events))
	}
	e := events[0]
	want := AuditEvent{
		AuditID: "a1", Stage: "ResponseComplete", User: "system:serviceaccount:ns1:op",
		Groups: []string{"system:serviceaccounts", "system:authenticated"}, UserAgent: "widget-operator/dev",
		Verb: "get", RequestURI: "/api/v1/namespaces/ns1/configmaps/cm", APIVersion: "v1",
		Resource: "configmaps", Namespace: "ns1", Name: "cm", Code: 404,
		Received:  time.Date(2026, 1, 2, 3, 4, 5, 1000, time.UTC),
		Timestamp: time.Date(2026, 1, 2, 3, 4, 5, 900000, time.UTC),
	}
	if e.AuditID != want.AuditID || e.Stage != want.Stage || e.User != want.User || !slices.Equal(e.Groups, want.Groups) ||
		e.UserAgent != want.UserAgent || e.Verb != want.Verb || e.RequestURI != want.RequestURI || e.APIVersion != want.APIVersion ||
		e.Resource != want.Resource || e.Namespace != want.Namespace || e.Name != want.Name || e.Code != want.Code ||
		!e.Received.Equal(want.Received) || !e.Timestamp.Equal(want.Timestamp) {
		t.Errorf("event 0 = %+v\nwant %+v", e, want)
	}
	if events[1].APIGroup != "apps" || events[1].Stage != "ResponseStarted" {
		t.Errorf("event 1 = %+v", events[1])
	}
	if events[3].Resource != "" || events[3].Code != 200 {
		t.Errorf("non-resource event = %+v", events[3])
	}

	for _, tc := range []struct {
		name  string
		match func(AuditEvent) bool
		want  int
	}{
		{"all", nil, 3},
		{"admin", func(e AuditEvent) bool { return e.User == "admin" }, 2},
		{"watches", func(e AuditEvent) bool { return e.Verb == "watch" }, 1},
		{"404s", func(e AuditEvent) bool { return e.Code == 404 }, 1},
	} {
		if got := CountRequests(events, tc.match); got != tc.want {
			t.Errorf("CountRequests(%s) = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestParseAuditLogBadLine(t *testing.T) {
	in := auditSample + "{not json\n"
	events, err := ParseAuditLog(strings.NewReader(in))
	if err == nil || !strings.Contains(err.Error(), "line 6") {
		t.Fatalf("err = %v, want an error naming line 6", err)
	}
	if len(events) != 4 {
		t.Errorf("got %d events before the bad line, want 4", len(events))
	}
}

func TestTailFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	os.WriteFile(path, []byte("a\nb\nc\nd\n"), 0o644)
	if got := tailFile(path, 2); got != "c\nd" {
		t.Errorf("tailFile(2) = %q", got)
	}
	if got := tailFile(path, 10); got != "a\nb\nc\nd" {
		t.Errorf("tailFile(10) = %q", got)
	}
	if got := tailFile(filepath.Join(t.TempDir(), "missing"), 2); !strings.HasPrefix(got, "(") {
		t.Errorf("tailFile(missing) = %q", got)
	}
}

func TestKubeconfigYAML(t *testing.T) {
	got := string(kubeconfigYAML("https://127.0.0.1:1", []byte("CA"), []byte("CERT"), []byte("KEY"), "admin"))
	for _, want := range []string{
		"server: https://127.0.0.1:1\n",
		"certificate-authority-data: Q0E=\n",
		"client-certificate-data: Q0VSVA==\n",
		"client-key-data: S0VZ\n",
		"current-context: widget-local\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("kubeconfig lacks %q:\n%s", want, got)
		}
	}
}

func TestSweepStale(t *testing.T) {
	root := t.TempDir()
	mk := func(name, owner string) string {
		dir := filepath.Join(root, name)
		os.MkdirAll(dir, 0o755)
		if owner != "" {
			os.WriteFile(filepath.Join(dir, ownerFile), []byte(owner), 0o644)
		}
		return dir
	}
	// A process that has exited and been reaped leaves a dead pid.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip("no true command:", err)
	}
	dead := mk("controlplane-dead", strconv.Itoa(cmd.Process.Pid))
	alive := mk("controlplane-alive", strconv.Itoa(os.Getppid()))
	unknown := mk("controlplane-unknown", "")
	garbage := mk("controlplane-garbage", "not a pid")
	other := mk("other-dead", strconv.Itoa(cmd.Process.Pid))
	sweepStale(root)
	for dir, want := range map[string]bool{dead: false, alive: true, unknown: true, garbage: true, other: true} {
		_, err := os.Stat(dir)
		if got := err == nil; got != want {
			t.Errorf("%s kept = %v, want %v", filepath.Base(dir), got, want)
		}
	}
}

// TestStartFailsFastWhenEtcdExits gives Start an etcd that exits at once:
// the start fails quickly, names the component, and leaves no folder.
func TestStartFailsFastWhenEtcdExits(t *testing.T) {
	dir := t.TempDir()
	exiting := filepath.Join(dir, "exiting-etcd")
	if err := os.WriteFile(exiting, []byte("#!/bin/sh\necho 'fake etcd: cannot start' >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	bins := binariesIn(dir)
	bins.Etcd = exiting
	t.Setenv("TMPDIR", filepath.Join(dir, "tmp"))
	os.MkdirAll(filepath.Join(dir, "tmp"), 0o755)
	start := time.Now()
	p, err := Start(t.Context(), Options{Binaries: bins, ReadyTimeout: 30 * time.Second})
	if err == nil {
		p.Stop()
		t.Fatal("Start with an exiting etcd: no error")
	}
	if p != nil {
		t.Error("Start returned a plane with its error")
	}
	for _, want := range []string{"etcd exited", "exit status 3", "fake etcd: cannot start"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Start took %s to notice", d)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "tmp", "controlplane-*"))
	if len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
}
