// Command opprof is the operator with a CPU profile: the same
// internal/operator.Run as cmd/widget-operator, with the flags the scale
// scenario passes, writing a CPU profile of its whole life to -cpuprofile.
// It exists so that the scale scenario can show where the operator spends
// its CPU (the product has no pprof endpoint):
//
//	go build -o /tmp/opprof ./bench/cmd/opprof
//	go run ./bench/cmd/compare -profile /tmp/opprof -n 1000   # see compare
//	go tool pprof -top /tmp/opprof <profile>
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/zerodep-k8s/widget-operator/internal/operator"
)

func main() {
	var opts operator.Options
	profile := flag.String("cpuprofile", "", "write a CPU profile here")
	flag.StringVar(&opts.Kubeconfig, "kubeconfig", "", "kubeconfig")
	flag.StringVar(&opts.MetricsAddr, "metrics-bind-address", "0", "metrics address")
	flag.StringVar(&opts.ProbeAddr, "health-probe-bind-address", "0", "probe address")
	flag.Parse()
	if *profile != "" {
		f, err := os.Create(*profile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "opprof:", err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "opprof:", err)
			os.Exit(1)
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if err := operator.Run(ctx, opts, log); err != nil {
		fmt.Fprintln(os.Stderr, "opprof:", err)
	}
}
