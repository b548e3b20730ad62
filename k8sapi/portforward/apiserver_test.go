package portforward

// Tests against a real kube-apiserver and kwok's kubelet endpoint, started
// by testenv/controlplane: port controlplane.EchoPort of every pod reaches
// the plane's TCP echo server; any other port has no forward.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/testenv/controlplane"
)

var plane controlplane.Shared

func TestMain(m *testing.M) { os.Exit(plane.Run(m)) }

func runningPod(t testing.TB) (*controlplane.Plane, *Forwarder, string, context.Context) {
	p := plane.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	t.Cleanup(cancel)
	ns := p.TestNamespace(t)
	if err := p.RunPod(ctx, ns, "p"); err != nil {
		t.Fatal(err)
	}
	cert, key := p.AdminCertificate()
	f, err := New(&k8sapi.Config{Host: p.Host(), CAData: p.CAData(), CertData: cert, KeyData: key})
	if err != nil {
		t.Fatal(err)
	}
	return p, f, ns, ctx
}

// echoOnce writes msg on c and reads it back.
func echoOnce(c net.Conn, msg []byte) error {
	errc := make(chan error, 1)
	go func() {
		_, err := c.Write(msg)
		errc <- err
	}()
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		return err
	}
	if err := <-errc; err != nil {
		return err
	}
	if !bytes.Equal(got, msg) {
		return fmt.Errorf("echo differs")
	}
	return nil
}

func TestAPIServerDialTwoAtOnce(t *testing.T) {
	_, f, ns, ctx := runningPod(t)
	var conns []net.Conn
	for range 2 {
		c, err := f.Dial(ctx, ns, "p", controlplane.EchoPort)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() {
			msg := bytes.Repeat([]byte{byte('a' + i)}, 200<<10) // several messages each way
			if err := echoOnce(c, msg); err != nil {
				t.Errorf("connection %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if got := conns[0].RemoteAddr().String(); got != ns+"/p:7" {
		t.Fatalf("RemoteAddr %s", got)
	}
}

// The server's error for a port ends the connection that asked for it.
func TestAPIServerNoSuchPort(t *testing.T) {
	_, f, ns, ctx := runningPod(t)
	c, err := f.Dial(ctx, ns, "p", 8)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Read(make([]byte, 10))
	var pe *Error
	if !errors.As(err, &pe) || pe.Port != 8 || !strings.Contains(pe.Message, "8") {
		t.Fatalf("read: %v, want the server's *Error for port 8", err)
	}
	if _, err := f.Dial(ctx, ns, "missing", 7); !k8sapi.IsNotFound(err) {
		t.Fatalf("missing pod: %v, want NotFound", err)
	}
}

// Serve forwards each accepted connection, two at once, and reports the
// error of one to a port with no forward.
func TestAPIServerServe(t *testing.T) {
	_, f, ns, ctx := runningPod(t)
	ctx, cancel := context.WithCancel(ctx)
	for _, port := range []uint16{controlplane.EchoPort, 8} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		reports := make(chan error, 4)
		served := make(chan error, 1)
		go func() { served <- f.Serve(ctx, l, ns, "p", port, func(err error) { reports <- err }) }()
		if port == 8 {
			c, err := net.Dial("tcp", l.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Read(make([]byte, 1)); err != io.EOF {
				t.Fatalf("local read for port 8: %v, want EOF", err)
			}
			c.Close()
			var pe *Error
			if err := <-reports; !errors.As(err, &pe) {
				t.Fatalf("report %v, want *Error", err)
			}
			cancel()
			if err := <-served; err != nil {
				t.Fatalf("Serve: %v", err)
			}
			continue
		}
		var wg sync.WaitGroup
		for i := range 2 {
			wg.Go(func() {
				c, err := net.Dial("tcp", l.Addr().String())
				if err != nil {
					t.Error(err)
					return
				}
				defer c.Close()
				if err := echoOnce(c, bytes.Repeat([]byte{byte('x' + i)}, 100<<10)); err != nil {
					t.Errorf("connection %d: %v", i, err)
				}
			})
		}
		wg.Wait()
		// Serve is still running: new ctx for the next port.
		cancel()
		if err := <-served; err != nil {
			t.Fatalf("Serve: %v", err)
		}
		ctx, cancel = context.WithCancel(t.Context())
	}
	cancel()
}

// A WebSocket port-forward needs "get" and "create" on pods/portforward.
func TestAPIServerRBAC(t *testing.T) {
	p, _, ns, ctx := runningPod(t)
	for _, verbs := range [][]string{{"get"}, {"create"}, {"get", "create"}} {
		token, err := p.GrantedToken(ctx, ns, "forward-"+strings.Join(verbs, "-"), []string{"pods/portforward"}, verbs)
		if err != nil {
			t.Fatal(err)
		}
		f, err := New(&k8sapi.Config{Host: p.Host(), CAData: p.CAData(), BearerToken: token})
		if err != nil {
			t.Fatal(err)
		}
		c, err := f.Dial(ctx, ns, "p", controlplane.EchoPort)
		if err == nil {
			err = echoOnce(c, []byte("allowed"))
			c.Close()
		}
		if len(verbs) == 1 && !k8sapi.IsForbidden(err) {
			t.Errorf("with %s on pods/portforward alone: %v, want Forbidden", verbs[0], err)
		}
		if len(verbs) == 2 && err != nil {
			t.Errorf("with get and create: %v", err)
		}
	}
}
