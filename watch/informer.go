package watch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// Handler receives the changes to the cache. Each field may be nil. The
// callbacks run one at a time, in order, on the goroutine that called
// [Informer.Run], after the store has been updated; they should be quick
// (typically they add a key to a work queue). They must not mutate the
// objects they are given. [Informer.Listing] tells the changes a list
// found from those the watch brought.
type Handler[T any] struct {
	// OnAdd is called for an object that is new to the cache, including
	// every object of the first list.
	OnAdd func(obj *T)
	// OnUpdate is called for an object whose resourceVersion changed.
	OnUpdate func(old, new *T)
	// OnDelete is called for an object that left the cache: deleted on
	// the server, or missing from a relist. obj is the last state seen.
	OnDelete func(obj *T)
}

// OnChange returns a Handler that calls f with the object of every add,
// update (the new object) and delete, for a caller that only needs to
// know which object changed.
func OnChange[T any](f func(obj *T)) Handler[T] {
	return Handler[T]{OnAdd: f, OnUpdate: func(_, obj *T) { f(obj) }, OnDelete: f}
}

// Config says what an [Informer] watches. The zero value of each field
// other than Source is useful.
type Config[T any] struct {
	// Source lists and watches the resource. Required; see [ClientSource].
	Source Source[T]
	// Namespace limits the informer to one namespace. Empty means all
	// namespaces (and is the only choice for cluster-scoped resources).
	Namespace string
	// LabelSelector, FieldSelector and ShardSelector filter objects, in
	// the API's text form (see [k8sapi.ListOptions]). Empty means all
	// objects.
	LabelSelector, FieldSelector, ShardSelector string
	// PageSize is the number of objects per list page. Zero means 500.
	// The first list asks the server's cache, which ignores it. A page
	// over the client's size limit is asked for again, consistently, with
	// half as many objects, down to one, until the list ends.
	PageSize int64
	// DisableStreamingList asks for the initial state, and the state
	// after a 410, as a paginated list followed by a watch. False means a
	// streaming list: a watch that starts with the existing objects
	// (sendInitialEvents), whose end bookmark replaces the store, which
	// holds no page whole. An informer whose server refuses one (400 or
	// 422), ends one before its end bookmark, or sends nothing for a
	// minute after its opening (or for a watch's silence limit, see
	// WatchTimeout, before its end bookmark) lists and watches instead,
	// for the rest of its Run, and logs that once.
	DisableStreamingList bool
	// Handler receives the changes. The zero value receives nothing.
	Handler Handler[T]
	// Indexers adds indexes to the store, by name, such as
	// [ControllerUID]. Nil means none.
	Indexers map[string]IndexFunc[T]
	// Transform, when non-nil, is called on each object of a list page
	// and of a watch event (bookmarks aside) as soon as it is decoded,
	// before the store, the indexes or the Handler see it. It may change
	// the object in place, which is the informer's own: to drop the
	// fields the program never reads, so that the cache holds only what
	// it needs (see [TrimMeta]). It must keep the name, namespace and
	// resourceVersion. Objects given to [Cache.Wrote] are kept as they
	// are. Nil means objects are kept as decoded.
	Transform func(obj *T)
	// Name labels log lines, such as "deployments". Empty means none.
	Name string
	// Logger receives reconnects and relists, one line per episode. Nil
	// means no logging.
	Logger *slog.Logger
	// WatchTimeout is the shortest timeout a watch asks of the server;
	// each watch asks for a random one between WatchTimeout and twice
	// that. Zero means 5 minutes, so 5 to 10. A watch may stay silent
	// for its timeout plus a margin of a tenth of WatchTimeout (30 s by
	// default) before it is deemed dead and restarted. A list page or the
	// opening of a watch that gets no answer within twice WatchTimeout
	// plus that margin is abandoned and retried.
	WatchTimeout time.Duration
}

// Object is the constraint of P, the pointer type of T, in the generic
// functions of this package and those built on it: *T, with object
// metadata. It is inferred, as in watch.New(cfg).
type Object[T any] interface {
	*T
	k8sapi.Object
}

// Informer keeps a [Store] equal to the server's state of a resource and
// tells a [Handler] about every change. Create one with [New] and start it
// with [Informer.Run], once. Its methods are safe for concurrent use.
type Informer[T any] struct {
	core  informer[*T]
	store *Store[T]
}

// informer is the state and code of an Informer. P is the objects' pointer
// type, as in machine and store: the binary holds one for all object types.
type informer[P any] struct {
	machine[P]           // its step
	src        source[P] // Config.Source, as a pointerSource; nil if that is nil
	handler    handler[P]
	transform  func(P) // Config.Transform, never nil
	store      *store[P]
	ns, name   string
	logger     *slog.Logger
	synced     atomic.Bool
	listing    atomic.Bool // while the handlers are told the changes of a list
	own        atomic.Bool // while they are told of a deletion recorded by Cache.Deleted

	mu     sync.Mutex // guards the fields below
	stats  StatsSnapshot
	health health       // the machine's, as of its last step
	added  []handler[P] // by AddHandler, after handler
}

// handler is a Handler on P.
type handler[P any] struct {
	OnAdd    func(obj P)
	OnUpdate func(old, new P)
	OnDelete func(obj P)
}

// New returns an informer for cfg. P is the pointer type of T; it is
// inferred, as in watch.New(cfg).
func New[T any, P Object[T]](cfg Config[T]) *Informer[T] {
	meta := func(obj *T) *k8sapi.ObjectMeta { return P(obj).GetObjectMeta() }
	inf := &Informer[T]{store: newStore(meta, cfg.Indexers)}
	s := settings{cfg.LabelSelector, cfg.FieldSelector, cfg.ShardSelector, cfg.PageSize, cfg.DisableStreamingList, cfg.WatchTimeout, ""}
	if cs, ok := cfg.Source.(clientSource[T]); ok {
		s.resource = strings.TrimSuffix(cs.Resource.Resource+"."+cs.Resource.Group, ".") + "/" + cs.Resource.Version
	}
	inf.core.init(meta, &s, cfg.Transform, cfg.Logger)
	inf.core.handler, inf.core.store = handler[*T](cfg.Handler), &inf.store.core
	inf.core.ns, inf.core.name = cfg.Namespace, cfg.Name
	if cfg.Source != nil {
		inf.core.src = pointerSource[T, Source[T]]{cfg.Source}
	}
	return inf
}

// init sets the informer's machine, transform and logger, with New's defaults.
func (inf *informer[P]) init(meta func(P) *k8sapi.ObjectMeta, s *settings, transform func(P), logger *slog.Logger) {
	// A value zero or negative gets the default.
	s.PageSize = cmp.Or(max(s.PageSize, 0), defaultPageSize)
	s.WatchTimeout = cmp.Or(max(s.WatchTimeout, 0), defaultWatchTimeout)
	inf.machine, inf.transform = machine[P]{meta, *s}, transform
	if transform == nil {
		inf.transform = func(P) {} // objects kept as decoded
	}
	inf.logger = cmp.Or(logger, slog.New(slog.DiscardHandler))
}

// AddHandler adds h to the handlers that receive the changes, after
// Config.Handler and those added before, so that several users can share
// one informer. Added while the informer runs, h receives the changes
// from then on, and none for the objects already in the store.
func (inf *Informer[T]) AddHandler(h Handler[T]) { inf.core.addHandler(handler[*T](h)) }

func (inf *informer[P]) addHandler(h handler[P]) {
	inf.mu.Lock()
	inf.added = append(inf.added, h)
	inf.mu.Unlock()
}

// Store returns the informer's cache. It is empty until [Informer.HasSynced].
func (inf *Informer[T]) Store() *Store[T] { return inf.store }

// HasSynced reports whether the first full list has been delivered to the
// store and the handler.
func (inf *Informer[T]) HasSynced() bool { return inf.core.synced.Load() }

// LastEvent returns when the informer last heard from the server: a list,
// a watch opening, an event or a bookmark. A time much older than the
// watch timeout means the watch is dead. Zero before the first.
func (inf *Informer[T]) LastEvent() time.Time { return inf.core.lastEvent() }

func (inf *informer[P]) lastEvent() time.Time {
	inf.mu.Lock()
	defer inf.mu.Unlock()
	return inf.health.heard
}

// Healthy returns nil while the informer's list and watch work: the last
// attempt succeeded and the server has not been silent for longer than a
// watch may be. Otherwise it returns a one-line reason, for a readiness
// probe. A watch that the server ends normally is not a failure.
func (inf *Informer[T]) Healthy(now time.Time) error { return inf.core.healthy(now) }

func (inf *informer[P]) healthy(now time.Time) error {
	inf.mu.Lock()
	defer inf.mu.Unlock()
	if h := inf.health; !h.failingSince.IsZero() {
		return fmt.Errorf("watch: failing for %v: %v", now.Sub(h.failingSince).Round(time.Second), h.err)
	}
	// The longest a healthy watch stays silent: its timeout (at most twice
	// WatchTimeout) plus the margin.
	if last := inf.health.heard; !last.IsZero() && now.Sub(last) > inf.requestLimit() {
		return fmt.Errorf("watch: silent for %v", now.Sub(last).Round(time.Second))
	}
	return nil
}

// Stats returns a snapshot of the informer's counters.
func (inf *Informer[T]) Stats() StatsSnapshot { return inf.core.snapshot() }

func (inf *informer[P]) snapshot() StatsSnapshot {
	inf.mu.Lock()
	st := inf.stats
	inf.mu.Unlock()
	st.Objects, st.Bytes = int64(inf.store.len()), inf.store.bytes.Load()
	return st
}

// count adds one to c, a counter in inf.stats, and returns the handlers
// added.
func (inf *informer[P]) count(c *int64) []handler[P] {
	inf.mu.Lock()
	*c++
	added := inf.added
	inf.mu.Unlock()
	return added
}

// Listing reports whether the change the handlers are being told of comes
// from a list (the first list or a relist, streaming or not) rather than
// from the watch. Call it from a [Handler]'s callback, for example to queue
// the keys of a list behind those of live changes (see
// queue.Queue.AddBacklog); at other times it reports whether the informer
// is telling its handlers the changes of a list.
func (inf *Informer[T]) Listing() bool { return inf.core.listing.Load() }

// Run lists and watches until ctx ends, then returns nil. It retries every
// failure with backoff, so it returns an error only when the informer
// cannot start: no Source. Call it once: the informer's store has one
// writer.
func (inf *Informer[T]) Run(ctx context.Context) error { return inf.core.run(ctx) }

func (inf *informer[P]) run(ctx context.Context) error {
	if inf.src == nil {
		return errors.New("watch: Config.Source is nil")
	}
	r := runner[P]{inf: inf}
	r.run(ctx)
	return nil
}

// runner is the driver of one Run: it carries out the machine's actions
// and feeds the outcomes back as inputs.
type runner[P any] struct {
	inf *informer[P]
	s   state[P]

	// The open watch: its stream, the cancel of the context it was opened
	// with, the timer that ends it when it stays silent too long, and how
	// long that is: idle, its timeout plus the margin, and silence, what
	// the timer runs for now (less before a streaming list's first event).
	// A watch is open while the machine waits for its events: do closes
	// it at the next action that asks for an input.
	stream        stream[P]
	cancel        context.CancelFunc
	timer         *time.Timer
	idle, silence time.Duration
}

func (r *runner[P]) run(ctx context.Context) {
	defer r.closeStream()
	next := input[P]{kind: inStart}
	for ctx.Err() == nil {
		next.now = time.Now()
		next.rand = rand.Float64()
		var acts []action[P]
		r.s, acts = r.inf.step(r.s, next)
		r.inf.mu.Lock()
		r.inf.health = r.s.health
		r.inf.mu.Unlock()
		// Only the last action may yield an input (see step).
		have := false
		for i := range acts {
			next, have = r.do(ctx, &acts[i])
		}
		if have {
			continue
		}
		if r.stream == nil {
			// Nothing to wait for: a machine bug. Avoid spinning.
			r.inf.logger.Error("watch: informer stalled", "phase", r.s.phase)
			<-ctx.Done()
			return
		}
		next = r.next()
	}
}

// do carries out one action. It returns the input that follows from it,
// if any. An action that asks for an input ends the open watch, if any:
// the machine no longer waits for its events.
func (r *runner[P]) do(ctx context.Context, a *action[P]) (input[P], bool) {
	inf := r.inf
	if a.kind == actList || a.kind == actWatch || a.kind == actWait {
		r.closeStream()
	}
	switch a.kind {
	case actList:
		return inf.list(ctx, &a.opts), true
	case actWatch:
		return r.open(ctx, a), true
	case actWait:
		select {
		case <-ctx.Done():
		case <-time.After(a.delay):
		}
		return input[P]{kind: inTimer}, true
	case actReplace:
		if inf.synced.Load() {
			inf.count(&inf.stats.Relists)
		}
		inf.listing.Store(true)
		for _, c := range inf.store.replace(a.items) {
			inf.notify(c)
		}
		inf.listing.Store(false)
		inf.synced.Store(true)
	case actApply:
		key := inf.store.key(a.obj)
		if a.typ != k8sapi.Deleted {
			inf.notify(change[P]{inf.store.put(key, a.obj), a.obj})
		} else if old, own := inf.store.remove(key); !isNil(old) {
			// Nothing for a key never seen, or already gone: no duplicate
			// delete. OnDelete gets the event's object, the last state seen.
			inf.own.Store(own)
			inf.notify(change[P]{old: a.obj})
			inf.own.Store(false)
		}
	case actLog:
		args := []any{"informer", inf.name, "namespace", inf.ns}
		if a.err != nil {
			args = append(args, "err", a.err)
		}
		inf.logger.Log(ctx, a.level, "watch: "+a.msg, args...)
	}
	return input[P]{}, false
}

// list asks for the list page of opts, and transforms its objects.
func (inf *informer[P]) list(ctx context.Context, opts *k8sapi.ListOptions) input[P] {
	limit := inf.requestLimit()
	lctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	list, err := inf.src.pagePointers(lctx, inf.ns, opts)
	if err != nil && lctx.Err() != nil && ctx.Err() == nil {
		err = fmt.Errorf("watch: list got no answer within %v: %w", limit, err)
	}
	if err == nil && list != nil {
		for _, obj := range list.Items {
			inf.transform(obj)
		}
	}
	return input[P]{kind: inListed, list: list, err: err}
}

// open opens the watch that a asks for, which becomes the open watch.
func (r *runner[P]) open(ctx context.Context, a *action[P]) input[P] {
	inf := r.inf
	if a.reconnect {
		inf.count(&inf.stats.Reconnects)
	}
	// The stream lives as long as wctx. Opening it must not take longer
	// than the silence a watch is allowed; once it is open, the same
	// timer ends it when it stays silent (see next).
	limit := inf.requestLimit()
	wctx, cancel := context.WithCancel(ctx)
	timer := time.AfterFunc(limit, cancel)
	st, err := inf.src.watchPointers(wctx, inf.ns, &a.opts)
	if !timer.Stop() && ctx.Err() == nil { // wctx has ended, and the stream with it
		err = fmt.Errorf("watch: watch got no answer within %v: %w", limit, cmp.Or(err, context.Canceled))
	}
	if err != nil {
		cancel()
		return input[P]{kind: inOpened, err: err}
	}
	r.idle = time.Duration(a.opts.TimeoutSeconds)*time.Second + inf.cfg.WatchTimeout/idleMargin
	r.silence = r.idle
	if a.opts.SendInitialEvents != nil {
		// A server that ignores sendInitialEvents sends nothing at first.
		r.silence = min(r.idle, streamStartLimit)
	}
	timer.Reset(r.silence)
	r.stream, r.cancel, r.timer = st, cancel, timer
	return input[P]{kind: inOpened}
}

// pointers returns list with a pointer to a copy of its own of each item:
// a pointer into the page would keep the whole page alive for as long as
// any one object of it stays in the cache.
func pointers[T any](list *k8sapi.List[T]) *k8sapi.List[*T] {
	if list == nil {
		return nil
	}
	out := &k8sapi.List[*T]{TypeMeta: list.TypeMeta, Metadata: list.Metadata}
	for _, item := range list.Items {
		out.Items = append(out.Items, &item)
	}
	return out
}

// source is a pointerSource and stream a pointerStream, as an informer
// calls them. The calls of a generic interface's methods make the linker
// keep every method of the same name in the binary: these have names of
// their own, and pointerSource and pointerStream call the Source's and
// the Stream's methods as a type parameter's, which the linker keeps
// alone.
type source[P any] interface {
	pagePointers(ctx context.Context, ns string, opts *k8sapi.ListOptions) (*k8sapi.List[P], error)
	watchPointers(ctx context.Context, ns string, opts *k8sapi.ListOptions) (stream[P], error)
}

type stream[P any] interface {
	nextPointer() (k8sapi.WatchEvent[P], error)
}

// pointerSource is the source on *T that an informer reads, S being
// Source[T]: each object of a list page is given a copy of its own (see
// pointers), and each of a watch event a copy of the event's.
type pointerSource[T any, S Source[T]] struct{ src S }

func (s pointerSource[T, S]) pagePointers(ctx context.Context, ns string, opts *k8sapi.ListOptions) (*k8sapi.List[*T], error) {
	list, err := s.src.List(ctx, ns, *opts)
	return pointers(list), err
}

func (s pointerSource[T, S]) watchPointers(ctx context.Context, ns string, opts *k8sapi.ListOptions) (stream[*T], error) {
	st, err := s.src.Watch(ctx, ns, *opts)
	if err == nil && st == nil {
		err = errors.New("watch: Source.Watch returned no stream")
	}
	if err != nil {
		return nil, err
	}
	c := io.Closer(st) // the stream lives as long as ctx
	context.AfterFunc(ctx, func() { c.Close() })
	return pointerStream[T, Stream[T]]{st}, nil
}

// pointerStream is a stream on *T, S being Stream[T].
type pointerStream[T any, S Stream[T]] struct{ st S }

func (s pointerStream[T, S]) nextPointer() (k8sapi.WatchEvent[*T], error) {
	ev, err := s.st.Next()
	obj := ev.Object // a copy: &ev.Object would give the binary a WatchEvent type per object shape
	return k8sapi.WatchEvent[*T]{Type: ev.Type, Object: &obj}, err
}

// notify counts one change to the cache and tells the handlers.
func (inf *informer[P]) notify(c change[P]) {
	old, obj := c.old, c.new
	var added []handler[P]
	switch {
	case isNil(old):
		added = inf.count(&inf.stats.Added)
	case isNil(obj):
		added = inf.count(&inf.stats.Deleted)
	default:
		added = inf.count(&inf.stats.Modified)
	}
	inf.handler.call(old, obj)
	for _, h := range added {
		h.call(old, obj)
	}
}

// call tells h of one change: an add when old is nil, a delete when obj
// is, else an update.
func (h handler[P]) call(old, obj P) {
	switch {
	case isNil(old):
		if h.OnAdd != nil {
			h.OnAdd(obj)
		}
	case isNil(obj):
		if h.OnDelete != nil {
			h.OnDelete(old)
		}
	case h.OnUpdate != nil:
		h.OnUpdate(old, obj)
	}
}

// requestLimit bounds a list page and the opening of a watch: the longest
// timeout a watch may ask for, plus the margin.
func (inf *informer[P]) requestLimit() time.Duration {
	return 2*inf.cfg.WatchTimeout + inf.cfg.WatchTimeout/idleMargin
}

// next reads the next event of the open watch. A watch silent for longer
// than its timeout plus the margin is closed by its timer and reported
// idle, whatever its last read returned.
func (r *runner[P]) next() input[P] {
	ev, err := r.stream.nextPointer()
	if !r.timer.Reset(r.idle) {
		return input[P]{kind: inIdle, err: fmt.Errorf("watch: no data for %v", r.silence)}
	}
	r.silence = r.idle
	if err == nil && ev.Type == k8sapi.Bookmark {
		r.inf.count(&r.inf.stats.Bookmarks)
	} else if err == nil {
		r.inf.transform(ev.Object)
	}
	return input[P]{kind: inEvent, typ: ev.Type, obj: ev.Object, err: err}
}

// closeStream closes the open stream, if any, and stops its timer: the
// stream's context ends, which closes it (see pointerSource.watchPointers).
func (r *runner[P]) closeStream() {
	if r.stream == nil {
		return
	}
	r.cancel()
	r.timer.Stop()
	r.stream, r.cancel, r.timer = nil, nil, nil
}

// StatsSnapshot counts what an informer did, and what its store holds, as
// of one moment; see [Informer.Stats]: the relists, reconnects, events by
// type and the store's size that the metrics code exposes.
//
// Bytes is an estimate, kept up to date as objects are stored and
// removed: the sum, over the objects, of the size of each object's struct
// and of the memory its exported fields refer to (strings' bytes, slices'
// arrays, pointed-to values, maps' keys and values), as decoded. It leaves
// out the indexes, the maps' own buckets, the allocator's rounding and the
// sharing of a string between objects, so the heap the store keeps is
// larger, though in proportion to it.
type StatsSnapshot struct {
	Relists    int64 // full lists after the first (after a 410)
	Reconnects int64 // watches reopened after a failure
	Bookmarks  int64 // bookmarks received
	Added      int64 // objects added to the cache
	Modified   int64 // objects updated in the cache
	Deleted    int64 // objects removed from the cache
	Objects    int64 // objects in the store now
	Bytes      int64 // an estimate of the memory the store's objects hold: see above
}
