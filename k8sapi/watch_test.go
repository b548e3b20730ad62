package k8sapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// serveStream answers a watch with body, flushed, then ends the stream.
// newWatcher returns a watcher of the stream body, as Typed.Watch opens
// one.
func newWatcher[T any](op *operation, body io.ReadCloser, cancel context.CancelFunc, limit int64) *Watcher[T] {
	w := new(Watcher[T])
	w.open(op, body, cancel, limit)
	return w
}

func serveStream(body []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(200)
		w.Write(body)
	}
}

func TestWatchRecordedStream(t *testing.T) {
	srv := newAPIServer(t, serveStream(testdata(t, "watch-deployments.json")))
	c, _ := newTestClient(t, srv, nil)
	w, err := For[Deployment](c, Deployments).Watch(t.Context(), "shop", ListOptions{
		LabelSelector: "app.kubernetes.io/name=web", FieldSelector: "metadata.name=web",
		ResourceVersion: "48200", ResourceVersionMatch: "NotOlderThan", TimeoutSeconds: 300,
		AllowWatchBookmarks: true, SendInitialEvents: ptr(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	type got struct {
		Type     EventType
		Name, RV string
		Replicas int32
	}
	var events []got
	for {
		ev, err := w.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var r int32
		if ev.Object.Spec.Replicas != nil {
			r = *ev.Object.Spec.Replicas
		}
		events = append(events, got{ev.Type, ev.Object.Name, ev.Object.ResourceVersion, r})
	}
	want := []got{{Added, "web", "48213", 3}, {Bookmark, "", "48240", 0}, {Modified, "web", "48230", 5}, {Deleted, "web", "48251", 5}}
	if !reflect.DeepEqual(events, want) {
		t.Errorf("events\n%v\nwant\n%v", events, want)
	}
	if _, err := w.Next(); err != io.EOF {
		t.Errorf("Next after the end: %v, want io.EOF again", err)
	}
	r := srv.requests()[0]
	q, _ := url.ParseQuery(r.RawQuery)
	wantQ := url.Values{"watch": {"1"}, "labelSelector": {"app.kubernetes.io/name=web"}, "fieldSelector": {"metadata.name=web"},
		"resourceVersion": {"48200"}, "resourceVersionMatch": {"NotOlderThan"}, "timeoutSeconds": {"300"},
		"allowWatchBookmarks": {"true"}, "sendInitialEvents": {"true"}}
	if r.Method != "GET" || r.Path != "/apis/apps/v1/namespaces/shop/deployments" || !reflect.DeepEqual(q, wantQ) {
		t.Errorf("sent %s %s %v", r.Method, r.Path, q)
	}
}

func TestWatchErrorEvent(t *testing.T) {
	srv := newAPIServer(t, serveStream(testdata(t, "watch-error-gone.json")))
	c, _ := newTestClient(t, srv, nil)
	w, err := For[Deployment](c, Deployments).Watch(t.Context(), "", ListOptions{ResourceVersion: "48000"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if ev, err := w.Next(); err != nil || ev.Type != Added {
		t.Fatalf("first event: %v %v", ev.Type, err)
	}
	_, err = w.Next()
	var ae *APIError
	if !errors.As(err, &ae) || !IsGone(err) || ae.Op != "watch" || ae.Code != 410 || ae.Status.Reason != "Expired" {
		t.Fatalf("got %v, want 410 *APIError", err)
	}
	if want := "k8sapi: watch deployments: 410 Expired: too old resource version: 48000 (48213)"; err.Error() != want {
		t.Errorf("Error() = %q, want %q", err, want)
	}
	if _, err2 := w.Next(); err2 != err {
		t.Errorf("Next after an error: %v, want the same error", err2)
	}
}

func TestWatchOpenFails(t *testing.T) {
	srv := newAPIServer(t, serveFile(t, 403, "status-403-forbidden.json"))
	c, _ := newTestClient(t, srv, nil)
	_, err := For[Deployment](c, Deployments).Watch(t.Context(), "shop", ListOptions{})
	var ae *APIError
	if !errors.As(err, &ae) || ae.Op != "watch" || !IsForbidden(err) {
		t.Fatalf("got %v", err)
	}
}

// TestWatchHostileStreams feeds the watcher bad streams; each must end in
// a typed error, never a panic or a hang.
func TestWatchHostileStreams(t *testing.T) {
	added := `{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"1"}}}` + "\n"
	tests := []struct {
		name   string
		stream string
		events int    // good events before the error
		want   error  // errors.Is target, or nil to only check the type
		isAPI  bool   // *APIError rather than *DecodeError
		substr string // in the message
	}{
		{"garbage line", added + "this is not json\n" + added, 1, nil, false, "invalid character"},
		{"truncated", added + `{"type":"MODIFIED","object":{"metadata":{"na`, 1, io.ErrUnexpectedEOF, false, ""},
		{"unknown type", `{"type":"RENAMED","object":{}}`, 0, nil, false, `unknown event type "RENAMED"`},
		{"type not string", `{"type":7,"object":{}}`, 0, nil, false, "not a string"},
		{"not an object", `["ADDED",{}]`, 0, nil, false, "not a JSON object"},
		{"bare string", `"ADDED"`, 0, nil, false, "not a JSON object"},
		{"no type", `{"object":{}}`, 0, nil, false, "no type"},
		{"no object", `{"type":"ADDED"}`, 0, nil, false, "no object"},
		{"object of wrong shape", `{"type":"ADDED","object":{"metadata":"x"}}`, 0, nil, false, "cannot unmarshal"},
		{"error event not a status", `{"type":"ERROR","object":"boom"}`, 0, nil, false, "cannot unmarshal"},
		{"error event other object", `{"type":"ERROR","object":{"kind":"Pod"}}`, 0, nil, false, "not a Status"},
		{"error event object first", `{"object":{"kind":"Status","code":500,"reason":"InternalError","message":"etcd"},"type":"ERROR"}`, 0, nil, true, "500 InternalError: etcd"},
		{"error event then more", `{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired","message":"too old"}}` + "\n" + added, 0, nil, true, "410 Expired: too old"},
		{"garbage error event then more", `{"type":"ERROR","object":"<html>"}` + "\n" + added, 0, nil, false, "cannot unmarshal"},
		{"control characters in message", `{"type":"ERROR","object":{"kind":"Status","code":500,"message":"a\u001b[2Jb\nc"}}`, 0, nil, true, `500 InternalError: a\u001b[2Jb c`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newAPIServer(t, serveStream([]byte(tt.stream)))
			c, _ := newTestClient(t, srv, nil)
			w, err := For[Deployment](c, Deployments).Watch(t.Context(), "", ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			var n int
			for {
				_, err = w.Next()
				if err != nil {
					break
				}
				n++
			}
			var de *DecodeError
			var ae *APIError
			switch {
			case n != tt.events:
				t.Errorf("%d events before the error, want %d", n, tt.events)
			case tt.isAPI && !errors.As(err, &ae):
				t.Errorf("got %v (%T), want *APIError", err, err)
			case !tt.isAPI && !errors.As(err, &de):
				t.Errorf("got %v (%T), want *DecodeError", err, err)
			case tt.want != nil && !errors.Is(err, tt.want):
				t.Errorf("got %v, want it to wrap %v", err, tt.want)
			case !strings.Contains(err.Error(), tt.substr) || !strings.HasPrefix(err.Error(), "k8sapi: watch deployments: "):
				t.Errorf("error %q, want it to contain %q", err, tt.substr)
			}
		})
	}
}

func TestWatchObjectBeforeType(t *testing.T) {
	stream := `{"object":{"metadata":{"name":"a"}},"extra":[1,{"x":2}],"type":"DELETED"}` + "\n" +
		`{"type":"ADDED","object":{"metadata":{"name":"b"}}}`
	srv := newAPIServer(t, serveStream([]byte(stream)))
	c, _ := newTestClient(t, srv, nil)
	w, err := For[Deployment](c, Deployments).Watch(t.Context(), "", ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	e1, err1 := w.Next()
	e2, err2 := w.Next()
	_, err3 := w.Next()
	if err1 != nil || err2 != nil || err3 != io.EOF || e1.Type != Deleted || e1.Object.Name != "a" || e2.Type != Added || e2.Object.Name != "b" {
		t.Errorf("got %v %v %v / %v %v %v", e1.Type, e1.Object.Name, err1, e2.Type, e2.Object.Name, err2)
	}
}

func TestWatchHugeEvent(t *testing.T) {
	// One event of 17 MiB, over the 4 MiB per-event limit, sent without
	// newlines so nothing but the limit can stop it.
	big := bytes.Repeat([]byte("x"), 17<<20)
	srv := newAPIServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"type":"ADDED","object":{"metadata":{"name":"`)
		w.Write(big)
		io.WriteString(w, `"}}}`)
	})
	c, _ := newTestClient(t, srv, nil)
	w, err := For[json.RawMessage](c, ConfigMaps).Watch(t.Context(), "", ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	_, err = w.Next()
	var de *DecodeError
	if !errors.As(err, &de) || !errors.Is(err, ErrBodyTooLarge) {
		t.Fatalf("got %v, want *DecodeError wrapping ErrBodyTooLarge", err)
	}
	if w.in.read > objectLimit+64<<10 {
		t.Errorf("read %d bytes for a %d-byte limit", w.in.read, objectLimit)
	}
}

func TestWatchEventLimitIsPerEvent(t *testing.T) {
	// Many small events add up to far more than the limit: fine.
	var stream bytes.Buffer
	for i := 0; i < 200; i++ {
		stream.WriteString(`{"type":"ADDED","object":{"metadata":{"name":"` + strings.Repeat("n", 900) + `"}}}` + "\n")
	}
	srv := newAPIServer(t, serveStream(stream.Bytes()))
	c, _ := newTestClient(t, srv, nil)
	w, err := For[Deployment](c, Deployments).Watch(t.Context(), "", ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.in.itemLimit = 4 << 10 // each event is about 1 KiB; the stream is 190 KiB
	n := 0
	for {
		if _, err = w.Next(); err != nil {
			break
		}
		n++
	}
	if err != io.EOF || n != 200 {
		t.Errorf("%d events then %v, want 200 then io.EOF", n, err)
	}
}

// blockingStream sends one event and then holds the stream open until the
// client goes away.
func blockingStream(w http.ResponseWriter, r *http.Request) {
	w.WriteHeader(200)
	io.WriteString(w, `{"type":"ADDED","object":{"metadata":{"name":"a"}}}`+"\n")
	w.(http.Flusher).Flush()
	<-r.Context().Done()
}

func TestWatchCloseWhileBlocked(t *testing.T) {
	srv := newAPIServer(t, blockingStream)
	c, _ := newTestClient(t, srv, nil)
	w, err := For[Deployment](c, Deployments).Watch(t.Context(), "", ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Next(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := w.Next()
		done <- err
	}()
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ { // Close is safe to call concurrently and twice
		wg.Add(1)
		go func() { defer wg.Done(); w.Close() }()
	}
	wg.Wait()
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("Next after Close: %v, want ErrClosed", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Next still blocked 30s after Close")
	}
}

func TestWatchContextCanceled(t *testing.T) {
	srv := newAPIServer(t, blockingStream)
	c, _ := newTestClient(t, srv, nil)
	ctx, cancel := context.WithCancel(t.Context())
	w, err := For[Deployment](c, Deployments).Watch(ctx, "", ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.Next()
	cancel()
	_, err = w.Next()
	var re *RequestError
	if !errors.As(err, &re) || !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want *RequestError wrapping context.Canceled", err)
	}
}

// silenceableListener hands out connections that can be made to go
// silent: they then drop everything they read and discard what they
// write, like a server that has hung or a network path that has died.
type silenceableListener struct {
	net.Listener
	mu    sync.Mutex
	conns []*silenceableConn
}

func (l *silenceableListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	sc := &silenceableConn{Conn: c, quiet: make(chan struct{}), closed: make(chan struct{})}
	l.mu.Lock()
	l.conns = append(l.conns, sc)
	l.mu.Unlock()
	return sc, nil
}

func (l *silenceableListener) silence() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		c.quietOnce.Do(func() { close(c.quiet) })
	}
}

type silenceableConn struct {
	net.Conn
	quiet, closed        chan struct{}
	quietOnce, closeOnce sync.Once
}

func (c *silenceableConn) isQuiet() bool {
	select {
	case <-c.quiet:
		return true
	default:
		return false
	}
}

func (c *silenceableConn) Read(p []byte) (int, error) {
	if !c.isQuiet() {
		n, err := c.Conn.Read(p)
		if !c.isQuiet() || err != nil {
			return n, err
		}
	}
	<-c.closed // silent: what arrived is dropped, nothing more comes
	return 0, net.ErrClosed
}

func (c *silenceableConn) Write(p []byte) (int, error) {
	if c.isQuiet() {
		return len(p), nil
	}
	return c.Conn.Write(p)
}

func (c *silenceableConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// TestWatchDeadConnection makes the server go silent mid-watch over real
// TLS and HTTP/2: the health-check ping must end the watch with an error
// within about twice the ping timeout, well before the context's deadline.
func TestWatchDeadConnection(t *testing.T) {
	hs := httptest.NewUnstartedServer(http.HandlerFunc(blockingStream))
	l := &silenceableListener{Listener: hs.Listener}
	hs.Listener = l
	hs.EnableHTTP2 = true
	hs.StartTLS()
	t.Cleanup(hs.Close)
	t.Cleanup(hs.CloseClientConnections) // runs first: unblocks the silent conns
	srv := &apiServer{Server: hs}
	c, _ := newTestClient(t, srv, func(c *Config) { c.PingTimeout = time.Second })

	const safetyNet = 60 * time.Second
	ctx, cancel := context.WithTimeout(t.Context(), safetyNet)
	defer cancel()
	w, err := For[Deployment](c, Deployments).Watch(ctx, "", ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Next(); err != nil {
		t.Fatal(err)
	}
	l.silence()
	start := time.Now()
	_, err = w.Next()
	elapsed := time.Since(start)
	t.Logf("silent connection detected after %v: %v", elapsed, err)
	var re *RequestError
	if !errors.As(err, &re) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v after %v, want a connection error before the %v safety net", err, elapsed, safetyNet)
	}
}
