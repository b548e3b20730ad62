// Package wstest is a fake WebSocket server for tests of the channel
// protocols: it answers an upgrade as the API server does and lets the
// test script the server's side, message by message.
package wstest

import (
	"bufio"
	"encoding/binary"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/zerodep-k8s/widget-operator/k8sapi/internal/websocket"
)

// Conn is the server side of one connection.
type Conn struct {
	brw *bufio.ReadWriter
}

// Send writes one unmasked binary message: the stream byte, then data.
func (c *Conn) Send(stream byte, data string) {
	p := append([]byte{stream}, data...)
	h := []byte{0x82}
	switch {
	case len(p) < 126:
		h = append(h, byte(len(p)))
	case len(p) <= 0xFFFF:
		h = append(h, 126)
		h = binary.BigEndian.AppendUint16(h, uint16(len(p)))
	default:
		h = append(h, 127)
		h = binary.BigEndian.AppendUint64(h, uint64(len(p)))
	}
	c.brw.Write(append(h, p...))
	c.brw.Flush()
}

// Close sends a close frame with code 1000.
func (c *Conn) Close() {
	c.brw.Write([]byte{0x88, 0x02, 0x03, 0xe8})
	c.brw.Flush()
}

// Recv reads one masked client frame and returns its payload unmasked.
func (c *Conn) Recv() ([]byte, error) {
	var h [2]byte
	if _, err := io.ReadFull(c.brw, h[:]); err != nil {
		return nil, err
	}
	n := uint64(h[1] & 0x7F)
	switch n {
	case 126:
		var l [2]byte
		io.ReadFull(c.brw, l[:])
		n = uint64(binary.BigEndian.Uint16(l[:]))
	case 127:
		var l [8]byte
		io.ReadFull(c.brw, l[:])
		n = binary.BigEndian.Uint64(l[:])
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

// Server answers each upgrade with the first offered protocol in speaks,
// runs script, and closes the connection when script returns. It is
// closed when the test ends.
func Server(t testing.TB, speaks []string, script func(c *Conn, proto string, r *http.Request)) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var proto string
		for p := range strings.SplitSeq(r.Header.Get("Sec-WebSocket-Protocol"), ",") {
			if p = strings.TrimSpace(p); proto == "" && slices.Contains(speaks, p) {
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
		script(&Conn{brw: brw}, proto, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}
