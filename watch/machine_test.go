package watch

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// thing is the smallest object type: metadata only.
type thing struct {
	k8sapi.ObjectMeta `json:"metadata"`
}

func obj(name, rv string) *thing {
	return &thing{k8sapi.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv}}
}

func bookmark(rv string, end bool) *thing {
	t := &thing{k8sapi.ObjectMeta{ResourceVersion: rv}}
	if end {
		t.Annotations = map[string]string{InitialEventsEndAnnotation: "true"}
	}
	return t
}

func page(rv, cont string, items ...*thing) *k8sapi.List[thing] {
	l := &k8sapi.List[thing]{Metadata: k8sapi.ListMeta{ResourceVersion: rv, Continue: cont}}
	for _, it := range items {
		l.Items = append(l.Items, *it)
	}
	return l
}

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func gone410() error {
	return &k8sapi.APIError{Op: "watch", Resource: "things", Code: http.StatusGone,
		Status: k8sapi.Status{Reason: "Expired", Code: 410, Message: "too old resource version: 1 (5)"}}
}

func goneEvent() error {
	// An ERROR event: the HTTP status was 200, the Status inside says 410.
	return &k8sapi.APIError{Op: "watch", Resource: "things", Code: 410,
		Status: k8sapi.Status{Status: "Failure", Reason: "Expired", Code: 410,
			Message: "The resourceVersion for the provided watch is too old."}}
}

func tooMany(after time.Duration) error {
	return &k8sapi.APIError{Op: "watch", Resource: "things", Code: http.StatusTooManyRequests,
		RetryAfter: after, Status: k8sapi.Status{Reason: "TooManyRequests", Code: 429}}
}

// notFound is what a kube-apiserver answers to a list or watch of a group
// it does not serve: 404 with a body "404 page not found", which is no
// Status.
func notFound(op string) error {
	return &k8sapi.APIError{Op: op, Resource: "things", Code: http.StatusNotFound, Body: "404 page not found",
		Status: k8sapi.Status{Status: "Failure", Reason: "NotFound", Code: 404, Message: "404 page not found"}}
}

func netErr() error {
	return &k8sapi.RequestError{Op: "watch", Resource: "things", Err: syscall.ECONNRESET}
}

// describe renders actions compactly for comparison.
func describe(acts []action[*thing]) string {
	var parts []string
	for _, a := range acts {
		var s string
		switch a.kind {
		case actList:
			s = fmt.Sprintf("list rv=%q", a.opts.ResourceVersion)
			if a.opts.ResourceVersionMatch != "" {
				s += " match=" + a.opts.ResourceVersionMatch
			}
			if a.opts.Continue != "" {
				s += " cont=" + a.opts.Continue
			}
			s += fmt.Sprintf(" limit=%d", a.opts.Limit)
		case actWatch:
			s = fmt.Sprintf("watch rv=%q timeout=%d", a.opts.ResourceVersion, a.opts.TimeoutSeconds)
			if a.opts.ResourceVersionMatch != "" {
				s += " match=" + a.opts.ResourceVersionMatch
			}
			if a.opts.SendInitialEvents != nil && *a.opts.SendInitialEvents {
				s += " initial"
			}
			if !a.opts.AllowWatchBookmarks {
				s += " nobookmarks"
			}
			if a.reconnect {
				s += " reconnect"
			}
		case actWait:
			s = "wait " + a.delay.String()
		case actReplace:
			var names []string
			for _, it := range a.items {
				names = append(names, it.Name)
			}
			s = "replace [" + strings.Join(names, " ") + "]"
		case actApply:
			s = fmt.Sprintf("apply %s %s", a.typ, a.obj.Name)
		case actLog:
			s = fmt.Sprintf("log %s %s", a.level, a.msg)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// The phases' names, as the tables check them.
const (
	phaseList   = "list"
	phaseOpen   = "open"
	phaseWatch  = "watch"
	phaseStream = "stream"
	phaseWait   = "wait"
)

type stepCase struct {
	in    input[*thing]
	phase string
	acts  string
}

func start() stepCase {
	return stepCase{input[*thing]{kind: inStart, now: at(0)}, phaseList, `list rv="0" limit=500`}
}

// listed is the first list coming back with rv, then the first watch.
func listed(d time.Duration, rv string, items ...*thing) stepCase {
	var names []string
	for _, it := range items {
		names = append(names, it.Name)
	}
	return stepCase{input[*thing]{kind: inListed, now: at(d), list: pointers(page(rv, "", items...))}, phaseOpen,
		"replace [" + strings.Join(names, " ") + "]; watch rv=\"" + rv + "\" timeout=300"}
}

func opened(d time.Duration) stepCase {
	return stepCase{input[*thing]{kind: inOpened, now: at(d)}, phaseWatch, ""}
}

func event(d time.Duration, typ k8sapi.EventType, o *thing, acts string) stepCase {
	return stepCase{input[*thing]{kind: inEvent, now: at(d), typ: typ, obj: o}, phaseWatch, acts}
}

// openedStream and streamEvent are opened and event for a streaming list,
// before its end bookmark.
func openedStream(d time.Duration) stepCase {
	return stepCase{input[*thing]{kind: inOpened, now: at(d)}, phaseStream, ""}
}

func streamEvent(d time.Duration, typ k8sapi.EventType, o *thing, acts string) stepCase {
	return stepCase{input[*thing]{kind: inEvent, now: at(d), typ: typ, obj: o}, phaseStream, acts}
}

func ended(d time.Duration, err error, p string, acts string) stepCase {
	return stepCase{input[*thing]{kind: inEvent, now: at(d), err: err}, p, acts}
}

func timer(d time.Duration, p string, acts string) stepCase {
	return stepCase{input[*thing]{kind: inTimer, now: at(d)}, p, acts}
}

func TestStep(t *testing.T) {
	tests := []struct {
		name      string
		streaming bool
		steps     []stepCase
		wantRV    string
	}{
		{
			name: "clean close re-watches from the last resourceVersion without relisting",
			steps: []stepCase{
				start(),
				listed(time.Second, "10", obj("a", "5"), obj("b", "9")),
				opened(time.Second),
				event(2*time.Second, k8sapi.Modified, obj("a", "11"), "apply MODIFIED a"),
				event(3*time.Minute, k8sapi.Bookmark, bookmark("15", false), ""),
				ended(5*time.Minute, io.EOF, phaseOpen, `watch rv="15" timeout=300`),
				opened(5 * time.Minute),
			},
			wantRV: "15",
		},
		{
			name: "410 as an HTTP status on the watch relists consistently",
			steps: []stepCase{
				start(),
				listed(0, "10", obj("a", "5")),
				{input[*thing]{kind: inOpened, now: at(time.Second), err: gone410()}, phaseWait,
					"log INFO resourceVersion expired; relisting; wait 400ms"},
				timer(2*time.Second, phaseList, `list rv="" limit=500`),
				{input[*thing]{kind: inListed, now: at(3 * time.Second), list: pointers(page("20", "", obj("b", "19")))}, phaseOpen,
					`replace [b]; watch rv="20" timeout=300`},
			},
			wantRV: "20",
		},
		{
			name: "410 as an ERROR event mid-stream relists consistently, in pages",
			steps: []stepCase{
				start(),
				listed(0, "10", obj("a", "5")),
				opened(0),
				event(time.Second, k8sapi.Added, obj("b", "11"), "apply ADDED b"),
				ended(2*time.Second, goneEvent(), phaseWait, "log INFO resourceVersion expired; relisting; wait 400ms"),
				timer(3*time.Second, phaseList, `list rv="" limit=500`),
				{input[*thing]{kind: inListed, now: at(4 * time.Second), list: pointers(page("30", "tok", obj("a", "25")))}, phaseList,
					`list rv="" cont=tok limit=500`},
				{input[*thing]{kind: inListed, now: at(4 * time.Second), list: pointers(page("30", "", obj("c", "28")))}, phaseOpen,
					`replace [a c]; watch rv="30" timeout=300`},
			},
			wantRV: "30",
		},
		{
			name: "429 with Retry-After waits at least that long",
			steps: []stepCase{
				start(),
				listed(0, "10"),
				{input[*thing]{kind: inOpened, now: at(time.Second), err: tooMany(7 * time.Second)}, phaseWait,
					"log WARN watch failed; wait 7s"},
				{input[*thing]{kind: inTimer, now: at(8 * time.Second)}, phaseOpen, `watch rv="10" timeout=300 reconnect`},
				{input[*thing]{kind: inOpened, now: at(9 * time.Second), err: tooMany(time.Second)}, phaseWait,
					"log DEBUG watch failed; wait 1s"},
			},
			wantRV: "10",
		},
		{
			name: "network error mid-stream reconnects from the last resourceVersion with growing backoff",
			steps: []stepCase{
				start(),
				listed(0, "10"),
				opened(0),
				event(time.Second, k8sapi.Added, obj("a", "12"), "apply ADDED a"),
				ended(2*time.Second, netErr(), phaseWait, "log WARN watch failed; wait 400ms"),
				timer(3*time.Second, phaseOpen, `watch rv="12" timeout=300 reconnect`),
				{input[*thing]{kind: inOpened, now: at(4 * time.Second), err: netErr()}, phaseWait,
					"log DEBUG watch failed; wait 800ms"},
				timer(5*time.Second, phaseOpen, `watch rv="12" timeout=300 reconnect`),
				{input[*thing]{kind: inOpened, now: at(6 * time.Second), err: netErr()}, phaseWait,
					"log DEBUG watch failed; wait 1.6s"},
				timer(8*time.Second, phaseOpen, `watch rv="12" timeout=300 reconnect`),
				opened(9 * time.Second),
				// Healthy for less than two minutes: the backoff goes on.
				ended(60*time.Second, netErr(), phaseWait, "log WARN watch failed; wait 3.2s"),
				timer(64*time.Second, phaseOpen, `watch rv="12" timeout=300 reconnect`),
				opened(64 * time.Second),
				// Healthy for two minutes: the backoff starts over.
				ended(200*time.Second, netErr(), phaseWait, "log WARN watch failed; wait 400ms"),
			},
			wantRV: "12",
		},
		{
			name: "bookmark-only stream tracks the resourceVersion and re-watches from it",
			steps: []stepCase{
				start(),
				listed(0, "10"),
				opened(0),
				event(time.Minute, k8sapi.Bookmark, bookmark("40", false), ""),
				event(2*time.Minute, k8sapi.Bookmark, bookmark("55", false), ""),
				ended(5*time.Minute, io.EOF, phaseOpen, `watch rv="55" timeout=300`),
			},
			wantRV: "55",
		},
		{
			name: "idle stream is torn down and reopened from the last resourceVersion",
			steps: []stepCase{
				start(),
				listed(0, "10"),
				opened(0),
				event(time.Second, k8sapi.Bookmark, bookmark("11", false), ""),
				{input[*thing]{kind: inIdle, now: at(6 * time.Minute), err: errors.New("watch: no data for 5m30s")}, phaseWait,
					"log WARN watch silent; reconnecting; wait 400ms"},
				timer(6*time.Minute+time.Second, phaseOpen, `watch rv="11" timeout=300 reconnect`),
			},
			wantRV: "11",
		},
		{
			name: "watch ending at once with no events backs off",
			steps: []stepCase{
				start(),
				listed(0, "10"),
				opened(0),
				ended(time.Second, io.EOF, phaseWait, "log WARN watch ended at once; wait 400ms"),
				timer(2*time.Second, phaseOpen, `watch rv="10" timeout=300 reconnect`),
			},
			wantRV: "10",
		},
		{
			name: "watch ending within a second after events backs off",
			steps: []stepCase{
				start(),
				listed(0, "10"),
				opened(0),
				event(100*time.Millisecond, k8sapi.Bookmark, bookmark("11", false), ""),
				ended(200*time.Millisecond, io.EOF, phaseWait, "log WARN watch ended at once; wait 400ms"),
				timer(time.Second, phaseOpen, `watch rv="11" timeout=300 reconnect`),
			},
			wantRV: "11",
		},
		{
			// The edges of "at once": a watch with events that lived a
			// second, and one without events that lived half its timeout
			// (300s here), ended normally.
			name: "watch that lived a second with events, or half its timeout without, is watched on",
			steps: []stepCase{
				start(),
				listed(0, "10"),
				opened(0),
				event(100*time.Millisecond, k8sapi.Bookmark, bookmark("11", false), ""),
				ended(time.Second, io.EOF, phaseOpen, `watch rv="11" timeout=300`),
				opened(time.Second),
				ended(time.Second+150*time.Second, io.EOF, phaseOpen, `watch rv="11" timeout=300`),
				opened(151 * time.Second),
				ended(151*time.Second+149*time.Second, io.EOF, phaseWait, "log WARN watch ended at once; wait 400ms"),
			},
			wantRV: "11",
		},
		{
			name: "backoff starts over after exactly two healthy minutes",
			steps: []stepCase{
				start(),
				listed(0, "10"),
				opened(0),
				ended(time.Second, netErr(), phaseWait, "log WARN watch failed; wait 400ms"),
				timer(2*time.Second, phaseOpen, `watch rv="10" timeout=300 reconnect`),
				opened(2 * time.Second),
				ended(2*time.Second+2*time.Minute, netErr(), phaseWait, "log WARN watch failed; wait 400ms"),
				timer(3*time.Minute, phaseOpen, `watch rv="10" timeout=300 reconnect`),
				opened(3 * time.Minute),
				ended(3*time.Minute+2*time.Minute-time.Nanosecond, netErr(), phaseWait, "log WARN watch failed; wait 800ms"),
			},
			wantRV: "10",
		},
		{
			name: "failed list page is retried from its continue token",
			steps: []stepCase{
				start(),
				{input[*thing]{kind: inListed, now: at(0), list: pointers(page("", "tok", obj("a", "1")))}, phaseList,
					`list rv="" cont=tok limit=500`},
				{input[*thing]{kind: inListed, now: at(time.Second), err: netErr()}, phaseWait,
					"log WARN list failed; wait 400ms"},
				timer(2*time.Second, phaseList, `list rv="" cont=tok limit=500`),
				{input[*thing]{kind: inListed, now: at(3 * time.Second), list: pointers(page("9", "", obj("b", "2")))}, phaseOpen,
					`replace [a b]; watch rv="9" timeout=300`},
			},
			wantRV: "9",
		},
		{
			name: "a resource not served yet is listed again with backoff, logged once, until it is served",
			steps: []stepCase{
				start(),
				{input[*thing]{kind: inListed, now: at(0), err: notFound("list")}, phaseWait,
					"log WARN things is not served (404): waiting for it; wait 400ms"},
				timer(time.Second, phaseList, `list rv="0" limit=500`),
				{input[*thing]{kind: inListed, now: at(time.Second), err: notFound("list")}, phaseWait,
					"log DEBUG things is not served (404): waiting for it; wait 800ms"},
				timer(2*time.Second, phaseList, `list rv="0" limit=500`),
				listed(3*time.Second, "7", obj("a", "6")),
			},
			wantRV: "7",
		},
		{
			name:      "a resource not served yet, by streaming list, is waited for the same way",
			streaming: true,
			steps: []stepCase{
				{input[*thing]{kind: inStart, now: at(0)}, phaseOpen, `watch rv="" timeout=300 match=NotOlderThan initial`},
				{input[*thing]{kind: inOpened, now: at(0), err: notFound("watch")}, phaseWait,
					"log WARN things is not served (404): waiting for it; wait 400ms"},
				timer(time.Second, phaseList, `list rv="0" limit=500`),
			},
		},
		{
			name: "expired continue token restarts the list consistently",
			steps: []stepCase{
				start(),
				{input[*thing]{kind: inListed, now: at(0), list: pointers(page("", "tok", obj("a", "1")))}, phaseList,
					`list rv="" cont=tok limit=500`},
				{input[*thing]{kind: inListed, now: at(time.Second), err: gone410()}, phaseWait,
					"log INFO resourceVersion expired; relisting; wait 400ms"},
				timer(2*time.Second, phaseList, `list rv="" limit=500`),
			},
		},
		{
			name:      "streaming list delivers the initial events at the end bookmark",
			streaming: true,
			steps: []stepCase{
				{input[*thing]{kind: inStart, now: at(0)}, phaseOpen, `watch rv="" timeout=300 match=NotOlderThan initial`},
				openedStream(0),
				streamEvent(0, k8sapi.Added, obj("a", "3"), ""),
				streamEvent(0, k8sapi.Added, obj("b", "4"), ""),
				event(0, k8sapi.Bookmark, bookmark("9", true), "replace [a b]"),
				event(time.Second, k8sapi.Modified, obj("a", "10"), "apply MODIFIED a"),
				ended(5*time.Minute, io.EOF, phaseOpen, `watch rv="10" timeout=300`),
			},
			wantRV: "10",
		},
		{
			// Only the bookmark annotated as the end ends the initial
			// events: ending at an earlier one would replace the cache
			// with part of the list, and delete the rest.
			name:      "streaming list ignores bookmarks before its end bookmark",
			streaming: true,
			steps: []stepCase{
				{input[*thing]{kind: inStart, now: at(0)}, phaseOpen, `watch rv="" timeout=300 match=NotOlderThan initial`},
				openedStream(0),
				streamEvent(0, k8sapi.Added, obj("a", "3"), ""),
				streamEvent(0, k8sapi.Bookmark, bookmark("5", false), ""),
				streamEvent(0, k8sapi.Added, obj("b", "4"), ""),
				event(0, k8sapi.Bookmark, bookmark("9", true), "replace [a b]"),
			},
			wantRV: "9",
		},
		{
			// A server may send changes after the initial events and
			// before the end bookmark: the list delivered is the state
			// after them, and an object deleted in between is not in it.
			name:      "streaming list applies the changes before its end bookmark to the list",
			streaming: true,
			steps: []stepCase{
				{input[*thing]{kind: inStart, now: at(0)}, phaseOpen, `watch rv="" timeout=300 match=NotOlderThan initial`},
				openedStream(0),
				streamEvent(0, k8sapi.Added, obj("a", "3"), ""),
				streamEvent(0, k8sapi.Added, obj("b", "4"), ""),
				streamEvent(0, k8sapi.Added, obj("c", "5"), ""),
				streamEvent(0, k8sapi.Deleted, obj("a", "6"), ""),
				streamEvent(0, k8sapi.Modified, obj("c", "7"), ""),
				event(0, k8sapi.Bookmark, bookmark("9", true), "replace [b c]"),
			},
			wantRV: "9",
		},
		{
			name:      "streaming list relists by streaming after a 410",
			streaming: true,
			steps: []stepCase{
				{input[*thing]{kind: inStart, now: at(0)}, phaseOpen, `watch rv="" timeout=300 match=NotOlderThan initial`},
				openedStream(0),
				event(0, k8sapi.Bookmark, bookmark("9", true), "replace []"),
				ended(time.Second, goneEvent(), phaseWait, "log INFO resourceVersion expired; relisting; wait 400ms"),
				timer(2*time.Second, phaseOpen, `watch rv="" timeout=300 match=NotOlderThan initial reconnect`),
				openedStream(2 * time.Second),
				streamEvent(2*time.Second, k8sapi.Added, obj("c", "20"), ""),
				event(2*time.Second, k8sapi.Bookmark, bookmark("21", true), "replace [c]"),
			},
			wantRV: "21",
		},
		{
			name:      "streaming list refused falls back to list and watch",
			streaming: true,
			steps: []stepCase{
				{input[*thing]{kind: inStart, now: at(0)}, phaseOpen, `watch rv="" timeout=300 match=NotOlderThan initial`},
				{input[*thing]{kind: inOpened, now: at(0), err: &k8sapi.APIError{Code: 422, Status: k8sapi.Status{Reason: "Invalid"}}}, phaseList,
					`log INFO streaming list refused; using list and watch; list rv="0" limit=500`},
				listed(time.Second, "10", obj("a", "5")),
			},
			wantRV: "10",
		},
		{
			// A stream that keeps failing must not keep the cache from
			// syncing: the sync after a failed one is a list, and the
			// one after that streams again.
			name:      "streaming list broken before its end bookmark lists once, then streams again",
			streaming: true,
			steps: []stepCase{
				{input[*thing]{kind: inStart, now: at(0)}, phaseOpen, `watch rv="" timeout=300 match=NotOlderThan initial`},
				openedStream(0),
				streamEvent(0, k8sapi.Added, obj("a", "3"), ""),
				ended(time.Second, netErr(), phaseWait, "log WARN watch failed; wait 400ms"),
				timer(2*time.Second, phaseList, `list rv="0" limit=500`),
				listed(3*time.Second, "9", obj("b", "4")),
				opened(3 * time.Second),
				ended(4*time.Second, goneEvent(), phaseWait, "log INFO resourceVersion expired; relisting; wait 800ms"),
				timer(5*time.Second, phaseOpen, `watch rv="" timeout=300 match=NotOlderThan initial reconnect`),
			},
			wantRV: "9",
		},
		{
			// The fault suite's proxy answers 410 to every watch: a
			// streaming list that gets one lists instead, consistently.
			name:      "streaming list expired at its opening lists consistently",
			streaming: true,
			steps: []stepCase{
				{input[*thing]{kind: inStart, now: at(0)}, phaseOpen, `watch rv="" timeout=300 match=NotOlderThan initial`},
				{input[*thing]{kind: inOpened, now: at(0), err: gone410()}, phaseWait,
					"log INFO resourceVersion expired; relisting; wait 400ms"},
				timer(time.Second, phaseList, `list rv="" limit=500`),
			},
		},
		{
			name: "inputs that do not fit the phase are ignored",
			steps: []stepCase{
				start(),
				{input[*thing]{kind: inTimer, now: at(0)}, phaseList, ""},
				{input[*thing]{kind: inEvent, now: at(0), typ: k8sapi.Added, obj: obj("x", "1")}, phaseList, ""},
				{input[*thing]{kind: inIdle, now: at(0)}, phaseList, ""},
				{input[*thing]{kind: inStart, now: at(0)}, phaseList, ""},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runSteps(t, testMachine(500, tt.streaming), tt.steps, tt.wantRV)
		})
	}
}

// testMachine returns a machine with a page size of pageSize, streaming
// lists if streaming, and the default watch timeout.
func testMachine(pageSize int64, streaming bool) *machine[*thing] {
	return &machine[*thing]{
		meta: func(o *thing) *k8sapi.ObjectMeta { return &o.ObjectMeta },
		cfg:  settings{PageSize: pageSize, DisableStreamingList: !streaming, WatchTimeout: 5 * time.Minute},
	}
}

// runSteps feeds steps to m from the zero state, checking each step's
// actions and phase, then the last resourceVersion.
func runSteps(t *testing.T, m *machine[*thing], steps []stepCase, wantRV string) {
	t.Helper()
	var s state[*thing]
	for i, sc := range steps {
		var acts []action[*thing]
		s, acts = m.step(s, sc.in)
		if got := describe(acts); got != sc.acts {
			t.Fatalf("step %d: actions\n got: %s\nwant: %s", i, got, sc.acts)
		}
		for j, a := range acts {
			if j < len(acts)-1 && (a.kind == actList || a.kind == actWatch || a.kind == actWait) {
				t.Fatalf("step %d: action %d of %d waits for an input but is not the last", i, j, len(acts))
			}
		}
		if got := s.phase.String(); got != sc.phase {
			t.Fatalf("step %d: phase = %v, want %v", i, got, sc.phase)
		}
	}
	if s.rv != wantRV {
		t.Errorf("last resourceVersion = %q, want %q", s.rv, wantRV)
	}
}

func TestNextResourceVersion(t *testing.T) {
	type things = listing[*thing]
	tests := []struct {
		name      string
		s         state[*thing] // its phase is the request asked for
		rv, match string
	}{
		{"first list from the watch cache", state[*thing]{phase: things{}}, "0", ""},
		{"first list retried", state[*thing]{phase: things{}, failures: 1}, "0", ""},
		{"relist after 410 is consistent", state[*thing]{phase: things{}, rv: "10", synced: true, gone: true}, "", ""},
		{"list after an oversized answer is consistent", state[*thing]{phase: things{}, big: true}, "", ""},
		{"later page carries only the token", state[*thing]{phase: things{cont: "tok"}}, "", ""},
		{"relist page", state[*thing]{phase: things{cont: "tok"}, rv: "10", synced: true, gone: true}, "", ""},
		{"watch from last seen", state[*thing]{phase: opening{}, rv: "42", synced: true}, "42", ""},
		{"streaming list", state[*thing]{phase: opening{stream: true}}, "", "NotOlderThan"},
		{"streaming relist", state[*thing]{phase: opening{stream: true}, rv: "42", synced: true, gone: true}, "", "NotOlderThan"},
	}
	m := testMachine(0, false)
	for _, tt := range tests {
		o := m.ask(&tt.s, tt.s.phase.(request), &input[*thing]{}, nil)[0].opts
		if o.ResourceVersion != tt.rv || o.ResourceVersionMatch != tt.match {
			t.Errorf("%s: got (%q, %q), want (%q, %q)", tt.name, o.ResourceVersion, o.ResourceVersionMatch, tt.rv, tt.match)
		}
	}
}

func TestIsGone(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"HTTP 410", gone410(), true},
		{"ERROR event 410", goneEvent(), true},
		{"wrapped", fmt.Errorf("watch: %w", gone410()), true},
		{"too old message without code", &k8sapi.APIError{Code: 500,
			Status: k8sapi.Status{Message: "too old resource version: 5 (9)"}}, true},
		{"429", tooMany(time.Second), false},
		{"network", netErr(), false},
		{"EOF", io.EOF, false},
	}
	for _, tt := range tests {
		if got := k8sapi.IsGone(tt.err); got != tt.want {
			t.Errorf("%s: k8sapi.IsGone = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestBackoff(t *testing.T) {
	tests := []struct {
		n        int
		r        float64
		min, max time.Duration
	}{
		{0, 0, 400 * time.Millisecond, 400 * time.Millisecond},
		{0, 0.999, 799 * time.Millisecond, 800 * time.Millisecond},
		{1, 0, 800 * time.Millisecond, 800 * time.Millisecond},
		{5, 0, 12800 * time.Millisecond, 12800 * time.Millisecond},
		{6, 0.999, 29900 * time.Millisecond, 30 * time.Second},
		{1000, 0.5, 22500 * time.Millisecond, 22500 * time.Millisecond},
	}
	for _, tt := range tests {
		if got := retryBackoff.Jittered(tt.n, tt.r); got < tt.min || got > tt.max {
			t.Errorf("backoff(%d, %v) = %v, want in [%v, %v]", tt.n, tt.r, got, tt.min, tt.max)
		}
	}
}

func TestTimeout(t *testing.T) {
	m := &New(Config[thing]{}).core.machine // the default WatchTimeout
	if got := m.timeout(0); got != 5*time.Minute {
		t.Errorf("timeout(0) = %v, want 5m", got)
	}
	if got := m.timeout(0.9999); got < 9*time.Minute || got >= 10*time.Minute {
		t.Errorf("timeout(0.9999) = %v, want within [9m, 10m)", got)
	}
	m.cfg.WatchTimeout = 2 * time.Second
	if got := m.timeout(0.5); got != 3*time.Second {
		t.Errorf("timeout(0.5) with 2s = %v, want 3s", got)
	}
}

// Only a 400 or a 422 on opening a streaming list means the server does not
// do streaming lists; other failures are retried as they are.
func TestRefused(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{&k8sapi.APIError{Code: 400}, true},
		{fmt.Errorf("watch: %w", &k8sapi.APIError{Code: 422}), true},
		{&k8sapi.APIError{Code: 500}, false},
		{gone410(), false},
		{tooMany(time.Second), false},
		{netErr(), false},
	}
	for _, tt := range tests {
		if got := refused(tt.err); got != tt.want {
			t.Errorf("refused(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// A watch that ends at once says in its error how long it lived and how
// many events it brought.
func TestWatchEndedAtOnceCause(t *testing.T) {
	m := testMachine(500, false)
	var s state[*thing]
	for _, in := range []input[*thing]{
		{kind: inStart, now: at(0)},
		{kind: inListed, now: at(0), list: pointers(page("10", ""))},
		{kind: inOpened, now: at(0)},
		{kind: inEvent, now: at(0), typ: k8sapi.Bookmark, obj: bookmark("11", false)},
		{kind: inEvent, now: at(0), typ: k8sapi.Added, obj: obj("a", "12")},
	} {
		s, _ = m.step(s, in)
	}
	_, acts := m.step(s, input[*thing]{kind: inEvent, now: at(500 * time.Millisecond), err: io.EOF})
	for _, a := range acts {
		if a.kind == actLog {
			if a.err == nil || a.err.Error() != "watch: server closed the watch after 500ms with 2 events" {
				t.Errorf("cause = %v", a.err)
			}
			return
		}
	}
	t.Fatalf("no log action in %s", describe(acts))
}

// The machine decides what is an answer and what is a failure, for
// Healthy and LastEvent: answers are heard, failures start an episode
// that keeps its start, carries the latest cause and ends at the next
// list page or watch opening; a watch ended at once is a failure.
func TestHealth(t *testing.T) {
	m := testMachine(500, false)
	refused := errors.New("refused")
	tests := []struct {
		in      input[*thing]
		heard   time.Duration // -1: never
		failing time.Duration // -1: not failing
		err     error
	}{
		{input[*thing]{kind: inStart, now: at(0)}, -1, -1, nil},
		{input[*thing]{kind: inListed, now: at(1 * time.Second), list: pointers(page("10", ""))}, time.Second, -1, nil},
		{input[*thing]{kind: inOpened, now: at(2 * time.Second)}, 2 * time.Second, -1, nil},
		{input[*thing]{kind: inEvent, now: at(3 * time.Second), typ: k8sapi.Added, obj: obj("a", "11")}, 3 * time.Second, -1, nil},
		{input[*thing]{kind: inEvent, now: at(4 * time.Second), err: io.ErrUnexpectedEOF}, 3 * time.Second, 4 * time.Second, io.ErrUnexpectedEOF},
		{input[*thing]{kind: inTimer, now: at(5 * time.Second)}, 3 * time.Second, 4 * time.Second, io.ErrUnexpectedEOF},
		{input[*thing]{kind: inOpened, now: at(6 * time.Second), err: refused}, 3 * time.Second, 4 * time.Second, refused},
		{input[*thing]{kind: inTimer, now: at(7 * time.Second)}, 3 * time.Second, 4 * time.Second, refused},
		{input[*thing]{kind: inOpened, now: at(8 * time.Second)}, 8 * time.Second, -1, nil},
		{input[*thing]{kind: inEvent, now: at(8*time.Second + 500*time.Millisecond), err: io.EOF}, 8 * time.Second, 8*time.Second + 500*time.Millisecond, nil},
	}
	var s state[*thing]
	for i, tt := range tests {
		s, _ = m.step(s, tt.in)
		if want := at(tt.heard); tt.heard < 0 && !s.heard.IsZero() || tt.heard >= 0 && !s.heard.Equal(want) {
			t.Errorf("step %d: heard %v, want %v", i, s.heard, tt.heard)
		}
		if want := at(tt.failing); tt.failing < 0 && !s.failingSince.IsZero() || tt.failing >= 0 && !s.failingSince.Equal(want) {
			t.Errorf("step %d: failing since %v, want %v", i, s.failingSince, tt.failing)
		}
		if tt.err != nil && !errors.Is(s.err, tt.err) {
			t.Errorf("step %d: err %v, want %v", i, s.err, tt.err)
		}
	}
}

// A 404 to a list or a watch says that the resource is not served, named
// as the ClientSource's resource or else as the server's error does;
// other failures are reported as they are.
func TestNotServed(t *testing.T) {
	// What a kube-apiserver answers for a resource it does not serve in a
	// group it serves: a Status.
	unknown := &k8sapi.APIError{Op: "list", Resource: "gizmos", Code: 404,
		Status: k8sapi.Status{Status: "Failure", Reason: "NotFound", Code: 404, Message: "the server could not find the requested resource"}}
	tests := []struct {
		resource string
		err      error
		want     string // "": not a resource not served
	}{
		{"things.example.com/v1", notFound("list"), "things.example.com/v1 is not served (404): waiting for it"},
		{"", notFound("watch"), "things is not served (404): waiting for it"},
		{"gizmos.apps/v1", fmt.Errorf("wrapped: %w", unknown), "gizmos.apps/v1 is not served (404): waiting for it"},
		{"things.example.com/v1", gone410(), ""},
		{"things.example.com/v1", &k8sapi.APIError{Code: 403, Status: k8sapi.Status{Reason: "Forbidden"}}, ""},
		{"things.example.com/v1", &k8sapi.APIError{Code: 500}, ""},
		{"things.example.com/v1", netErr(), ""},
		{"things.example.com/v1", io.EOF, ""},
	}
	for _, tt := range tests {
		m := testMachine(500, false)
		m.cfg.resource = tt.resource
		got := m.notServed(tt.err)
		if got == nil && tt.want != "" || got != nil && got.Error() != tt.want {
			t.Errorf("notServed(%v) with resource %q = %v, want %q", tt.err, tt.resource, got, tt.want)
		}
	}
}

// New names a ClientSource's resource as group, version and plural.
func TestResourceName(t *testing.T) {
	c, err := k8sapi.New(&k8sapi.Config{Host: "https://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	for r, want := range map[k8sapi.Resource]string{
		{Group: "example.com", Version: "v1", Resource: "widgets"}: "widgets.example.com/v1",
		k8sapi.ConfigMaps: "configmaps/v1",
	} {
		if got := New(Config[thing]{Source: ClientSource[thing](c, r)}).core.cfg.resource; got != want {
			t.Errorf("resource of %v = %q, want %q", r, got, want)
		}
	}
	if got := New(Config[thing]{Source: newScriptedSource()}).core.cfg.resource; got != "" {
		t.Errorf("resource of another Source = %q, want none", got)
	}
}
