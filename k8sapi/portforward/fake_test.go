package portforward

// Tests against wstest's fake server, which answers as the kubelet's
// WebSocket port-forward does, for what kwok cannot show: bad prefixes,
// long error messages, a cut connection, large writes.

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/k8sapi/internal/websocket/wstest"
)

const port7 = "\x07\x00" // port 7, little-endian

func fakeForwarder(t *testing.T, script func(c *wstest.Conn, proto string, r *http.Request)) *Forwarder {
	srv := wstest.Server(t, []string{Protocol}, script)
	f, err := New(&k8sapi.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func dialFake(t *testing.T, f *Forwarder) (io.ReadWriteCloser, context.Context) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	c, err := f.Dial(ctx, "ns", "p", 7)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, ctx
}

// The port prefix is dropped; data after it, and in later messages,
// arrives in order; writes over 32 KiB go in several messages.
func TestFakeData(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789"), 10000) // 100,000 bytes
	received := make(chan []byte, 1)
	f := fakeForwarder(t, func(c *wstest.Conn, proto string, r *http.Request) {
		if r.URL.Query().Get("ports") != "7" || proto != Protocol {
			t.Errorf("ports %q, protocol %q", r.URL.Query().Get("ports"), proto)
		}
		c.Send(streamData, port7+"hel")
		c.Send(streamError, port7)
		c.Send(streamData, "lo")
		var got []byte
		for len(got) < len(big) {
			m, err := c.Recv()
			if err != nil || m[0] != streamData || len(m) > 1+writeChunk {
				t.Errorf("message of %d bytes, %v", len(m), err)
				break
			}
			got = append(got, m[1:]...)
		}
		received <- got
		c.Close()
	})
	c, _ := dialFake(t, f)
	buf := make([]byte, 5)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("read %q, %v", buf, err)
	}
	if n, err := c.Write(big); n != len(big) || err != nil {
		t.Fatalf("write %d, %v", n, err)
	}
	if got := <-received; !bytes.Equal(got, big) {
		t.Fatalf("server got %d bytes, want %d", len(got), len(big))
	}
	// The server hangs up: the end of the data.
	if _, err := c.Read(buf); err != io.EOF {
		t.Fatalf("read at the end: %v, want EOF", err)
	}
}

func TestFakeErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script func(c *wstest.Conn)
		check  func(error) bool
	}{
		{"wrong port prefix", func(c *wstest.Conn) { c.Send(streamData, "\x08\x00data") },
			func(err error) bool { return err != nil && strings.Contains(err.Error(), "did not start with port 7") }},
		{"long error message", func(c *wstest.Conn) {
			c.Send(streamError, port7+strings.Repeat("e", 60000))
			c.Send(streamError, strings.Repeat("f", 60000))
		}, func(err error) bool {
			var pe *Error
			return errors.As(err, &pe) && len(pe.Message) <= errorLimit && strings.HasPrefix(pe.Message, "eee")
		}},
		{"cut without a close frame", func(c *wstest.Conn) { c.Send(streamData, port7) },
			func(err error) bool { return errors.Is(err, io.ErrUnexpectedEOF) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fakeForwarder(t, func(c *wstest.Conn, proto string, r *http.Request) { tc.script(c) })
			c, _ := dialFake(t, f)
			_, err := c.Read(make([]byte, 10))
			if !tc.check(err) {
				t.Fatalf("read: %v", err)
			}
		})
	}
}

func TestInvalidDial(t *testing.T) {
	f, err := New(&k8sapi.Config{Host: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][3]string{{"", "p"}, {"ns", ""}, {"..", "p"}} {
		if _, err := f.Dial(t.Context(), args[0], args[1], 7); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%q: %v, want ErrInvalidOptions", args, err)
		}
	}
	if _, err := f.Dial(t.Context(), "ns", "p", 0); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("port 0: %v", err)
	}
}
