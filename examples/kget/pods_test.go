package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi/podexec"
	"github.com/zerodep-k8s/widget-operator/testenv/controlplane"
	"github.com/zerodep-k8s/widget-operator/testenv/logbuf"
)

// kubeletPlane is a full one: kwok serves its pods' logs, exec and
// port-forward.
var kubeletPlane controlplane.Shared

func TestKgetPods(t *testing.T) {
	p := kubeletPlane.Get(t)
	ns := p.TestNamespace(t)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	if err := p.RunPod(ctx, ns, "web"); err != nil {
		t.Fatal(err)
	}
	if err := p.ResetPodLog(); err != nil {
		t.Fatal(err)
	}
	if err := p.AppendPodLog(time.Now(), "stdout", "serving on :8080"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args   []string
		stdin  string
		code   int
		stdout string
		stderr string // a part of it
	}{
		{args: []string{"logs", "web"}, stdout: "serving on :8080\n"},
		{args: []string{"logs", "--tail=1", "pod/web"}, stdout: "serving on :8080\n"},
		{args: []string{"exec", "web", "--", "sh", "-c", "echo out; echo err >&2"}, stdout: "out\n", stderr: "err\n"},
		{args: []string{"exec", "-i", "web", "--", "head", "-n", "1"}, stdin: "typed line\n", stdout: "typed line\n"},
		// kwok v0.8.0 loses the exit code (see testenv/controlplane):
		// as kubectl, kget exits 1 there, with the server's message.
		{args: []string{"exec", "web", "--", "sh", "-c", "exit 3"}, code: 1, stderr: "exit status 3"},
		{args: []string{"exec", "nope", "--", "true"}, code: 1, stderr: "404 NotFound"},
		{args: []string{"exec", "web"}, code: 2, stderr: "a command is required"},
		{args: []string{"logs"}, code: 2, stderr: "a pod name is required"},
		{args: []string{"port-forward", "web", "x:7"}, code: 2, stderr: `invalid port "x:7"`},
	} {
		var stdout, stderr strings.Builder
		args := append([]string{"-kubeconfig", p.Kubeconfig(), "-n", ns}, tc.args...)
		code := runStdin(ctx, args, strings.NewReader(tc.stdin), &stdout, &stderr)
		if code != tc.code || stdout.String() != tc.stdout || !strings.Contains(stderr.String(), tc.stderr) {
			t.Errorf("kget %q: exit %d\nstdout %q\nstderr %q\nwant exit %d, stdout %q, stderr with %q",
				tc.args, code, stdout.String(), stderr.String(), tc.code, tc.stdout, tc.stderr)
		}
	}

	// logs -f: lines written after the call arrive, until interrupted.
	t.Run("logs -f", func(t *testing.T) {
		fctx, stop := context.WithCancel(ctx)
		var out, errOut logbuf.Buffer
		done := make(chan int, 1)
		go func() {
			done <- runStdin(fctx, []string{"-kubeconfig", p.Kubeconfig(), "-n", ns, "logs", "-f", "--tail", "0", "web"}, nil, &out, &errOut)
		}()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for !strings.Contains(out.String(), "new request\n") {
			select {
			case code := <-done:
				t.Fatalf("logs -f exited %d; stderr %q", code, errOut.String())
			case <-ctx.Done():
				t.Fatal("no followed line")
			case <-tick.C:
				p.AppendPodLog(time.Now(), "stdout", "new request")
			}
		}
		stop()
		if code := <-done; code != 0 {
			t.Fatalf("logs -f exited %d after the interrupt; stderr %q", code, errOut.String())
		}
	})

	t.Run("port-forward", func(t *testing.T) {
		fctx, stop := context.WithCancel(ctx)
		pr, pw := io.Pipe()
		var errOut logbuf.Buffer
		done := make(chan int, 1)
		go func() {
			done <- runStdin(fctx, []string{"-kubeconfig", p.Kubeconfig(), "-n", ns, "port-forward", "web", ":7"}, nil, pw, &errOut)
			pw.Close()
		}()
		line, err := bufio.NewReader(pr).ReadString('\n')
		if err != nil {
			t.Fatalf("port-forward said %q, %v; stderr %q", line, err, errOut.String())
		}
		go io.Copy(io.Discard, pr)
		// "Forwarding from 127.0.0.1:PORT -> 7"
		f := strings.Fields(line)
		if len(f) != 5 || f[0] != "Forwarding" || f[4] != "7" {
			t.Fatalf("port-forward said %q", line)
		}
		c, err := net.Dial("tcp", f[2])
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte("ping\n"))
		if got, err := bufio.NewReader(c).ReadString('\n'); got != "ping\n" {
			t.Fatalf("echo %q, %v", got, err)
		}
		c.Close()
		stop()
		if code := <-done; code != 0 {
			t.Fatalf("port-forward exited %d; stderr %q", code, errOut.String())
		}
	})
}

// kget exits with the command's exit code; a bad command line is 2.
func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code int
	}{
		{nil, 0},
		{fmt.Errorf("exec: %w", &podexec.ExitError{Code: 3}), 3},
		{&usageError{"bad"}, 2},
		{errors.New("refused"), 1},
	} {
		if got := exitCode(tc.err, io.Discard); got != tc.code {
			t.Errorf("exitCode(%v) = %d, want %d", tc.err, got, tc.code)
		}
	}
}
