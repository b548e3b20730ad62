package main

// The pod commands, with kubectl's flags (-x and --x are the same):
//
//	kget [-kubeconfig FILE] [-context NAME] [-n NAMESPACE] logs [-f] [-c CONTAINER] [--tail N] [--since DURATION] [--since-time TIME] [--timestamps] [--limit-bytes N] [-p] POD
//	kget ... exec [-i] [-t] [-c CONTAINER] POD -- COMMAND [ARG...]
//	kget ... port-forward [--address ADDR] POD [LOCAL:]REMOTE...
//
// exec exits with the command's exit code.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/k8sapi/podexec"
	"github.com/zerodep-k8s/widget-operator/k8sapi/podlogs"
	"github.com/zerodep-k8s/widget-operator/k8sapi/portforward"
)

const podUsage = `usage: kget [-kubeconfig FILE] [-context NAME] [-n NAMESPACE] logs [-f] [-c CONTAINER] [--tail N] [--since DURATION] [--since-time TIME] [--timestamps] [--limit-bytes N] [-p] POD
       kget [-kubeconfig FILE] [-context NAME] [-n NAMESPACE] exec [-i] [-t] [-c CONTAINER] POD -- COMMAND [ARG...]
       kget [-kubeconfig FILE] [-context NAME] [-n NAMESPACE] port-forward [--address ADDR] POD [LOCAL:]REMOTE...`

// podEnv is what every pod command needs.
type podEnv struct {
	cfg       *k8sapi.Config
	namespace string
	stdin     io.Reader
	stdout    io.Writer
	stderr    io.Writer
}

// usageError is a command line the pod commands refuse: exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// runStdin is run with the standard input, which exec -i reads. A pod
// command (logs, exec, port-forward) after the connection flags runs
// here; anything else is run's.
func runStdin(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("kget", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	kubeconfig := fs.String("kubeconfig", "", "")
	kubecontext := fs.String("context", "", "")
	namespace := fs.String("n", "", "")
	if fs.Parse(args) != nil || fs.NArg() == 0 {
		return run(ctx, args, stdout, stderr)
	}
	cmd := podCommands[fs.Arg(0)]
	if cmd == nil {
		return run(ctx, args, stdout, stderr)
	}
	cfg, err := k8sapi.Load(k8sapi.LoadOptions{Kubeconfig: *kubeconfig, Context: *kubecontext})
	if err != nil {
		fmt.Fprintf(stderr, "kget: %v\n", err)
		return 1
	}
	env := &podEnv{cfg: cfg, namespace: *namespace, stdin: stdin, stdout: stdout, stderr: stderr}
	if env.namespace == "" {
		env.namespace = cfg.Namespace
	}
	if env.namespace == "" {
		env.namespace = "default"
	}
	return exitCode(cmd(ctx, env, fs.Args()[1:]), stderr)
}

var podCommands = map[string]func(context.Context, *podEnv, []string) error{
	"logs":         logs,
	"exec":         execCmd,
	"port-forward": portForward,
}

// exitCode prints err and returns the exit code: the command's own for
// exec, 2 for bad usage, 1 for any other failure.
func exitCode(err error, stderr io.Writer) int {
	var ee *podexec.ExitError
	var ue *usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.Code
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "kget: %v\n%s\n", err, podUsage)
		return 2
	}
	fmt.Fprintf(stderr, "kget: %v\n", err)
	return 1
}

// podName accepts "NAME", "pod/NAME" and "pods/NAME", as kubectl does.
func podName(s string) string {
	for _, p := range []string{"pod/", "pods/", "po/"} {
		if n, ok := strings.CutPrefix(s, p); ok {
			return n
		}
	}
	return s
}

// boolFlag binds a short and a long name to one bool.
func boolFlag(fs *flag.FlagSet, p *bool, short, long string) {
	fs.BoolVar(p, short, false, "")
	fs.BoolVar(p, long, false, "")
}

func logs(ctx context.Context, env *podEnv, args []string) error {
	fs := flag.NewFlagSet("logs", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var opts podlogs.Options
	boolFlag(fs, &opts.Follow, "f", "follow")
	boolFlag(fs, &opts.Previous, "p", "previous")
	fs.StringVar(&opts.Container, "c", "", "")
	fs.StringVar(&opts.Container, "container", "", "")
	fs.BoolVar(&opts.Timestamps, "timestamps", false, "")
	fs.Int64Var(&opts.LimitBytes, "limit-bytes", 0, "")
	tail := fs.Int64("tail", -1, "")
	since := fs.Duration("since", 0, "")
	sinceTime := fs.String("since-time", "", "")
	pod, _, err := parsePod(fs, args)
	if err != nil {
		return err
	}
	if *tail >= 0 {
		opts.TailLines = tail
	}
	opts.SinceSeconds = int64(since.Round(time.Second) / time.Second)
	if *sinceTime != "" {
		if opts.SinceTime, err = time.Parse(time.RFC3339, *sinceTime); err != nil {
			return &usageError{"--since-time: " + err.Error()}
		}
	}
	c, err := k8sapi.New(env.cfg)
	if err != nil {
		return err
	}
	rc, err := podlogs.Stream(ctx, c, env.namespace, pod, opts)
	if err != nil {
		return err
	}
	defer rc.Close()
	if _, err := io.Copy(env.stdout, rc); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// parsePod parses flags, the pod's name, then flags again (kubectl takes
// them on either side), and returns the pod and what follows: the words
// after "--" or the first word that is not a flag.
func parsePod(fs *flag.FlagSet, args []string) (string, []string, error) {
	if err := fs.Parse(args); err != nil {
		return "", nil, &usageError{err.Error()}
	}
	if fs.NArg() == 0 || fs.Arg(0) == "--" {
		return "", nil, &usageError{"a pod name is required"}
	}
	pod := podName(fs.Arg(0))
	if err := fs.Parse(fs.Args()[1:]); err != nil {
		return "", nil, &usageError{err.Error()}
	}
	return pod, fs.Args(), nil
}

func execCmd(ctx context.Context, env *podEnv, args []string) error {
	fs := flag.NewFlagSet("exec", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var stdin, tty bool
	var opts podexec.Options
	boolFlag(fs, &stdin, "i", "stdin")
	boolFlag(fs, &tty, "t", "tty")
	fs.StringVar(&opts.Container, "c", "", "")
	fs.StringVar(&opts.Container, "container", "", "")
	pod, command, err := parsePod(fs, args)
	if err != nil {
		return err
	}
	if len(command) == 0 {
		return &usageError{"a command is required after --"}
	}
	opts.Stdout, opts.TTY = env.stdout, tty && stdin
	if !opts.TTY {
		opts.Stderr = env.stderr
	}
	if stdin {
		opts.Stdin = env.stdin
	}
	if tty && !stdin {
		fmt.Fprintln(env.stderr, "Unable to use a TTY - input is not a terminal or the right kind of file")
	}
	if opts.TTY {
		resize, stop := terminalSizes(ctx)
		defer stop()
		opts.Resize = resize
	}
	c, err := podexec.New(env.cfg)
	if err != nil {
		return err
	}
	return c.Exec(ctx, env.namespace, pod, command, opts)
}

// portPair is one LOCAL:REMOTE of port-forward.
type portPair struct{ local, remote uint16 }

func parsePorts(specs []string) ([]portPair, error) {
	if len(specs) == 0 {
		return nil, &usageError{"at least one port is required"}
	}
	var pairs []portPair
	for _, s := range specs {
		local, remote, found := strings.Cut(s, ":")
		if !found {
			local, remote = s, s // "8080": the same port on both ends
		}
		r, err := strconv.ParseUint(remote, 10, 16)
		if err != nil || r == 0 {
			return nil, &usageError{fmt.Sprintf("invalid port %q", s)}
		}
		l := uint64(0)
		if local != "" {
			if l, err = strconv.ParseUint(local, 10, 16); err != nil {
				return nil, &usageError{fmt.Sprintf("invalid port %q", s)}
			}
		}
		pairs = append(pairs, portPair{uint16(l), uint16(r)})
	}
	return pairs, nil
}

func portForward(ctx context.Context, env *podEnv, args []string) error {
	fs := flag.NewFlagSet("port-forward", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	address := fs.String("address", "127.0.0.1", "")
	pod, specs, err := parsePod(fs, args)
	if err != nil {
		return err
	}
	pairs, err := parsePorts(specs)
	if err != nil {
		return err
	}
	f, err := portforward.New(env.cfg)
	if err != nil {
		return err
	}
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for _, pp := range pairs {
		l, err := net.Listen("tcp", net.JoinHostPort(*address, strconv.Itoa(int(pp.local))))
		if err != nil {
			return err
		}
		listeners = append(listeners, l)
		fmt.Fprintf(env.stdout, "Forwarding from %s -> %d\n", l.Addr(), pp.remote)
	}
	return serveAll(ctx, env, f, pod, pairs, listeners)
}

// serveAll forwards each listener's connections until ctx ends or one
// listener fails.
func serveAll(ctx context.Context, env *podEnv, f *portforward.Forwarder, pod string, pairs []portPair, listeners []net.Listener) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var mu sync.Mutex // serializes the lines on stderr
	var wg sync.WaitGroup
	for i, l := range listeners {
		wg.Go(func() {
			report := func(err error) {
				mu.Lock()
				defer mu.Unlock()
				fmt.Fprintf(env.stderr, "kget: port %d: %v\n", pairs[i].remote, err)
			}
			if err := f.Serve(ctx, l, env.namespace, pod, pairs[i].remote, report); err != nil {
				cancel(err)
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
