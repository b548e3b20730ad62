// Command quickstart is `make run`: it runs the operator against the
// current cluster, or against the project's local control plane when there
// is none, and shows a sample Widget going Ready.
//
// Usage:
//
//	go run ./hack/quickstart [-operator=bin/widget-operator] [-local]
//
// It picks the cluster the operator would pick ($KUBECONFIG, then
// ~/.kube/config) when that cluster answers; -local forces the local
// control plane. It installs manifests/crd.yaml and manifests/rbac/,
// starts the operator, applies manifests/samples/widget.yaml, prints
// `kubectl get widgets` once the Widget is Ready, and then keeps the
// operator running until Ctrl-C.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/testenv/controlplane"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run() error {
	operatorBin := flag.String("operator", "bin/widget-operator", "the operator `binary` to run")
	local := flag.Bool("local", false, "always use the local control plane")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	kubeconfig, kubectl := "", "kubectl"
	if !*local {
		kubeconfig = reachableKubeconfig(ctx)
	}
	if kubeconfig != "" {
		fmt.Printf("using the cluster of %s\n", kubeconfig)
		if _, err := exec.LookPath("kubectl"); err != nil {
			// The local control plane's kubectl works against any cluster.
			b, err := buildPlane(ctx)
			if err != nil {
				return err
			}
			kubectl = b.Kubectl
		}
	} else {
		fmt.Println("no reachable cluster: starting the local control plane")
		b, err := buildPlane(ctx)
		if err != nil {
			return err
		}
		start := time.Now()
		p, err := controlplane.Start(ctx, controlplane.Options{Binaries: b, Log: os.Stderr})
		if err != nil {
			return err
		}
		defer p.Stop()
		fmt.Printf("local control plane ready in %s at %s\n", time.Since(start).Round(time.Millisecond), p.Host())
		kubeconfig, kubectl = p.Kubeconfig(), b.Kubectl
		fmt.Printf("  export KUBECONFIG=%s\n  kubectl: %s\n", kubeconfig, kubectl)
	}
	k := func(args ...string) error {
		cmd := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		return cmd.Run()
	}

	fmt.Println("installing the CRD and RBAC")
	if err := k("apply", "-f", "manifests/namespace.yaml", "-f", "manifests/crd.yaml", "-f", "manifests/rbac/"); err != nil {
		return fmt.Errorf("kubectl apply: %w", err)
	}
	if err := k("wait", "--for=condition=Established", "--timeout=60s", "crd/widgets.example.com"); err != nil {
		return fmt.Errorf("waiting for the CRD: %w", err)
	}

	fmt.Printf("starting %s\n", *operatorBin)
	op := exec.Command(*operatorBin, "--kubeconfig", kubeconfig, "--log-format", "text",
		"--metrics-bind-address", "127.0.0.1:8443", "--health-probe-bind-address", "127.0.0.1:8081")
	op.Stdout, op.Stderr = os.Stdout, os.Stderr
	if err := op.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- op.Wait() }()
	defer func() {
		if op.ProcessState == nil {
			_ = op.Process.Signal(syscall.SIGTERM)
			<-exited
		}
	}()

	if err := k("apply", "-f", "manifests/samples/widget.yaml"); err != nil {
		return fmt.Errorf("kubectl apply sample: %w", err)
	}
	if err := k("wait", "--for=jsonpath={.status.phase}=Ready", "--timeout=120s", "widget/sample"); err != nil {
		return fmt.Errorf("the sample Widget did not get Ready: %w", err)
	}
	_ = k("get", "widgets")
	fmt.Println("the operator keeps running; press Ctrl-C to stop")
	select {
	case <-ctx.Done():
		return nil
	case err := <-exited:
		return fmt.Errorf("operator exited: %v", err)
	}
}

// reachableKubeconfig returns the kubeconfig file the operator would use
// when it names a cluster that answers, and "" otherwise.
func reachableKubeconfig(ctx context.Context) string {
	path := strings.Split(os.Getenv("KUBECONFIG"), string(os.PathListSeparator))[0]
	if path == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		path = filepath.Join(home, ".kube", "config")
	}
	if _, err := os.Stat(path); err != nil {
		return ""
	}
	cfg, err := k8sapi.LoadKubeconfig([]string{path}, "")
	if err != nil {
		fmt.Fprintf(os.Stderr, "quickstart: ignoring %s: %v\n", path, err)
		return ""
	}
	c, err := k8sapi.New(cfg)
	if err != nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = k8sapi.For[k8sapi.TypeMeta](c, k8sapi.Namespaces).List(ctx, "", k8sapi.ListOptions{Limit: 1})
	if err != nil && !k8sapi.IsForbidden(err) {
		fmt.Fprintf(os.Stderr, "quickstart: the cluster of %s does not answer: %v\n", path, err)
		return ""
	}
	return path
}

func buildPlane(ctx context.Context) (*controlplane.Binaries, error) {
	if b, err := controlplane.FindBinaries(""); err == nil {
		return b, nil
	} else if !errors.Is(err, controlplane.ErrNotBuilt) {
		return nil, err
	}
	fmt.Println("building the local control plane (kube-apiserver, etcd, kwok...) from the Go module proxy;")
	fmt.Println("the first build takes 10 to 30 minutes on 2 cores (about 10 on idle ones), later runs start in seconds")
	start := time.Now()
	b, err := controlplane.Build(ctx, controlplane.BuildOptions{Log: os.Stderr})
	if err != nil {
		return nil, err
	}
	fmt.Printf("built in %s\n", time.Since(start).Round(time.Second))
	return b, nil
}
