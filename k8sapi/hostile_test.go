package k8sapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
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

// A server that answers 101 Switching Protocols to a request that asked
// for no upgrade and then stays silent (the audit's case) fails a get or
// a watch at once with an *APIError, the connection closed: the call
// neither reads the silent connection nor waits for its context's end.
// A server silent from the start is given up at the context's end.
func TestSwitchingProtocolsFailsAtOnce(t *testing.T) {
	get := func(ctx context.Context, c *Client) error {
		_, err := For[Deployment](c, Deployments).Get(ctx, "shop", "web", GetOptions{})
		return err
	}
	watch := func(ctx context.Context, c *Client) error {
		_, err := For[Deployment](c, Deployments).Watch(ctx, "shop", ListOptions{})
		return err
	}
	tests := []struct {
		name     string
		call     func(context.Context, *Client) error
		answer   string        // what the server writes before it stays silent
		timeout  time.Duration // the call's context
		wantCode int           // 0: a RequestError at the context's end
	}{
		{"get", get, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: silence\r\n\r\n", 2 * time.Minute, 101},
		{"watch", watch, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: silence\r\n\r\n", 2 * time.Minute, 101},
		{"silent get", get, "", 100 * time.Millisecond, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The server holds the connection until the client closes it,
			// or gives up after 10 s.
			closedByClient := make(chan bool, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				conn, buf, err := w.(http.Hijacker).Hijack()
				if err != nil {
					closedByClient <- false
					return
				}
				defer conn.Close()
				buf.WriteString(tt.answer)
				buf.Flush()
				conn.SetReadDeadline(time.Now().Add(10 * time.Second))
				_, err = io.Copy(io.Discard, conn)
				closedByClient <- err == nil
			}))
			defer srv.Close()
			c, err := New(&Config{Host: srv.URL, MaxRetries: -1})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), tt.timeout)
			defer cancel()
			err = tt.call(ctx, c)
			if !<-closedByClient {
				t.Fatal("the client held the connection until the server gave up")
			}
			var ae *APIError
			switch {
			case tt.wantCode == 0 && !errors.Is(err, context.DeadlineExceeded):
				t.Fatalf("got %v, want the context's deadline", err)
			case tt.wantCode == 0:
			case !errors.As(err, &ae) || ae.Code != tt.wantCode || ctx.Err() != nil:
				t.Fatalf("got %v (context: %v), want an *APIError with code %d before the context's end", err, ctx.Err(), tt.wantCode)
			case !strings.HasPrefix(err.Error(), "k8sapi: "+tt.name+" deployments shop") || !strings.HasSuffix(err.Error(), ": 101 SwitchingProtocols"):
				t.Errorf("error %q, want the call and 101 SwitchingProtocols", err)
			}
		})
	}
}
