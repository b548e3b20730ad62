package k8sapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"
)

// bigAnnotationPage returns a DeploymentList page of n Deployments, each
// with one annotation of size bytes: the shape whose decoded form is as
// large as its JSON, the worst case for memory.
func bigAnnotationPage(n, size int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"kind":"DeploymentList","apiVersion":"apps/v1","metadata":{"resourceVersion":"7"},"items":[`)
	note := strings.Repeat("x", size)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"metadata":{"name":"big-%04d","namespace":"shop","resourceVersion":"%d","annotations":{"example.com/note":%q}},"spec":{"replicas":1}}`, i, 100+i, note)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// pageTransport answers every request with body, in 32 KiB reads and
// without a Content-Length, as the API server streams a list.
type pageTransport struct{ body []byte }

func (p pageTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Header: http.Header{}, ContentLength: -1, Request: r,
		Body: io.NopCloser(&chunkReader{b: p.body})}, nil
}

type chunkReader struct{ b []byte }

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), 32<<10)], c.b)
	c.b = c.b[n:]
	return n, nil
}

// heapPeak samples the heap's object bytes until stop is called, and
// returns the highest value seen above the value at start.
func heapPeak() (stop func() uint64) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	base := read()
	var (
		mu   sync.Mutex
		peak = base
		done = make(chan struct{})
		wg   sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(100 * time.Microsecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				v := read()
				mu.Lock()
				peak = max(peak, v)
				mu.Unlock()
			}
		}
	}()
	return func() uint64 {
		close(done)
		wg.Wait()
		return max(peak, read()) - base
	}
}

// BenchmarkListPageMemory lists one page of Deployments with large
// annotations and reports the heap it took: peak-MiB (sampled peak of live
// and not yet collected objects above the start) and alloc-MiB (all bytes
// allocated, an upper bound of the peak). The 60 MiB page is listed with
// the page limit raised to fit it; the 8 MiB one is at today's limit.
func BenchmarkListPageMemory(b *testing.B) {
	for _, tc := range []struct {
		name    string
		objects int
	}{{"page=60MiB", 480}, {"page=8MiB", 62}} {
		b.Run(tc.name, func(b *testing.B) {
			page := bigAnnotationPage(tc.objects, 128<<10)
			c, err := New(&Config{Host: "https://api.example", Transport: pageTransport{page}})
			if err != nil {
				b.Fatal(err)
			}
			c.listLimit = max(c.listLimit, int64(len(page)))
			var peak, alloc uint64
			for range b.N {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				stop := heapPeak()
				l, err := For[Deployment](c, Deployments).List(b.Context(), "shop", ListOptions{})
				p := stop()
				runtime.ReadMemStats(&after)
				if err != nil {
					b.Fatal(err)
				}
				if len(l.Items) != tc.objects {
					b.Fatalf("%d items", len(l.Items))
				}
				peak = max(peak, p)
				alloc = max(alloc, after.TotalAlloc-before.TotalAlloc)
			}
			b.ReportMetric(float64(len(page))/(1<<20), "page-MiB")
			b.ReportMetric(float64(peak)/(1<<20), "peak-MiB")
			b.ReportMetric(float64(alloc)/(1<<20), "alloc-MiB")
		})
	}
}

// bigEventStream returns a watch stream of one MODIFIED Deployment event
// with an annotation of size bytes, then an ERROR event (410).
func bigEventStream(size int) []byte {
	return []byte(`{"type":"MODIFIED","object":{"metadata":{"name":"big","resourceVersion":"9","annotations":{"n":"` +
		strings.Repeat("x", size) + `"}}}}` + "\n" +
		`{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old resource version: 1 (9)","reason":"Expired","code":410}}` + "\n")
}

// TestWatchBigEventHeldOnce: an event far over eventKeepMax is not kept
// a second time by the reader, the decoder that grew to hold it is
// replaced, and the ERROR event after it is still decoded.
func TestWatchBigEventHeldOnce(t *testing.T) {
	const size = 3 << 20
	op := &operation{verb: "watch", resource: "deployments"}
	w := newWatcher[Deployment](op, io.NopCloser(bytes.NewReader(bigEventStream(size))), func() {}, objectLimit)
	dec := w.dec
	ev, err := w.Next()
	if err != nil || len(ev.Object.Annotations["n"]) != size {
		t.Fatalf("got %v, %v", ev.Object.Name, err)
	}
	if c := cap(w.in.kept); c > eventKeepMax+readSize {
		t.Errorf("reader keeps %d bytes after a %d-byte event", c, size)
	}
	if w.dec == dec {
		t.Error("decoder not replaced after a large event")
	}
	if _, err := w.Next(); !IsGone(err) {
		t.Errorf("after the large event: %v, want 410", err)
	}
}

func TestWatchHugeErrorEvent(t *testing.T) {
	stream := `{"type":"ERROR","object":{"kind":"Status","code":410,"message":"` + strings.Repeat("x", eventKeepMax) + `"}}`
	op := &operation{verb: "watch", resource: "deployments"}
	w := newWatcher[Deployment](op, io.NopCloser(strings.NewReader(stream)), func() {}, objectLimit)
	_, err := w.Next()
	var de *DecodeError
	if !errors.As(err, &de) || !strings.Contains(err.Error(), "ERROR event over") {
		t.Errorf("got %v, want a DecodeError", err)
	}
}

// BenchmarkWatchBigEventMemory decodes one 3 MiB watch event and reports
// the heap it took, as BenchmarkListPageMemory does.
func BenchmarkWatchBigEventMemory(b *testing.B) {
	stream := bigEventStream(3 << 20)
	op := &operation{verb: "watch", resource: "deployments"}
	var peak, alloc uint64
	for range b.N {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		stop := heapPeak()
		w := newWatcher[Deployment](op, io.NopCloser(&chunkReader{b: stream}), func() {}, objectLimit)
		ev, err := w.Next()
		p := stop()
		runtime.ReadMemStats(&after)
		if err != nil || ev.Object.Name != "big" {
			b.Fatal(err)
		}
		peak = max(peak, p)
		alloc = max(alloc, after.TotalAlloc-before.TotalAlloc)
	}
	b.ReportMetric(3, "event-MiB")
	b.ReportMetric(float64(peak)/(1<<20), "peak-MiB")
	b.ReportMetric(float64(alloc)/(1<<20), "alloc-MiB")
}

func TestDecodeListStreaming(t *testing.T) {
	tests := []struct {
		name, body string
		items      int
		rv, err    string
	}{
		{"page", `{"kind":"DeploymentList","apiVersion":"apps/v1","metadata":{"resourceVersion":"5","continue":"c"},"items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"}}]}`, 2, "5", ""},
		{"unknown fields skipped", `{"extra":{"deep":[1,2,{"x":null}]},"items":[{"metadata":{"name":"a"}}],"more":"s","metadata":{"resourceVersion":"6"}}`, 1, "6", ""},
		{"null items", `{"metadata":{"resourceVersion":"7"},"items":null}`, 0, "7", ""},
		{"empty", `{}`, 0, "", ""},
		{"items not an array", `{"items":{"a":1}}`, 0, "", "list items is not an array"},
		{"not an object", `[1,2]`, 0, "", "want"},
		{"truncated", `{"items":[{"metadata":{"name":"a"}},`, 0, "", "unexpected EOF"},
		{"trailing data", `{"items":[]} {}`, 0, "", "data after the list object"},
		{"bad item", `{"items":[{"metadata":{"name":5}}]}`, 0, "", "cannot unmarshal"},
		{"empty body", ``, 0, "", "unexpected EOF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New(&Config{Host: "https://api.example", Transport: pageTransport{[]byte(tt.body)}})
			if err != nil {
				t.Fatal(err)
			}
			l, err := For[Deployment](c, Deployments).List(t.Context(), "shop", ListOptions{})
			if tt.err != "" {
				var de *DecodeError
				if !errors.As(err, &de) || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("got %v, want a DecodeError with %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(l.Items) != tt.items || l.Metadata.ResourceVersion != tt.rv {
				t.Errorf("got %d items, rv %q", len(l.Items), l.Metadata.ResourceVersion)
			}
		})
	}
}

// failingBody returns its data, then err.
type failingBody struct {
	data []byte
	err  error
}

func (f *failingBody) Read(p []byte) (int, error) {
	if len(f.data) == 0 {
		return 0, f.err
	}
	n := copy(p, f.data)
	f.data = f.data[n:]
	return n, nil
}

type bodyTransport struct {
	body   io.Reader
	length int64
}

func (b bodyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Header: http.Header{}, ContentLength: b.length, Request: r, Body: io.NopCloser(b.body)}, nil
}

func TestListPageErrors(t *testing.T) {
	list := func(rt http.RoundTripper, limit int64) error {
		c, err := New(&Config{Host: "https://api.example", Transport: rt})
		if err != nil {
			t.Fatal(err)
		}
		c.listLimit = limit
		_, err = For[Deployment](c, Deployments).List(t.Context(), "shop", ListOptions{})
		return err
	}
	page := bigAnnotationPage(10, 1000)
	// A page over the limit, streamed: read up to the limit, then refused.
	err := list(pageTransport{page}, int64(len(page))-1)
	var de *DecodeError
	if !errors.As(err, &de) || !errors.Is(err, ErrBodyTooLarge) {
		t.Errorf("page over the limit: %v", err)
	}
	// Exactly at the limit: fine.
	if err := list(pageTransport{page}, int64(len(page))); err != nil {
		t.Errorf("page at the limit: %v", err)
	}
	// One item over the object limit is refused within a read of it.
	big := &chunkReader{b: bigAnnotationPage(1, 5<<20)}
	err = list(bodyTransport{big, -1}, 16<<20)
	if !errors.As(err, &de) || !errors.Is(err, ErrBodyTooLarge) || !strings.Contains(err.Error(), "list item over 4194304 bytes") {
		t.Errorf("item over the object limit: %v", err)
	}
	if read := 5<<20 - len(big.b); read > objectLimit+2*readSize {
		t.Errorf("read %d bytes of an item over the %d-byte limit", read, objectLimit)
	}
	// A Content-Length over the limit is refused before reading.
	body := &failingBody{err: errors.New("must not be read")}
	err = list(bodyTransport{body, 1 << 30}, 1<<20)
	if !errors.As(err, &de) || !errors.Is(err, ErrBodyTooLarge) || !strings.Contains(err.Error(), "1073741824 bytes") {
		t.Errorf("Content-Length over the limit: %v", err)
	}
	// A connection lost part way is a RequestError.
	lost := errors.New("connection reset")
	err = list(bodyTransport{&failingBody{data: page[:len(page)/2], err: lost}, -1}, 1<<20)
	var re *RequestError
	if !errors.As(err, &re) || !errors.Is(err, lost) {
		t.Errorf("lost connection: %v", err)
	}
}

func TestConfigLimits(t *testing.T) {
	page := bigAnnotationPage(2, 1000)
	c, err := New(&Config{Host: "https://api.example", Transport: pageTransport{page}, ObjectLimit: 100, ListPageLimit: int64(len(page)) - 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := For[Deployment](c, Deployments).List(t.Context(), "shop", ListOptions{}); !errors.Is(err, ErrBodyTooLarge) {
		t.Errorf("list over ListPageLimit: %v", err)
	}
	if _, err := For[Deployment](c, Deployments).Get(t.Context(), "shop", "x", GetOptions{}); !errors.Is(err, ErrBodyTooLarge) {
		t.Errorf("get over ObjectLimit: %v", err)
	}
	c, err = New(&Config{Host: "https://api.example"})
	if err != nil {
		t.Fatal(err)
	}
	if c.objectLimit != 4<<20 || c.listLimit != 16<<20 {
		t.Errorf("default limits %d and %d", c.objectLimit, c.listLimit)
	}
}
