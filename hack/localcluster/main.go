// Command localcluster builds and runs the local control plane of
// testenv/controlplane.
//
// Usage:
//
//	go run ./hack/localcluster build
//	go run ./hack/localcluster up [-kubeconfig-out=FILE] [-dir=DIR] [-bare] [-sa-dir=DIR]
//	go run ./hack/localcluster paths
//
// build compiles the pinned binaries into the cache folder unless they are
// there already; it prints progress, and takes about ten minutes when
// cold. up builds if needed, starts a plane, writes the admin kubeconfig to
// -kubeconfig-out and runs until interrupted (Ctrl-C or SIGTERM), then
// stops every process it started. paths prints where the binaries are.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/zerodep-k8s/widget-operator/testenv/controlplane"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "localcluster:", err)
		os.Exit(1)
	}
}

const usage = `usage:
  localcluster build                 build the control plane binaries if needed
  localcluster up [flags]            start a control plane and run until interrupted
  localcluster paths                 print the paths of the built binaries
`

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	switch args[0] {
	case "build":
		fs := flag.NewFlagSet("build", flag.ContinueOnError)
		force := fs.Bool("force", false, "rebuild even when the binaries are up to date")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		start := time.Now()
		b, err := controlplane.Build(ctx, controlplane.BuildOptions{Log: stderr, Force: *force})
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "localcluster: binaries ready in %s (%s)\n", b.Dir, time.Since(start).Round(time.Millisecond))
		return nil

	case "paths":
		b, err := controlplane.FindBinaries("")
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "dir=%s\nkubectl=%s\nkube-apiserver=%s\netcd=%s\nkwok=%s\n", b.Dir, b.Kubectl, b.KubeAPIServer, b.Etcd, b.Kwok)
		return nil

	case "up":
		fs := flag.NewFlagSet("up", flag.ContinueOnError)
		kubeconfigOut := fs.String("kubeconfig-out", "", "also write the admin kubeconfig to this `file`")
		dir := fs.String("dir", "", "data `folder`, kept after exit; empty means a temporary one, removed on exit")
		bare := fs.Bool("bare", false, "start etcd and kube-apiserver only")
		saDir := fs.String("sa-dir", "", "also lay out a service-account `folder` (token, ca.crt, namespace) for default/widget-operator")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		bins, err := controlplane.Build(ctx, controlplane.BuildOptions{Log: stderr})
		if err != nil {
			return err
		}
		start := time.Now()
		p, err := controlplane.Start(ctx, controlplane.Options{Bare: *bare, Dir: *dir, Binaries: bins, Log: stderr})
		if err != nil {
			return err
		}
		defer p.Stop()
		kubeconfig := p.Kubeconfig()
		if *kubeconfigOut != "" {
			data, err := os.ReadFile(p.Kubeconfig())
			if err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Dir(*kubeconfigOut), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(*kubeconfigOut, data, 0o600); err != nil {
				return err
			}
			kubeconfig = *kubeconfigOut
		}
		if *saDir != "" {
			if err := p.WriteServiceAccountDir(ctx, *saDir, "default", "widget-operator"); err != nil {
				return err
			}
		}
		fmt.Fprintf(stdout, "control plane ready in %s\n", time.Since(start).Round(time.Millisecond))
		fmt.Fprintf(stdout, "  server:     %s\n", p.Host())
		fmt.Fprintf(stdout, "  kubeconfig: %s\n", kubeconfig)
		fmt.Fprintf(stdout, "  kubectl:    %s\n", bins.Kubectl)
		fmt.Fprintf(stdout, "  data:       %s\n", p.Dir())
		if *saDir != "" {
			fmt.Fprintf(stdout, "  sa folder:  %s\n", *saDir)
		}
		fmt.Fprintf(stdout, "try: KUBECONFIG=%s %s get nodes\npress Ctrl-C to stop\n", kubeconfig, bins.Kubectl)
		<-ctx.Done()
		fmt.Fprintln(stderr, "localcluster: stopping")
		return p.Stop()
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}
