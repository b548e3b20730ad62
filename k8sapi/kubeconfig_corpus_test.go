package k8sapi

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zerodep-k8s/widget-operator/k8sapi/internal/yaml"
)

var updateCorpus = flag.Bool("update-corpus", false, "rewrite the config and error of testdata/kubeconfig/corpus/*.want.json from what the loader returns")

const corpusDir = "testdata/kubeconfig/corpus"

// corpusWant is a NAME.want.json file: what loading NAME.yaml (or files,
// merged as $KUBECONFIG merges them) gives, a Config or an error.
type corpusWant struct {
	// Tool names what wrote the file, for people.
	Tool string `json:"tool"`
	// Files, when set, are loaded in this order instead of NAME.yaml.
	Files []string `json:"files,omitempty"`
	// Context is the context to load; empty means current-context.
	Context string        `json:"context,omitempty"`
	Config  *corpusConfig `json:"config,omitempty"`
	Error   string        `json:"error,omitempty"`
}

// corpusConfig is a Config as JSON shows it well: PEM data as text, paths
// relative to the corpus, the exec plugin's folder left out (it is the
// corpus's).
type corpusConfig struct {
	Host            string         `json:"host"`
	CAData          string         `json:"caData,omitempty"`
	CAFile          string         `json:"caFile,omitempty"`
	Insecure        bool           `json:"insecure,omitempty"`
	ServerName      string         `json:"serverName,omitempty"`
	ProxyURL        string         `json:"proxyURL,omitempty"`
	BearerToken     string         `json:"token,omitempty"`
	BearerTokenFile string         `json:"tokenFile,omitempty"`
	Username        string         `json:"username,omitempty"`
	Password        string         `json:"password,omitempty"`
	CertData        string         `json:"certData,omitempty"`
	KeyData         string         `json:"keyData,omitempty"`
	CertFile        string         `json:"certFile,omitempty"`
	KeyFile         string         `json:"keyFile,omitempty"`
	Exec            *ExecConfig    `json:"exec,omitempty"`
	Impersonate     *Impersonation `json:"impersonate,omitempty"`
	Namespace       string         `json:"namespace,omitempty"`
}

func corpusView(t *testing.T, cfg *Config) *corpusConfig {
	t.Helper()
	abs, err := filepath.Abs(corpusDir)
	if err != nil {
		t.Fatal(err)
	}
	v := &corpusConfig{
		Host: cfg.Host, CAData: string(cfg.CAData), CAFile: strings.TrimPrefix(cfg.CAFile, abs+"/"), Insecure: cfg.Insecure,
		ServerName: cfg.ServerName, ProxyURL: cfg.ProxyURL,
		BearerToken: cfg.BearerToken, BearerTokenFile: strings.TrimPrefix(cfg.BearerTokenFile, abs+"/"),
		Username: cfg.Username, Password: cfg.Password,
		CertData: string(cfg.CertData), KeyData: string(cfg.KeyData),
		CertFile: strings.TrimPrefix(cfg.CertFile, abs+"/"), KeyFile: strings.TrimPrefix(cfg.KeyFile, abs+"/"),
		Namespace: cfg.Namespace,
	}
	if cfg.Exec != nil {
		x := *cfg.Exec
		x.Command = strings.TrimPrefix(x.Command, abs+"/")
		v.Exec = &x
	}
	if cfg.Impersonate.UserName != "" {
		v.Impersonate = &cfg.Impersonate
	}
	return v
}

// TestKubeconfigCorpus loads each kubeconfig shape of the corpus, as the
// tools that write them do, and compares the result with its want file.
func TestKubeconfigCorpus(t *testing.T) {
	wants, err := filepath.Glob(filepath.Join(corpusDir, "*.want.json"))
	if err != nil || len(wants) < 30 {
		t.Fatalf("%d corpus files, want at least 30 (%v)", len(wants), err)
	}
	for _, wantFile := range wants {
		name := strings.TrimSuffix(filepath.Base(wantFile), ".want.json")
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(wantFile)
			if err != nil {
				t.Fatal(err)
			}
			var want corpusWant
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&want); err != nil {
				t.Fatalf("%s: %v", wantFile, err)
			}
			files := want.Files
			if files == nil {
				files = []string{name + ".yaml"}
			}
			var paths []string
			for _, f := range files {
				paths = append(paths, filepath.Join(corpusDir, f))
			}
			got := corpusWant{Tool: want.Tool, Files: want.Files, Context: want.Context}
			cfg, err := LoadKubeconfig(paths, want.Context)
			if err != nil {
				got.Error = err.Error()
			} else {
				got.Config = corpusView(t, cfg)
			}
			gotJSON, _ := json.MarshalIndent(got, "", "  ")
			gotJSON = append(gotJSON, '\n')
			if *updateCorpus {
				if err := os.WriteFile(wantFile, gotJSON, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if want.Config == nil && want.Error == "" {
				t.Fatalf("%s has neither a config nor an error", wantFile)
			}
			wantJSON, _ := json.MarshalIndent(want, "", "  ")
			wantJSON = append(wantJSON, '\n')
			if !bytes.Equal(gotJSON, wantJSON) {
				t.Errorf("loading %v gives\n%s\nwant\n%s", files, gotJSON, wantJSON)
			}
		})
	}
}

// TestKubeconfigCorpusInstallHints checks text the Config does not carry,
// as the YAML reader gives it to the loader: the install hints, a plain
// scalar wrapped over two lines (gcloud) and a block scalar with an
// indentation indicator (az, kubelogin). The loader reads and ignores
// them.
func TestKubeconfigCorpusInstallHints(t *testing.T) {
	const aks = "\nkubelogin is not installed which is required to connect to AAD enabled cluster.\n\nTo learn more, please go to https://aka.ms/aks/kubelogin\n"
	tests := []struct{ file, user, hint string }{
		{"gke.yaml", "gke_acme-prod_europe-west1_shop", "Install gke-gcloud-auth-plugin for use with kubectl by following https://cloud.google.com/kubernetes-engine/docs/how-to/cluster-access-for-kubectl#install_plugin"},
		{"aks-entra-devicecode.yaml", "clusterUser_rg-shop_shop", aks},
		{"aks-entra-kubelogin-azurecli.yaml", "clusterUser_rg-shop_shop", aks},
	}
	for _, tt := range tests {
		path := filepath.Join(corpusDir, tt.file)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := newKubeconfig().merge(path, data); err != nil {
			t.Fatal(err)
		}
		root, err := yaml.Parse(data)
		if err != nil {
			t.Fatal(err)
		}
		var hint *yaml.Node
		for _, u := range yamlAt(root, "users").Items {
			if yamlAt(u, "name").Value == tt.user {
				hint = yamlAt(u, "user", "exec", "installHint")
			}
		}
		if hint == nil || hint.Value != tt.hint {
			t.Errorf("%s: install hint %+v, want %q", tt.file, hint, tt.hint)
		}
	}
}

// yamlAt returns the value at the path of map keys from n, or nil where a
// node on the way is not a map or lacks the key.
func yamlAt(n *yaml.Node, keys ...string) *yaml.Node {
	for _, k := range keys {
		var v *yaml.Node
		for _, e := range n.Entries {
			if n.Kind == yaml.Map && e.Key == k {
				v = e.Value
			}
		}
		if n = v; n == nil {
			return nil
		}
	}
	return n
}
