package podexec

// Tests against fakeKubelet, an httptest server that speaks the channel
// protocols as the API server does, for what kwok cannot show: exit
// codes, v5's close of stdin, a cut stream, hostile statuses.

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/k8sapi/internal/websocket/wstest"
)

// fakeKubelet answers each upgrade with the first offered protocol that
// it speaks, then runs script.
func fakeKubelet(t *testing.T, speaks []string, script func(c *wstest.Conn, proto string, r *http.Request)) *Client {
	srv := wstest.Server(t, speaks, script)
	c, err := New(&k8sapi.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const exit3 = `{"metadata":{},"status":"Failure","message":"command terminated with non-zero exit code: exit status 3","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"3"}]}}`

func fakeContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestExitCode(t *testing.T) {
	c := fakeKubelet(t, []string{ProtocolV5}, func(c *wstest.Conn, proto string, r *http.Request) {
		if q := r.URL.Query(); strings.Join(q["command"], " ") != "sh -c exit 3" || q.Get("stdout") != "true" || q.Get("stderr") != "" {
			t.Errorf("query %v", q)
		}
		c.Send(streamStdout, "")
		c.Send(streamStdout, "some output")
		c.Send(streamError, exit3)
	})
	var out bytes.Buffer
	err := c.Exec(fakeContext(t), "ns", "p", []string{"sh", "-c", "exit 3"}, Options{Stdout: &out})
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != 3 {
		t.Fatalf("err %v, want ExitError with code 3", err)
	}
	if out.String() != "some output" {
		t.Fatalf("stdout %q", out.String())
	}
}

// v5 closes the command's stdin at the end of Stdin; a v4 server gets
// the data alone.
func TestStdinClose(t *testing.T) {
	for _, proto := range []string{ProtocolV5, ProtocolV4} {
		t.Run(proto, func(t *testing.T) {
			got := make(chan []byte, 4)
			c := fakeKubelet(t, []string{proto}, func(c *wstest.Conn, p string, r *http.Request) {
				if p != proto {
					t.Errorf("protocol %q, want %q", p, proto)
				}
				msg, _ := c.Recv()
				got <- msg
				if proto == ProtocolV5 {
					msg, _ = c.Recv()
					got <- msg
				}
				c.Send(streamError, `{"status":"Success"}`)
			})
			err := c.Exec(fakeContext(t), "ns", "p", []string{"cat"}, Options{Stdin: strings.NewReader("abc"), Stdout: io.Discard})
			if err != nil {
				t.Fatal(err)
			}
			if m := <-got; string(m) != "\x00abc" {
				t.Fatalf("stdin message %q", m)
			}
			if proto == ProtocolV5 {
				if m := <-got; !bytes.Equal(m, []byte{streamClose, streamStdin}) {
					t.Fatalf("close message %q, want 255 0", m)
				}
			}
		})
	}
}

func TestCutStream(t *testing.T) {
	c := fakeKubelet(t, []string{ProtocolV5}, func(c *wstest.Conn, proto string, r *http.Request) {
		c.Send(streamStdout, "partial")
		// The handler returns: the connection closes with no status.
	})
	err := c.Exec(fakeContext(t), "ns", "p", []string{"x"}, Options{Stdout: io.Discard})
	if !errors.Is(err, ErrNoStatus) {
		t.Fatalf("err %v, want ErrNoStatus", err)
	}
}

// A status that never ends, or a long message, stays bounded.
func TestHostileStatus(t *testing.T) {
	c := fakeKubelet(t, []string{ProtocolV5}, func(c *wstest.Conn, proto string, r *http.Request) {
		for range errorLimit/60000 + 1 {
			c.Send(streamError, strings.Repeat("x", 60000))
		}
	})
	err := c.Exec(fakeContext(t), "ns", "p", []string{"x"}, Options{Stdout: io.Discard})
	if err == nil || len(err.Error()) > 2*messageLimit {
		t.Fatalf("err of %d bytes: %.200v", len(err.Error()), err)
	}

	long := `{"status":"Failure","reason":"InternalError","message":"` + strings.Repeat("y", 10000) + `"}`
	c = fakeKubelet(t, []string{ProtocolV5}, func(c *wstest.Conn, proto string, r *http.Request) {
		c.Send(streamError, long)
	})
	err = c.Exec(fakeContext(t), "ns", "p", []string{"x"}, Options{Stdout: io.Discard})
	var se *StatusError
	if !errors.As(err, &se) || len(err.Error()) > 2*messageLimit {
		t.Fatalf("err of %d bytes: %.200v", len(err.Error()), err)
	}
}

func TestInvalidOptions(t *testing.T) {
	c, err := New(&k8sapi.Config{Host: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for name, err := range map[string]error{
		"no command": c.Exec(ctx, "ns", "p", nil, Options{Stdout: io.Discard}),
		"no stream":  c.Exec(ctx, "ns", "p", []string{"x"}, Options{}),
		"no pod":     c.Attach(ctx, "ns", "", Options{Stdout: io.Discard}),
		"dot-dot":    c.Attach(ctx, "..", "p", Options{Stdout: io.Discard}),
	} {
		if !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%s: %v, want ErrInvalidOptions", name, err)
		}
	}
}

// After Exec returns, its stdin and resize goroutines are gone.
func TestNoGoroutineLeft(t *testing.T) {
	c := fakeKubelet(t, []string{ProtocolV5}, func(c *wstest.Conn, proto string, r *http.Request) {
		c.Recv() // stdin
		c.Send(streamError, `{"status":"Success"}`)
	})
	ctx := fakeContext(t)
	before := runtime.NumGoroutine()
	resize := make(chan TerminalSize) // never closed: the session must stop reading it
	err := c.Exec(ctx, "ns", "p", []string{"x"}, Options{Stdin: strings.NewReader("in"), Stdout: io.Discard, TTY: true, Resize: resize})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		runtime.Gosched()
	}
}

// The query names the container and only the streams asked for, and a
// message of one byte of output is output.
func TestQueryAndShortOutput(t *testing.T) {
	c := fakeKubelet(t, []string{ProtocolV5}, func(c *wstest.Conn, proto string, r *http.Request) {
		if q := r.URL.Query(); q.Get("container") != "app" || q.Has("stdin") || q.Get("stdout") != "true" {
			t.Errorf("query %v", q)
		}
		c.Send(streamStdout, "x")
		c.Send(streamError, `{"status":"Success"}`)
	})
	var out bytes.Buffer
	if err := c.Exec(fakeContext(t), "ns", "p", []string{"x"}, Options{Container: "app", Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	if out.String() != "x" {
		t.Fatalf("stdout %q, want x", out.String())
	}
	c = fakeKubelet(t, []string{ProtocolV5}, func(c *wstest.Conn, proto string, r *http.Request) {
		if q := r.URL.Query(); q.Has("container") {
			t.Errorf("query %v names a container", q)
		}
		c.Send(streamError, `{"status":"Success"}`)
	})
	if err := c.Attach(fakeContext(t), "ns", "p", Options{Stdout: io.Discard}); err != nil {
		t.Fatal(err)
	}
}

// Stdin that takes several reads is sent whole before its close.
func TestStdinInPieces(t *testing.T) {
	got := make(chan string, 1)
	c := fakeKubelet(t, []string{ProtocolV5}, func(c *wstest.Conn, proto string, r *http.Request) {
		var in []byte
		for {
			msg, err := c.Recv()
			if err != nil || bytes.Equal(msg, []byte{streamClose, streamStdin}) {
				break
			}
			in = append(in, msg[1:]...)
		}
		got <- string(in)
		c.Send(streamError, `{"status":"Success"}`)
	})
	err := c.Exec(fakeContext(t), "ns", "p", []string{"cat"}, Options{Stdin: iotest.OneByteReader(strings.NewReader("abc")), Stdout: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if in := <-got; in != "abc" {
		t.Fatalf("stdin %q, want abc", in)
	}
}

// Each terminal size is sent on the resize stream.
func TestResize(t *testing.T) {
	resize := make(chan TerminalSize, 2)
	resize <- TerminalSize{Width: 80, Height: 24}
	resize <- TerminalSize{Width: 100, Height: 30}
	c := fakeKubelet(t, []string{ProtocolV5}, func(c *wstest.Conn, proto string, r *http.Request) {
		for _, want := range []string{`{"Width":80,"Height":24}`, `{"Width":100,"Height":30}`} {
			if msg, err := c.Recv(); err != nil || string(msg) != "\x04"+want {
				t.Errorf("resize %q, %v; want %s", msg, err, want)
			}
		}
		c.Send(streamError, `{"status":"Success"}`)
	})
	// The resize never comes on a bug: a short wait, not fakeContext's.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := c.Exec(ctx, "ns", "p", []string{"sh"}, Options{Stdout: io.Discard, TTY: true, Resize: resize}); err != nil {
		t.Fatal(err)
	}
}

// The error channel takes a Status of exactly its cap, split in two
// messages, and refuses one byte more; a message of exactly 1 KiB is
// quoted whole.
func TestStatusEdges(t *testing.T) {
	status := func(n int) string {
		s := `{"status":"Success"}`
		return s + strings.Repeat(" ", n-len(s))
	}
	exec := func(st string) error {
		c := fakeKubelet(t, []string{ProtocolV5}, func(c *wstest.Conn, proto string, r *http.Request) {
			c.Send(streamError, st[:len(st)/2])
			c.Send(streamError, st[len(st)/2:])
		})
		return c.Exec(fakeContext(t), "ns", "p", []string{"x"}, Options{Stdout: io.Discard})
	}
	if err := exec(status(errorLimit)); err != nil {
		t.Fatalf("status of %d bytes: %v", errorLimit, err)
	}
	if err := exec(status(errorLimit + 1)); err == nil || !strings.Contains(err.Error(), "over") {
		t.Fatalf("status of %d bytes: %v, want a refusal", errorLimit+1, err)
	}
	msg := strings.Repeat("y", messageLimit)
	err := exec(`{"status":"Failure","reason":"InternalError","message":"` + msg + `"}`)
	if se := (*StatusError)(nil); !errors.As(err, &se) || se.Status.Message != msg {
		t.Fatalf("err %.100v, want a StatusError with the message whole", err)
	}
}
