package podexec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/k8sapi/internal/websocket"
)

// stdinChunk is the most stdin one message carries.
const stdinChunk = 32 << 10

// session is one exec or attach stream. run reads in the calling
// goroutine; stdin and resizes are sent from goroutines of their own,
// which end when done closes (resizes) or at their next write (stdin).
type session struct {
	conn   *websocket.Conn
	opts   *Options
	v5     bool
	done   chan struct{}
	status []byte // the error channel's bytes so far
}

func (s *session) run(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { s.conn.Close() })
	defer stop()
	defer close(s.done)
	defer s.conn.Close()
	if s.opts.Stdin != nil {
		go s.copyStdin()
	}
	if s.opts.TTY && s.opts.Resize != nil {
		go s.resizes()
	}
	err := s.read()
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}

// read copies stdout and stderr until the server ends the stream, and
// returns the command's end.
func (s *session) read() error {
	for {
		_, p, err := s.conn.ReadMessage()
		if err != nil {
			return s.end(err)
		}
		if len(p) < 2 {
			continue // the server's "connected" message, or nothing
		}
		var w io.Writer
		switch p[0] {
		case streamStdout:
			w = s.opts.Stdout
		case streamStderr:
			w = s.opts.Stderr
		case streamError:
			if len(s.status)+len(p)-1 > errorLimit {
				return fmt.Errorf("podexec: the error channel sent over %d bytes", errorLimit)
			}
			s.status = append(s.status, p[1:]...)
		}
		if w != nil {
			if _, err := w.Write(p[1:]); err != nil {
				return fmt.Errorf("podexec: writing the command's output: %w", err)
			}
		}
	}
}

// end turns the end of the stream into the command's result: the status
// the error channel carried, or, without one, the stream's error.
func (s *session) end(streamErr error) error {
	if len(s.status) == 0 {
		var ce *websocket.CloseError
		if errors.Is(streamErr, io.EOF) || errors.As(streamErr, &ce) {
			return fmt.Errorf("%w (%v)", ErrNoStatus, streamErr)
		}
		return fmt.Errorf("%w: %w", ErrNoStatus, streamErr)
	}
	var st k8sapi.Status
	if err := json.Unmarshal(s.status, &st); err != nil {
		return fmt.Errorf("podexec: the error channel sent no Status: %q", quote(string(s.status)))
	}
	st.Message = quote(st.Message)
	switch code, ok := exitCode(&st); {
	case st.Status == "Success":
		return nil
	case ok:
		return &ExitError{Code: code, Message: st.Message}
	}
	return &StatusError{Status: st}
}

// copyStdin sends Stdin, then on v5 closes the command's stdin.
func (s *session) copyStdin() {
	buf := make([]byte, 1+stdinChunk)
	buf[0] = streamStdin
	for {
		n, err := s.opts.Stdin.Read(buf[1:])
		if n > 0 {
			if s.conn.WriteMessage(websocket.OpBinary, buf[:1+n]) != nil {
				return
			}
		}
		if err != nil {
			break
		}
	}
	if s.v5 {
		s.conn.WriteMessage(websocket.OpBinary, []byte{streamClose, streamStdin})
	}
}

// resizes sends each terminal size until Resize closes or the session
// ends.
func (s *session) resizes() {
	for {
		select {
		case <-s.done:
			return
		case size, ok := <-s.opts.Resize:
			if !ok {
				return
			}
			p, _ := json.Marshal(size)
			if s.conn.WriteMessage(websocket.OpBinary, append([]byte{streamResize}, p...)) != nil {
				return
			}
		}
	}
}
