package k8sapi

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeEnv is the environment Load and inCluster read, and the home folder.
type fakeEnv map[string]string

// set makes e the test's environment: each variable Load reads is e's
// value, or empty.
func (e fakeEnv) set(t *testing.T) {
	for _, k := range []string{"KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "HOME"} {
		t.Setenv(k, e[k])
	}
}

// kubeconfigFor returns a minimal kubeconfig whose only cluster is server.
func kubeconfigFor(server string) string {
	return "clusters:\n- name: c\n  cluster: {server: \"" + server + "\"}\n" +
		"contexts:\n- name: x\n  context: {cluster: c}\n- name: y\n  context: {cluster: c, namespace: other}\n" +
		"current-context: x\n"
}

// serviceAccountDir writes a service-account folder and returns it.
func serviceAccountDir(t *testing.T, withNamespace bool) string {
	t.Helper()
	ca, _ := selfSignedPair(t, "cluster-ca")
	files := map[string]string{"token": "sa-token\n", "ca.crt": string(ca)}
	if withNamespace {
		files["namespace"] = "operators\n"
	}
	return writeFiles(t, t.TempDir(), files)
}

func TestInClusterIPv6(t *testing.T) {
	dir := serviceAccountDir(t, true)
	env := fakeEnv{"KUBERNETES_SERVICE_HOST": "fd00:10:96::1", "KUBERNETES_SERVICE_PORT": "443"}
	env.set(t)
	cfg, err := inCluster(dir)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://[fd00:10:96::1]:443" {
		t.Errorf("Host = %q", cfg.Host)
	}
	if cfg.BearerToken != "" || cfg.BearerTokenFile != filepath.Join(dir, "token") || cfg.Namespace != "operators" || cfg.CAData != nil || cfg.CAFile != filepath.Join(dir, "ca.crt") {
		t.Errorf("got %+v", cfg)
	}
	if cfg.AuthMethod() != "token-file" {
		t.Errorf("AuthMethod = %q", cfg.AuthMethod())
	}

	env["KUBERNETES_SERVICE_HOST"] = "10.96.0.1"
	env.set(t)
	if cfg, err = inCluster(serviceAccountDir(t, false)); err != nil || cfg.Host != "https://10.96.0.1:443" || cfg.Namespace != "" {
		t.Errorf("IPv4 without namespace file: %+v, %v", cfg, err)
	}
}

func TestInClusterErrors(t *testing.T) {
	env := fakeEnv{"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
	fakeEnv{"KUBERNETES_SERVICE_HOST": "10.0.0.1"}.set(t)
	if cfg, err := inCluster(serviceAccountDir(t, true)); cfg != nil || err != nil {
		t.Errorf("not in a pod: %+v, %v; want nil, nil", cfg, err)
	}
	env.set(t)
	// Files without end (here /dev/zero) are read up to their limit only.
	dir := serviceAccountDir(t, false)
	os.Remove(filepath.Join(dir, "namespace"))
	if err := os.Symlink("/dev/zero", filepath.Join(dir, "namespace")); err != nil {
		t.Fatal(err)
	}
	if _, err := inCluster(dir); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("namespace is /dev/zero: %v", err)
	}
	// The CA file is named, not read: New reads it, once.
	for name, want := range map[string]string{"missing": "no such file or directory", "junk": "the CA data holds no PEM certificate", "/dev/zero": "larger than 1024 KiB"} {
		dir := serviceAccountDir(t, false)
		path := filepath.Join(dir, "ca.crt")
		os.Remove(path)
		switch name {
		case "junk":
			writeFiles(t, dir, map[string]string{"ca.crt": "junk"})
		case "/dev/zero":
			if err := os.Symlink("/dev/zero", path); err != nil {
				t.Fatal(err)
			}
		}
		cfg, err := inCluster(dir)
		if err != nil {
			t.Fatalf("CA %s: in-cluster config read the CA file: %v", name, err)
		}
		if _, err := New(cfg); err == nil || err.Error() != "k8sapi: TLS: CA file "+path+": "+want {
			t.Errorf("CA %s: New: %v", name, err)
		}
	}
	// The token file is named, not read: New reads it, once.
	for name, token := range map[string]string{"missing": "", "empty": " \n", "/dev/zero": ""} {
		dir := serviceAccountDir(t, false)
		path := filepath.Join(dir, "token")
		os.Remove(path)
		switch name {
		case "empty":
			writeFiles(t, dir, map[string]string{"token": token})
		case "/dev/zero":
			if err := os.Symlink("/dev/zero", path); err != nil {
				t.Fatal(err)
			}
		}
		cfg, err := inCluster(dir)
		if err != nil {
			t.Fatalf("token %s: in-cluster config read the token file: %v", name, err)
		}
		want := map[string]string{"missing": "no such file or directory", "empty": "empty", "/dev/zero": "larger than 64 KiB"}[name]
		if _, err := New(cfg); err == nil || err.Error() != "k8sapi: token file "+path+": "+want {
			t.Errorf("token %s: New: %v, want %q", name, err, want)
		}
	}
	env["KUBERNETES_SERVICE_HOST"] = "evil/host"
	env.set(t)
	if _, err := inCluster(serviceAccountDir(t, true)); err == nil {
		t.Error("malformed host accepted")
	}
}

func TestLoadOrder(t *testing.T) {
	home := writeFiles(t, t.TempDir(), map[string]string{".kube/config": kubeconfigFor("https://home")})
	files := writeFiles(t, t.TempDir(), map[string]string{
		"explicit": kubeconfigFor("https://explicit"),
		"env1":     kubeconfigFor("https://env1"),
		"env2":     kubeconfigFor("https://env2"),
	})
	sa := serviceAccountDir(t, true)
	inPod := fakeEnv{"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "6443", "HOME": home}
	withKubeconfig := fakeEnv{"KUBECONFIG": filepath.Join(files, "missing") + ":" + filepath.Join(files, "env2") + "::" + filepath.Join(files, "env1"),
		"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "6443", "HOME": home}

	tests := []struct {
		name string
		env  fakeEnv
		opts LoadOptions
		host string
		ns   string
	}{
		{"explicit wins", withKubeconfig, LoadOptions{Kubeconfig: filepath.Join(files, "explicit"), InClusterDir: sa}, "https://explicit", ""},
		{"KUBECONFIG merged, missing skipped", withKubeconfig, LoadOptions{InClusterDir: sa}, "https://env2", ""},
		{"in cluster", inPod, LoadOptions{InClusterDir: sa}, "https://10.0.0.1:6443", "operators"},
		{"context skips in-cluster", inPod, LoadOptions{Context: "y", InClusterDir: sa}, "https://home", "other"},
		{"home", fakeEnv{"HOME": home}, LoadOptions{}, "https://home", ""},
		{"context in KUBECONFIG", withKubeconfig, LoadOptions{Context: "y"}, "https://env2", "other"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.env.set(t)
			cfg, err := Load(tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Host != tt.host || cfg.Namespace != tt.ns {
				t.Errorf("Host %q Namespace %q, want %q %q", cfg.Host, cfg.Namespace, tt.host, tt.ns)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	empty := t.TempDir()
	tests := []struct {
		name string
		env  fakeEnv
		opts LoadOptions
		msg  string
	}{
		{"missing explicit", fakeEnv{"HOME": empty}, LoadOptions{Kubeconfig: filepath.Join(empty, "nope")},
			"k8sapi: kubeconfig " + filepath.Join(empty, "nope") + ": no such file or directory"},
		{"no KUBECONFIG file exists", fakeEnv{"KUBECONFIG": "/nonexistent/a:/nonexistent/b", "HOME": empty}, LoadOptions{},
			"k8sapi: none of the files in $KUBECONFIG (/nonexistent/a:/nonexistent/b) exists"},
		{"nothing at all", fakeEnv{"HOME": empty}, LoadOptions{},
			"k8sapi: no configuration found: no kubeconfig given, $KUBECONFIG empty, not in a cluster, and " + filepath.Join(empty, ".kube/config") + " does not exist"},
		{"broken in-cluster", fakeEnv{"KUBERNETES_SERVICE_HOST": "h/x", "KUBERNETES_SERVICE_PORT": "1", "HOME": empty}, LoadOptions{InClusterDir: empty},
			"k8sapi: in-cluster config: KUBERNETES_SERVICE_HOST or KUBERNETES_SERVICE_PORT is malformed"},
		{"unknown context", fakeEnv{}, LoadOptions{Kubeconfig: "testdata/kubeconfig/kind.yaml", Context: "prod"},
			`k8sapi: kubeconfig testdata/kubeconfig/kind.yaml: context "prod" not found`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.env.set(t)
			_, err := Load(tt.opts)
			if err == nil || err.Error() != tt.msg {
				t.Errorf("error %v\nwant  %s", err, tt.msg)
			}
		})
	}
}
