// Command widget-operator runs the Widget operator: it watches Widgets
// (example.com/v1) and keeps a Deployment and a Service for each.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"

	"github.com/zerodep-k8s/widget-operator/internal/operator"
	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/reconcile"
)

// Version is the operator's version, printed by -version and sent in the
// User-Agent. The build sets it with -ldflags "-X main.Version=...".
var Version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// run is main without the process exit, for tests. It returns the exit code.
func run(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	opts, showVersion, err := parseFlags(args, getenv, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "widget-operator: %s (see -h)\n", k8sapi.Escape(err.Error()))
		return 2
	}
	if showVersion {
		fmt.Fprintf(stdout, "widget-operator %s\n", Version)
		return 0
	}

	logger, err := newLogger(stderr, opts.LogLevel, opts.LogFormat)
	if err != nil {
		fmt.Fprintf(stderr, "widget-operator: %v\n", err)
		return 2
	}

	setMemoryLimit(getenv, logger)

	// One channel, registered for the life of the process: a second
	// signal that comes at once is never lost between two registrations.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go onSignals(sigs, cancel, func() {
		fmt.Fprintln(stderr, "widget-operator: second signal, exiting now")
		os.Exit(1)
	})

	opts.Version = Version
	if err := operator.Run(ctx, opts.Options, logger); err != nil {
		// One line, no stack trace, nothing a terminal acts on (a
		// certificate's names, a kubeconfig's keys).
		fmt.Fprintf(stderr, "widget-operator: %s\n", k8sapi.Escape(strings.Join(strings.Fields(err.Error()), " ")))
		return 1
	}
	return 0
}

// onSignals calls shutdown at the first value of sigs and exit at the
// second: a second signal exits at once.
func onSignals(sigs <-chan os.Signal, shutdown, exit func()) {
	<-sigs
	shutdown()
	<-sigs
	exit()
}

type flags struct {
	operator.Options
	LogLevel  string
	LogFormat string
}

// parseFlags parses the command line. Help goes to helpOut; a bad flag is an
// error, printed by the caller as one line.
func parseFlags(args []string, getenv func(string) string, helpOut io.Writer) (flags, bool, error) {
	var f flags
	fs := flag.NewFlagSet("widget-operator", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	// The flag package calls Usage on every parse error too; help is
	// printed below only when it was asked for.
	fs.Usage = func() {}
	fs.StringVar(&f.Kubeconfig, "kubeconfig", "", "path to a kubeconfig; empty means $KUBECONFIG, then in-cluster, then ~/.kube/config")
	fs.StringVar(&f.Context, "context", "", "kubeconfig context to use; empty means current-context")
	fs.StringVar(&f.Namespace, "namespace", getenv("WATCH_NAMESPACE"), "namespace to watch; empty means all namespaces (default $WATCH_NAMESPACE)")
	fs.IntVar(&f.Workers, "workers", 4, "number of concurrent reconciles")
	fs.StringVar(&f.MetricsAddr, "metrics-bind-address", ":8443", "address of the /metrics endpoint; 0 turns it off")
	metricsSecure := fs.Bool("metrics-secure", true, "serve /metrics over HTTPS, each scrape authenticated (TokenReview) and authorized (SubjectAccessReview); false serves plain HTTP to anyone")
	fs.StringVar(&f.MetricsCertDir, "metrics-cert-dir", "", "folder with tls.crt and tls.key for the metrics endpoint; empty means a self-signed certificate made at start")
	fs.StringVar(&f.ProbeAddr, "health-probe-bind-address", ":8081", "address of the /healthz and /readyz endpoints; 0 turns it off")
	fs.BoolVar(&f.LeaderElect, "leader-elect", false, "elect a leader with a Lease, so that only one replica reconciles")
	fs.StringVar(&f.LeaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader-election Lease; empty means the operator's own namespace")
	fs.StringVar(&f.LeaderElectionID, "leader-election-id", "widget-operator.example.com", "name of the leader-election Lease, and prefix of the shards' Leases")
	fs.IntVar(&f.Shards, "shards", 1, "above 1, split the Widgets into this many shards, each a Lease, shared by the replicas (instead of one leader)")
	fs.StringVar(&f.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&f.LogFormat, "log-format", "json", "log format: json or text")
	fs.Float64Var(&f.QPS, "qps", 0, "client-side limit on API requests per second; 0 means no limit")
	fs.IntVar(&f.Burst, "burst", 0, "burst for --qps; 0 means 1 when --qps is set")
	fs.DurationVar(&f.ShutdownTimeout, "graceful-shutdown-timeout", reconcile.DefaultShutdownTimeout, "how long in-flight reconciles may run after SIGTERM")
	version := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(helpOut, "Usage: widget-operator [flags]\n\n"+
				"Runs the Widget operator against the cluster of the current kubeconfig,\n"+
				"or in-cluster with the pod's service account.\n\nFlags:\n")
			fs.SetOutput(helpOut)
			fs.PrintDefaults()
		}
		return f, false, err
	}
	f.InsecureMetrics = !*metricsSecure
	switch {
	case f.InsecureMetrics && f.MetricsCertDir != "":
		return f, false, errors.New("--metrics-cert-dir needs --metrics-secure")
	case fs.NArg() > 0:
		return f, false, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case f.Workers < 1:
		return f, false, fmt.Errorf("--workers must be at least 1, not %d", f.Workers)
	case f.Shards < 1 || f.Shards > 64:
		return f, false, fmt.Errorf("--shards must be from 1 to 64, not %d", f.Shards)
	case f.QPS < 0 || f.Burst < 0:
		return f, false, errors.New("--qps and --burst must not be negative")
	}
	return f, *version, nil
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	o, w := &slog.HandlerOptions{Level: l}, escapingWriter{w}
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(w, o)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, o)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want json or text", format)
}

// escapingWriter writes log lines, one per Write as slog's handlers write
// them, through k8sapi.Escape: the JSON handler leaves DEL, the C1
// controls and format characters raw, which Escape writes as the JSON
// escapes that decode to them.
type escapingWriter struct{ w io.Writer }

func (e escapingWriter) Write(p []byte) (int, error) {
	_, err := io.WriteString(e.w, k8sapi.Escape(strings.TrimSuffix(string(p), "\n"))+"\n")
	return len(p), err
}

// memoryLimitEnv names the variable that holds the container's memory
// limit in bytes: manifests/operator.yaml sets it from the downward API's
// limits.memory.
const memoryLimitEnv = "CONTAINER_MEMORY_LIMIT"

// setMemoryLimit sets the runtime's soft memory limit as memoryLimit
// chooses it, and logs it.
func setMemoryLimit(getenv func(string) string, log *slog.Logger) {
	limit, err := memoryLimit(getenv)
	if err != nil {
		log.Warn("memory limit left unset", "err", err)
		return
	}
	if limit > 0 {
		debug.SetMemoryLimit(limit)
		log.Info("memory limit set", "bytes", limit, "from", memoryLimitEnv)
	}
}

// memoryLimit returns 90% of the container's memory limit, read from
// memoryLimitEnv: the rest is headroom for memory the runtime does not
// count (thread stacks, the binary's own pages) and for its lag. It
// returns 0 when the limit should be left alone: GOMEMLIMIT is set (the
// runtime has read it), or memoryLimitEnv is not.
func memoryLimit(getenv func(string) string) (int64, error) {
	v := getenv(memoryLimitEnv)
	if v == "" || getenv("GOMEMLIMIT") != "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive number of bytes", memoryLimitEnv, v)
	}
	return int64(math.Floor(float64(n) * 0.9)), nil
}
