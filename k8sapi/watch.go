package k8sapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"sync/atomic"
)

// EventType is the kind of change a watch event reports.
type EventType string

// The event types a watch can deliver.
const (
	Added    EventType = "ADDED"
	Modified EventType = "MODIFIED"
	Deleted  EventType = "DELETED"
	// Bookmark carries only a newer metadata.resourceVersion to resume
	// from; sent when ListOptions.AllowWatchBookmarks is set.
	Bookmark EventType = "BOOKMARK"
	// Error events never reach the caller as events: [Watcher.Next]
	// returns them as an *APIError.
	Error EventType = "ERROR"
)

// WatchEvent is one change on a watch. For Deleted, Object is the last state
// of the object; for Bookmark, only its resourceVersion is set.
type WatchEvent[T any] struct {
	Type   EventType
	Object T
}

// Watch opens a watch on the resource, from opts.ResourceVersion (empty:
// from now, possibly starting with synthetic ADDED events; see
// ListOptions.SendInitialEvents). The stream lasts until ctx ends, the
// server ends it (opts.TimeoutSeconds), the connection fails, or Close.
//
// Opening the watch is retried like a GET; once the stream has started, it
// never is: the caller reopens it from the last resourceVersion seen.
func (t Typed[T]) Watch(ctx context.Context, namespace string, opts ListOptions) (*Watcher[T], error) {
	w := new(Watcher[T])
	if err := t.Client.watch(ctx, &t.Resource, namespace, &opts, &w.stream); err != nil {
		return nil, err
	}
	return w, nil
}

// watch is Watch, opening the stream s.
func (c *Client) watch(ctx context.Context, r *Resource, namespace string, opts *ListOptions, s *stream) error {
	op, err := c.newOp(ctx, r, "watch", namespace, "", "")
	if err != nil {
		return err
	}
	op.query = opts.query(true)
	wctx, cancel := context.WithCancel(ctx)
	resp, err := c.do(wctx, op)
	if err != nil {
		cancel()
		return err
	}
	s.open(op, resp.Body, cancel, c.objectLimit)
	return nil
}

// Watcher reads the events of one watch stream, decoding them one at a
// time as they arrive; the stream is never held in memory as a whole, and
// an event's bytes are held once, by the decoder, while it is decoded.
//
// Next must be called from one goroutine at a time. Close may be called
// from any goroutine, at any time, also while Next is blocked, and more
// than once.
type Watcher[T any] struct {
	stream
	env envelope[T] // reused
}

// stream is all of a Watcher but its event: its code is the same for
// every T, so the binary holds it once.
type stream struct {
	op     *operation
	body   io.ReadCloser
	cancel context.CancelFunc
	in     *eventReader
	dec    *json.Decoder
	base   int64 // stream offset at which dec began
	err    error // sticky: once set, every Next returns it

	closed    atomic.Bool
	closeOnce sync.Once
}

// open starts reading body, the stream of op, whose context cancel ends;
// an event is at most limit bytes.
func (w *stream) open(op *operation, body io.ReadCloser, cancel context.CancelFunc, limit int64) {
	w.in = &eventReader{limitReader: limitReader{r: body, limit: math.MaxInt64 / 2, item: "watch event", itemLimit: limit}}
	w.op, w.body, w.cancel, w.dec = op, body, cancel, json.NewDecoder(w.in)
}

// Next blocks until the next event and returns it. It returns:
//
//   - io.EOF when the server ended the stream cleanly between events;
//   - an *APIError for an ERROR event, such as 410 Gone (see [IsGone])
//     when the resourceVersion is too old;
//   - a *DecodeError for malformed or truncated JSON, an event over 4 MiB
//     (wrapping [ErrBodyTooLarge]) or an unknown event type;
//   - a *RequestError when the connection failed or the context ended,
//     including when an HTTP/2 health-check ping went unanswered;
//   - [ErrClosed] after Close.
//
// After an error the watcher is done, its connection released, and every
// later call returns the same error.
func (w *Watcher[T]) Next() (WatchEvent[T], error) {
	w.env = envelope[T]{}
	if err := w.next(&w.env); err != nil {
		return WatchEvent[T]{}, err
	}
	return WatchEvent[T]{Type: EventType(w.env.Type), Object: *w.env.Object}, nil
}

// next is Next, decoding into env; an error is sticky.
func (w *stream) next(env event) error {
	if w.err != nil {
		return w.err
	}
	if err := w.decode(env); err != nil {
		if w.closed.Load() {
			err = ErrClosed
		}
		w.err = err
		w.release()
	}
	return w.err
}

// Close ends the watch and releases its connection. A Next blocked in
// another goroutine returns [ErrClosed]. Close always returns nil.
func (w *stream) Close() error {
	w.closed.Store(true)
	w.release()
	return nil
}

func (w *stream) release() {
	w.closeOnce.Do(func() {
		w.cancel()
		w.body.Close()
	})
}

// eventType decodes an event's type, which must be one of the five known
// ones, without allocating.
type eventType EventType

func (t *eventType) UnmarshalJSON(b []byte) error {
	// b is a whole JSON value: one of len(known)+2 bytes that holds known
	// inside is that string.
	for _, known := range [...]EventType{Added, Modified, Deleted, Bookmark, Error} {
		if len(b) == len(known)+2 && string(b[1:len(b)-1]) == string(known) {
			*t = eventType(known)
			return nil
		}
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.New("event type is not a string")
	}
	return fmt.Errorf("unknown event type %.64q", s)
}

// envelope is a watch event on the wire. Object is a pointer so that a
// missing object can be told from an empty one.
type envelope[T any] struct {
	Type   eventType `json:"type"`
	Object *T        `json:"object"`
}

// An event is an envelope of any T.
type event interface {
	kind() (typ EventType, hasObject bool)
}

func (e *envelope[T]) kind() (EventType, bool) { return EventType(e.Type), e.Object != nil }

// decode decodes one event, {"type": ..., "object": ...}, in one pass,
// straight into env, an empty envelope. An ERROR event's object, a
// Status, is decoded again from the event's bytes, which eventReader
// keeps.
func (w *stream) decode(env event) error {
	start := w.offset()
	w.in.begin(start)
	err := w.dec.Decode(env)
	typ, hasObject := env.kind()
	if err != nil {
		te, isTypeErr := errors.AsType[*json.UnmarshalTypeError](err)
		switch {
		case err == io.EOF:
			return io.EOF
		case isTypeErr && te.Field == "":
			return w.op.decodeError(errors.New("event is not a JSON object"))
		case isTypeErr && typ == Error:
			// A Status that does not fit T; decoded below.
		default:
			return w.in.fail(w.op, err)
		}
	}
	switch {
	case typ == "":
		return w.op.decodeError(errors.New("event has no type"))
	case typ == Error:
		// Only this event's bytes: the reader may hold the next ones.
		kept, size := w.in.since(start), w.offset()-start
		if int64(len(kept)) < size {
			return w.op.decodeError(fmt.Errorf("ERROR event over %d bytes", eventKeepMax))
		}
		return w.errorEvent(kept[:size])
	case !hasObject:
		return w.op.decodeError(fmt.Errorf("%s event has no object", typ))
	}
	if w.offset()-start > renewDecoderAfter {
		w.renewDecoder()
	}
	return nil
}

// offset returns the stream offset the decoder has reached.
func (w *stream) offset() int64 { return w.base + w.dec.InputOffset() }

// renewDecoder replaces the decoder with one that goes on where it
// stopped, so that the buffer the last, large event grew is let go.
func (w *stream) renewDecoder() {
	rest, _ := io.ReadAll(w.dec.Buffered()) // at most one read
	w.base = w.offset()
	w.dec = json.NewDecoder(io.MultiReader(bytes.NewReader(rest), w.in))
}

// errorEvent turns the bytes of an ERROR event into its *APIError.
func (w *stream) errorEvent(event []byte) error {
	var e envelope[Status]
	if err := json.Unmarshal(event, &e); err != nil {
		return w.op.decodeError(fmt.Errorf("ERROR event: %w", err))
	}
	if e.Object == nil || e.Object.Kind != "Status" {
		return w.op.decodeError(errors.New("ERROR event object is not a Status"))
	}
	return statusError(w.op, int(e.Object.Code), *e.Object, nil)
}

const (
	// eventKeepMax is how much of an event eventReader keeps for a second
	// decode: enough for any ERROR event's Status.
	eventKeepMax = 64 << 10
	// renewDecoderAfter is the event size past which the decoder is
	// replaced, so that its buffer, grown to hold the event, is let go.
	renewDecoderAfter = 1 << 20
)

// eventReader feeds the decoder, stopping it once the event being decoded
// grows past the object limit (see limitReader). It keeps the bytes of
// the current event, as long as it is at most eventKeepMax, so that an
// ERROR event can be decoded a second time; a larger event is held by the
// decoder alone, and only the last read is kept (it holds the start of
// the next event).
type eventReader struct {
	limitReader
	kept []byte // the stream's last bytes, up to offset read
}

// begin marks the start of the next event, at stream offset off, and lets
// the kept bytes before it go.
func (e *eventReader) begin(off int64) {
	if rest := e.since(off); rest != nil {
		e.kept = e.kept[:copy(e.kept, rest)]
	}
	e.start = off
}

// since returns the kept bytes from stream offset off, or nil if they
// were not kept.
func (e *eventReader) since(off int64) []byte {
	at := e.read - int64(len(e.kept))
	if off < at {
		return nil
	}
	return e.kept[off-at:]
}

func (e *eventReader) Read(p []byte) (int, error) {
	n, err := e.limitReader.Read(p)
	if len(e.kept)+n > eventKeepMax {
		e.kept = e.kept[:0]
	}
	e.kept = append(e.kept, p[:n]...)
	return n, err
}
