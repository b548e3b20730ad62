package k8sapi

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeEnv is an environment for LoadOptions.Getenv.
type fakeEnv map[string]string

func (e fakeEnv) get(k string) string { return e[k] }

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
	cfg, err := inCluster(dir, env.get)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://[fd00:10:96::1]:443" {
		t.Errorf("Host = %q", cfg.Host)
	}
	if cfg.BearerToken != "" || cfg.BearerTokenFile != filepath.Join(dir, "token") || cfg.Namespace != "operators" || len(cfg.CAData) == 0 {
		t.Errorf("got %+v", cfg)
	}
	if cfg.AuthMethod() != "token-file" {
		t.Errorf("AuthMethod = %q", cfg.AuthMethod())
	}

	env["KUBERNETES_SERVICE_HOST"] = "10.96.0.1"
	if cfg, err = inCluster(serviceAccountDir(t, false), env.get); err != nil || cfg.Host != "https://10.96.0.1:443" || cfg.Namespace != "" {
		t.Errorf("IPv4 without namespace file: %+v, %v", cfg, err)
	}
}

func TestInClusterErrors(t *testing.T) {
	env := fakeEnv{"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
	if cfg, err := inCluster(serviceAccountDir(t, true), fakeEnv{"KUBERNETES_SERVICE_HOST": "10.0.0.1"}.get); cfg != nil || err != nil {
		t.Errorf("not in a pod: %+v, %v; want nil, nil", cfg, err)
	}
	noCA := writeFiles(t, t.TempDir(), map[string]string{"token": "t"})
	if _, err := inCluster(noCA, env.get); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("no CA: %v", err)
	}
	badCA := writeFiles(t, t.TempDir(), map[string]string{"token": "t", "ca.crt": "junk"})
	if _, err := inCluster(badCA, env.get); err == nil || err.Error() != "k8sapi: in-cluster config: CA bundle "+filepath.Join(badCA, "ca.crt")+": the CA data holds no PEM certificate" {
		t.Errorf("bad CA: %v", err)
	}
	// Files without end (here /dev/zero) are read up to their limit only.
	for _, name := range []string{"ca.crt", "namespace"} {
		dir := serviceAccountDir(t, false)
		os.Remove(filepath.Join(dir, name))
		if err := os.Symlink("/dev/zero", filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
		if _, err := inCluster(dir, env.get); err == nil || !strings.Contains(err.Error(), "larger than") {
			t.Errorf("%s is /dev/zero: %v", name, err)
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
		cfg, err := inCluster(dir, env.get)
		if err != nil {
			t.Fatalf("token %s: in-cluster config read the token file: %v", name, err)
		}
		want := map[string]string{"missing": "no such file or directory", "empty": "empty", "/dev/zero": "larger than 64 KiB"}[name]
		if _, err := New(cfg); err == nil || err.Error() != "k8sapi: token file "+path+": "+want {
			t.Errorf("token %s: New: %v, want %q", name, err, want)
		}
	}
	env["KUBERNETES_SERVICE_HOST"] = "evil/host"
	if _, err := inCluster(serviceAccountDir(t, true), env.get); err == nil {
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
	inPod := fakeEnv{"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "6443"}
	withKubeconfig := fakeEnv{"KUBECONFIG": filepath.Join(files, "missing") + ":" + filepath.Join(files, "env2") + "::" + filepath.Join(files, "env1"),
		"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "6443"}

	tests := []struct {
		name string
		opts LoadOptions
		host string
		ns   string
	}{
		{"explicit wins", LoadOptions{Kubeconfig: filepath.Join(files, "explicit"), Getenv: withKubeconfig.get, HomeDir: home, InClusterDir: sa}, "https://explicit", ""},
		{"KUBECONFIG merged, missing skipped", LoadOptions{Getenv: withKubeconfig.get, HomeDir: home, InClusterDir: sa}, "https://env2", ""},
		{"in cluster", LoadOptions{Getenv: inPod.get, HomeDir: home, InClusterDir: sa}, "https://10.0.0.1:6443", "operators"},
		{"context skips in-cluster", LoadOptions{Context: "y", Getenv: inPod.get, HomeDir: home, InClusterDir: sa}, "https://home", "other"},
		{"home", LoadOptions{Getenv: fakeEnv{}.get, HomeDir: home}, "https://home", ""},
		{"context in KUBECONFIG", LoadOptions{Context: "y", Getenv: withKubeconfig.get, HomeDir: home}, "https://env2", "other"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
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
		opts LoadOptions
		msg  string
	}{
		{"missing explicit", LoadOptions{Kubeconfig: filepath.Join(empty, "nope"), Getenv: fakeEnv{}.get, HomeDir: empty},
			"k8sapi: kubeconfig " + filepath.Join(empty, "nope") + ": no such file or directory"},
		{"no KUBECONFIG file exists", LoadOptions{Getenv: fakeEnv{"KUBECONFIG": "/nonexistent/a:/nonexistent/b"}.get, HomeDir: empty},
			"k8sapi: none of the files in $KUBECONFIG (/nonexistent/a:/nonexistent/b) exists"},
		{"nothing at all", LoadOptions{Getenv: fakeEnv{}.get, HomeDir: empty},
			"k8sapi: no configuration found: no kubeconfig given, $KUBECONFIG empty, not in a cluster, and " + filepath.Join(empty, ".kube/config") + " does not exist"},
		{"broken in-cluster", LoadOptions{Getenv: fakeEnv{"KUBERNETES_SERVICE_HOST": "h", "KUBERNETES_SERVICE_PORT": "1"}.get, InClusterDir: empty, HomeDir: empty},
			"k8sapi: in-cluster config: CA bundle " + filepath.Join(empty, "ca.crt") + ": no such file or directory"},
		{"unknown context", LoadOptions{Kubeconfig: "testdata/kubeconfig/kind.yaml", Context: "prod"},
			`k8sapi: kubeconfig testdata/kubeconfig/kind.yaml: context "prod" not found`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(tt.opts)
			if err == nil || err.Error() != tt.msg {
				t.Errorf("error %v\nwant  %s", err, tt.msg)
			}
		})
	}
}
