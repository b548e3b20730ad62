package k8sapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// Tests against servers that misbehave: each must end in a typed error,
// with memory and time bounded.

func TestTruncatedJSON(t *testing.T) {
	full := testdata(t, "deployment.json")
	srv := newAPIServer(t, func(w http.ResponseWriter, r *http.Request) { w.Write(full[:len(full)/2]) })
	c, _ := newTestClient(t, srv, nil)
	_, err := For[Deployment](c, Deployments).Get(t.Context(), "shop", "web", GetOptions{})
	var de *DecodeError
	if !errors.As(err, &de) || de.Op != "get" {
		t.Fatalf("got %v, want *DecodeError", err)
	}
}

func TestNotJSONSuccess(t *testing.T) {
	srv := newAPIServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "<html>login page</html>") })
	c, _ := newTestClient(t, srv, nil)
	_, err := For[Deployment](c, Deployments).List(t.Context(), "shop", ListOptions{})
	var de *DecodeError
	if !errors.As(err, &de) || de.Op != "list" {
		t.Fatalf("got %v, want *DecodeError", err)
	}
}

// writeJunk writes n bytes of a never-ending JSON string in 32 KiB chunks.
func writeJunk(w io.Writer, n int) {
	chunk := bytes.Repeat([]byte("a"), 32<<10)
	io.WriteString(w, `{"kind":"Deployment","metadata":{"name":"`)
	for sent := 0; sent < n; sent += len(chunk) {
		if _, err := w.Write(chunk); err != nil {
			return
		}
	}
}

func TestHugeBody(t *testing.T) {
	const size = 50 << 20
	for _, withLength := range []bool{true, false} {
		t.Run("content-length "+strconv.FormatBool(withLength), func(t *testing.T) {
			srv := newAPIServer(t, func(w http.ResponseWriter, r *http.Request) {
				if withLength {
					w.Header().Set("Content-Length", strconv.Itoa(size+41))
				}
				writeJunk(w, size)
			})
			c, _ := newTestClient(t, srv, nil)
			_, err := For[Deployment](c, Deployments).Get(t.Context(), "shop", "web", GetOptions{})
			var de *DecodeError
			if !errors.As(err, &de) || !errors.Is(err, ErrBodyTooLarge) {
				t.Fatalf("got %v, want *DecodeError wrapping ErrBodyTooLarge", err)
			}
		})
	}
}

// junkTransport answers every request with 200 and a body of n generated
// bytes of unknown length, allocating nothing itself.
type junkTransport struct{ n int64 }

func (j junkTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Header: http.Header{}, ContentLength: -1, Request: r,
		Body: io.NopCloser(io.LimitReader(junkReader{}, j.n))}, nil
}

type junkReader struct{}

func (junkReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}

func TestHugeBodyMemoryBounded(t *testing.T) {
	c, err := New(&Config{Host: "https://api.example", Transport: junkTransport{50 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err = For[Deployment](c, Deployments).Get(t.Context(), "shop", "web", GetOptions{})
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrBodyTooLarge) {
		t.Fatalf("got %v, want ErrBodyTooLarge", err)
	}
	// Reading up to the 16 MiB limit, buffer growth included, allocates
	// well under the 50 MiB offered.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 40<<20 {
		t.Errorf("allocated %d MiB for a 50 MiB body", alloc>>20)
	}
}

func TestListPageLimit(t *testing.T) {
	srv := newAPIServer(t, func(w http.ResponseWriter, r *http.Request) { writeJunk(w, 2<<20) })
	c, _ := newTestClient(t, srv, nil)
	c.listLimit = 1 << 20
	_, err := For[Deployment](c, Deployments).List(t.Context(), "shop", ListOptions{})
	if !errors.Is(err, ErrBodyTooLarge) {
		t.Fatalf("got %v, want ErrBodyTooLarge", err)
	}
}

func TestSlowDrip(t *testing.T) {
	srv := newAPIServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		io.WriteString(w, `{"kind":"Deployment","metadata":{"name":"`)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-r.Context().Done():
				return
			case <-tick.C:
				w.Write([]byte("a"))
				w.(http.Flusher).Flush()
			}
		}
	})
	c, _ := newTestClient(t, srv, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	_, err := For[Deployment](c, Deployments).Get(ctx, "shop", "web", GetOptions{})
	var re *RequestError
	if !errors.As(err, &re) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want *RequestError wrapping context.DeadlineExceeded", err)
	}
}

func TestHugeErrorBody(t *testing.T) {
	srv := newAPIServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(502)
		writeJunk(w, 10<<20)
	})
	c, _ := newTestClient(t, srv, func(c *Config) { c.MaxRetries = -1 })
	_, err := For[Deployment](c, Deployments).Get(t.Context(), "shop", "web", GetOptions{})
	var ae *APIError
	if !errors.As(err, &ae) || ae.Code != 502 || len(ae.Body) > 256 || len(err.Error()) > 600 {
		t.Fatalf("got %v", err)
	}
}
