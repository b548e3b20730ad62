package portforward

import (
	"bufio"
	"context"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/zerodep-k8s/widget-operator/testenv/controlplane"
)

// BenchmarkPortForward sends data through a forwarded port to the plane's
// echo server and reads it back, over loopback: local TCP, the forwarder,
// the API server, kwok, the echo server and back. "ours" is Serve;
// "kubectl" is kubectl port-forward on the same plane. MB/s counts the
// bytes sent (each also comes back).
func BenchmarkPortForward(b *testing.B) {
	p, f, ns, ctx := runningPod(b)
	b.Run("ours", func(b *testing.B) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go f.Serve(ctx, l, ns, "p", controlplane.EchoPort, nil)
		benchEcho(b, l.Addr().String())
	})
	b.Run("kubectl", func(b *testing.B) {
		cmd := exec.CommandContext(ctx, p.Binaries().Kubectl, "--kubeconfig", p.Kubeconfig(), "-n", ns,
			"port-forward", "pod/p", "--address", "127.0.0.1", ":"+strconv.Itoa(controlplane.EchoPort))
		out, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		defer func() { cmd.Process.Kill(); cmd.Wait() }()
		// "Forwarding from 127.0.0.1:PORT -> 7"
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil {
			b.Fatal(err)
		}
		f := strings.Fields(line)
		if len(f) < 3 {
			b.Fatalf("kubectl said %q", line)
		}
		go io.Copy(io.Discard, out)
		benchEcho(b, f[2])
	})
}

func benchEcho(b *testing.B, addr string) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	const chunk = 1 << 20
	buf := make([]byte, chunk)
	b.SetBytes(chunk)
	b.ResetTimer()
	errc := make(chan error, 1)
	go func() {
		var err error
		for i := 0; i < b.N && err == nil; i++ {
			_, err = c.Write(buf)
		}
		errc <- err
	}()
	got := make([]byte, chunk)
	for range b.N {
		if _, err := io.ReadFull(c, got); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
}
