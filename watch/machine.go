package watch

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
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

	// InitialEventsEndAnnotation marks the bookmark that ends the initial
	// events of a streaming list.
	InitialEventsEndAnnotation = "k8s.io/initial-events-end"
)

// retryBackoff is the delay before retry number n (0-based): 800ms
// doubling to at most 30s, jittered so that clients that failed together
// retry apart.
var retryBackoff = k8sapi.Backoff{Base: backoffInitial, Max: backoffMax}

// phase is what the machine is waiting for.
type phase uint8

const (
	phaseNew   phase = iota // not started
	phaseList               // a list page
	phaseOpen               // a watch to open
	phaseWatch              // the next event of an open watch
	phaseWait               // the end of a backoff
)

func (p phase) String() string {
	return [...]string{"new", "list", "open", "watch", "wait"}[p]
}

// state is everything the machine remembers. It is a value: step returns a
// new one.
type state[P any] struct {
	phase phase

	rv     string // last resourceVersion seen: list, event or bookmark
	synced bool   // a full list has been delivered
	gone   bool   // the next sync must be a consistent list (after a 410)
	// big says a list page or watch event was over the client's size
	// limit: the next sync is a consistent list (the server's watch cache
	// may ignore the page size), in pages of pageSize.
	big      bool
	pageSize int64 // objects per page of the list in progress; 0: machine's

	streamRefused bool // the server refused a streaming list

	// The sync in progress: a paginated list or a streaming list.
	initial bool   // the open watch is a streaming list before its end bookmark
	cont    string // continue token of the next list page
	pending []P    // objects collected so far

	// The watch in progress.
	watchStart   time.Time
	watchTimeout time.Duration
	watchEvents  int

	// Backoff.
	after        phase     // what phaseWait leads to: phaseList or phaseOpen
	failures     int       // consecutive failures, for the backoff delay
	relistLogged bool      // the relist in progress has been logged
	healthySince time.Time // start of the current run of successes

	health
}

// health is what the machine knows of the server's answers, as
// [Informer.Healthy] and [Informer.LastEvent] report it.
type health struct {
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

// awaits is the phase in which the machine waits for each kind of input.
var awaits = [...]phase{
	inStart:  phaseNew,
	inListed: phaseList,
	inOpened: phaseOpen,
	inEvent:  phaseWatch,
	inTimer:  phaseWait,
	inIdle:   phaseWatch,
}

// input is one thing that happened, with the time and a uniform random
// number in [0, 1) drawn by the driver.
type input[P any] struct {
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
	LabelSelector, FieldSelector string
	PageSize                     int64
	StreamingList                bool
	WatchTimeout                 time.Duration
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
// and it comes last: the machine waits for one thing at a time.
func (m *machine[P]) step(s state[P], in input[P]) (state[P], []action[P]) {
	if s.phase != awaits[in.kind] {
		return s, nil // not what the machine waits for: stale
	}
	var acts []action[P]
	switch in.kind {
	case inStart:
		acts = m.sync(&s, in, acts)

	case inListed:
		if errors.Is(in.err, k8sapi.ErrBodyTooLarge) {
			acts = m.pageTooLarge(&s, in, acts)
			break
		}
		if in.err != nil || in.list == nil {
			acts = m.fail(&s, in, "list failed", acts)
			break
		}
		m.healthy(&s, in.now)
		s.pending = append(s.pending, in.list.Items...)
		if c := in.list.Metadata.Continue; c != "" {
			s.cont = c
			acts = append(acts, action[P]{kind: actList, opts: m.listOptions(&s)})
			break
		}
		s.rv = in.list.Metadata.ResourceVersion
		acts = m.synced(&s, acts)
		acts = m.watch(&s, in, acts)

	case inOpened:
		if in.err != nil {
			if s.initial && refused(in.err) {
				// The server does not do streaming lists: list instead,
				// now and from now on.
				acts = m.noStream(&s, "streaming list refused", in.err, acts)
				break
			}
			acts = m.fail(&s, in, "watch failed", acts)
			break
		}
		m.healthy(&s, in.now)
		s.phase = phaseWatch
		s.watchStart = in.now
		s.watchEvents = 0

	case inEvent:
		if in.err != nil {
			acts = m.ended(&s, in, acts)
			break
		}
		s.watchEvents++
		s.heard = in.now
		meta := m.meta(in.obj)
		if meta.ResourceVersion != "" {
			s.rv = meta.ResourceVersion
		}
		switch {
		case in.typ == k8sapi.Bookmark:
			if s.initial && meta.Annotations[InitialEventsEndAnnotation] == "true" {
				s.initial = false
				acts = m.synced(&s, acts)
			}
		case !s.initial:
			acts = append(acts, action[P]{kind: actApply, typ: in.typ, obj: in.obj})
		case in.typ != k8sapi.Deleted:
			// Before the end bookmark a streaming list sends only the
			// objects that exist; collect them.
			s.pending = append(s.pending, in.obj)
		}

	case inIdle:
		acts = m.fail(&s, in, "watch silent; reconnecting", acts)

	case inTimer:
		switch {
		case s.after == phaseOpen:
			acts = m.watch(&s, in, acts)
		case s.cont != "":
			// Resume a paginated list where it failed.
			s.phase = phaseList
			acts = append(acts, action[P]{kind: actList, opts: m.listOptions(&s)})
		default:
			acts = m.sync(&s, in, acts)
		}
	}
	return s, acts
}

// ended handles the end of a watch stream with err (io.EOF if clean).
func (m *machine[P]) ended(s *state[P], in input[P], acts []action[P]) []action[P] {
	if errors.Is(in.err, io.EOF) {
		if s.initial {
			// The stream ended before its initial events did. A server
			// that ignores sendInitialEvents does this at its timeout;
			// list instead.
			return m.noStream(s, "streaming list ended early", nil, acts)
		}
		// A watch the server ends early with nothing to say, or within a
		// second whatever it said, is a failure: reopening it at once could
		// turn into a hot loop against a server in trouble.
		lived := in.now.Sub(s.watchStart)
		if lived < minWatchLife || s.watchEvents == 0 && lived < s.watchTimeout/2 {
			in.err = fmt.Errorf("watch: server closed the watch after %v with %d events", lived, s.watchEvents)
			return m.fail(s, in, "watch ended at once", acts)
		}
		// The server ended the watch at its timeout: watch on from the
		// last resourceVersion, at once, without relisting.
		return m.watch(s, in, acts)
	}
	return m.fail(s, in, "watch failed", acts)
}

// pageTooLarge handles a list page over the client's size limit: the
// page is asked for again with half as many objects, at once, down to
// one; a page of one object over the limit (for a page, or for one
// object, which the client also checks in a list) is a failure, retried
// with backoff
// from the list's first page at the full page size, so that the list
// succeeds once the object is gone (a continue token would show the
// list's old snapshot, object included).
func (m *machine[P]) pageTooLarge(s *state[P], in input[P], acts []action[P]) []action[P] {
	s.big = true
	if size := cmp.Or(s.pageSize, m.cfg.PageSize); size > 1 {
		s.pageSize = size / 2
		acts = append(acts, action[P]{kind: actLog, level: slog.LevelInfo,
			msg: fmt.Sprintf("list page too large; page size now %d", s.pageSize), err: in.err})
		return append(acts, action[P]{kind: actList, opts: m.listOptions(s)})
	}
	s.cont, s.pending, s.pageSize = "", nil, 0
	in.err = fmt.Errorf("watch: one object is over the client's size limit: %w", in.err)
	return m.fail(s, in, "list failed", acts)
}

// sync starts a full sync: a streaming list if offered and not refused,
// else a paginated list.
func (m *machine[P]) sync(s *state[P], in input[P], acts []action[P]) []action[P] {
	if m.cfg.StreamingList && !s.streamRefused && !s.big {
		s.initial = true
		return m.watch(s, in, acts)
	}
	return m.list(s, acts)
}

// noStream gives up streaming lists, now and from now on, for a
// paginated list, and logs why: msg, with err if any.
func (m *machine[P]) noStream(s *state[P], msg string, err error, acts []action[P]) []action[P] {
	s.streamRefused, s.initial = true, false
	acts = append(acts, action[P]{kind: actLog, level: slog.LevelInfo, msg: msg + "; using list and watch", err: err})
	return m.list(s, acts)
}

// list starts a paginated list from its first page.
func (m *machine[P]) list(s *state[P], acts []action[P]) []action[P] {
	s.phase = phaseList
	s.pending, s.cont = nil, ""
	return append(acts, action[P]{kind: actList, opts: m.listOptions(s)})
}

// synced delivers the collected objects as the whole cache and moves on.
func (m *machine[P]) synced(s *state[P], acts []action[P]) []action[P] {
	acts = append(acts, action[P]{kind: actReplace, items: s.pending})
	s.pending, s.cont = nil, ""
	s.gone, s.relistLogged = false, false
	s.big, s.pageSize = false, 0
	s.synced = true
	return acts
}

// watch opens a watch from the last resourceVersion, or a streaming list
// (from its start) if s.initial.
func (m *machine[P]) watch(s *state[P], in input[P], acts []action[P]) []action[P] {
	s.pending = nil // a streaming list collects from its start
	s.phase = phaseOpen
	s.watchTimeout = m.timeout(in.rand)
	// A watch opened during a failure episode replaces one that failed.
	return append(acts, action[P]{kind: actWatch, opts: m.watchOptions(s), reconnect: !s.failingSince.IsZero()})
}

// fail records a failure, whose cause is in.err, and schedules a retry of
// what failed once the backoff has passed: the list page, or the watch.
func (m *machine[P]) fail(s *state[P], in input[P], msg string, acts []action[P]) []action[P] {
	if k8sapi.IsGone(in.err) {
		// The resourceVersion or continue token expired: sync again,
		// consistently, from the first page.
		s.gone = true
		s.cont, s.pending = "", nil
	}
	if errors.Is(in.err, k8sapi.ErrBodyTooLarge) {
		// Reopening a watch from the same resourceVersion would meet the
		// same event again: list instead, which skips it once the object
		// is gone or smaller.
		s.big = true
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
	acts = append(acts, action[P]{kind: actLog, level: level, msg: msg, err: in.err})

	s.after = phaseOpen
	if s.phase == phaseList || s.gone || s.big {
		// A paginated list resumes from its continue token; after a 410
		// or an oversized answer the sync is a consistent list; a
		// streaming list starts over.
		s.after, s.initial = phaseList, false
	}
	s.phase = phaseWait
	return append(acts, action[P]{kind: actWait, delay: delay})
}

// healthy records a success: an answer that ends a failure episode.
func (m *machine[P]) healthy(s *state[P], now time.Time) {
	if s.healthySince.IsZero() {
		s.healthySince = now
	}
	s.heard = now
	s.failingSince = time.Time{}
}

// listOptions returns the options of the next list page.
//
// The first list asks for resourceVersion "0": any state the server's watch
// cache holds will do, which spares etcd. (The server ignores limit then
// and answers in one page.) A list after a 410 or an oversized answer, and
// any later full list, asks for "": a consistent read, never older than
// what the cache has already seen. Later pages of a list carry only the
// continue token.
func (m *machine[P]) listOptions(s *state[P]) k8sapi.ListOptions {
	o := k8sapi.ListOptions{
		LabelSelector: m.cfg.LabelSelector,
		FieldSelector: m.cfg.FieldSelector,
		Limit:         cmp.Or(s.pageSize, m.cfg.PageSize),
		Continue:      s.cont,
	}
	if s.cont == "" && !s.gone && !s.big && !s.synced {
		o.ResourceVersion = "0"
	}
	return o
}

// watchOptions returns the options of the next watch. A watch goes on from
// the last resourceVersion seen. A streaming list asks for "" with
// NotOlderThan: the server sends the current state, then a bookmark, then
// changes.
func (m *machine[P]) watchOptions(s *state[P]) k8sapi.ListOptions {
	o := k8sapi.ListOptions{
		LabelSelector:       m.cfg.LabelSelector,
		FieldSelector:       m.cfg.FieldSelector,
		ResourceVersion:     s.rv,
		AllowWatchBookmarks: true,
		TimeoutSeconds:      int64(s.watchTimeout / time.Second),
	}
	if s.initial {
		o.ResourceVersion, o.ResourceVersionMatch = "", "NotOlderThan"
		o.SendInitialEvents = new(true)
	}
	return o
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
