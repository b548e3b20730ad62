package watch

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// This file is the informer's core: step, a pure function from a state and
// an input to the next state and a list of actions. It does no I/O, reads
// no clock and draws no random numbers; the driver in informer.go does all
// of that and feeds the results back in as inputs.

// Backoff and timing defaults.
const (
	backoffInitial = 800 * time.Millisecond
	backoffMax     = 30 * time.Second
	backoffReset   = 2 * time.Minute // healthy this long: backoff starts over
	minWatchLife   = time.Second     // a watch that ends sooner is a failure

	defaultWatchTimeout = 5 * time.Minute // each watch asks for 1 to 2 times this
	idleMargin          = 10              // a watch may stay silent 1/10 of WatchTimeout past its timeout
	defaultPageSize     = 500
	streamStartLimit    = time.Minute // a streaming list's silence before its first event

	// InitialEventsEndAnnotation marks the bookmark that ends the initial
	// events of a streaming list.
	InitialEventsEndAnnotation = "k8s.io/initial-events-end"
)

// retryBackoff is the delay before retry number n (0-based): 800ms
// doubling to at most 30s, jittered so that clients that failed together
// retry apart.
var retryBackoff = k8sapi.Backoff{Base: backoffInitial, Max: backoffMax}

// A phase is what the machine waits for, with what it knows of the one
// request in progress; nothing else is kept of a request once its phase
// has ended. A state is in one phase, its phase field:
//
//   - nil: not started; Run's start begins a sync.
//   - [listing]: a page of a paginated list.
//   - [opening]: a watch, or a streaming list, to open.
//   - [streaming]: the next initial event of an open streaming list.
//   - [watching]: the next event of an open watch.
//   - [backoff]: the end of a delay after a failure.
//
// A sync is a paginated list, or a streaming list if the config asks for
// it and the server has not refused one and no answer was over the size
// limit. The phases follow one another so:
//
//	nil ──start──▶ listing, or opening a stream (a sync)
//	listing ──page with a continue token──▶ listing
//	listing ──last page──▶ opening
//	opening ──opened──▶ watching, or streaming for a stream
//	opening a stream ──refused──▶ listing
//	streaming ──end bookmark──▶ watching (the same watch)
//	streaming ──ended early──▶ listing
//	watching ──ended after its time──▶ opening
//	any phase ──failure──▶ backoff ──timer──▶ its retry: listing or opening
type phase interface {
	String() string
}

// A request is a phase that begins with a request to the server, as a
// retry after a backoff does: a listing or an opening.
type request interface {
	phase
	request()
}

// listing waits for a page of a paginated list.
type listing[P any] struct {
	cont    string // continue token of the page asked for; "" for the first page
	pending []P    // the objects of the pages before; none if cont is ""
	// pageSize is the objects per page, halved for each page over the
	// client's size limit; 0 means the machine's.
	pageSize int64
}

// opening waits for a watch to open: a watch from the last resourceVersion
// seen, or a streaming list.
type opening struct {
	stream  bool          // a streaming list
	timeout time.Duration // the watch's timeout; drawn when it is asked for
}

// watching waits for the next event of an open watch.
type watching struct {
	start   time.Time     // when it opened
	timeout time.Duration // the timeout it asked for
	events  int           // the events it brought, bookmarks included
}

// streaming waits for the next event of an open streaming list, before
// the bookmark that ends its initial events. The server sends the
// objects that exist, as adds, and may send changes after them; the end
// bookmark delivers the state after those, and the same connection goes
// on as a watch.
type streaming[P any] struct {
	watching
	pending []P // the objects sent so far, changes applied
}

// backoff waits for the end of a delay after a failure.
type backoff struct {
	retry request // what the end of the delay asks for
}

func (listing[P]) String() string   { return "list" }
func (opening) String() string      { return "open" }
func (watching) String() string     { return "watch" }
func (streaming[P]) String() string { return "stream" }
func (backoff) String() string      { return "wait" }

func (listing[P]) request() {}
func (opening) request()    {}

// state is everything the machine remembers. It is a value: step returns a
// new one.
type state[P any] struct {
	phase phase // what the machine waits for; nil before the start

	rv     string // last resourceVersion seen: list, event or bookmark
	synced bool   // a full list has been delivered
	// gone says the sync to come, or in progress, must be a consistent
	// list (after a 410); big that it must be a consistent paginated list
	// (a list page or watch event was over the client's size limit, and
	// the server's watch cache may ignore the page size). The end of a
	// sync clears both.
	gone, big bool

	streamRefused bool // the server refused a streaming list: no more are asked for
	// streamFailed says a streaming list failed: the sync to come is a
	// paginated list, so that a stream that keeps failing cannot keep the
	// cache from syncing. The end of a sync clears it.
	streamFailed bool

	// Backoff.
	failures     int       // consecutive failures, for the backoff delay
	relistLogged bool      // the relist in progress has been logged
	healthySince time.Time // start of the current run of successes

	health
}

// health is what the machine knows of the server's answers, as
// [Informer.Healthy] and [Informer.LastEvent] report it.
type health struct {
	_     [0]func() // not comparable: the binary needs no equality per object type
	heard time.Time // the last answer: a list page, a watch opening or event
	// failingSince is when the failure episode in progress began (it is
	// logged once), zero if none; err is its latest failure.
	failingSince time.Time
	err          error
}

// inputKind says what happened.
type inputKind uint8

const (
	inStart  inputKind = iota // Run was called
	inListed                  // a list page came back: list or err
	inOpened                  // a watch opened, or err
	inEvent                   // a watch event, or err (io.EOF: clean end)
	inTimer                   // a backoff ended
	inIdle                    // no byte arrived for too long: err says so
)

// input is one thing that happened, with the time and a uniform random
// number in [0, 1) drawn by the driver.
type input[P any] struct {
	_    [0]func() // not comparable, as health
	kind inputKind
	now  time.Time
	rand float64
	list *k8sapi.List[P] // inListed: a pointer to a copy of each item
	typ  k8sapi.EventType
	obj  P     // inEvent
	err  error // inListed, inOpened, inEvent
}

// actionKind says what the driver must do.
type actionKind uint8

const (
	actList    actionKind = iota // request a list page with opts
	actWatch                     // open a watch with opts
	actWait                      // wait for delay, then send inTimer
	actReplace                   // replace the whole cache with items: a full list
	actApply                     // apply one event (typ, obj) to the cache
	actLog                       // log msg at level, with err
)

// action is one thing for the driver to do.
type action[P any] struct {
	kind  actionKind
	opts  k8sapi.ListOptions // actList, actWatch
	delay time.Duration      // actWait
	items []P                // actReplace
	typ   k8sapi.EventType   // actApply
	obj   P                  // actApply

	reconnect bool // actWatch: this watch replaces one that failed

	level slog.Level // actLog
	msg   string
	err   error
}

// settings are the fields of Config that step reads, and the resource
// that Config.Source reads.
type settings struct {
	LabelSelector, FieldSelector, ShardSelector string
	PageSize                                    int64
	DisableStreamingList                        bool
	WatchTimeout                                time.Duration
	// resource names the resource in messages, as "widgets.example.com/v1";
	// empty for a Source other than a [ClientSource].
	resource string
}

// machine holds what step needs that never changes during a run: the
// fields of the informer's config it reads, with New's defaults filled in.
// P, like the type parameter of state, input and action, is the pointer
// type of the objects: every pointer type has the same shape, so the
// binary holds one machine for all the informers, not one per object type.
type machine[P any] struct {
	meta func(P) *k8sapi.ObjectMeta
	cfg  settings
}

// step returns the state after in and the actions to carry out, in order.
// At most one action of kinds actList, actWatch and actWait is returned,
// and it comes last: the machine waits for one thing at a time. An input
// that the phase does not wait for is stale: it changes nothing.
func (m *machine[P]) step(s state[P], in input[P]) (state[P], []action[P]) {
	var acts []action[P]
	switch p := s.phase.(type) {
	case nil:
		if in.kind == inStart {
			acts = m.ask(&s, m.newSync(&s), &in, nil)
		}
	case listing[P]:
		if in.kind == inListed {
			acts = m.listed(&s, p, &in)
		}
	case opening:
		if in.kind == inOpened {
			acts = m.opened(&s, p, &in)
		}
	case watching:
		acts = m.watched(&s, p, &in)
	case streaming[P]:
		acts = m.streamed(&s, p, &in)
	case backoff:
		if in.kind == inTimer {
			acts = m.ask(&s, p.retry, &in, nil)
		}
	}
	return s, acts
}

// newSync returns the request that begins a sync: a streaming list if
// the config asks for one, the server has not refused one and no answer
// was over the size limit; else a paginated list from its first page.
func (m *machine[P]) newSync(s *state[P]) request {
	if !m.cfg.DisableStreamingList && !s.streamRefused && !s.streamFailed && !s.big {
		return opening{stream: true}
	}
	return listing[P]{}
}

// ask moves to r and appends to acts the request it makes: a list page,
// or a watch with a timeout drawn by in.rand.
//
// The first list asks for resourceVersion "0": any state the server's watch
// cache holds will do, which spares etcd. (The server ignores limit then
// and answers in one page.) A list after a 410 or an oversized answer, and
// any later full list, asks for "": a consistent read, never older than
// what the cache has already seen. Later pages of a list carry only the
// continue token. A watch goes on from the last resourceVersion seen. A
// streaming list asks for "" with NotOlderThan: the server sends the
// current state, then a bookmark, then changes.
func (m *machine[P]) ask(s *state[P], r request, in *input[P], acts []action[P]) []action[P] {
	a := action[P]{kind: actList, opts: k8sapi.ListOptions{LabelSelector: m.cfg.LabelSelector,
		FieldSelector: m.cfg.FieldSelector, ShardSelector: m.cfg.ShardSelector}}
	switch r := r.(type) {
	case listing[P]:
		s.phase = r
		a.opts.Limit = cmp.Or(r.pageSize, m.cfg.PageSize)
		a.opts.Continue = r.cont
		if r.cont == "" && !s.gone && !s.big && !s.synced {
			a.opts.ResourceVersion = "0"
		}
	case opening:
		r.timeout = m.timeout(in.rand)
		s.phase = r
		// A watch opened during a failure episode replaces one that failed.
		a.kind, a.reconnect = actWatch, !s.failingSince.IsZero()
		a.opts.ResourceVersion = s.rv
		a.opts.AllowWatchBookmarks = true
		a.opts.TimeoutSeconds = int64(r.timeout / time.Second)
		if r.stream {
			a.opts.ResourceVersion, a.opts.ResourceVersionMatch = "", "NotOlderThan"
			a.opts.SendInitialEvents = new(true)
		}
	}
	return append(acts, a)
}

// listed handles the answer to a page of l: the next page is asked for,
// or the whole list delivered and watched from its resourceVersion.
func (m *machine[P]) listed(s *state[P], l listing[P], in *input[P]) []action[P] {
	if errors.Is(in.err, k8sapi.ErrBodyTooLarge) {
		return m.pageTooLarge(s, l, in)
	}
	if in.err != nil || in.list == nil {
		return m.fail(s, in, "list failed")
	}
	m.healthy(s, in.now)
	l.pending = append(l.pending, in.list.Items...)
	if l.cont = in.list.Metadata.Continue; l.cont != "" {
		return m.ask(s, l, in, nil)
	}
	s.rv = in.list.Metadata.ResourceVersion
	return m.ask(s, opening{}, in, m.synced(s, l.pending))
}

// opened handles the opening of o's watch: its events follow, or, if it
// failed, a retry or a list instead of a refused streaming list.
func (m *machine[P]) opened(s *state[P], o opening, in *input[P]) []action[P] {
	if in.err != nil {
		if o.stream && refused(in.err) {
			// The server does not do streaming lists: list instead, now
			// and from now on.
			return m.noStream(s, "streaming list refused", in)
		}
		return m.fail(s, in, "watch failed")
	}
	m.healthy(s, in.now)
	w := watching{start: in.now, timeout: o.timeout}
	s.phase = w
	if o.stream {
		s.phase = streaming[P]{watching: w}
	}
	return nil
}

// watched handles an input of the open watch w: an event is applied to
// the cache.
func (m *machine[P]) watched(s *state[P], w watching, in *input[P]) []action[P] {
	switch {
	case in.kind == inIdle:
		return m.fail(s, in, "watch silent; reconnecting")
	case in.kind != inEvent:
		return nil
	case in.err != nil:
		return m.ended(s, w, in)
	}
	s.phase = m.event(s, w, in)
	if in.typ == k8sapi.Bookmark {
		return nil
	}
	return []action[P]{{kind: actApply, typ: in.typ, obj: in.obj}}
}

// streamed handles an input of the open streaming list l: the objects
// are collected until the end bookmark delivers them. Its silence, or
// its end, gives up streaming lists; its failure is that of any watch.
func (m *machine[P]) streamed(s *state[P], l streaming[P], in *input[P]) []action[P] {
	switch {
	case in.kind == inIdle:
		// A server that ignores sendInitialEvents sends no initial events.
		return m.noStream(s, "streaming list silent", in)
	case in.kind != inEvent || in.err != nil && !errors.Is(in.err, io.EOF):
		return m.watched(s, l.watching, in)
	case in.err != nil:
		// The stream ended before its initial events did. A server that
		// ignores sendInitialEvents does this at its timeout; list instead.
		in.err = nil
		return m.noStream(s, "streaming list ended early", in)
	}
	l.watching = m.event(s, l.watching, in)
	switch {
	case in.typ == k8sapi.Bookmark && m.meta(in.obj).Annotations[InitialEventsEndAnnotation] == "true":
		s.phase = l.watching
		return m.synced(s, l.pending)
	case in.typ == k8sapi.Added:
		l.pending = append(l.pending, in.obj)
	case in.typ != k8sapi.Bookmark:
		// A change after the initial events, before their end: the list
		// is the state after it, without an object deleted. (Rare: the
		// objects before are copied rather than shared with older states.)
		o := m.meta(in.obj)
		l.pending = slices.DeleteFunc(slices.Clone(l.pending), func(p P) bool {
			return m.meta(p).Name == o.Name && m.meta(p).Namespace == o.Namespace
		})
		if in.typ == k8sapi.Modified {
			l.pending = append(l.pending, in.obj)
		}
	}
	s.phase = l
	return nil
}

// event records an event of the open watch w, and returns w with it
// counted.
func (m *machine[P]) event(s *state[P], w watching, in *input[P]) watching {
	s.heard = in.now
	if rv := m.meta(in.obj).ResourceVersion; rv != "" {
		s.rv = rv
	}
	w.events++
	return w
}

// ended handles the end of the watch w with in.err (io.EOF if clean).
func (m *machine[P]) ended(s *state[P], w watching, in *input[P]) []action[P] {
	if !errors.Is(in.err, io.EOF) {
		return m.fail(s, in, "watch failed")
	}
	// A watch the server ends early with nothing to say, or within a
	// second whatever it said, is a failure: reopening it at once could
	// turn into a hot loop against a server in trouble.
	lived := in.now.Sub(w.start)
	if lived < minWatchLife || w.events == 0 && lived < w.timeout/2 {
		in.err = fmt.Errorf("watch: server closed the watch after %v with %d events", lived, w.events)
		return m.fail(s, in, "watch ended at once")
	}
	// The server ended the watch at its timeout: watch on from the last
	// resourceVersion, at once, without relisting.
	return m.ask(s, opening{}, in, nil)
}

// pageTooLarge handles a page of l over the client's size limit: the
// page is asked for again with half as many objects, at once, down to
// one; a page of one object over the limit (for a page, or for one
// object, which the client also checks in a list) is a failure, retried
// with backoff from the list's first page at the full page size, so that
// the list succeeds once the object is gone (a continue token would show
// the list's old snapshot, object included).
func (m *machine[P]) pageTooLarge(s *state[P], l listing[P], in *input[P]) []action[P] {
	s.big = true
	if size := cmp.Or(l.pageSize, m.cfg.PageSize); size > 1 {
		l.pageSize = size / 2
		acts := []action[P]{{kind: actLog, level: slog.LevelInfo,
			msg: fmt.Sprintf("list page too large; page size now %d", l.pageSize), err: in.err}}
		return m.ask(s, l, in, acts)
	}
	s.phase = listing[P]{}
	in.err = fmt.Errorf("watch: one object is over the client's size limit: %w", in.err)
	return m.fail(s, in, "list failed")
}

// noStream gives up streaming lists, now and from now on, for a
// paginated list, and logs why: msg, with in.err if any.
func (m *machine[P]) noStream(s *state[P], msg string, in *input[P]) []action[P] {
	s.streamRefused = true
	acts := []action[P]{{kind: actLog, level: slog.LevelInfo, msg: msg + "; using list and watch", err: in.err}}
	return m.ask(s, listing[P]{}, in, acts)
}

// synced delivers items, a full list, as the whole cache: the sync has
// ended.
func (m *machine[P]) synced(s *state[P], items []P) []action[P] {
	s.gone, s.big, s.relistLogged, s.streamFailed = false, false, false, false
	s.synced = true
	return []action[P]{{kind: actReplace, items: items}}
}

// fail records a failure, whose cause is in.err, and waits for a backoff
// before a retry.
func (m *machine[P]) fail(s *state[P], in *input[P], msg string) []action[P] {
	expired := k8sapi.IsGone(in.err)
	// After a 410 the sync is a consistent list; after an oversized
	// answer, too: reopening a watch from the same resourceVersion would
	// meet the same event again, and a list skips it once the object is
	// gone or smaller.
	s.gone = s.gone || expired
	s.big = s.big || errors.Is(in.err, k8sapi.ErrBodyTooLarge)
	switch p := s.phase.(type) {
	case opening:
		s.streamFailed = s.streamFailed || p.stream
	case streaming[P]:
		s.streamFailed = true
	}
	if !s.healthySince.IsZero() && in.now.Sub(s.healthySince) >= backoffReset {
		s.failures = 0
	}
	s.healthySince = time.Time{}
	// A server's Retry-After (as k8sapi read and capped it) wins if longer.
	delay := max(retryBackoff.Jittered(s.failures, in.rand), apiError(in.err).RetryAfter)
	s.failures++

	// Log each episode once: its start at warning level, a relist at info
	// level, the retries that follow at debug level only.
	level := slog.LevelDebug
	switch {
	case s.gone && !s.relistLogged:
		level, msg = slog.LevelInfo, "resourceVersion expired; relisting"
		s.relistLogged = true
	case s.failingSince.IsZero():
		level = slog.LevelWarn
	}
	s.failingSince = cmp.Or(s.failingSince, in.now)
	s.err = in.err
	if err := m.notServed(in.err); err != nil {
		msg, s.err = err.Error(), err
	}
	s.phase = backoff{m.retry(s, expired)}
	return []action[P]{{kind: actLog, level: level, msg: msg, err: in.err}, {kind: actWait, delay: delay}}
}

// retry returns what to ask for again after a failure of the phase s is
// in, expired if it was a 410: a paginated list resumes from its continue
// token, or after a 410 from its first page (the token has expired); a
// watch from the last resourceVersion is reopened; a streaming list, or
// any watch after a 410 or an oversized answer, gives way to a new sync.
func (m *machine[P]) retry(s *state[P], expired bool) request {
	switch p := s.phase.(type) {
	case listing[P]:
		if expired {
			return listing[P]{pageSize: p.pageSize}
		}
		return p
	case opening:
		if !p.stream && !s.gone && !s.big {
			return opening{}
		}
	case watching:
		if !s.gone && !s.big {
			return opening{}
		}
	}
	return m.newSync(s)
}

// healthy records a success: an answer that ends a failure episode.
func (m *machine[P]) healthy(s *state[P], now time.Time) {
	if s.healthySince.IsZero() {
		s.healthySince = now
	}
	s.heard = now
	s.failingSince = time.Time{}
}

// refused reports whether err is the server rejecting a request's
// parameters, as a server without streaming lists rejects
// sendInitialEvents.
func refused(err error) bool {
	code := apiError(err).Code
	return code == 400 || code == 422
}

// notServed returns the reason of a failure whose cause err says that the
// resource is not served, or nil if err says something else. A 404 to a
// list or a watch, which name no object, says so: a custom resource gets
// one until its definition is applied. Like any failure it is retried with
// backoff, until the resource is served.
func (m *machine[P]) notServed(err error) error {
	ae := apiError(err)
	if ae.Code != http.StatusNotFound {
		return nil
	}
	return fmt.Errorf("%s is not served (404): waiting for it", cmp.Or(m.cfg.resource, ae.Resource))
}

// apiError returns the [*k8sapi.APIError] err wraps, or an empty one: no
// code, and no Retry-After.
func apiError(err error) *k8sapi.APIError {
	ae := new(k8sapi.APIError)
	errors.As(err, &ae)
	return ae
}

// timeout returns the timeout of the next watch: between watchTimeout and
// twice that (by default 5 to 10 minutes), drawn by r in [0, 1), so that
// watches started together do not end together.
func (m *machine[P]) timeout(r float64) time.Duration {
	d := m.cfg.WatchTimeout + time.Duration(r*float64(m.cfg.WatchTimeout))
	return d.Truncate(time.Second)
}
