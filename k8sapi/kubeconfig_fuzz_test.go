package k8sapi

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzLoadKubeconfig feeds documents to the kubeconfig decoder: it must
// never panic, and every error must be a one-line *ConfigError.
func FuzzLoadKubeconfig(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/kubeconfig/*.yaml")
	corpus, _ := filepath.Glob("testdata/kubeconfig/corpus/*.yaml")
	seeds = append(seeds, corpus...)
	for _, s := range seeds {
		if b, err := os.ReadFile(s); err == nil {
			f.Add(b, "")
		}
	}
	f.Add([]byte(kubeconfigFor("https://h:1")), "y")
	f.Fuzz(func(t *testing.T, data []byte, context string) {
		kc := newKubeconfig()
		const path = "/nonexistent/fuzz/config" // relative paths resolve here
		err := kc.merge(path, data)
		if err == nil {
			var cfg *Config
			cfg, err = kc.config(path, context)
			if err == nil && cfg.Host == "" {
				t.Fatal("a Config without a Host")
			}
		}
		if err == nil {
			return
		}
		var ce *ConfigError
		if !errors.As(err, &ce) {
			t.Fatalf("%T %v is not a *ConfigError", err, err)
		}
		if !strings.HasPrefix(err.Error(), "k8sapi: kubeconfig ") {
			t.Fatalf("error %q lacks the prefix", err)
		}
	})
}
