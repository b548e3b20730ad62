package k8sapi

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
)

// DefaultInClusterDir is the folder where Kubernetes mounts a pod's
// service-account token, CA bundle and namespace.
const DefaultInClusterDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// inCluster returns the Config of a process running in a pod, or nil
// when KUBERNETES_SERVICE_HOST or KUBERNETES_SERVICE_PORT is not set: the
// API server from those, and the token, ca.crt and namespace files in dir
// ("" means [DefaultInClusterDir]). The token and CA files are named, not
// read: [New] reads them, and reads the token again as the kubelet
// rotates it (see [Config].BearerTokenFile). A missing namespace file
// leaves Namespace empty.
func inCluster(dir string) (*Config, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return nil, nil
	}
	if strings.ContainsAny(host, "/[]@ ") || strings.ContainsAny(port, "/:@ ") {
		return nil, errors.New("k8sapi: in-cluster config: KUBERNETES_SERVICE_HOST or KUBERNETES_SERVICE_PORT is malformed")
	}
	dir = cmp.Or(dir, DefaultInClusterDir)
	ns, err := readFileLimit(filepath.Join(dir, "namespace"), maxTokenFileSize)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("k8sapi: in-cluster config: namespace: %w", err)
	}
	return &Config{
		Host:            "https://" + net.JoinHostPort(host, port),
		CAFile:          filepath.Join(dir, "ca.crt"),
		BearerTokenFile: filepath.Join(dir, "token"),
		Namespace:       strings.TrimSpace(string(ns)),
	}, nil
}
