package k8sapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// decodeList decodes a List object from dec, which reads r: apiVersion
// and kind into tm, metadata into lm, and each item into the new one add returns.
// Fields other than these are skipped. r is told the stream offset of
// each item as its decoding starts, and -1 after the last.
func decodeList(dec *json.Decoder, tm *TypeMeta, lm *ListMeta, add func() any, r *limitReader) error {
	if err := expectDelim(dec, '{'); err != nil {
		return err
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch key, _ := tok.(string); key {
		case "apiVersion":
			err = dec.Decode(&tm.APIVersion)
		case "kind":
			err = dec.Decode(&tm.Kind)
		case "metadata":
			err = dec.Decode(lm)
		case "items":
			err = decodeItems(dec, add, r)
		default:
			err = dec.Decode(new(json.RawMessage)) // read and dropped
		}
		if err != nil {
			return err
		}
	}
	if err := expectDelim(dec, '}'); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the list object")
	}
	return nil
}

// decodeItems decodes the items array, or null, one element at a time.
func decodeItems(dec *json.Decoder, add func() any, r *limitReader) error {
	tok, err := dec.Token()
	if err != nil || tok == nil {
		return err
	}
	if tok != json.Delim('[') {
		return errors.New("list items is not an array")
	}
	for dec.More() {
		r.start = dec.InputOffset()
		if err := dec.Decode(add()); err != nil {
			return err
		}
	}
	r.start = -1
	return expectDelim(dec, ']')
}

// expectDelim reads the delimiter d from dec. The end of the input is
// io.EOF, which limitReader.fail reports as a body that ended too soon.
func expectDelim(dec *json.Decoder, d json.Delim) error {
	tok, err := dec.Token()
	if err == nil && tok != d {
		err = fmt.Errorf("list: want %q, got %v", d, tok)
	}
	return err
}

// readSize bounds one read of a list or watch body, so that an item
// over its limit is caught within that many bytes.
const readSize = 32 << 10

// limitReader feeds a decoder from r, at most readSize bytes a read. It
// fails, with an error wrapping ErrBodyTooLarge, on the byte after limit
// bytes in all (a list page; a watch stream has no such limit), or once
// the item that began at stream offset start (if not negative) has grown
// past itemLimit bytes; item names such an item in that error. It records the first read error other than io.EOF, so
// that a decoder's error can be traced to it.
type limitReader struct {
	r                io.Reader
	read, limit      int64
	start, itemLimit int64
	item             string
	err              error
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	size := min(int64(len(p)), l.limit-l.read+1, readSize)
	if l.start >= 0 {
		room := l.itemLimit - (l.read - l.start)
		if room < 0 {
			l.err = fmt.Errorf("%w (%s over %d bytes)", ErrBodyTooLarge, l.item, l.itemLimit)
			return 0, l.err
		}
		size = min(size, room+1)
	}
	n, err := l.r.Read(p[:size])
	l.read += int64(n)
	if l.read > l.limit {
		n, err = 0, fmt.Errorf("%w (list page over %d bytes)", ErrBodyTooLarge, l.limit)
	}
	if err != nil && err != io.EOF {
		l.err = err
	}
	return n, err
}

// fail classifies err, from a decoder reading l: l's own read error
// (connection lost, context ended) is a RequestError; anything else,
// including a body that ended too soon and one over a limit, a
// DecodeError.
func (l *limitReader) fail(op *operation, err error) error {
	switch {
	case l.err != nil && !errors.Is(l.err, ErrBodyTooLarge):
		return op.requestError(l.err)
	case l.err != nil:
		return op.decodeError(l.err)
	case err == io.EOF:
		err = io.ErrUnexpectedEOF
	}
	return op.decodeError(err)
}
