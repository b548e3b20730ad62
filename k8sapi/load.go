package k8sapi

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// LoadOptions says where [Load] looks for configuration. The zero value
// follows kubectl's rules.
type LoadOptions struct {
	// Kubeconfig is a kubeconfig file to use, as a --kubeconfig flag gives
	// it. Empty means look further.
	Kubeconfig string
	// Context is the kubeconfig context to use. Empty means the file's
	// current-context. When set, in-cluster configuration is skipped: a
	// context only exists in a kubeconfig.
	Context string
	// InClusterDir is the service-account folder. Empty means
	// [DefaultInClusterDir].
	InClusterDir string
}

// Load finds the configuration the way kubectl and in-cluster clients do,
// taking the first of:
//
//  1. opts.Kubeconfig, when set; it must exist.
//  2. $KUBECONFIG, a list of files separated by the OS list separator
//     (':' on Unix), merged by [LoadKubeconfig]'s rules; files in the list
//     that do not exist are skipped, but at least one must exist.
//  3. The pod's service account, when $KUBERNETES_SERVICE_HOST and
//     $KUBERNETES_SERVICE_PORT are set and opts.Context is empty.
//  4. ~/.kube/config.
//
// Every error is one line that names the file, and the line in it when
// there is one.
func Load(opts LoadOptions) (*Config, error) {
	if opts.Kubeconfig != "" {
		return LoadKubeconfig([]string{opts.Kubeconfig}, opts.Context)
	}
	if list := os.Getenv("KUBECONFIG"); list != "" {
		paths := slices.DeleteFunc(filepath.SplitList(list), func(p string) bool {
			_, err := os.Stat(p)
			return errors.Is(err, os.ErrNotExist) // so does an empty entry
		})
		if len(paths) == 0 {
			return nil, fmt.Errorf("k8sapi: none of the files in $KUBECONFIG (%s) exists", list)
		}
		return LoadKubeconfig(paths, opts.Context)
	}
	if opts.Context == "" {
		if cfg, err := inCluster(opts.InClusterDir); cfg != nil || err != nil {
			return cfg, err
		}
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return nil, fmt.Errorf("k8sapi: no configuration found: no kubeconfig given, not in a cluster, and %v", err)
	}
	path := filepath.Join(home, ".kube", "config")
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("k8sapi: no configuration found: no kubeconfig given, $KUBECONFIG empty, not in a cluster, and %s does not exist", path)
	}
	return LoadKubeconfig([]string{path}, opts.Context)
}
