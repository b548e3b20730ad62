package watch

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/testenv/logbuf"
)

// scriptedSource is a Source whose answers the test gives one at a time:
// each List or Watch call waits for the test to reply through its channel.
type scriptedSource struct {
	lists   chan listCall
	watches chan watchCall
}

type listCall struct {
	opts  k8sapi.ListOptions
	reply chan listReply
}

type listReply struct {
	list *k8sapi.List[thing]
	err  error
}

type watchCall struct {
	opts  k8sapi.ListOptions
	reply chan watchReply
}

type watchReply struct {
	stream *scriptedStream
	err    error
}

func newScriptedSource() *scriptedSource {
	return &scriptedSource{lists: make(chan listCall), watches: make(chan watchCall)}
}

func (s *scriptedSource) List(ctx context.Context, _ string, opts k8sapi.ListOptions) (*k8sapi.List[thing], error) {
	c := listCall{opts, make(chan listReply, 1)}
	select {
	case s.lists <- c:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case r := <-c.reply:
		return r.list, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *scriptedSource) Watch(ctx context.Context, _ string, opts k8sapi.ListOptions) (Stream[thing], error) {
	c := watchCall{opts, make(chan watchReply, 1)}
	select {
	case s.watches <- c:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case r := <-c.reply:
		if r.err != nil {
			return nil, r.err
		}
		return r.stream, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// scriptedStream is a Stream fed by the test.
type scriptedStream struct {
	events    chan input[*thing]
	closeOnce sync.Once
	closed    chan struct{}
}

func newScriptedStream() *scriptedStream {
	return &scriptedStream{events: make(chan input[*thing]), closed: make(chan struct{})}
}

func (s *scriptedStream) Next() (k8sapi.WatchEvent[thing], error) {
	select {
	case it := <-s.events:
		if it.err != nil {
			return k8sapi.WatchEvent[thing]{}, it.err
		}
		return k8sapi.WatchEvent[thing]{Type: it.typ, Object: *it.obj}, nil
	case <-s.closed:
		return k8sapi.WatchEvent[thing]{}, errors.New("scripted stream closed")
	}
}

func (s *scriptedStream) Close() error {
	s.closeOnce.Do(func() { close(s.closed) })
	return nil
}

func (s *scriptedStream) send(t *testing.T, typ k8sapi.EventType, o *thing) {
	t.Helper()
	select {
	case s.events <- input[*thing]{typ: typ, obj: o}:
	case <-s.closed:
		t.Fatalf("send %s %s: stream closed", typ, o.Name)
	}
}

func (s *scriptedStream) end(err error) {
	select {
	case s.events <- input[*thing]{err: err}:
	case <-s.closed:
	}
}

func (s *scriptedStream) isClosed() bool {
	select {
	case <-s.closed:
		return true
	default:
		return false
	}
}

// expectList waits for the informer's next list call and answers it.
func (s *scriptedSource) expectList(t *testing.T, wantRV string, list *k8sapi.List[thing], err error) {
	t.Helper()
	c := <-s.lists
	if c.opts.ResourceVersion != wantRV {
		t.Fatalf("list resourceVersion = %q, want %q", c.opts.ResourceVersion, wantRV)
	}
	c.reply <- listReply{list, err}
}

// expectNoCall fails the test if a list or watch call is waiting for an
// answer the script does not give.
func (s *scriptedSource) expectNoCall(t *testing.T) {
	t.Helper()
	select {
	case c := <-s.lists:
		t.Errorf("unexpected list: %+v", c.opts)
	case c := <-s.watches:
		t.Errorf("unexpected watch: %+v", c.opts)
	default:
	}
}

// expectWatch waits for the informer's next watch call and answers it with
// a new stream, or err.
func (s *scriptedSource) expectWatch(t *testing.T, wantRV string, err error) *scriptedStream {
	t.Helper()
	c := <-s.watches
	if c.opts.ResourceVersion != wantRV {
		t.Fatalf("watch resourceVersion = %q, want %q", c.opts.ResourceVersion, wantRV)
	}
	if !c.opts.AllowWatchBookmarks {
		t.Error("watch without allowWatchBookmarks")
	}
	if c.opts.TimeoutSeconds <= 0 {
		t.Errorf("watch timeoutSeconds = %d, want in [300, 600)", c.opts.TimeoutSeconds)
	}
	if err != nil {
		c.reply <- watchReply{err: err}
		return nil
	}
	st := newScriptedStream()
	c.reply <- watchReply{stream: st}
	return st
}

// recordingHandler records handler calls as strings.
type recordingHandler struct {
	mu    sync.Mutex
	calls []string
}

func (h *recordingHandler) handler() Handler[thing] {
	return Handler[thing]{
		OnAdd: func(o *thing) { h.add("add " + o.Name + "@" + o.ResourceVersion) },
		OnUpdate: func(old, o *thing) {
			h.add("update " + o.Name + "@" + old.ResourceVersion + "->" + o.ResourceVersion)
		},
		OnDelete: func(o *thing) { h.add("delete " + o.Name + "@" + o.ResourceVersion) },
	}
}

func (h *recordingHandler) add(s string) {
	h.mu.Lock()
	h.calls = append(h.calls, s)
	h.mu.Unlock()
}

func (h *recordingHandler) take() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := strings.Join(h.calls, "; ")
	h.calls = nil
	return s
}

func startInformer(t *testing.T, cfg Config[thing]) (*Informer[thing], context.CancelFunc, chan error) {
	t.Helper()
	inf := New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	// A test that fails halfway still stops the informer: inside a
	// synctest bubble a goroutine left blocked would fail the whole test
	// binary and hide the other tests' results.
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- inf.Run(ctx) }()
	return inf, cancel, done
}

// A handler added before Run gets every change, as Config.Handler does,
// and one with only OnUpdate gets the updates alone.
func TestInformerAddHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newScriptedSource()
		first, second := &recordingHandler{}, &recordingHandler{}
		inf := New(Config[thing]{DisableStreamingList: true, Source: src, Handler: first.handler()})
		inf.AddHandler(second.handler())
		var updates recordingHandler
		inf.AddHandler(Handler[thing]{OnUpdate: updates.handler().OnUpdate})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go inf.Run(ctx)
		src.expectList(t, "0", page("10", "", obj("a", "5")), nil)
		st := src.expectWatch(t, "10", nil)
		st.send(t, k8sapi.Modified, obj("a", "12"))
		st.send(t, k8sapi.Deleted, obj("a", "13"))
		synctest.Wait()
		const want = "add a@5; update a@5->12; delete a@13"
		if a, b := first.take(), second.take(); a != want || b != want {
			t.Errorf("Config.Handler got %q, the added one %q; want %q", a, b, want)
		}
		if got := updates.take(); got != "update a@5->12" {
			t.Errorf("an OnUpdate alone got %q", got)
		}
	})
}

func TestInformerLifecycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newScriptedSource()
		rec := &recordingHandler{}
		var logs logbuf.Buffer
		inf, cancel, done := startInformer(t, Config[thing]{DisableStreamingList: true,
			Source:   src,
			Handler:  rec.handler(),
			Indexers: map[string]IndexFunc[thing]{IndexControllerUID: ControllerUID[thing]},
			Logger:   slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
		})

		if inf.HasSynced() || !inf.LastEvent().IsZero() {
			t.Fatal("synced before the first list")
		}
		src.expectList(t, "0", page("10", "", obj("a", "5"), obj("b", "6"), owned("c", "7", "w", true)), nil)
		st := src.expectWatch(t, "10", nil)
		synctest.Wait()
		if !inf.HasSynced() {
			t.Fatal("not synced after the first list")
		}
		if got := rec.take(); got != "add a@5; add b@6; add c@7" {
			t.Fatalf("after list: %s", got)
		}
		if got := names(inf.Store().ByIndex(IndexControllerUID, "uid-w")); len(got) != 1 || got[0] != "c" {
			t.Fatalf("index: %q", got)
		}

		st.send(t, k8sapi.Added, obj("d", "11"))
		st.send(t, k8sapi.Modified, obj("a", "12"))
		st.send(t, k8sapi.Deleted, obj("b", "13"))
		st.send(t, k8sapi.Deleted, obj("b", "13")) // a duplicate delete is dropped
		st.send(t, k8sapi.Bookmark, bookmark("14", false))
		synctest.Wait()
		if got := rec.take(); got != "add d@11; update a@5->12; delete b@13" {
			t.Fatalf("after events: %s", got)
		}
		if !inf.LastEvent().Equal(time.Now()) {
			t.Errorf("LastEvent = %v, want now %v", inf.LastEvent(), time.Now())
		}

		// The server ends the watch at its timeout: watch on from the
		// bookmark, without a list.
		time.Sleep(5 * time.Minute) // fake time inside the bubble
		st.end(io.EOF)
		st = src.expectWatch(t, "14", nil)

		// Compaction: an ERROR 410. The relist is consistent; c vanished,
		// a changed, d unchanged, e new.
		st.send(t, k8sapi.Modified, obj("d", "15"))
		st.end(goneEvent())
		synctest.Wait()
		if !st.isClosed() {
			t.Error("stream not closed after the 410")
		}
		src.expectList(t, "", page("30", "", obj("a", "20"), obj("d", "15"), obj("e", "21")), nil)
		st = src.expectWatch(t, "30", nil)
		synctest.Wait()
		if got := rec.take(); got != "update d@11->15; update a@12->20; add e@21; delete c@7" {
			t.Fatalf("after relist: %s", got)
		}
		if got := inf.Store().Keys(); strings.Join(got, ",") != "ns/a,ns/d,ns/e" {
			t.Fatalf("store keys after relist: %q", got)
		}
		if got := inf.Store().ByIndex(IndexControllerUID, "uid-w"); got != nil {
			t.Errorf("index still has c after relist")
		}

		src.expectNoCall(t) // two lists and three watches in all, as scripted
		stats := inf.Stats()
		var held int64 // what the store's puts, removes and relist added up
		for _, o := range inf.Store().List() {
			held += heldBytes(reflect.ValueOf(o), 0)
		}
		want := StatsSnapshot{Relists: 1, Reconnects: 0, Bookmarks: 1, Added: 5, Modified: 3, Deleted: 2, Objects: 3, Bytes: held}
		if stats != want {
			t.Errorf("stats = %+v\nwant %+v", stats, want)
		}
		if n := strings.Count(logs.String(), "relisting"); n != 1 {
			t.Errorf("relist logged %d times:\n%s", n, logs.String())
		}

		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v after cancel, want nil", err)
		}
		if !st.isClosed() {
			t.Error("stream left open after Run returned")
		}
	})
}

func TestInformerIdleWatchRestarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newScriptedSource()
		inf, cancel, done := startInformer(t, Config[thing]{DisableStreamingList: true, Source: src})
		defer func() { cancel(); <-done }()

		src.expectList(t, "0", page("10", ""), nil)
		st := src.expectWatch(t, "10", nil)
		startWatch := time.Now()
		st.send(t, k8sapi.Bookmark, bookmark("11", false))

		// Nothing more arrives. The informer must give up on the stream
		// after the watch timeout plus the margin, and watch again.
		st2 := src.expectWatch(t, "11", nil)
		silent := time.Since(startWatch)
		if !st.isClosed() {
			t.Error("silent stream not closed")
		}
		if silent < 5*time.Minute+30*time.Second || silent > 11*time.Minute+time.Second {
			t.Errorf("silent watch noticed after %v, want between 5m30s and 11m", silent)
		}
		if got := inf.Stats().Reconnects; got != 1 {
			t.Errorf("Reconnects = %d, want 1", got)
		}
		st2.send(t, k8sapi.Added, obj("a", "12"))
		synctest.Wait()
		if _, ok := inf.Store().Get("ns", "a"); !ok {
			t.Error("event after reconnect not applied")
		}
	})
}

func TestInformerBackoffAndLogsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newScriptedSource()
		var logs logbuf.Buffer
		inf, cancel, done := startInformer(t, Config[thing]{DisableStreamingList: true,
			Source: src,
			Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
		})
		defer func() { cancel(); <-done }()

		src.expectList(t, "0", page("10", ""), nil)
		st := src.expectWatch(t, "10", nil)
		st.end(netErr())

		// The server is down: reconnects fail, each wait longer, up to 30s.
		var waits []time.Duration
		last := time.Now()
		for range 8 {
			c := <-src.watches
			waits = append(waits, time.Since(last))
			c.reply <- watchReply{err: netErr()}
			last = time.Now()
		}
		for i, w := range waits {
			lo := min(backoffInitial<<i, backoffMax) / 2
			if w < lo || w > 2*lo {
				t.Errorf("wait %d = %v, want within [%v, %v]", i, w, lo, 2*lo)
			}
		}
		// A 429 asks for 45s, more than the backoff.
		c := <-src.watches
		c.reply <- watchReply{err: tooMany(45 * time.Second)}
		last = time.Now()
		st = src.expectWatch(t, "10", nil)
		if w := time.Since(last); w < 45*time.Second {
			t.Errorf("retried after %v, before the server's Retry-After of 45s", w)
		}
		st.send(t, k8sapi.Bookmark, bookmark("12", false))
		synctest.Wait()
		if n := strings.Count(logs.String(), "level="); n != 1 {
			t.Errorf("one reconnect episode logged %d lines, want 1:\n%s", n, logs.String())
		}
		if got := inf.Stats().Reconnects; got != 10 {
			t.Errorf("Reconnects = %d, want 10", got)
		}
	})
}

func TestInformerStreamingList(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newScriptedSource()
		rec := &recordingHandler{}
		inf, cancel, done := startInformer(t, Config[thing]{Source: src, Handler: rec.handler()})
		defer func() { cancel(); <-done }()

		c := <-src.watches
		if c.opts.SendInitialEvents == nil || !*c.opts.SendInitialEvents || c.opts.ResourceVersionMatch != "NotOlderThan" {
			t.Fatalf("first watch is not a streaming list: %+v", c.opts)
		}
		st := newScriptedStream()
		c.reply <- watchReply{stream: st}
		st.send(t, k8sapi.Added, obj("a", "3"))
		synctest.Wait()
		if inf.HasSynced() || inf.Store().Len() != 0 || rec.take() != "" {
			t.Fatal("initial events delivered before the end bookmark")
		}
		st.send(t, k8sapi.Bookmark, bookmark("9", true))
		synctest.Wait()
		if !inf.HasSynced() || rec.take() != "add a@3" {
			t.Fatal("initial events not delivered at the end bookmark")
		}
	})
}

func TestInformerStreamingListRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newScriptedSource()
		inf, cancel, done := startInformer(t, Config[thing]{Source: src})
		defer func() { cancel(); <-done }()
		c := <-src.watches
		c.reply <- watchReply{err: &k8sapi.APIError{Op: "watch", Code: 422, Status: k8sapi.Status{Reason: "Invalid"}}}
		src.expectList(t, "0", page("10", "", obj("a", "1")), nil)
		src.expectWatch(t, "10", nil)
		synctest.Wait()
		if !inf.HasSynced() {
			t.Fatal("not synced after falling back to list")
		}
	})
}

// A server that ignores sendInitialEvents opens the watch and sends
// nothing: a minute later the informer lists and watches instead, says
// so once, and keeps to that for its Run, a relist after a 410 included.
func TestInformerStreamingListIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newScriptedSource()
		var logs logbuf.Buffer
		inf, cancel, done := startInformer(t, Config[thing]{Source: src,
			Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
		defer func() { cancel(); <-done }()
		c := <-src.watches
		if c.opts.SendInitialEvents == nil {
			t.Fatalf("first watch is not a streaming list: %+v", c.opts)
		}
		began := time.Now()
		st := newScriptedStream()
		c.reply <- watchReply{stream: st}
		src.expectList(t, "0", page("10", "", obj("a", "1")), nil)
		if waited := time.Since(began); waited != time.Minute {
			t.Errorf("silent streaming list given up after %v, want 1m0s", waited)
		}
		if !st.isClosed() {
			t.Error("the silent streaming list was left open")
		}
		w := src.expectWatch(t, "10", nil)
		synctest.Wait()
		if !inf.HasSynced() {
			t.Fatal("not synced after falling back to list")
		}
		w.end(gone410())
		src.expectList(t, "", page("20", "", obj("a", "1")), nil) // not a streaming list again
		src.expectWatch(t, "20", nil)
		synctest.Wait()
		if n := strings.Count(logs.String(), "streaming list silent; using list and watch"); n != 1 {
			t.Errorf("fallback logged %d times, want once:\n%s", n, logs.String())
		}
	})
}

func TestInformerUnansweredRequestsAreAbandoned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newScriptedSource()
		var logs logbuf.Buffer
		_, cancel, done := startInformer(t, Config[thing]{DisableStreamingList: true, Source: src, WatchTimeout: time.Minute,
			Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
		defer func() { cancel(); <-done }()
		limit := 2*time.Minute + 6*time.Second // a margin of a tenth of WatchTimeout

		// A list the server never answers.
		began := time.Now()
		<-src.lists // not answered
		src.expectList(t, "0", page("10", ""), nil)
		if waited := time.Since(began); waited < limit || waited > limit+time.Second {
			t.Errorf("unanswered list retried after %v, want %v plus a backoff", waited, limit)
		}
		// A watch that never opens.
		began = time.Now()
		<-src.watches // not answered
		src.expectWatch(t, "10", nil)
		if waited := time.Since(began); waited < limit || waited > limit+2*time.Second {
			t.Errorf("unopened watch retried after %v, want %v plus a backoff", waited, limit)
		}
		if n := strings.Count(logs.String(), "\n"); n != 2 {
			t.Errorf("%d lines logged, want one per failure, 2:\n%s", n, logs.String())
		}
		for _, want := range []string{"list got no answer within 2m6s", "watch got no answer within 2m6s"} {
			if !strings.Contains(logs.String(), want) {
				t.Errorf("log lacks %q:\n%s", want, logs.String())
			}
		}
	})
}

func TestInformerConfigErrors(t *testing.T) {
	inf := New(Config[thing]{})
	if err := inf.Run(context.Background()); err == nil || !strings.HasPrefix(err.Error(), "watch: ") {
		t.Errorf("Run without a Source = %v, want a watch: error", err)
	}
}

func TestInformerHealthy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newScriptedSource()
		inf, cancel, done := startInformer(t, Config[thing]{DisableStreamingList: true, Source: src})
		defer func() { cancel(); <-done }()

		if err := inf.Healthy(time.Now()); err != nil {
			t.Fatalf("before the first list: %v", err)
		}
		src.expectList(t, "0", page("10", ""), nil)
		st := src.expectWatch(t, "10", nil)
		synctest.Wait()
		if err := inf.Healthy(time.Now()); err != nil {
			t.Fatalf("watching: %v", err)
		}

		// A watch the server ends normally is no failure.
		st.end(io.EOF)
		st = src.expectWatch(t, "10", nil)
		synctest.Wait()
		if err := inf.Healthy(time.Now()); err != nil {
			t.Fatalf("after a clean end: %v", err)
		}

		// The server goes away: unhealthy until a watch opens again.
		st.end(netErr())
		c := <-src.watches
		c.reply <- watchReply{err: netErr()}
		synctest.Wait()
		err := inf.Healthy(time.Now())
		if err == nil || !strings.Contains(err.Error(), "failing for") {
			t.Fatalf("server down: Healthy = %v", err)
		}
		st = src.expectWatch(t, "10", nil)
		synctest.Wait()
		if err := inf.Healthy(time.Now()); err != nil {
			t.Fatalf("after reconnecting: %v", err)
		}

		// Silence past the longest watch plus the margin is unhealthy.
		if err := inf.Healthy(time.Now().Add(inf.core.requestLimit() + time.Second)); err == nil || !strings.Contains(err.Error(), "silent") {
			t.Fatalf("silent: Healthy = %v", err)
		}
		_ = st
	})
}

// A list that fails at once is reported with its own error, not as one
// that got no answer.
func TestInformerListErrorIsNotATimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newScriptedSource()
		inf, cancel, done := startInformer(t, Config[thing]{DisableStreamingList: true, Source: src})
		defer func() { cancel(); <-done }()
		src.expectList(t, "0", nil, errors.New("k8sapi: list things: decode: response body too large"))
		synctest.Wait()
		err := inf.Healthy(time.Now())
		if err == nil || !strings.Contains(err.Error(), "too large") || strings.Contains(err.Error(), "no answer") {
			t.Fatalf("Healthy = %v, want the list's own error", err)
		}
		src.expectList(t, "0", page("10", ""), nil)
	})
}

// Healthy allows silence up to the longest watch (twice WatchTimeout) plus
// a tenth of WatchTimeout, and no longer: 10m30s by default.
func TestInformerHealthySilenceLimit(t *testing.T) {
	tests := []struct {
		name  string
		cfg   Config[thing]
		limit time.Duration
	}{
		{"defaults", Config[thing]{}, 10*time.Minute + 30*time.Second},
		{"negative means default", Config[thing]{WatchTimeout: -time.Minute}, 10*time.Minute + 30*time.Second},
		{"configured", Config[thing]{WatchTimeout: time.Minute}, 2*time.Minute + 6*time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				src := newScriptedSource()
				tt.cfg.Source, tt.cfg.DisableStreamingList = src, true
				inf, cancel, done := startInformer(t, tt.cfg)
				defer func() { cancel(); <-done }()
				src.expectList(t, "0", page("10", ""), nil)
				src.expectWatch(t, "10", nil)
				synctest.Wait()
				last := inf.LastEvent()
				if err := inf.Healthy(last.Add(tt.limit)); err != nil {
					t.Errorf("silent for %v: Healthy = %v, want nil", tt.limit, err)
				}
				if err := inf.Healthy(last.Add(tt.limit + time.Nanosecond)); err == nil || !strings.Contains(err.Error(), "silent") {
					t.Errorf("silent for %v and 1ns: Healthy = %v, want silent", tt.limit, err)
				}
			})
		})
	}
}

// A list asks for pages of Config.PageSize objects, 500 when it is zero.
func TestInformerPageSize(t *testing.T) {
	for _, tt := range []struct {
		size, want int64
	}{{0, 500}, {7, 7}} {
		synctest.Test(t, func(t *testing.T) {
			src := newScriptedSource()
			_, cancel, done := startInformer(t, Config[thing]{DisableStreamingList: true, Source: src, PageSize: tt.size})
			defer func() { cancel(); <-done }()
			c := <-src.lists
			if c.opts.Limit != tt.want {
				t.Errorf("PageSize %d: list limit = %d, want %d", tt.size, c.opts.Limit, tt.want)
			}
			c.reply <- listReply{page("10", ""), nil}
			src.expectWatch(t, "10", nil)
		})
	}
}

// lateSource is a Source whose watches answer badly: the first opens a
// stream only once the informer has given up on it (its context ended),
// the second returns neither a stream nor an error; later ones, and every
// list, go to the scriptedSource.
type lateSource struct {
	*scriptedSource
	calls int
	late  *scriptedStream
}

func (s *lateSource) Watch(ctx context.Context, ns string, opts k8sapi.ListOptions) (Stream[thing], error) {
	s.calls++
	switch s.calls {
	case 1:
		<-ctx.Done()
		s.late = newScriptedStream()
		return s.late, nil
	case 2:
		return nil, nil
	}
	return s.scriptedSource.Watch(ctx, ns, opts)
}

// A watch that opens only after the informer gave up on it is closed, not
// leaked, and one that comes back without a stream is a failure; both are
// retried.
func TestInformerBadWatchAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &lateSource{scriptedSource: newScriptedSource()}
		var logs logbuf.Buffer
		inf, cancel, done := startInformer(t, Config[thing]{DisableStreamingList: true,
			Source: src, WatchTimeout: time.Minute,
			Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		})
		defer func() { cancel(); <-done }()
		src.expectList(t, "0", page("10", ""), nil)
		st := src.expectWatch(t, "10", nil)
		synctest.Wait()
		if src.late == nil || !src.late.isClosed() {
			t.Error("a stream opened after the informer gave up on it was left open")
		}
		if n := strings.Count(logs.String(), "\n"); n != 2 {
			t.Errorf("%d lines logged, want one per failure, 2:\n%s", n, logs.String())
		}
		for _, want := range []string{"watch got no answer within 2m6s", "Source.Watch returned no stream"} {
			if !strings.Contains(logs.String(), want) {
				t.Errorf("log lacks %q:\n%s", want, logs.String())
			}
		}
		st.send(t, k8sapi.Added, obj("a", "11"))
		synctest.Wait()
		if _, ok := inf.Store().Get("ns", "a"); !ok {
			t.Error("the watch that finally opened is not applied")
		}
	})
}

// A watch that opens and then says nothing at all is given up exactly its
// timeout plus a tenth of WatchTimeout after it opened, and watched again.
func TestInformerSilentWatchFromTheStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newScriptedSource()
		inf, cancel, done := startInformer(t, Config[thing]{DisableStreamingList: true, Source: src, WatchTimeout: time.Minute})
		defer func() { cancel(); <-done }()
		src.expectList(t, "0", page("10", ""), nil)
		c := <-src.watches
		st := newScriptedStream()
		c.reply <- watchReply{stream: st}
		silence := time.Duration(c.opts.TimeoutSeconds)*time.Second + 6*time.Second
		time.Sleep(silence - time.Nanosecond) // fake time inside the bubble
		synctest.Wait()
		if st.isClosed() {
			t.Fatalf("stream closed before its timeout %ds plus 6s", c.opts.TimeoutSeconds)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if !st.isClosed() {
			t.Fatalf("stream still open after its timeout %ds plus 6s", c.opts.TimeoutSeconds)
		}
		src.expectWatch(t, "10", nil)
		if got := inf.Stats().Reconnects; got != 1 {
			t.Errorf("Reconnects = %d, want 1", got)
		}
	})
}

// A Deleted event calls OnDelete when it removes an object, at once, and
// not at all for a key the cache never held.
func TestInformerDeleteOfUnknownKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newScriptedSource()
		rec := &recordingHandler{}
		inf, cancel, done := startInformer(t, Config[thing]{DisableStreamingList: true, Source: src, Handler: rec.handler()})
		defer func() { cancel(); <-done }()
		src.expectList(t, "0", page("10", "", obj("a", "5")), nil)
		st := src.expectWatch(t, "10", nil)
		synctest.Wait()
		rec.take()
		st.send(t, k8sapi.Deleted, obj("b", "11"))
		synctest.Wait()
		if got := rec.take(); got != "" {
			t.Errorf("delete of a key never seen: %s", got)
		}
		st.send(t, k8sapi.Deleted, obj("a", "12"))
		synctest.Wait()
		if got := rec.take(); got != "delete a@12" {
			t.Errorf("delete of a: %q, want delete a@12", got)
		}
		if got := inf.Stats().Deleted; got != 1 {
			t.Errorf("Deleted = %d, want 1", got)
		}
	})
}

// A Source whose List returns neither a list nor an error has failed, with
// a Transform too: the informer reports it and lists again, and the next
// page is transformed and stored.
func TestInformerNoListNoError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newScriptedSource()
		inf, cancel, done := startInformer(t, Config[thing]{DisableStreamingList: true, Source: src,
			Transform: func(o *thing) { o.Labels = map[string]string{"seen": "yes"} }})
		defer func() { cancel(); <-done }()
		src.expectList(t, "0", nil, nil)
		synctest.Wait()
		if err := inf.Healthy(time.Now()); err == nil {
			t.Error("Healthy after a list with no answer = nil, want an error")
		}
		src.expectList(t, "0", page("10", "", obj("a", "10")), nil)
		synctest.Wait()
		if a, ok := inf.Store().Get("ns", "a"); !ok || a.Labels["seen"] != "yes" {
			t.Errorf("after the next list, the store has %+v, %v; want a, transformed", a, ok)
		}
	})
}

// unservedAPI is a fake API server, as an http.RoundTripper, for the
// resource widgets.example.com/v1: until served is set it answers each
// request as a kube-apiserver does while the resource's CRD is not
// applied, 404 with a text body; then it lists one widget and keeps each
// watch open, silent, until its request ends.
type unservedAPI struct {
	served   atomic.Bool
	requests atomic.Int64
}

func (a *unservedAPI) RoundTrip(req *http.Request) (*http.Response, error) {
	a.requests.Add(1)
	resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}}, Request: req}
	switch {
	case !a.served.Load():
		resp.StatusCode, resp.Header = http.StatusNotFound, http.Header{"Content-Type": {"text/plain; charset=utf-8"}}
		resp.Body = io.NopCloser(strings.NewReader("404 page not found\n"))
	case req.URL.Query().Get("watch") == "1":
		pr, pw := io.Pipe()
		context.AfterFunc(req.Context(), func() { pw.Close() })
		resp.Body = pr
	default:
		resp.Body = io.NopCloser(strings.NewReader(`{"metadata":{"resourceVersion":"7"},"items":[{"metadata":{"namespace":"ns","name":"a","resourceVersion":"6"}}]}`))
	}
	return resp, nil
}

// An informer whose resource is not served yet waits for it: it lists
// again with backoff (a handful of requests a minute, no hot loop), says
// why in Healthy, logs it once, and syncs once the resource is served.
func TestInformerWaitsForAResourceNotServed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := &unservedAPI{}
		c, err := k8sapi.New(&k8sapi.Config{Host: "https://api.example", Transport: api})
		if err != nil {
			t.Fatal(err)
		}
		var logs logbuf.Buffer
		widgets := k8sapi.Resource{Group: "example.com", Version: "v1", Resource: "widgets", Namespaced: true}
		inf, cancel, done := startInformer(t, Config[thing]{DisableStreamingList: true, Source: ClientSource[thing](c, widgets), Name: "widgets",
			Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
		defer func() { cancel(); <-done }()

		time.Sleep(time.Minute)
		synctest.Wait()
		// Lists 0.4-0.8s apart at first, doubling to 15-30s: 7 to 9 in a
		// minute.
		if n := api.requests.Load(); n < 7 || n > 9 {
			t.Errorf("%d requests in a minute, want 7 to 9", n)
		}
		const reason = "widgets.example.com/v1 is not served (404): waiting for it"
		if err := inf.Healthy(time.Now()); err == nil || !strings.Contains(err.Error(), reason) {
			t.Errorf("Healthy = %v, want %q", err, reason)
		}
		if n := strings.Count(logs.String(), "level="); n != 1 || !strings.Contains(logs.String(), reason) {
			t.Errorf("logged %d lines, want 1 saying %q:\n%s", n, reason, logs.String())
		}
		if inf.HasSynced() {
			t.Fatal("synced with nothing served")
		}

		api.served.Store(true)
		time.Sleep(30 * time.Second) // the longest backoff
		synctest.Wait()
		if _, ok := inf.Store().Get("ns", "a"); !inf.HasSynced() || !ok {
			t.Fatalf("served for 30s: synced %v, object a in the store %v", inf.HasSynced(), ok)
		}
		if err := inf.Healthy(time.Now()); err != nil {
			t.Errorf("served: Healthy = %v", err)
		}
	})
}
