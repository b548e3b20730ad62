package k8sapi_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

func ExampleLoad() {
	dir, err := os.MkdirTemp("", "kubeconfig")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "config")
	kubeconfig := `
apiVersion: v1
kind: Config
clusters:
- name: dev
  cluster:
    server: https://127.0.0.1:6443
    insecure-skip-tls-verify: true
users:
- name: dev
  user:
    token: dev-token
contexts:
- name: dev
  context: {cluster: dev, user: dev, namespace: widgets}
current-context: dev
`
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		log.Fatal(err)
	}

	// As a --kubeconfig flag would give it; with an empty Kubeconfig, Load
	// tries $KUBECONFIG, the pod's service account, then ~/.kube/config.
	cfg, err := k8sapi.Load(k8sapi.LoadOptions{Kubeconfig: path})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(cfg.Host, cfg.Namespace, cfg.AuthMethod(), cfg.Insecure)
	// Output: https://127.0.0.1:6443 widgets token true
}
