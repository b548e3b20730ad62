// Package websocket is the client side of the WebSocket protocol (RFC
// 6455) over a connection that an HTTP/1.1 upgrade handed over: masked
// frames, ping and pong, fragmented messages, close codes, and a cap on
// the size of what the server may make the client hold.
//
// It is the one WebSocket client of the kit, shared by the pod streams
// (exec, attach and port-forward). It negotiates no extension.
package websocket

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"unicode/utf8"
)

// Opcodes of RFC 6455 section 5.2.
const (
	opContinuation = 0x0
	OpText         = 0x1
	OpBinary       = 0x2
	opClose        = 0x8
	opPing         = 0x9
	opPong         = 0xA
)

// Close codes of RFC 6455 section 7.4.1 that the client sends.
const (
	CloseNormal        = 1000
	CloseProtocolError = 1002
	CloseInvalidData   = 1007
	CloseTooBig        = 1009
	closeNoStatus      = 1005 // received without a code; never sent
)

// DefaultMaxMessage is the cap on one message when [Conn.MaxMessage] is
// zero: 1 MiB.
const DefaultMaxMessage = 1 << 20

// maxControl is the largest payload of a control frame (section 5.5).
const maxControl = 125

// ErrProtocol is wrapped by the error of a frame that breaks RFC 6455. The
// client has then sent a close frame with code 1002 and closed the
// connection.
var ErrProtocol = errors.New("websocket: protocol error")

// ErrTooLarge is wrapped by the error of a message over the cap. Nothing
// of it beyond its header has been read; the client has sent a close frame
// with code 1009 and closed the connection.
var ErrTooLarge = errors.New("websocket: message over the size cap")

// ErrClosed is returned by writes after Close, or after the connection
// was closed for an error.
var ErrClosed = errors.New("websocket: connection closed")

// CloseError is the server's close frame: the end of the messages.
type CloseError struct {
	Code   int    // 1005 when the frame had no code
	Reason string // at most 123 bytes, as the frame carries it
}

func (e *CloseError) Error() string {
	if e.Reason == "" {
		return fmt.Sprintf("websocket: closed by the server with code %d", e.Code)
	}
	return fmt.Sprintf("websocket: closed by the server with code %d: %q", e.Code, e.Reason)
}

// Conn is a client WebSocket connection.
//
// One goroutine reads (ReadMessage) while others write (WriteMessage,
// Close): writes are serialized, reads are not, so at most one goroutine
// may call ReadMessage at a time. A Conn starts no goroutine of its own.
type Conn struct {
	rwc io.ReadWriteCloser
	br  *bufio.Reader
	// max is the cap on one message, fragments together, and so on one
	// frame: over it a frame fails before its payload is read.
	max int
	// rand gives the masking keys: crypto/rand, or a fixed source in
	// tests.
	rand io.Reader

	msg []byte // the message being read; reused, valid until the next read

	wmu       sync.Mutex // guards the fields below and serializes writes
	wbuf      []byte
	closeSent bool
	closed    bool

	// The answer to the last ping, when a write held wmu as it came: the
	// reader never waits for a writer, which may be blocked on a server
	// that waits to be read. Whoever releases wmu next sends it.
	pmu  sync.Mutex
	pong []byte // nil: none pending
}

// NewConn returns a Conn over rwc, the connection of a 101 answer, with a
// cap of max bytes on a message (0 means [DefaultMaxMessage]).
func NewConn(rwc io.ReadWriteCloser, max int) *Conn {
	if max <= 0 {
		max = DefaultMaxMessage
	}
	return &Conn{rwc: rwc, br: bufio.NewReaderSize(rwc, 32<<10), max: max, rand: rand.Reader}
}

// frameHeader is a frame's first bytes, decoded.
type frameHeader struct {
	fin    bool
	op     byte
	length int
}

// readHeader reads and checks one frame header, and refuses a payload
// longer than room bytes before anything of it is read.
func (c *Conn) readHeader(room int) (frameHeader, error) {
	var b [8]byte
	if _, err := io.ReadFull(c.br, b[:2]); err != nil {
		return frameHeader{}, err
	}
	h := frameHeader{fin: b[0]&0x80 != 0, op: b[0] & 0x0F}
	n := uint64(b[1] & 0x7F)
	switch {
	case b[0]&0x70 != 0:
		return h, protocolErr("reserved bits set without an extension")
	case b[1]&0x80 != 0:
		return h, protocolErr("the server masked a frame")
	case h.op > OpBinary && h.op < opClose || h.op > opPong:
		return h, protocolErr(fmt.Sprintf("unknown opcode %#x", h.op))
	case h.op >= opClose && (!h.fin || n > maxControl):
		return h, protocolErr("control frame fragmented or over 125 bytes")
	}
	switch n {
	case 126:
		if _, err := io.ReadFull(c.br, b[:2]); err != nil {
			return h, unexpected(err)
		}
		if n = uint64(binary.BigEndian.Uint16(b[:2])); n < 126 {
			return h, protocolErr("length not in its shortest form")
		}
	case 127:
		if _, err := io.ReadFull(c.br, b[:8]); err != nil {
			return h, unexpected(err)
		}
		if n = binary.BigEndian.Uint64(b[:8]); n>>63 != 0 || n <= 0xFFFF {
			return h, protocolErr("64-bit length with its top bit set or not in its shortest form")
		}
	}
	if n > uint64(room) {
		return h, fmt.Errorf("%w: a frame of %d bytes, %d left of the cap", ErrTooLarge, n, room)
	}
	h.length = int(n)
	return h, nil
}

// ReadMessage returns the next text or binary message, its fragments
// joined. p is valid until the next call. It answers pings with pongs and
// skips pongs. The server's close frame ends the messages: ReadMessage
// answers it and returns a *CloseError. A frame that breaks the protocol,
// a message over the cap or invalid UTF-8 in a text message fail with an
// error, after which the connection is closed. A connection cut mid-frame
// fails with io.ErrUnexpectedEOF.
func (c *Conn) ReadMessage() (op byte, p []byte, err error) {
	op, p, err = c.readMessage()
	if err != nil {
		c.fail(err)
	}
	return op, p, err
}

func (c *Conn) readMessage() (byte, []byte, error) {
	c.msg = c.msg[:0]
	var op byte
	for {
		h, err := c.readHeader(c.max - len(c.msg))
		if err != nil {
			return 0, nil, err
		}
		if h.op >= opClose {
			if err := c.control(h); err != nil {
				return 0, nil, err
			}
			continue
		}
		switch {
		case h.op == opContinuation && op == 0:
			return 0, nil, protocolErr("continuation frame with no message to continue")
		case h.op != opContinuation && op != 0:
			return 0, nil, protocolErr("new message inside a fragmented one")
		case op == 0:
			op = h.op
		}
		start := len(c.msg)
		c.msg = growTo(c.msg, start+h.length)
		if _, err := io.ReadFull(c.br, c.msg[start:]); err != nil {
			return 0, nil, unexpected(err)
		}
		if h.fin {
			break
		}
	}
	if op == OpText && !utf8.Valid(c.msg) {
		return 0, nil, fmt.Errorf("%w: invalid UTF-8 in a text message", errInvalidData)
	}
	return op, c.msg, nil
}

// growTo returns b resliced to n bytes, reallocated if need be.
func growTo(b []byte, n int) []byte {
	if n <= cap(b) {
		return b[:n]
	}
	nb := make([]byte, n, max(n, 2*cap(b)))
	copy(nb, b)
	return nb
}

// errInvalidData is a text message that is not UTF-8; closed with 1007.
var errInvalidData = fmt.Errorf("%w: invalid data", ErrProtocol)

// control handles a ping, pong or close frame.
func (c *Conn) control(h frameHeader) error {
	var buf [maxControl]byte
	p := buf[:h.length]
	if _, err := io.ReadFull(c.br, p); err != nil {
		return unexpected(err)
	}
	switch h.op {
	case opPing:
		c.pmu.Lock()
		c.pong = append(make([]byte, 0, len(p)), p...)
		c.pmu.Unlock()
		c.flushPong()
		return nil
	case opPong:
		return nil
	}
	ce := &CloseError{Code: closeNoStatus}
	switch {
	case len(p) == 1:
		return protocolErr("close frame of one byte")
	case len(p) >= 2:
		ce.Code = int(binary.BigEndian.Uint16(p))
		ce.Reason = string(p[2:])
		if !validCloseCode(ce.Code) || !utf8.ValidString(ce.Reason) {
			return protocolErr(fmt.Sprintf("close code %d or its reason is not valid", ce.Code))
		}
	}
	// Answer with the code received (section 5.5.1), then hang up: the
	// server closes the TCP connection first, but nothing more is read.
	code := ce.Code
	if code == closeNoStatus {
		code = CloseNormal
	}
	c.sendClose(code, "")
	c.closeConn()
	return ce
}

// validCloseCode reports whether a server may send code (section 7.4).
func validCloseCode(code int) bool {
	switch {
	case code >= 3000 && code <= 4999:
		return true
	case code < 1000 || code > 1014:
		return false
	}
	return code != 1004 && code != 1005 && code != 1006
}

// fail closes the connection after a read error, first telling the
// server why when the error is the server's fault.
func (c *Conn) fail(err error) {
	var ce *CloseError
	switch {
	case errors.As(err, &ce):
		return // answered already
	case errors.Is(err, ErrTooLarge):
		c.sendClose(CloseTooBig, "message too big")
	case errors.Is(err, errInvalidData):
		c.sendClose(CloseInvalidData, "")
	case errors.Is(err, ErrProtocol):
		c.sendClose(CloseProtocolError, "")
	}
	c.closeConn()
}

// WriteMessage sends p as one masked frame of opcode op (OpText or
// OpBinary). It is safe to call from several goroutines.
func (c *Conn) WriteMessage(op byte, p []byte) error {
	if op != OpText && op != OpBinary {
		return fmt.Errorf("websocket: WriteMessage of opcode %#x", op)
	}
	return c.write(op, p)
}

// write sends one masked frame with FIN set, then any pong that came
// meanwhile.
func (c *Conn) write(op byte, p []byte) error {
	c.wmu.Lock()
	err := c.writeLocked(op, p)
	c.wmu.Unlock()
	c.flushPong()
	return err
}

// flushPong sends the pending pong unless another goroutine holds wmu,
// which then sends it when it is done.
func (c *Conn) flushPong() {
	for c.pendingPong() && c.wmu.TryLock() {
		c.pmu.Lock()
		p := c.pong
		c.pong = nil
		c.pmu.Unlock()
		if p != nil {
			c.writeLocked(opPong, p)
		}
		c.wmu.Unlock()
	}
}

func (c *Conn) pendingPong() bool {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	return c.pong != nil
}

func (c *Conn) writeLocked(op byte, p []byte) error {
	if c.closed || c.closeSent {
		return ErrClosed
	}
	b := append(c.wbuf[:0], 0x80|op)
	switch n := len(p); {
	case n < 126:
		b = append(b, 0x80|byte(n))
	case n <= 0xFFFF:
		b = append(b, 0x80|126)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b = append(b, 0x80|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	var key [4]byte
	if _, err := io.ReadFull(c.rand, key[:]); err != nil {
		return fmt.Errorf("websocket: masking key: %w", err)
	}
	b = append(b, key[:]...)
	start := len(b)
	b = append(b, p...)
	mask(key, b[start:])
	if cap(b) <= 64<<10 {
		c.wbuf = b
	}
	if op == opClose {
		c.closeSent = true
	}
	_, err := c.rwc.Write(b)
	return err
}

// mask XORs p with the key, in place (section 5.3), a word at a time.
func mask(key [4]byte, p []byte) {
	k := uint64(binary.LittleEndian.Uint32(key[:]))
	k |= k << 32
	for len(p) >= 8 {
		binary.LittleEndian.PutUint64(p, binary.LittleEndian.Uint64(p)^k)
		p = p[8:]
	}
	for i := range p {
		p[i] ^= key[i&3]
	}
}

// sendClose sends a close frame once. It is a courtesy: when another
// goroutine is in the middle of a write, which may be blocked on a server
// that reads nothing, or the write fails, the connection closes without
// it.
func (c *Conn) sendClose(code int, reason string) {
	if !c.wmu.TryLock() {
		return
	}
	defer c.wmu.Unlock()
	p := binary.BigEndian.AppendUint16(nil, uint16(code))
	c.writeLocked(opClose, append(p, reason[:min(len(reason), maxControl-2)]...))
}

func (c *Conn) closeConn() {
	c.wmu.Lock()
	c.closed = true
	c.wmu.Unlock()
	c.rwc.Close()
}

// Close sends a close frame with code 1000 and closes the connection,
// which ends a ReadMessage blocked in another goroutine. It is safe to
// call more than once and concurrently with the other methods.
func (c *Conn) Close() error {
	c.sendClose(CloseNormal, "")
	c.closeConn()
	return nil
}

func protocolErr(what string) error { return fmt.Errorf("%w: %s", ErrProtocol, what) }

// unexpected turns an EOF inside a frame into io.ErrUnexpectedEOF.
func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
