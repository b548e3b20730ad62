package k8sapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

// smallReads is an io.Reader that returns at most n bytes a read, as a
// slow network does.
type smallReads struct {
	b []byte
	n int
}

func (s *smallReads) Read(p []byte) (int, error) {
	if len(s.b) == 0 {
		return 0, io.EOF
	}
	k := copy(p[:min(len(p), s.n)], s.b)
	s.b = s.b[k:]
	return k, nil
}

// listWithLimits lists through a client whose ObjectLimit and list page
// limit are given, the body read in reads of at most chunk bytes, and with
// a Content-Length if length is set.
func listWithLimits(t *testing.T, body []byte, objectLimit, pageLimit int64, chunk int, length bool) (*List[Deployment], *smallReads, error) {
	t.Helper()
	r := &smallReads{b: body, n: chunk}
	size := int64(-1)
	if length {
		size = int64(len(body))
	}
	c, err := New(&Config{Host: "https://api.example", Transport: bodyTransport{r, size}, ObjectLimit: objectLimit, ListPageLimit: pageLimit})
	if err != nil {
		t.Fatal(err)
	}
	l, err := For[Deployment](c, Deployments).List(t.Context(), "shop", ListOptions{})
	return l, r, err
}

// ObjectLimit bounds each item of a list, not the list: a page whose
// metadata before its items, and whose fields after them, are each larger
// than ObjectLimit, with many small items, is read whole.
func TestListObjectLimitIsPerItem(t *testing.T) {
	big := strings.Repeat("c", 500)
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"metadata":{"resourceVersion":"7","continue":%q},"items":[`, big)
	for i := range 20 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"metadata":{"name":"d-%02d"}}`, i)
	}
	fmt.Fprintf(&b, `],"extra":%q}`, big)
	l, _, err := listWithLimits(t, b.Bytes(), 100, 1<<20, 16, false)
	if err != nil || len(l.Items) != 20 {
		t.Fatalf("list of 20 small items, with fields over ObjectLimit around them: %v", err)
	}
}

// A page of exactly the list page limit is read, its length announced or
// not; a page over it is refused having read at most one byte past it.
func TestListPageAtTheLimit(t *testing.T) {
	page := bigAnnotationPage(10, 1000)
	limit := int64(len(page))
	for _, length := range []bool{false, true} {
		if _, _, err := listWithLimits(t, page, 4<<20, limit, 32<<10, length); err != nil {
			t.Errorf("page at the limit (Content-Length %v): %v", length, err)
		}
	}
	_, r, err := listWithLimits(t, page, 4<<20, limit-100, 32<<10, false)
	if !errors.Is(err, ErrBodyTooLarge) {
		t.Fatalf("page over the limit: %v", err)
	}
	if read := len(page) - len(r.b); int64(read) > limit-100+1 {
		t.Errorf("read %d bytes of a page over the %d-byte limit", read, limit-100)
	}
}

// An ERROR event of exactly 64 KiB is kept whole and read as its Status,
// even when it arrives a byte at a time; one byte more is too large to
// keep.
func TestWatchErrorEventAtTheKeepLimit(t *testing.T) {
	event := func(size int) string {
		s := `{"type":"ERROR","object":{"kind":"Status","code":410,"message":""}}`
		return strings.Replace(s, `"message":""`, `"message":"`+strings.Repeat("m", size-len(s))+`"`, 1)
	}
	op := &operation{verb: "watch", resource: "deployments"}
	for _, chunk := range []int{1, 32 << 10} {
		w := newWatcher[Deployment](op, io.NopCloser(&smallReads{b: []byte(event(eventKeepMax)), n: chunk}), func() {}, objectLimit)
		_, err := w.Next()
		var ae *APIError
		if !errors.As(err, &ae) || ae.Code != 410 {
			t.Errorf("ERROR event of %d bytes, reads of %d: %v, want the 410", eventKeepMax, chunk, err)
		}
		w = newWatcher[Deployment](op, io.NopCloser(&smallReads{b: []byte(event(eventKeepMax + 1)), n: chunk}), func() {}, objectLimit)
		if _, err := w.Next(); err == nil || !strings.Contains(err.Error(), "ERROR event over") {
			t.Errorf("ERROR event of %d bytes, reads of %d: %v, want one too large to keep", eventKeepMax+1, chunk, err)
		}
	}
}
