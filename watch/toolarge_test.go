package watch

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/testenv/logbuf"
)

func pageTooLarge() error {
	return &k8sapi.DecodeError{Op: "list", Resource: "things",
		Err: fmt.Errorf("%w (list page over 16777216 bytes)", k8sapi.ErrBodyTooLarge)}
}

func eventTooLarge() error {
	return &k8sapi.DecodeError{Op: "watch", Resource: "things",
		Err: fmt.Errorf("%w: watch event over 4194304 bytes", k8sapi.ErrBodyTooLarge)}
}

func listErr(d time.Duration, err error, p string, acts string) stepCase {
	return stepCase{input[*thing]{kind: inListed, now: at(d), err: err}, p, acts}
}

func listOK(d time.Duration, l *k8sapi.List[thing], p string, acts string) stepCase {
	return stepCase{input[*thing]{kind: inListed, now: at(d), list: pointers(l)}, p, acts}
}

// TestStepTooLarge: the page size shrinks when a page is over the client's
// limit, a single object over it is a failure the informer recovers from
// once the object is gone, and an oversized watch event leads to a list.
// The machine's page size is 4.
func TestStepTooLarge(t *testing.T) {
	tests := []struct {
		name      string
		streaming bool
		steps     []stepCase
		wantRV    string
	}{
		{
			name: "a page too large is asked for again, consistently, with half as many objects; the next sync is at full size",
			steps: []stepCase{
				{input[*thing]{kind: inStart, now: at(0)}, phaseList, `list rv="0" limit=4`},
				listErr(0, pageTooLarge(), phaseList, `log INFO list page too large; page size now 2; list rv="" limit=2`),
				listOK(time.Second, page("30", "tok", obj("a", "5"), obj("b", "6")), phaseList, `list rv="" cont=tok limit=2`),
				listErr(time.Second, pageTooLarge(), phaseList, `log INFO list page too large; page size now 1; list rv="" cont=tok limit=1`),
				listOK(2*time.Second, page("30", "", obj("c", "7")), phaseOpen, `replace [a b c]; watch rv="30" timeout=300`),
				opened(2 * time.Second),
				ended(time.Minute, goneEvent(), phaseWait, "log INFO resourceVersion expired; relisting; wait 400ms"),
				timer(2*time.Minute, phaseList, `list rv="" limit=4`),
			},
			wantRV: "30",
		},
		{
			name: "one object over the limit fails with backoff; the list starts over and succeeds once it is gone",
			steps: []stepCase{
				{input[*thing]{kind: inStart, now: at(0)}, phaseList, `list rv="0" limit=4`},
				listErr(0, pageTooLarge(), phaseList, `log INFO list page too large; page size now 2; list rv="" limit=2`),
				listOK(0, page("30", "tok", obj("a", "5"), obj("b", "6")), phaseList, `list rv="" cont=tok limit=2`),
				listErr(0, pageTooLarge(), phaseList, `log INFO list page too large; page size now 1; list rv="" cont=tok limit=1`),
				listErr(0, pageTooLarge(), phaseWait, "log WARN list failed; wait 400ms"),
				// From the first page, consistently, at the full size.
				timer(time.Second, phaseList, `list rv="" limit=4`),
				listErr(time.Second, pageTooLarge(), phaseList, `log INFO list page too large; page size now 2; list rv="" limit=2`),
				listErr(time.Second, pageTooLarge(), phaseList, `log INFO list page too large; page size now 1; list rv="" limit=1`),
				listErr(time.Second, pageTooLarge(), phaseWait, "log DEBUG list failed; wait 800ms"),
				// The object is gone.
				timer(2*time.Second, phaseList, `list rv="" limit=4`),
				listOK(3*time.Second, page("40", "", obj("a", "5"), obj("b", "6")), phaseOpen, `replace [a b]; watch rv="40" timeout=300`),
			},
			wantRV: "40",
		},
		{
			name: "a watch event over the limit leads to a consistent list, not the same event again",
			steps: []stepCase{
				{input[*thing]{kind: inStart, now: at(0)}, phaseList, `list rv="0" limit=4`},
				listOK(0, page("10", "", obj("a", "5")), phaseOpen, `replace [a]; watch rv="10" timeout=300`),
				opened(0),
				ended(time.Second, eventTooLarge(), phaseWait, "log WARN watch failed; wait 400ms"),
				timer(2*time.Second, phaseList, `list rv="" limit=4`),
				listOK(3*time.Second, page("20", "", obj("a", "15")), phaseOpen, `replace [a]; watch rv="20" timeout=300`),
			},
			wantRV: "20",
		},
		{
			name:      "a streaming list with an event over the limit falls back to a list",
			streaming: true,
			steps: []stepCase{
				{input[*thing]{kind: inStart, now: at(0)}, phaseOpen, `watch rv="" timeout=300 match=NotOlderThan initial`},
				openedStream(0),
				ended(time.Second, eventTooLarge(), phaseWait, "log WARN watch failed; wait 400ms"),
				timer(2*time.Second, phaseList, `list rv="" limit=4`),
				listOK(3*time.Second, page("20", "", obj("a", "15")), phaseOpen, `replace [a]; watch rv="20" timeout=300`),
			},
			wantRV: "20",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runSteps(t, testMachine(4, tt.streaming), tt.steps, tt.wantRV)
		})
	}
}

// pagingServer is a hand-made fake API server for Deployments in namespace
// ns: it pages lists by limit and continue (a continue token is the index
// of the next object), except at resourceVersion "0", where it answers in
// one page as the server's watch cache does. Watches are held open. Each
// object carries an annotation of its own size. Safe for concurrent use.
type pagingServer struct {
	mu      sync.Mutex
	objects []pagedObject
	limits  []string // the limit of every list request, in order
}

// pagedObject is one object's JSON, prepared once.
type pagedObject struct {
	name string
	json []byte
}

func newPagedObject(name string, note *string) pagedObject {
	b := fmt.Appendf(nil, `{"metadata":{"name":%q,"namespace":"ns","resourceVersion":"10","annotations":{"note":"`, name)
	b = append(b, *note...) // letters only: no escaping needed
	return pagedObject{name, append(b, `"}}}`...)}
}

func (s *pagingServer) remove(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objects = slices.DeleteFunc(s.objects, func(o pagedObject) bool { return o.name == name })
}

func (s *pagingServer) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.limits)
}

func (s *pagingServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("watch") != "" {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		return
	}
	s.mu.Lock()
	s.limits = append(s.limits, q.Get("limit"))
	objs := slices.Clone(s.objects)
	s.mu.Unlock()
	from, _ := strconv.Atoi(q.Get("continue"))
	to := len(objs)
	if n, _ := strconv.Atoi(q.Get("limit")); n > 0 && q.Get("resourceVersion") != "0" {
		to = min(from+n, len(objs))
	}
	cont := ""
	if to < len(objs) {
		cont = strconv.Itoa(to)
	}
	fmt.Fprintf(w, `{"kind":"DeploymentList","apiVersion":"apps/v1","metadata":{"resourceVersion":"100","continue":%q},"items":[`, cont)
	for i, o := range objs[from:to] {
		if i > 0 {
			io.WriteString(w, ",")
		}
		w.Write(o.json)
	}
	io.WriteString(w, "]}")
}

// TestInformerShrinksPages lists, through a client whose list page limit
// is 1 MiB, 16 Deployments of 130 KiB, 8 to a page (1.02 MiB, over the
// limit), and one of 1.1 MiB, over the limit on its own. The page size
// halves until pages fit; the large object fails the list, with a clear
// error, until it is deleted; then the informer syncs.
func TestInformerShrinksPages(t *testing.T) {
	small, huge := strings.Repeat("s", 130<<10), strings.Repeat("h", 1100<<10)
	ps := &pagingServer{}
	for i := range 16 {
		ps.objects = append(ps.objects, newPagedObject(fmt.Sprintf("d-%02d", i), &small))
	}
	ps.objects = append(ps.objects, newPagedObject("z-huge", &huge))
	srv := httptest.NewServer(ps)
	defer srv.Close()
	client, err := k8sapi.New(&k8sapi.Config{Host: srv.URL, ListPageLimit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	var logs logbuf.Buffer
	inf := New(Config[k8sapi.Deployment]{DisableStreamingList: true,
		Source:    ClientSource[k8sapi.Deployment](client, k8sapi.Deployments),
		Namespace: "ns",
		PageSize:  8,
		Logger:    slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- inf.Run(ctx) }()
	defer func() { cancel(); <-done }()

	waitFor(t, "the list to fail on the huge object", time.Minute, func() bool {
		return strings.Contains(logs.String(), "one object is over the client's size limit")
	})
	if inf.HasSynced() {
		t.Fatal("synced with an object missing")
	}
	if err := inf.Healthy(time.Now()); err == nil || !strings.Contains(err.Error(), "response body too large") {
		t.Errorf("Healthy = %v, want the size error", err)
	}
	ps.remove("z-huge")
	waitFor(t, "the sync once the huge object is gone", time.Minute, inf.HasSynced)
	if n := inf.Store().Len(); n != 16 {
		t.Errorf("store has %d objects, want 16", n)
	}
	// The cache's single page, too large; consistent pages of 4, then
	// smaller ones as the page that reaches the huge object fails, down to
	// it alone; after the backoff, the list from its first page again.
	got := strings.Join(ps.requests(), " ")
	if !strings.HasPrefix(got, "8 4 4 4 4 4 2 1 8 4 4 4 4") {
		t.Errorf("page sizes asked for: %s", got)
	}
}
