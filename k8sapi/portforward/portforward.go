// Package portforward forwards connections to a pod's ports, as "kubectl
// port-forward" does, through the API server's pods/portforward
// subresource over WebSocket (v4.channel.k8s.io).
//
// Each connection is a WebSocket of its own, for one port: messages on
// stream 0 carry the data both ways, messages on stream 1 the server's
// error for the port, and the server starts each stream with the port
// number (two bytes, little-endian), which the client drops.
//
// RBAC: "get" and "create" on pods/portforward: a WebSocket upgrade is a
// GET, and the API server also checks create.
//
// The operator does not import this package; it is for tools.
package portforward

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/k8sapi/internal/websocket"
)

// Protocol is the subprotocol the client asks for.
const Protocol = "v4.channel.k8s.io"

const (
	streamData  = 0
	streamError = 1
	// errorLimit caps the error message the server may send for a port.
	errorLimit = 1 << 10
	// writeChunk is the most data one message carries.
	writeChunk = 32 << 10
)

// ErrInvalidOptions is wrapped by the error of a call whose arguments the
// server would refuse; nothing is sent then.
var ErrInvalidOptions = errors.New("portforward: invalid options")

// ErrDeadline is returned by the deadline methods of a forwarded
// connection, which has none: close it to end a Read or Write.
var ErrDeadline = errors.New("portforward: deadlines are not supported; close the connection instead")

// Error is the server's error for a forwarded port, such as a port the
// pod does not listen on. It ends the connection that caused it.
type Error struct {
	Port    uint16
	Message string // at most 1 KiB
}

func (e *Error) Error() string {
	return fmt.Sprintf("portforward: port %d: %s", e.Port, e.Message)
}

// Addr is the address of a forwarded connection's pod end.
type Addr struct {
	Namespace, Pod string
	Port           uint16
}

func (a Addr) Network() string { return "portforward" }
func (a Addr) String() string  { return a.Namespace + "/" + a.Pod + ":" + strconv.Itoa(int(a.Port)) }

// Forwarder opens forwarded connections. It is safe for concurrent use.
type Forwarder struct {
	dialer *websocket.Dialer
}

// New returns a Forwarder for the server cfg describes; cfg is copied.
func New(cfg *k8sapi.Config) (*Forwarder, error) {
	d, err := websocket.NewDialer(cfg)
	if err != nil {
		return nil, err
	}
	return &Forwarder{dialer: d}, nil
}

// Dial opens one connection to port of pod. ctx bounds the opening only.
// The API server's refusals are k8sapi errors: [k8sapi.IsNotFound] for a
// missing pod, [k8sapi.IsForbidden] without RBAC, a 400 for a pod not
// running. An error for the port itself arrives as an *Error from the
// connection's Read.
func (f *Forwarder) Dial(ctx context.Context, namespace, pod string, port uint16) (net.Conn, error) {
	switch {
	case namespace == "" || pod == "" || namespace == ".." || pod == ".." || namespace == "." || pod == ".":
		return nil, fmt.Errorf("%w: namespace %q and pod %q", ErrInvalidOptions, namespace, pod)
	case port == 0:
		return nil, fmt.Errorf("%w: port 0", ErrInvalidOptions)
	}
	q := url.Values{"ports": {strconv.Itoa(int(port))}}
	ws, _, err := f.dialer.Dial(ctx, k8sapi.Pods.Path(namespace, pod, "portforward"), q, []string{Protocol})
	if err != nil {
		return nil, err
	}
	return &conn{ws: ws, addr: Addr{namespace, pod, port}, wbuf: make([]byte, 1+writeChunk)}, nil
}

// conn is one forwarded connection. Reads are serialized by rmu and
// writes by wmu, so that one goroutine may read while another writes.
type conn struct {
	ws   *websocket.Conn
	addr Addr

	rmu     sync.Mutex
	pending []byte // data of the last message not yet read; valid until the next message
	prefix  [2]bool
	readErr error // sticky

	wmu  sync.Mutex
	wbuf []byte
}

// Read returns the pod's data. The end of the connection is io.EOF, the
// server's *Error for the port, or, for a connection cut without a close
// frame, an error wrapping io.ErrUnexpectedEOF.
func (c *conn) Read(p []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	for len(c.pending) == 0 {
		if c.readErr != nil {
			return 0, c.readErr
		}
		c.next()
	}
	n := copy(p, c.pending)
	c.pending = c.pending[n:]
	return n, nil
}

// next reads one message, into pending or the error message, or sets
// readErr.
func (c *conn) next() {
	_, m, err := c.ws.ReadMessage()
	if err != nil {
		c.readErr = c.end(err)
		return
	}
	if len(m) == 0 || m[0] > streamError {
		return
	}
	ch, data := m[0], m[1:]
	if !c.prefix[ch] {
		if len(data) < 2 || binary.LittleEndian.Uint16(data) != c.addr.Port {
			c.readErr = fmt.Errorf("portforward: stream %d did not start with port %d", ch, c.addr.Port)
			c.ws.Close()
			return
		}
		c.prefix[ch], data = true, data[2:]
	}
	if ch == streamData {
		c.pending = data
		return
	}
	// The first message with an error ends the connection: nothing is
	// read after it.
	if msg := data[:min(len(data), errorLimit)]; len(msg) > 0 {
		c.readErr = &Error{Port: c.addr.Port, Message: string(msg)}
		c.ws.Close()
	}
}

// end turns the end of the WebSocket into the connection's end: the
// server's close frame is io.EOF; a connection cut without one is
// io.ErrUnexpectedEOF.
func (c *conn) end(err error) error {
	var ce *websocket.CloseError
	switch {
	case errors.As(err, &ce) && ce.Code == websocket.CloseNormal:
		return io.EOF
	case errors.Is(err, io.EOF):
		err = io.ErrUnexpectedEOF
	case errors.Is(err, net.ErrClosed), errors.Is(err, websocket.ErrClosed):
		return net.ErrClosed
	}
	return fmt.Errorf("portforward: %s: %w", c.addr, err)
}

// Write sends p to the pod, in messages of at most 32 KiB.
func (c *conn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	written := 0
	for len(p) > 0 {
		n := copy(c.wbuf[1:], p)
		c.wbuf[0] = streamData
		if err := c.ws.WriteMessage(websocket.OpBinary, c.wbuf[:1+n]); err != nil {
			return written, err
		}
		written += n
		p = p[n:]
	}
	return written, nil
}

// Close ends the connection; a Read or Write blocked in another goroutine
// returns.
func (c *conn) Close() error { return c.ws.Close() }

func (c *conn) LocalAddr() net.Addr                { return Addr{} }
func (c *conn) RemoteAddr() net.Addr               { return c.addr }
func (c *conn) SetDeadline(t time.Time) error      { return ErrDeadline }
func (c *conn) SetReadDeadline(t time.Time) error  { return ErrDeadline }
func (c *conn) SetWriteDeadline(t time.Time) error { return ErrDeadline }
