package podexec

// Tests against fakeKubelet, an httptest server that speaks the channel
// protocols as the API server does, for what kwok cannot show: exit
// codes, v5's close of stdin, a cut stream, hostile statuses.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/k8sapi/internal/websocket"
)

// fakeConn is the server side of one fake stream.
type fakeConn struct {
	t   *testing.T
	brw *bufio.ReadWriter
}

// send writes one unmasked binary message: stream byte and data.
func (c *fakeConn) send(stream byte, data string) {
	p := append([]byte{stream}, data...)
	h := []byte{0x82}
	if len(p) < 126 {
		h = append(h, byte(len(p)))
	} else {
		h = append(h, 126)
		h = binary.BigEndian.AppendUint16(h, uint16(len(p)))
	}
	c.brw.Write(append(h, p...))
	c.brw.Flush()
}

// recv reads one masked client message and returns it unmasked.
func (c *fakeConn) recv() ([]byte, error) {
	var h [2]byte
	if _, err := io.ReadFull(c.brw, h[:]); err != nil {
		return nil, err
	}
	n := int(h[1] & 0x7F)
	if n == 126 {
		var l [2]byte
		io.ReadFull(c.brw, l[:])
		n = int(binary.BigEndian.Uint16(l[:]))
	}
	var key [4]byte
	io.ReadFull(c.brw, key[:])
	p := make([]byte, n)
	if _, err := io.ReadFull(c.brw, p); err != nil {
		return nil, err
	}
	for i := range p {
		p[i] ^= key[i%4]
	}
	return p, nil
}

// fakeKubelet answers each upgrade with the first offered protocol that
// it speaks, then runs script.
func fakeKubelet(t *testing.T, speaks []string, script func(c *fakeConn, proto string, r *http.Request)) *Client {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var proto string
		for _, p := range strings.Split(r.Header.Get("Sec-WebSocket-Protocol"), ",") {
			if p = strings.TrimSpace(p); proto == "" && strings.Contains(strings.Join(speaks, " "), p) {
				proto = p
			}
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Protocol: " + proto +
			"\r\nSec-WebSocket-Accept: " + websocket.AcceptKey(r.Header.Get("Sec-WebSocket-Key")) + "\r\n\r\n")
		brw.Flush()
		script(&fakeConn{t: t, brw: brw}, proto, r)
	}))
	t.Cleanup(srv.Close)
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
	c := fakeKubelet(t, []string{ProtocolV5}, func(c *fakeConn, proto string, r *http.Request) {
		if q := r.URL.Query(); strings.Join(q["command"], " ") != "sh -c exit 3" || q.Get("stdout") != "true" || q.Get("stderr") != "" {
			t.Errorf("query %v", q)
		}
		c.send(streamStdout, "")
		c.send(streamStdout, "some output")
		c.send(streamError, exit3)
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
			c := fakeKubelet(t, []string{proto}, func(c *fakeConn, p string, r *http.Request) {
				if p != proto {
					t.Errorf("protocol %q, want %q", p, proto)
				}
				msg, _ := c.recv()
				got <- msg
				if proto == ProtocolV5 {
					msg, _ = c.recv()
					got <- msg
				}
				c.send(streamError, `{"status":"Success"}`)
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
	c := fakeKubelet(t, []string{ProtocolV5}, func(c *fakeConn, proto string, r *http.Request) {
		c.send(streamStdout, "partial")
		// The handler returns: the connection closes with no status.
	})
	err := c.Exec(fakeContext(t), "ns", "p", []string{"x"}, Options{Stdout: io.Discard})
	if !errors.Is(err, ErrNoStatus) {
		t.Fatalf("err %v, want ErrNoStatus", err)
	}
}

// A status that never ends, or a long message, stays bounded.
func TestHostileStatus(t *testing.T) {
	c := fakeKubelet(t, []string{ProtocolV5}, func(c *fakeConn, proto string, r *http.Request) {
		for range errorLimit/60000 + 1 {
			c.send(streamError, strings.Repeat("x", 60000))
		}
	})
	err := c.Exec(fakeContext(t), "ns", "p", []string{"x"}, Options{Stdout: io.Discard})
	if err == nil || len(err.Error()) > 2*messageLimit {
		t.Fatalf("err of %d bytes: %.200v", len(err.Error()), err)
	}

	long := `{"status":"Failure","reason":"InternalError","message":"` + strings.Repeat("y", 10000) + `"}`
	c = fakeKubelet(t, []string{ProtocolV5}, func(c *fakeConn, proto string, r *http.Request) {
		c.send(streamError, long)
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
	c := fakeKubelet(t, []string{ProtocolV5}, func(c *fakeConn, proto string, r *http.Request) {
		c.recv() // stdin
		c.send(streamError, `{"status":"Success"}`)
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
