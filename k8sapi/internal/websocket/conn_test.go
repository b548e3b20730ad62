package websocket

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// The frames of RFC 6455 section 5.7, byte for byte.
var (
	rfcText        = []byte{0x81, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f}
	rfcMaskedText  = []byte{0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58}
	rfcFragment1   = []byte{0x01, 0x03, 0x48, 0x65, 0x6c}
	rfcFragment2   = []byte{0x80, 0x02, 0x6c, 0x6f}
	rfcPing        = []byte{0x89, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f}
	rfcMaskedPong  = []byte{0x8a, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58}
	rfcMaskingKey  = []byte{0x37, 0xfa, 0x21, 0x3d}
	rfcBinary256   = append([]byte{0x82, 0x7E, 0x01, 0x00}, bytes.Repeat([]byte{0xAB}, 256)...)
	rfcBinary64KiB = append([]byte{0x82, 0x7F, 0, 0, 0, 0, 0, 1, 0, 0}, bytes.Repeat([]byte{0xCD}, 65536)...)
)

// fixedKey is a masking-key source that always gives the RFC's key.
type fixedKey struct{}

func (fixedKey) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = rfcMaskingKey[i%4]
	}
	return len(p), nil
}

// pipeConn returns a client Conn over one end of an in-memory pipe and
// the other end, which plays the server.
func pipeConn(t *testing.T, max int) (*Conn, net.Conn) {
	t.Helper()
	client, server := net.Pipe()
	t.Cleanup(func() { client.Close(); server.Close() })
	c := NewConn(client, max)
	c.rand = fixedKey{}
	return c, server
}

// serve writes frames from the server side in the background.
func serve(server net.Conn, frames ...[]byte) {
	go func() {
		for _, f := range frames {
			if _, err := server.Write(f); err != nil {
				return
			}
		}
	}()
}

// readFrame reads one frame the client sent, unmasked; it fails the test
// on an unmasked frame.
func readFrame(t *testing.T, r io.Reader) (op byte, payload []byte) {
	t.Helper()
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		t.Fatalf("read client frame: %v", err)
	}
	if h[1]&0x80 == 0 {
		t.Fatalf("client frame %x not masked", h)
	}
	n := int(h[1] & 0x7F)
	switch n {
	case 126:
		var l [2]byte
		io.ReadFull(r, l[:])
		n = int(binary.BigEndian.Uint16(l[:]))
	case 127:
		var l [8]byte
		io.ReadFull(r, l[:])
		n = int(binary.BigEndian.Uint64(l[:]))
	}
	var key [4]byte
	io.ReadFull(r, key[:])
	payload = make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		t.Fatalf("read client payload: %v", err)
	}
	mask(key, payload)
	return h[0] & 0x0F, payload
}

func TestRFCExamples(t *testing.T) {
	c, server := pipeConn(t, 0)
	serve(server, rfcText, rfcFragment1, rfcPing, rfcFragment2, rfcBinary256, rfcBinary64KiB)

	want := []struct {
		op   byte
		data []byte
	}{
		{OpText, []byte("Hello")},
		{OpText, []byte("Hello")}, // fragmented, with a ping between
		{OpBinary, bytes.Repeat([]byte{0xAB}, 256)},
		{OpBinary, bytes.Repeat([]byte{0xCD}, 65536)},
	}
	pong := make(chan []byte, 1)
	go func() {
		b := make([]byte, len(rfcMaskedPong))
		io.ReadFull(server, b)
		pong <- b
	}()
	for i, w := range want {
		op, p, err := c.ReadMessage()
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if op != w.op || !bytes.Equal(p, w.data) {
			t.Fatalf("message %d: opcode %d, %d bytes %.10q; want %d, %d bytes", i, op, len(p), p, w.op, len(w.data))
		}
	}
	// The answer to the RFC's ping, with the RFC's masking key, is the
	// RFC's masked pong.
	if got := <-pong; !bytes.Equal(got, rfcMaskedPong) {
		t.Fatalf("pong % x, want % x", got, rfcMaskedPong)
	}
}

func TestWriteIsRFCMaskedFrame(t *testing.T) {
	c, server := pipeConn(t, 0)
	go c.WriteMessage(OpText, []byte("Hello"))
	got := make([]byte, len(rfcMaskedText))
	if _, err := io.ReadFull(server, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, rfcMaskedText) {
		t.Fatalf("frame % x, want % x", got, rfcMaskedText)
	}
	// Longer payloads take the 16- and 64-bit lengths, and mask a word at
	// a time as byte by byte.
	for _, n := range []int{125, 126, 65535, 65536} {
		p := bytes.Repeat([]byte("abcdefghi"), n/9+1)[:n]
		go c.WriteMessage(OpBinary, p)
		op, got := readFrame(t, server)
		if op != OpBinary || !bytes.Equal(got, p) {
			t.Fatalf("%d bytes: opcode %d, payload differs", n, op)
		}
	}
	if err := c.WriteMessage(opPing, nil); err == nil {
		t.Fatal("WriteMessage of a ping: no error")
	}
}

// The server's close ends the messages, with its code and reason, and the
// client answers with the same code.
func TestServerClose(t *testing.T) {
	c, server := pipeConn(t, 0)
	serve(server, append([]byte{0x88, 0x0c, 0x03, 0xe9}, "going away"...))
	answer := make(chan []byte, 1)
	go func() {
		_, p := readFrame(t, server)
		answer <- p
	}()
	_, _, err := c.ReadMessage()
	var ce *CloseError
	if !errors.As(err, &ce) || ce.Code != 1001 || ce.Reason != "going away" {
		t.Fatalf("err %v, want CloseError 1001 going away", err)
	}
	if p := <-answer; binary.BigEndian.Uint16(p) != 1001 {
		t.Fatalf("close answer % x, want code 1001", p)
	}
	if err := c.WriteMessage(OpBinary, []byte("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("write after close: %v, want ErrClosed", err)
	}
}

func TestBadFrames(t *testing.T) {
	big := []byte{0x82, 0x7F, 0, 0, 1, 0, 0, 0, 0, 0} // 2^40 bytes
	for _, tc := range []struct {
		name  string
		frame []byte
		want  error
		code  uint16
	}{
		{"masked by the server (RFC 5.7)", rfcMaskedText, ErrProtocol, CloseProtocolError},
		{"reserved bit", []byte{0xC1, 0x00}, ErrProtocol, CloseProtocolError},
		{"unknown opcode", []byte{0x83, 0x00}, ErrProtocol, CloseProtocolError},
		{"fragmented ping", []byte{0x09, 0x00}, ErrProtocol, CloseProtocolError},
		{"ping over 125 bytes", []byte{0x89, 0x7E, 0x00, 0x7E}, ErrProtocol, CloseProtocolError},
		{"continuation first", rfcFragment2, ErrProtocol, CloseProtocolError},
		{"message inside a message", append(append([]byte{}, rfcFragment1...), rfcText...), ErrProtocol, CloseProtocolError},
		{"16-bit length not shortest", []byte{0x82, 0x7E, 0x00, 0x05}, ErrProtocol, CloseProtocolError},
		{"64-bit length top bit", []byte{0x82, 0x7F, 0x80, 0, 0, 0, 0, 0, 0, 0}, ErrProtocol, CloseProtocolError},
		{"64-bit length not shortest", []byte{0x82, 0x7F, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF}, ErrProtocol, CloseProtocolError},
		{"close code 1005", []byte{0x88, 0x02, 0x03, 0xed}, ErrProtocol, CloseProtocolError},
		{"close of one byte", []byte{0x88, 0x01, 0x03}, ErrProtocol, CloseProtocolError},
		{"text not UTF-8", []byte{0x81, 0x02, 0xc3, 0x28}, ErrProtocol, CloseInvalidData},
		{"frame over the cap", big, ErrTooLarge, CloseTooBig},
		{"fragments over the cap", append(append([]byte{0x02, 0x7E, 0x02, 0x58}, make([]byte, 600)...), 0x80, 0x7E, 0x02, 0x58), ErrTooLarge, CloseTooBig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, server := pipeConn(t, 1000)
			serve(server, tc.frame)
			closeFrame := make(chan []byte, 1)
			go func() {
				_, p := readFrame(t, server)
				closeFrame <- p
			}()
			_, _, err := c.ReadMessage()
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			if p := <-closeFrame; len(p) < 2 || binary.BigEndian.Uint16(p) != tc.code {
				t.Fatalf("close frame % x, want code %d", p, tc.code)
			}
		})
	}
}

// A frame that claims more than the cap fails before anything of its size
// is allocated.
func TestCapBoundsAllocation(t *testing.T) {
	frame := []byte{0x82, 0x7F, 0, 0, 0, 0x10, 0, 0, 0, 0} // 64 GiB
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 20 {
		c := NewConn(nopCloser{bytes.NewReader(frame)}, 1<<20)
		if _, _, err := c.ReadMessage(); !errors.Is(err, ErrTooLarge) {
			t.Fatalf("err %v, want ErrTooLarge", err)
		}
	}
	runtime.ReadMemStats(&after)
	// Each Conn's 32 KiB read buffer, and no payload buffer.
	if n := after.TotalAlloc - before.TotalAlloc; n > 20*64<<10 {
		t.Fatalf("%d bytes allocated for 20 refused frames", n)
	}
}

type nopCloser struct{ io.Reader }

func (nopCloser) Write(p []byte) (int, error) { return len(p), nil }
func (nopCloser) Close() error                { return nil }

// The edges of the lengths: 126 bytes, the shortest 16-bit length, and a
// message of exactly the cap, in two fragments. A message no longer than
// the last is read into the same bytes.
func TestLengthEdges(t *testing.T) {
	frame126 := append([]byte{0x82, 0x7E, 0x00, 0x7E}, bytes.Repeat([]byte{1}, 126)...)
	atCap := append(append([]byte{0x02, 0x7E, 0x02, 0x58}, make([]byte, 600)...), 0x80, 0x7E, 0x01, 0x90)
	atCap = append(atCap, make([]byte, 400)...)
	c := NewConn(nopCloser{bytes.NewReader(slices.Concat(frame126, frame126, atCap))}, 1000)
	var first *byte
	for i, want := range []int{126, 126, 1000} {
		_, p, err := c.ReadMessage()
		if err != nil || len(p) != want {
			t.Fatalf("message %d: %d bytes, %v; want %d bytes", i, len(p), err, want)
		}
		switch i {
		case 0:
			first = &p[0]
		case 1:
			if &p[0] != first {
				t.Fatal("a message as long as the last was read into new bytes")
			}
		}
	}
}

// A connection cut in the middle of a frame, even right after a header or
// a length, is io.ErrUnexpectedEOF.
func TestCutAfterHeader(t *testing.T) {
	for _, n := range []int{2, 4} {
		c := NewConn(nopCloser{bytes.NewReader(rfcBinary256[:n])}, 0)
		if _, _, err := c.ReadMessage(); err != io.ErrUnexpectedEOF {
			t.Fatalf("cut after %d bytes: %v, want io.ErrUnexpectedEOF", n, err)
		}
	}
}

// Writes reuse one buffer, but keep none over 64 KiB.
func TestWriteBuffer(t *testing.T) {
	c := NewConn(nopCloser{bytes.NewReader(nil)}, 0)
	if err := c.WriteMessage(OpBinary, []byte("small")); err != nil || cap(c.wbuf) == 0 {
		t.Fatalf("after a small write: %v, buffer of %d bytes kept", err, cap(c.wbuf))
	}
	if err := c.WriteMessage(OpBinary, make([]byte, 100<<10)); err != nil || cap(c.wbuf) > 64<<10 {
		t.Fatalf("after a large write: %v, buffer of %d bytes kept", err, cap(c.wbuf))
	}
}

// A close reason is cut to fit a control frame.
func TestCloseReasonFits(t *testing.T) {
	c, server := pipeConn(t, 0)
	go c.sendClose(CloseNormal, strings.Repeat("r", 200))
	if op, p := readFrame(t, server); op != opClose || len(p) != maxControl {
		t.Fatalf("opcode %d, %d bytes; want a close frame of %d", op, len(p), maxControl)
	}
}

// A connection cut in the middle of a frame is an error, not a hang.
func TestCutMidFrame(t *testing.T) {
	c, server := pipeConn(t, 0)
	go func() {
		server.Write(rfcBinary256[:100])
		server.Close()
	}()
	if _, _, err := c.ReadMessage(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err %v, want io.ErrUnexpectedEOF", err)
	}
}

// Close ends a ReadMessage blocked in another goroutine.
func TestCloseEndsRead(t *testing.T) {
	c, server := pipeConn(t, 0)
	go io.Copy(io.Discard, server)
	done := make(chan error, 1)
	go func() {
		_, _, err := c.ReadMessage()
		done <- err
	}()
	c.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("read after Close: no error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ReadMessage still blocked after Close")
	}
	c.Close() // twice is fine
}

// rfcServer is a fake WebSocket server, made from the RFC: it completes
// the handshake of section 4.2.2 and sends the frames of section 5.7.
func rfcServer(t *testing.T, protocol string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "websocket" || r.Header.Get("Sec-WebSocket-Version") != "13" {
			http.Error(w, "not a websocket request", http.StatusBadRequest)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		resp := "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
			"Sec-WebSocket-Accept: " + AcceptKey(r.Header.Get("Sec-WebSocket-Key")) + "\r\n"
		if protocol != "" {
			resp += "Sec-WebSocket-Protocol: " + protocol + "\r\n"
		}
		brw.WriteString(resp + "\r\n")
		brw.Write(rfcText)
		brw.Write(rfcPing)
		brw.Flush()
		// Echo the client's pong payload back as a text message, then
		// close.
		_, p := readFrame(t, brw)
		brw.Write(append([]byte{0x81, byte(len(p))}, p...))
		brw.Write([]byte{0x88, 0x02, 0x03, 0xe8})
		brw.Flush()
		readFrame(t, brw) // the client's answer
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestDialRFCServer(t *testing.T) {
	// Section 1.3's example key and answer.
	if got := AcceptKey("dGhlIHNhbXBsZSBub25jZQ=="); got != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" {
		t.Fatalf("AcceptKey = %s", got)
	}
	srv := rfcServer(t, "chat")
	d, err := NewDialer(&k8sapi.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, proto, err := d.Dial(ctx, "/chat", nil, []string{"chat", "superchat"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if proto != "chat" {
		t.Fatalf("protocol %q, want chat", proto)
	}
	for _, want := range []string{"Hello", "Hello"} {
		_, p, err := c.ReadMessage()
		if err != nil || string(p) != want {
			t.Fatalf("message %q, %v; want %q", p, err, want)
		}
	}
	_, _, err = c.ReadMessage()
	var ce *CloseError
	if !errors.As(err, &ce) || ce.Code != CloseNormal {
		t.Fatalf("end: %v, want CloseError 1000", err)
	}
}

// The handshake sends the Dialer's Origin and the protocols offered, and
// neither header when there is none.
func TestDialHeaders(t *testing.T) {
	headers := make(chan http.Header, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		headers <- r.Header.Clone()
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " +
			AcceptKey(r.Header.Get("Sec-WebSocket-Key")) + "\r\n\r\n")
		brw.Flush()
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for _, tc := range []struct {
		origin    string
		protocols []string
		want      string
	}{
		{"", nil, ""},
		{"https://example.com", []string{"a", "b"}, "a, b"},
	} {
		d, err := NewDialer(&k8sapi.Config{Host: srv.URL})
		if err != nil {
			t.Fatal(err)
		}
		d.Origin = tc.origin
		c, _, err := d.Dial(ctx, "/x", nil, tc.protocols)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		h := <-headers
		if got := h.Values("Origin"); strings.Join(got, ",") != tc.origin || (tc.origin == "") != (got == nil) {
			t.Errorf("Origin %q, want %q", got, tc.origin)
		}
		if got := h.Values("Sec-WebSocket-Protocol"); strings.Join(got, ",") != tc.want || (tc.want == "") != (got == nil) {
			t.Errorf("Sec-WebSocket-Protocol %q, want %q", got, tc.want)
		}
	}
}

func TestDialRefusals(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		check   func(error) bool
	}{
		{"403", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403}`)
		}, func(err error) bool { return k8sapi.IsForbidden(err) }},
		{"200 without switching", func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "hello")
		}, func(err error) bool { return errors.Is(err, ErrHandshake) }},
		{"wrong accept", func(w http.ResponseWriter, r *http.Request) {
			conn, brw, _ := http.NewResponseController(w).Hijack()
			defer conn.Close()
			brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: x\r\n\r\n")
			brw.Flush()
		}, func(err error) bool { return errors.Is(err, ErrHandshake) }},
		{"protocol not asked for", func(w http.ResponseWriter, r *http.Request) {
			conn, brw, _ := http.NewResponseController(w).Hijack()
			defer conn.Close()
			brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Protocol: other\r\nSec-WebSocket-Accept: " +
				AcceptKey(r.Header.Get("Sec-WebSocket-Key")) + "\r\n\r\n")
			brw.Flush()
		}, func(err error) bool { return errors.Is(err, ErrHandshake) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			d, err := NewDialer(&k8sapi.Config{Host: srv.URL, MaxRetries: -1})
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = d.Dial(ctx, "/x", nil, []string{"chat"})
			if !tc.check(err) {
				t.Fatalf("err %v", err)
			}
		})
	}
}

// A ping does not wait for a write blocked on a server that does not
// read: the read goes on, and the pong follows the write.
func TestPingDoesNotWaitForWriter(t *testing.T) {
	c, server := pipeConn(t, 0)
	big := bytes.Repeat([]byte("w"), 1000)
	wrote := make(chan error, 1)
	go func() { wrote <- c.WriteMessage(OpBinary, big) }() // blocks: nothing reads yet
	for deadline := time.Now().Add(10 * time.Second); c.wmu.TryLock(); {
		c.wmu.Unlock() // the writer has not started yet
		if time.Now().After(deadline) {
			t.Fatal("the write never started")
		}
		runtime.Gosched()
	}
	serve(server, rfcPing, rfcText)
	if _, p, err := c.ReadMessage(); err != nil || string(p) != "Hello" {
		t.Fatalf("read %q, %v", p, err)
	}
	if op, p := readFrame(t, server); op != OpBinary || len(p) != len(big) {
		t.Fatalf("first frame: opcode %d, %d bytes", op, len(p))
	}
	if op, p := readFrame(t, server); op != opPong || string(p) != "Hello" {
		t.Fatalf("second frame: opcode %d, %q; want the pong", op, p)
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
}
