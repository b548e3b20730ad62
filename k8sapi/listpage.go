package k8sapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// callList sends op, a list, and decodes the 2xx body into out one item
// at a time: the body is never held whole, only the item being decoded
// is, so a page costs about its decoded size. A body over the client's
// list page limit fails with a *DecodeError wrapping [ErrBodyTooLarge].
func callList[T any](ctx context.Context, c *Client, op *operation, out *List[T]) error {
	resp, err := c.do(ctx, op)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	limit := c.listLimit
	if resp.ContentLength > limit {
		return op.decodeError(fmt.Errorf("%w (list page of %d bytes, limit %d)", ErrBodyTooLarge, resp.ContentLength, limit))
	}
	r := &limitedBody{r: resp.Body, left: limit, limit: limit}
	err = decodeList(json.NewDecoder(r), out)
	switch {
	case err == nil:
		return nil
	case r.err != nil && errors.Is(r.err, ErrBodyTooLarge):
		return op.decodeError(r.err)
	case r.err != nil:
		return op.requestError(r.err)
	case err == io.EOF:
		err = io.ErrUnexpectedEOF // the body ended inside the list
	}
	return op.decodeError(err)
}

// decodeList decodes a List object from dec, item by item. Fields other
// than apiVersion, kind, metadata and items are skipped.
func decodeList[T any](dec *json.Decoder, out *List[T]) error {
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
			err = dec.Decode(&out.APIVersion)
		case "kind":
			err = dec.Decode(&out.Kind)
		case "metadata":
			err = dec.Decode(&out.Metadata)
		case "items":
			err = decodeItems(dec, out)
		default:
			err = dec.Decode(&skipValue{})
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
func decodeItems[T any](dec *json.Decoder, out *List[T]) error {
	out.Items = nil
	tok, err := dec.Token()
	if err != nil || tok == nil {
		return err
	}
	if tok != json.Delim('[') {
		return errors.New("list items is not an array")
	}
	for dec.More() {
		var item T
		if err := dec.Decode(&item); err != nil {
			return err
		}
		out.Items = append(out.Items, item)
	}
	return expectDelim(dec, ']')
}

func expectDelim(dec *json.Decoder, d json.Delim) error {
	tok, err := dec.Token()
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	if err != nil {
		return err
	}
	if tok != d {
		return fmt.Errorf("list: want %q, got %v", d, tok)
	}
	return nil
}

// skipValue decodes any JSON value into nothing.
type skipValue struct{}

func (*skipValue) UnmarshalJSON([]byte) error { return nil }

// limitedBody reads r until limit bytes have been read; one more byte
// fails with an error wrapping ErrBodyTooLarge. It records the first read
// error other than io.EOF, so that a decoder's error can be traced to it.
type limitedBody struct {
	r           io.Reader
	left, limit int64
	err         error
}

func (l *limitedBody) Read(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	if int64(len(p)) > l.left+1 {
		p = p[:l.left+1]
	}
	n, err := l.r.Read(p)
	if int64(n) > l.left {
		l.err = fmt.Errorf("%w (list page over %d bytes)", ErrBodyTooLarge, l.limit)
		return 0, l.err
	}
	l.left -= int64(n)
	if err != nil && err != io.EOF {
		l.err = err
	}
	return n, err
}
