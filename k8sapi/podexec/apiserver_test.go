package podexec

// Tests against a real kube-apiserver and kwok's kubelet endpoint, started
// by testenv/controlplane. kwok runs an exec'd command on this machine.

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/testenv/controlplane"
	"github.com/zerodep-k8s/widget-operator/testenv/logbuf"
)

var plane controlplane.Shared

func TestMain(m *testing.M) { os.Exit(plane.Run(m)) }

// runningPod returns a client and the namespace of a Running pod "p".
func runningPod(t *testing.T) (*controlplane.Plane, *Client, string, context.Context) {
	p := plane.Get(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	ns := p.TestNamespace(t)
	if err := p.RunPod(ctx, ns, "p"); err != nil {
		t.Fatal(err)
	}
	cert, key := p.AdminCertificate()
	c, err := New(&k8sapi.Config{Host: p.Host(), CAData: p.CAData(), CertData: cert, KeyData: key})
	if err != nil {
		t.Fatal(err)
	}
	return p, c, ns, ctx
}

func TestAPIServerExec(t *testing.T) {
	_, c, ns, ctx := runningPod(t)
	for _, proto := range []string{ProtocolV5, ProtocolV4} {
		t.Run(proto, func(t *testing.T) {
			c.protocols = []string{proto}
			var stdout, stderr bytes.Buffer
			err := c.Exec(ctx, ns, "p", []string{"sh", "-c", "echo out; echo err >&2; exit 3"}, Options{Stdout: &stdout, Stderr: &stderr})
			if stdout.String() != "out\n" || stderr.String() != "err\n" {
				t.Fatalf("stdout %q, stderr %q", stdout.String(), stderr.String())
			}
			// kwok v0.8.0 wraps the command's exit error, so that its
			// streaming server reports an InternalError, not the
			// NonZeroExitCode a kubelet sends (fake_test.go covers that).
			var se *StatusError
			if !errors.As(err, &se) || !strings.Contains(se.Status.Message, "exit status 3") {
				t.Fatalf("err %v, want a StatusError saying exit status 3", err)
			}
			if err := c.Exec(ctx, ns, "p", []string{"true"}, Options{Stdout: &stdout}); err != nil {
				t.Fatalf("true: %v", err)
			}
		})
	}
	c.protocols = nil

	err := c.Exec(ctx, ns, "missing", []string{"true"}, Options{Stdout: io.Discard})
	if !k8sapi.IsNotFound(err) {
		t.Fatalf("missing pod: %v, want NotFound", err)
	}
}

func TestAPIServerExecStdin(t *testing.T) {
	_, c, ns, ctx := runningPod(t)
	var stdout bytes.Buffer
	err := c.Exec(ctx, ns, "p", []string{"head", "-n", "1"}, Options{Stdin: strings.NewReader("hello through stdin\n"), Stdout: &stdout})
	if err != nil || stdout.String() != "hello through stdin\n" {
		t.Fatalf("stdout %q, err %v", stdout.String(), err)
	}
}

// The command sees the terminal's size change. The resize and the lines
// of stdin reach kwok on different streams, so stdin asks again until the
// new size shows.
func TestAPIServerExecTTYResize(t *testing.T) {
	_, c, ns, ctx := runningPod(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stdinR, stdinW := io.Pipe()
	defer stdinW.Close()
	resize := make(chan TerminalSize, 1)
	resize <- TerminalSize{Width: 123, Height: 45}
	var out logbuf.Buffer
	done := make(chan error, 1)
	go func() {
		done <- c.Exec(ctx, ns, "p", []string{"sh", "-c", "while read x; do stty size; done"},
			Options{Stdin: stdinR, Stdout: &out, TTY: true, Resize: resize})
	}()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !strings.Contains(out.String(), "45 123") {
		select {
		case err := <-done:
			t.Fatalf("exec ended: %v; output %q", err, out.String())
		case <-ctx.Done():
			t.Fatalf("no new size seen; output %q", out.String())
		case <-tick.C:
			stdinW.Write([]byte("\n"))
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("exec after cancel: %v", err)
	}
}

func TestAPIServerExecContextCancels(t *testing.T) {
	_, c, ns, ctx := runningPod(t)
	ctx, cancel := context.WithCancel(ctx)
	var out logbuf.Buffer
	done := make(chan error, 1)
	go func() {
		done <- c.Exec(ctx, ns, "p", []string{"sh", "-c", "echo started; exec sleep 60"}, Options{Stdout: &out})
	}()
	for !strings.Contains(out.String(), "started") {
		select {
		case err := <-done:
			t.Fatalf("exec ended early: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v, want context.Canceled", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("exec still running after cancel")
	}
}

// Attach follows the container's output: kwok attaches to the Pod log.
func TestAPIServerAttach(t *testing.T) {
	p, c, ns, ctx := runningPod(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var out logbuf.Buffer
	done := make(chan error, 1)
	go func() { done <- c.Attach(ctx, ns, "p", Options{Stdout: &out}) }()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !strings.Contains(out.String(), "attached line") {
		select {
		case err := <-done:
			t.Fatalf("attach ended: %v", err)
		case <-tick.C:
			if err := p.AppendPodLog(time.Now(), "stdout", "attached line"); err != nil {
				t.Fatal(err)
			}
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("attach after cancel: %v", err)
	}
}

// A WebSocket exec or attach is a GET, which RBAC checks as "get" on the
// subresource, and the API server checks "create" too: each alone is
// refused.
func TestAPIServerExecRBAC(t *testing.T) {
	p, _, ns, ctx := runningPod(t)
	for _, sub := range []string{"exec", "attach"} {
		for _, verbs := range [][]string{{"get"}, {"create"}, {"get", "create"}} {
			name := sub + "-" + strings.Join(verbs, "-")
			token, err := p.GrantedToken(ctx, ns, name, []string{"pods/" + sub}, verbs)
			if err != nil {
				t.Fatal(err)
			}
			c, err := New(&k8sapi.Config{Host: p.Host(), CAData: p.CAData(), BearerToken: token})
			if err != nil {
				t.Fatal(err)
			}
			if sub == "exec" {
				err = c.Exec(ctx, ns, "p", []string{"true"}, Options{Stdout: io.Discard})
			} else {
				// Attach follows the Pod log until the context ends.
				actx, cancel := context.WithTimeout(ctx, time.Second)
				err = c.Attach(actx, ns, "p", Options{Stdout: io.Discard})
				cancel()
				if errors.Is(err, context.DeadlineExceeded) {
					err = nil
				}
			}
			if len(verbs) == 1 && !k8sapi.IsForbidden(err) {
				t.Errorf("with %s on pods/%s alone: %v, want Forbidden", verbs[0], sub, err)
			}
			if len(verbs) == 2 && err != nil {
				t.Errorf("with get and create on pods/%s: %v", sub, err)
			}
		}
	}
}

// A stream cut mid-way, here by the API server's crash, is an error, not
// a hang. The test has a plane of its own, as it kills the API server.
func TestAPIServerExecCut(t *testing.T) {
	p := controlplane.StartForTest(t, controlplane.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := p.CreateNamespace(ctx, "cut"); err != nil {
		t.Fatal(err)
	}
	if err := p.RunPod(ctx, "cut", "p"); err != nil {
		t.Fatal(err)
	}
	cert, key := p.AdminCertificate()
	c, err := New(&k8sapi.Config{Host: p.Host(), CAData: p.CAData(), CertData: cert, KeyData: key})
	if err != nil {
		t.Fatal(err)
	}
	var out logbuf.Buffer
	done := make(chan error, 1)
	go func() {
		done <- c.Exec(ctx, "cut", "p", []string{"sh", "-c", "echo started; exec sleep 60"}, Options{Stdout: &out})
	}()
	for !strings.Contains(out.String(), "started") {
		select {
		case err := <-done:
			t.Fatalf("exec ended early: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	p.KillAPIServer()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNoStatus) {
			t.Fatalf("err %v, want ErrNoStatus", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("exec still running after the API server died")
	}
}
