package k8sapi

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// writeFiles writes name -> content under dir, making folders as needed,
// and returns dir.
func writeFiles(t testing.TB, dir string, files map[string]string) string {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// selfSignedPair returns a fresh PEM certificate and ECDSA key.
func selfSignedPair(t testing.TB, cn string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
}

func TestLoadKubeconfigKind(t *testing.T) {
	cfg, err := LoadKubeconfig([]string{"testdata/kubeconfig/kind.yaml"}, "")
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{Host: "https://127.0.0.1:40123", CAData: []byte("CA DATA"), BearerToken: "abc.def", Namespace: "team-a"}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("got %+v\nwant %+v", cfg, want)
	}

	cfg, err = LoadKubeconfig([]string{"testdata/kubeconfig/kind.yaml"}, "staging")
	if err != nil {
		t.Fatal(err)
	}
	want = &Config{Host: "https://[fd00::1]:6443/prefix", Insecure: true, ServerName: "api.internal",
		ProxyURL: "http://proxy.example:3128", Username: "admin", Password: "p@ss: word"}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("got %+v\nwant %+v", cfg, want)
	}
	if cfg.AuthMethod() != "basic" {
		t.Errorf("AuthMethod = %q", cfg.AuthMethod())
	}
}

func TestLoadKubeconfigExec(t *testing.T) {
	cfg, err := LoadKubeconfig([]string{"testdata/kubeconfig/exec.yaml"}, "")
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := filepath.Abs("testdata/kubeconfig")
	want := &ExecConfig{
		APIVersion:         execV1beta1,
		Command:            filepath.Join(dir, "bin/auth-plugin"),
		Args:               []string{"get-token", "--cluster", "cloud"},
		Env:                []string{"REGION=eu-1"},
		InteractiveMode:    "IfAvailable",
		ProvideClusterInfo: true,
	}
	if !reflect.DeepEqual(cfg.Exec, want) {
		t.Errorf("Exec = %+v\nwant %+v", cfg.Exec, want)
	}
	if cfg.Host != "https://cloud.example:443" || cfg.AuthMethod() != "exec" {
		t.Errorf("Host %q, AuthMethod %q", cfg.Host, cfg.AuthMethod())
	}
}

func TestLoadKubeconfigMerge(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"a/config": `
current-context: first
clusters:
- name: shared
  cluster: {server: "https://from-a"}
users:
- name: u
  user: {token: token-a}
contexts:
- name: first
  context: {cluster: shared, user: u, namespace: a}
`,
		"b/config": `
current-context: second
clusters:
- name: shared
  cluster: {server: "https://from-b"}
- name: only-b
  cluster:
    server: https://only-b
    certificate-authority: ca.pem
users:
- name: u
  user: {token: token-b}
- name: ub
  user:
    tokenFile: secrets/token
contexts:
- name: first
  context: {cluster: only-b}
- name: second
  context: {cluster: only-b, user: ub}
`,
		"b/ca.pem": "CA-B",
	})
	a, b := filepath.Join(dir, "a/config"), filepath.Join(dir, "b/config")

	cfg, err := LoadKubeconfig([]string{a, b}, "")
	if err != nil {
		t.Fatal(err)
	}
	// current-context, the context, cluster and user all come from a.
	if cfg.Host != "https://from-a" || cfg.BearerToken != "token-a" || cfg.Namespace != "a" {
		t.Errorf("first wins: got %+v", cfg)
	}

	// A context only b has, using b's cluster with a CA path relative to b.
	cfg, err = LoadKubeconfig([]string{a, b}, "second")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://only-b" || cfg.CAData != nil || cfg.CAFile != filepath.Join(dir, "b/ca.pem") || cfg.BearerTokenFile != filepath.Join(dir, "b/secrets/token") {
		t.Errorf("second: got %+v", cfg)
	}

	// Reversed order: b wins.
	cfg, err = LoadKubeconfig([]string{b, a}, "first")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://only-b" || cfg.BearerToken != "" {
		t.Errorf("b first: got %+v", cfg)
	}
}

func TestLoadKubeconfigRelativeFiles(t *testing.T) {
	certPEM, keyPEM := selfSignedPair(t, "client")
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"kube/config": `
clusters:
- name: c
  cluster:
    server: https://h
    certificate-authority: ../pki/ca.crt
users:
- name: u
  user:
    client-certificate: certs/client.crt
    client-key: certs/client.key
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
`,
		"pki/ca.crt":            "THE CA",
		"kube/certs/client.crt": string(certPEM),
		"kube/certs/client.key": string(keyPEM),
	})
	cfg, err := LoadKubeconfig([]string{filepath.Join(dir, "kube/config")}, "")
	if err != nil {
		t.Fatal(err)
	}
	// The CA file and the pair of files are named, for New to read.
	if cfg.CAData != nil || cfg.CAFile != filepath.Join(dir, "pki/ca.crt") || cfg.CertData != nil || cfg.KeyData != nil ||
		cfg.CertFile != filepath.Join(dir, "kube/certs/client.crt") || cfg.KeyFile != filepath.Join(dir, "kube/certs/client.key") {
		t.Errorf("got %+v", cfg)
	}
	if cfg.AuthMethod() != "client-certificate" {
		t.Errorf("AuthMethod = %q", cfg.AuthMethod())
	}
}

func TestLoadKubeconfigDataFields(t *testing.T) {
	certPEM, keyPEM := selfSignedPair(t, "client")
	enc := base64.StdEncoding.EncodeToString
	dir := writeFiles(t, t.TempDir(), map[string]string{"config": `
clusters:
- name: c
  cluster:
    server: http://localhost:8080
users:
- name: u
  user:
    client-certificate-data: ` + enc(certPEM) + `
    client-key-data: ` + enc(keyPEM) + `
contexts:
- name: x
  context:
    cluster: c
    user: u
current-context: x
`})
	cfg, err := LoadKubeconfig([]string{filepath.Join(dir, "config")}, "")
	if err != nil {
		t.Fatal(err)
	}
	if string(cfg.CertData) != string(certPEM) || string(cfg.KeyData) != string(keyPEM) {
		t.Error("cert/key data not decoded")
	}
	if _, err := readKeyPair(cfg); err != nil {
		t.Errorf("readKeyPair: %v", err)
	}
}

// TestLoadKubeconfigCertHalves: a kubeconfig's certificate and key may
// each be a file or data; the loader names the files and New reads them,
// so a bad file fails New, naming it.
func TestLoadKubeconfigCertHalves(t *testing.T) {
	const doc = "clusters:\n- name: c\n  cluster: {server: 'https://h'}\n" +
		"contexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\nusers:\n- name: u\n  user: {%s}\n"
	for _, tt := range []struct{ user, certFile, keyFile, msg string }{
		{"client-certificate-data: Q0E=, client-key: /dev/zero", "", "/dev/zero", "k8sapi: TLS: client certificate: key file /dev/zero: larger than 1024 KiB"},
		{"client-key-data: Q0E=, client-certificate: /dev/zero", "/dev/zero", "", "k8sapi: TLS: client certificate: certificate file /dev/zero: larger than 1024 KiB"},
		{"client-certificate-data: Q0E=, client-key: nope.key", "", "nope.key", "k8sapi: TLS: client certificate: key file DIR/nope.key: no such file or directory"},
	} {
		dir := writeFiles(t, t.TempDir(), map[string]string{"config": fmt.Sprintf(doc, tt.user)})
		cfg, err := LoadKubeconfig([]string{filepath.Join(dir, "config")}, "")
		if err != nil {
			t.Errorf("%s: %v", tt.user, err)
			continue
		}
		resolve := func(p string) string {
			if p == "" || filepath.IsAbs(p) {
				return p
			}
			return filepath.Join(dir, p)
		}
		if cfg.CertFile != resolve(tt.certFile) || cfg.KeyFile != resolve(tt.keyFile) || (cfg.CertData == nil) == (cfg.KeyData == nil) {
			t.Errorf("%s: got %+v", tt.user, cfg)
		}
		if _, err := New(cfg); err == nil || err.Error() != strings.ReplaceAll(tt.msg, "DIR", dir) {
			t.Errorf("%s: New: %v, want %q", tt.user, err, tt.msg)
		}
	}
}

// TestLoadKubeconfigCAFile: a cluster's certificate-authority is named,
// relative to the kubeconfig, and a bad one is New's error.
func TestLoadKubeconfigCAFile(t *testing.T) {
	const doc = "clusters:\n- name: c\n  cluster: {server: 'https://h', certificate-authority: %s}\n" +
		"contexts:\n- name: x\n  context: {cluster: c}\ncurrent-context: x\n"
	for _, tt := range []struct{ file, path, msg string }{
		{"/dev/zero", "/dev/zero", "k8sapi: TLS: CA file /dev/zero: larger than 1024 KiB"},
		{"nope.crt", "DIR/nope.crt", "k8sapi: TLS: CA file DIR/nope.crt: no such file or directory"},
		{"junk.crt", "DIR/junk.crt", "k8sapi: TLS: CA file DIR/junk.crt: the CA data holds no PEM certificate"},
	} {
		dir := writeFiles(t, t.TempDir(), map[string]string{"config": fmt.Sprintf(doc, tt.file), "junk.crt": "junk"})
		cfg, err := LoadKubeconfig([]string{filepath.Join(dir, "config")}, "")
		if err != nil {
			t.Errorf("%s: %v", tt.file, err)
			continue
		}
		if cfg.CAData != nil || cfg.CAFile != strings.ReplaceAll(tt.path, "DIR", dir) {
			t.Errorf("%s: got %+v", tt.file, cfg)
		}
		if _, err := New(cfg); err == nil || err.Error() != strings.ReplaceAll(tt.msg, "DIR", dir) {
			t.Errorf("%s: New: %v, want %q", tt.file, err, tt.msg)
		}
	}
}

func TestLoadKubeconfigErrors(t *testing.T) {
	const head = "clusters:\n- name: c\n  cluster:\n    server: https://h\n"
	const ctx = "contexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n"
	tests := []struct {
		name, doc, context string
		line               int
		msg                string
	}{
		{"bad yaml", "a:\n    b: 1\n  c: 2\n", "", 3, "unexpected indentation"},
		{"not a map", "- a\n", "", 1, "want a map"},
		{"clusters not a list", "clusters: {}\n", "", 1, "clusters: want a list"},
		{"no name", "clusters:\n- cluster: {}\n", "", 2, "no name"},
		{"duplicate name", "users:\n- name: u\n- name: u\n", "", 3, `"u" is defined twice (first at line 2)`},
		{"server not string", "clusters:\n- name: c\n  cluster:\n    server: [a]\n", "", 4, "server: want a string"},
		{"bad bool", "clusters:\n- name: c\n  cluster:\n    insecure-skip-tls-verify: yes\n", "", 4, "want true or false"},
		{"quoted bool", "clusters:\n- name: c\n  cluster:\n    insecure-skip-tls-verify: \"true\"\n", "", 4, "want true or false"},
		{"bad base64", "users:\n- name: u\n  user:\n    client-key-data: \"!!\"\n", "", 4, "client-key-data: invalid base64: illegal base64 data at input byte 0"},
		{"exec no version", "users:\n- name: u\n  user:\n    exec:\n      command: x\n", "", 5, "apiVersion is missing"},
		{"exec old version", "users:\n- name: u\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1alpha1\n      command: x\n", "", 5, "not supported"},
		{"exec v1 no mode", "users:\n- name: u\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: x\n", "", 5, "interactiveMode is required"},
		{"exec always", "users:\n- name: u\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: x\n      interactiveMode: Always\n", "", 5, "needs a terminal"},
		{"exec no command", "users:\n- name: u\n  user:\n    exec: {apiVersion: client.authentication.k8s.io/v1beta1}\n", "", 4, "command is missing"},
		{"exec bad env", "users:\n- name: u\n  user:\n    exec:\n      env:\n      - value: x\n", "", 6, "invalid or missing name"},
		{"exec env NUL", "users:\n- name: u\n  user:\n    exec:\n      env:\n      - name: A\n        value: \"a\\0b\"\n", "", 7, "env[0].value: contains a NUL byte"},
		{"auth provider", "users:\n- name: u\n  user:\n    auth-provider: {name: gcp}\n", "", 4, "auth providers are not supported"},
		{"impersonation without user", head + ctx + "users:\n- name: u\n  user: {as-groups: [g]}\n", "", 10, "need a user name"},
		{"impersonation extra not a map", "users:\n- name: u\n  user:\n    as-user-extra: [a]\n", "", 4, "as-user-extra: want a map"},
		{"impersonation groups not a list", "users:\n- name: u\n  user:\n    as-groups: g\n", "", 4, "as-groups: want a list"},
		{"no current context", head, "", 0, "no current-context"},
		{"unknown context", head + ctx, "nope", 0, `context "nope" not found`},
		{"unknown cluster", "contexts:\n- name: x\n  context: {cluster: zz}\ncurrent-context: x\n", "", 2, `cluster "zz" not found`},
		{"unknown user", head + ctx, "", 6, `user "u" not found`},
		{"no server", "clusters:\n- name: c\n  cluster: {}\n" + ctx, "", 2, "server is empty"},
		{"bad server", "clusters:\n- name: c\n  cluster: {server: 'h:6443'}\n" + ctx, "", 2, "not an https:// or http:// URL"},
		{"server with query", "clusters:\n- name: c\n  cluster: {server: 'https://h/?a=b'}\n" + ctx, "", 2, "server must not have a query"},
		{"server with credentials", "clusters:\n- name: c\n  cluster: {server: 'https://u:pw@h'}\n" + ctx, "", 2, "server must not hold credentials"},
		{"insecure with CA", "clusters:\n- name: c\n  cluster:\n    server: https://h\n    insecure-skip-tls-verify: true\n    certificate-authority-data: Q0E=\n" + ctx, "", 2, "cannot both be set"},
		{"ftp proxy", "clusters:\n- name: c\n  cluster:\n    server: https://h\n    proxy-url: ftp://p:21\n" + ctx, "", 2, "ProxyURL scheme must be http, https, socks5 or socks5h (proxy-url)"},
		{"insecure with CA file", "clusters:\n- name: c\n  cluster: {server: 'https://h', insecure-skip-tls-verify: true, certificate-authority: ca.crt}\n" + ctx, "", 2, "Insecure and CAData or CAFile cannot both be set"},
		{"two auth methods", head + ctx + "users:\n- name: u\n  user: {token: t, username: a, password: b}\n", "", 10, "more than one authentication method: token, username/password"},
		{"cert without key", head + ctx + "users:\n- name: u\n  user: {client-certificate-data: Q0E=}\n", "", 10, "needs both"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(writeFiles(t, t.TempDir(), map[string]string{"config": tt.doc}), "config")
			_, err := LoadKubeconfig([]string{path}, tt.context)
			if err == nil {
				t.Fatal("no error")
			}
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("%T %v is not a *ConfigError", err, err)
			}
			if ce.Line != tt.line || !strings.Contains(err.Error(), tt.msg) || ce.Path != path {
				t.Errorf("error %q (line %d), want line %d and %q", err, ce.Line, tt.line, tt.msg)
			}
			wantPrefix := "k8sapi: kubeconfig " + path + ": "
			if !strings.HasPrefix(err.Error(), wantPrefix) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q does not start with %q on one line", err, wantPrefix)
			}
		})
	}
}

func TestLoadKubeconfigFixtureErrors(t *testing.T) {
	tests := map[string]string{
		"bad-duplicate.yaml": "line 5: duplicate map key (first at line 4)",
		"bad-anchor.yaml":    "line 3: anchors are not supported",
		"bad-base64.yaml":    `line 5: cluster "a": certificate-authority-data: invalid base64: illegal base64 data at input byte 3`,
	}
	for file, want := range tests {
		_, err := LoadKubeconfig([]string{"testdata/kubeconfig/" + file}, "")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", file, err, want)
		}
	}
}

func TestLoadKubeconfigMissingFile(t *testing.T) {
	_, err := LoadKubeconfig([]string{"testdata/kubeconfig/kind.yaml", "testdata/nope"}, "")
	if !errors.Is(err, fs.ErrNotExist) || err.Error() != "k8sapi: kubeconfig testdata/nope: no such file or directory" {
		t.Errorf("error %v", err)
	}
	if _, err := LoadKubeconfig(nil, ""); err == nil {
		t.Error("no error for no paths")
	}
}

func TestLoadKubeconfigEmptyFileMerges(t *testing.T) {
	dir := writeFiles(t, t.TempDir(), map[string]string{"empty": "# nothing\n"})
	cfg, err := LoadKubeconfig([]string{filepath.Join(dir, "empty"), "testdata/kubeconfig/kind.yaml"}, "")
	if err != nil || cfg.Host != "https://127.0.0.1:40123" {
		t.Errorf("got %+v, %v", cfg, err)
	}
}

// TestProxyURLOneRule: the loader accepts a proxy-url exactly when New
// accepts it as Config.ProxyURL.
func TestProxyURLOneRule(t *testing.T) {
	for _, proxy := range []string{
		"http://p:3128", "https://p:443", "socks5://p:1080", "socks5h://p:1080",
		"ftp://p:21", "socks4://p:1080", "p:3128", "http://", "http://%zz",
	} {
		doc := "clusters:\n- name: c\n  cluster: {server: 'https://h', proxy-url: '" + proxy + "'}\n" +
			"contexts:\n- name: x\n  context: {cluster: c}\ncurrent-context: x\n"
		path := filepath.Join(writeFiles(t, t.TempDir(), map[string]string{"config": doc}), "config")
		_, loadErr := LoadKubeconfig([]string{path}, "")
		_, newErr := New(&Config{Host: "https://h", ProxyURL: proxy})
		if (loadErr == nil) != (newErr == nil) {
			t.Errorf("proxy %q: LoadKubeconfig error %v, New error %v", proxy, loadErr, newErr)
		}
		if strings.HasPrefix(proxy, "socks5") && loadErr != nil {
			t.Errorf("proxy %q refused: %v", proxy, loadErr)
		}
	}
}

// TestLoadKubeconfigBooleans reads each of the core schema's spellings of
// true and false, and null, as insecure-skip-tls-verify.
func TestLoadKubeconfigBooleans(t *testing.T) {
	for v, want := range map[string]bool{"true": true, "True": true, "TRUE": true, "false": false, "False": false, "FALSE": false, "~": false} {
		dir := writeFiles(t, t.TempDir(), map[string]string{"config": "clusters:\n- name: c\n  cluster:\n    server: https://h\n    insecure-skip-tls-verify: " + v +
			"\ncontexts:\n- name: x\n  context: {cluster: c}\ncurrent-context: x\n"})
		cfg, err := LoadKubeconfig([]string{filepath.Join(dir, "config")}, "")
		if err != nil || cfg.Insecure != want {
			t.Errorf("insecure-skip-tls-verify: %s: got %+v, %v; want Insecure %v", v, cfg, err, want)
		}
	}
}
