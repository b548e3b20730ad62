package leader

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/testenv/logbuf"
)

const leasePath = "/apis/coordination.k8s.io/v1/namespaces/ops/leases/widget-operator"

// write is one successful write the leaseServer took.
type write struct {
	at     time.Time
	verb   string
	holder string
	dur    int32
}

// leaseServer is a fake API server, in memory, that stores a single
// Lease, named widget-operator: an http.RoundTripper serving GET, POST (create) and PUT (update,
// conditional on resourceVersion, as the API server does it). It keeps
// no goroutine and no connection, so it runs inside a synctest bubble.
// With down set it answers every request 500.
type leaseServer struct {
	down   atomic.Bool
	mu     sync.Mutex
	lease  *k8sapi.Lease
	rv     int
	writes []write
}

func (s *leaseServer) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		req.Body.Close()
	}
	if s.down.Load() {
		return s.status(req, http.StatusInternalServerError, "InternalError"), nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case req.Method == http.MethodGet && req.URL.Path == leasePath:
		if s.lease == nil {
			return s.status(req, http.StatusNotFound, "NotFound"), nil
		}
		return s.object(req, http.StatusOK, s.lease), nil
	case req.Method == http.MethodPost && req.URL.Path == strings.TrimSuffix(leasePath, "/widget-operator"):
		if s.lease != nil {
			return s.status(req, http.StatusConflict, "AlreadyExists"), nil
		}
		var l k8sapi.Lease
		if err := json.Unmarshal(body, &l); err != nil || l.ResourceVersion != "" || l.Name != "widget-operator" {
			return s.status(req, http.StatusBadRequest, "BadRequest"), nil
		}
		return s.store(req, "create", &l, http.StatusCreated), nil
	case req.Method == http.MethodPut && req.URL.Path == leasePath:
		var l k8sapi.Lease
		if err := json.Unmarshal(body, &l); err != nil {
			return s.status(req, http.StatusBadRequest, "BadRequest"), nil
		}
		if s.lease == nil {
			return s.status(req, http.StatusNotFound, "NotFound"), nil
		}
		if l.ResourceVersion != s.lease.ResourceVersion {
			return s.status(req, http.StatusConflict, "Conflict"), nil
		}
		return s.store(req, "update", &l, http.StatusOK), nil
	}
	return s.status(req, http.StatusNotFound, "NotFound"), nil
}

// put stores l as if another client wrote it.
func (s *leaseServer) put(l k8sapi.Lease) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rv++
	l.ResourceVersion = strconv.Itoa(s.rv)
	s.lease = &l
}

func (s *leaseServer) store(req *http.Request, verb string, l *k8sapi.Lease, code int) *http.Response {
	s.rv++
	l.ResourceVersion = strconv.Itoa(s.rv)
	s.lease = l
	w := write{at: time.Now(), verb: verb, dur: *l.Spec.LeaseDurationSeconds}
	if l.Spec.HolderIdentity != nil {
		w.holder = *l.Spec.HolderIdentity
	}
	s.writes = append(s.writes, w)
	return s.object(req, code, l)
}

func (s *leaseServer) history() []write {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]write(nil), s.writes...)
}

func (s *leaseServer) current() k8sapi.Lease {
	s.mu.Lock()
	defer s.mu.Unlock()
	return *s.lease
}

// holder returns the Lease's holder; "" when it has none or is missing.
func (s *leaseServer) holder() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lease == nil || s.lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *s.lease.Spec.HolderIdentity
}

func (s *leaseServer) object(req *http.Request, code int, v any) *http.Response {
	b, _ := json.Marshal(v)
	return &http.Response{StatusCode: code, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(bytes.NewReader(b)), ContentLength: int64(len(b)), Request: req, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}
}

func (s *leaseServer) status(req *http.Request, code int, reason string) *http.Response {
	return s.object(req, code, k8sapi.Status{Status: "Failure", Reason: reason, Code: int32(code), Message: reason})
}

// candidate is one replica under test with one shard (leader election):
// its Shards and what its Work saw.
type candidate struct {
	s        *Shards
	log      *logbuf.Buffer
	starts   atomic.Int32 // how many times Work started
	started  atomic.Int64 // fake-clock UnixNano when Work last started, 0 before
	workDone atomic.Int64 // when Work last returned
	holderAt atomic.Value // string: the Lease's holder when Work last returned
	result   chan error
	cancel   context.CancelFunc
}

func startCandidate(t *testing.T, srv *leaseServer, id string) *candidate {
	t.Helper()
	c, err := k8sapi.New(&k8sapi.Config{Host: "https://leases.test", Transport: srv})
	if err != nil {
		t.Fatal(err)
	}
	cand := &candidate{log: &logbuf.Buffer{}, result: make(chan error, 1)}
	cand.s, err = New(Config{Client: c, Namespace: "ops", Name: "widget-operator", Identity: id,
		Logger: slog.New(slog.NewTextHandler(cand.log, nil)),
		Work: func(ctx context.Context, shard int) {
			if shard != 0 {
				t.Errorf("Work on shard %d of one", shard)
			}
			cand.starts.Add(1)
			cand.started.Store(time.Now().UnixNano())
			<-ctx.Done()
			cand.holderAt.Store(srv.holder())
			cand.workDone.Store(time.Now().UnixNano())
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cand.cancel = cancel
	go func() { cand.result <- cand.s.Run(ctx) }()
	t.Cleanup(cancel)
	return cand
}

func (c *candidate) leads() bool { return c.s.held[0].Load() }

func at(ns int64) time.Time { return time.Unix(0, ns) }

// TestCreateAndRenew: with one shard there is one Lease, named Name and
// no other, created at once and renewed every retry period.
func TestCreateAndRenew(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &leaseServer{}
		begin := time.Now()
		a := startCandidate(t, srv, "a")
		synctest.Wait()
		if !a.leads() || a.started.Load() != begin.UnixNano() {
			t.Fatalf("not leading at once on a missing lease")
		}
		time.Sleep(7 * time.Second)
		var got []string
		for _, w := range srv.history() {
			got = append(got, w.verb+"@"+w.at.Sub(begin).String()+":"+w.holder)
		}
		if want := "create@0s:a update@2s:a update@4s:a update@6s:a"; strings.Join(got, " ") != want {
			t.Errorf("writes %s\nwant   %s", strings.Join(got, " "), want)
		}
		l := srv.current()
		if l.Name != "widget-operator" || *l.Spec.LeaseDurationSeconds != 15 || *l.Spec.LeaseTransitions != 0 || !l.Spec.AcquireTime.Equal(begin) || !l.Spec.RenewTime.Equal(begin.Add(6*time.Second)) {
			t.Errorf("lease %s, spec %+v", l.Name, l.Spec)
		}
		a.cancel()
		if err := <-a.result; err != nil {
			t.Errorf("Run after cancel = %v", err)
		}
	})
}

func TestReleaseHandsOverWithinRetryPeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &leaseServer{}
		a := startCandidate(t, srv, "a")
		synctest.Wait()
		b := startCandidate(t, srv, "b")
		time.Sleep(time.Minute)
		if !a.leads() || b.leads() || b.starts.Load() != 0 {
			t.Fatalf("a=%v b=%v", a.leads(), b.leads())
		}
		released := time.Now()
		a.cancel()
		if err := <-a.result; err != nil {
			t.Errorf("a: Run = %v", err)
		}
		if a.workDone.Load() == 0 || a.holderAt.Load() != "a" {
			t.Errorf("a: work done %v, the lease's holder then %q; want the work ended before the release", a.workDone.Load(), a.holderAt.Load())
		}
		time.Sleep(3 * time.Second)
		if !b.leads() {
			t.Fatalf("b did not take over within 3s of the release")
		}
		if d := at(b.started.Load()).Sub(released); d > RetryPeriod {
			t.Errorf("b took over %v after the release, want within the %v retry period", d, RetryPeriod)
		}
		h := srv.history()
		var rel *write
		for i := range h {
			if h[i].holder == "" {
				rel = &h[i]
			}
		}
		if rel == nil || rel.dur != 1 {
			t.Errorf("no release write (holder \"\", 1s) in %+v", h)
		}
		if l := srv.current(); *l.Spec.LeaseTransitions != 1 || *l.Spec.HolderIdentity != "b" {
			t.Errorf("after hand-over: %+v", l.Spec)
		}
		if !strings.Contains(a.log.String(), `msg="leader: released the lease" identity=a lease=widget-operator`) {
			t.Errorf("a logged no release:\n%s", a.log)
		}
	})
}

// TestTakeOverByLocalObservation checks that a lease another replica
// stopped renewing is taken once it has been seen unchanged for the
// holder's lease duration, whatever its timestamps say.
func TestTakeOverByLocalObservation(t *testing.T) {
	for _, tc := range []struct {
		name   string
		renew  time.Duration // the dead holder's renewTime, from now
		dur    int32
		expect time.Duration
	}{
		{"renewTime long past", -24 * time.Hour, 15, 15 * time.Second},
		{"renewTime in the future", 24 * time.Hour, 15, 15 * time.Second},
		{"renewTime now", 0, 15, 15 * time.Second},
		{"holder's longer duration", 0, 40, 40 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := &leaseServer{}
				holder, dur, tr := "gone", tc.dur, int32(7)
				rt := k8sapi.MicroTime{Time: time.Now().Add(tc.renew)}
				srv.put(k8sapi.Lease{ObjectMeta: k8sapi.ObjectMeta{Name: "widget-operator", Namespace: "ops"},
					Spec: k8sapi.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &dur, RenewTime: &rt, AcquireTime: &rt, LeaseTransitions: &tr}})
				begin := time.Now()
				b := startCandidate(t, srv, "b")
				time.Sleep(tc.expect - time.Millisecond)
				if b.leads() {
					t.Fatalf("took the lease before it had been unchanged for %v", tc.expect)
				}
				time.Sleep(RetryPeriod + time.Millisecond)
				if !b.leads() {
					t.Fatalf("did not take the lease within a retry period after %v", tc.expect)
				}
				if d := at(b.started.Load()).Sub(begin); d < tc.expect || d > tc.expect+RetryPeriod {
					t.Errorf("took over after %v", d)
				}
				if l := srv.current(); *l.Spec.LeaseTransitions != 8 {
					t.Errorf("transitions %d, want 8", *l.Spec.LeaseTransitions)
				}
				if !strings.Contains(b.log.String(), `msg="leader: took the lease" identity=b lease=widget-operator held=1 from=gone`) {
					t.Errorf("no takeover line naming the holder it was taken from:\n%s", b.log)
				}
			})
		})
	}
}

// TestRenewedLeaseIsNotTaken: a holder that keeps renewing keeps the
// lease, however old its timestamps look.
func TestRenewedLeaseIsNotTaken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &leaseServer{}
		holder, dur := "alive", int32(15)
		renew := func() {
			rt := k8sapi.MicroTime{Time: time.Now().Add(-time.Hour)} // skewed clock
			srv.put(k8sapi.Lease{ObjectMeta: k8sapi.ObjectMeta{Name: "widget-operator", Namespace: "ops"},
				Spec: k8sapi.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &dur, RenewTime: &rt}})
		}
		renew()
		b := startCandidate(t, srv, "b")
		for range 30 {
			time.Sleep(2 * time.Second)
			renew()
		}
		if b.leads() || b.starts.Load() != 0 || *srv.current().Spec.HolderIdentity != "alive" {
			t.Errorf("took a lease that was being renewed")
		}
	})
}

// TestStepDownWhenRenewalFails: a leader that cannot renew stops its work
// within the renew deadline of its last renewal, before its lease could
// expire, and campaigns again: it leads again once the API server is
// back.
func TestStepDownWhenRenewalFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &leaseServer{}
		a := startCandidate(t, srv, "a")
		time.Sleep(5 * time.Second)
		srv.down.Store(true)
		h := srv.history()
		lastOK := h[len(h)-1].at
		time.Sleep(LeaseDuration)
		synctest.Wait()
		if a.leads() || a.workDone.Load() == 0 {
			t.Fatalf("still leading %v after the API server went down", LeaseDuration)
		}
		if d := at(a.workDone.Load()).Sub(lastOK); d > RenewDeadline {
			t.Errorf("work stopped %v after the last renewal, want within the %v renew deadline", d, RenewDeadline)
		}
		if !strings.Contains(a.log.String(), `msg="leader: lost the lease"`) {
			t.Errorf("no line for the loss:\n%s", a.log)
		}
		select {
		case err := <-a.result:
			t.Fatalf("Run returned %v on the loss; want it to campaign again", err)
		default:
		}
		back := time.Now()
		srv.down.Store(false)
		time.Sleep(RetryPeriod)
		synctest.Wait()
		if !a.leads() || a.starts.Load() != 2 || at(a.started.Load()).Sub(back) > RetryPeriod {
			t.Errorf("leading %v (work started %d times) a retry period after the API server came back; want leading again", a.leads(), a.starts.Load())
		}
	})
}

// TestStepDownWhenTakenOver: a leader that finds another holder stops its
// work within a retry period, and goes on campaigning.
func TestStepDownWhenTakenOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &leaseServer{}
		a := startCandidate(t, srv, "a")
		time.Sleep(3 * time.Second)
		l := srv.current()
		other := "usurper"
		l.Spec.HolderIdentity = &other
		srv.put(l)
		took := time.Now()
		time.Sleep(RetryPeriod)
		synctest.Wait()
		if a.leads() || a.workDone.Load() == 0 {
			t.Fatal("still leading a retry period after the takeover")
		}
		if d := at(a.workDone.Load()).Sub(took); d > RetryPeriod {
			t.Errorf("stopped %v after the takeover, want within one retry period", d)
		}
		if h := *srv.current().Spec.HolderIdentity; h != "usurper" {
			t.Errorf("the lease was written back by %q", h)
		}
		select {
		case err := <-a.result:
			t.Fatalf("Run returned %v on the loss; want it to campaign again", err)
		default:
		}
	})
}

func TestOneLeaderAmongRacers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &leaseServer{}
		cs := []*candidate{startCandidate(t, srv, "a"), startCandidate(t, srv, "b"), startCandidate(t, srv, "c")}
		for range 300 {
			time.Sleep(100 * time.Millisecond)
			n := 0
			for _, c := range cs {
				if c.leads() {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("%d leaders at once", n)
			}
		}
		creates := 0
		for _, w := range srv.history() {
			if w.verb == "create" {
				creates++
			}
		}
		if creates != 1 {
			t.Errorf("%d creates", creates)
		}
	})
}

func TestNewChecksConfig(t *testing.T) {
	c, _ := k8sapi.New(&k8sapi.Config{Host: "https://leases.test", Transport: &leaseServer{}})
	work := func(context.Context, int) {}
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"no client", Config{Name: "x", Work: work}},
		{"no name", Config{Client: c, Work: work}},
		{"no work", Config{Client: c, Name: "x"}},
		{"negative shards", Config{Client: c, Name: "x", Shards: -1, Work: work}},
		{"name with an underscore", Config{Client: c, Name: "my_lease", Work: work}},
		{"upper-case name", Config{Client: c, Name: "Lease", Work: work}},
		{"upper-case name, shards", Config{Client: c, Name: "W", Shards: 2, Work: work}},
		{"name with an empty label", Config{Client: c, Name: "a..b", Work: work}},
		{"name ending in a dash", Config{Client: c, Name: "lease-", Work: work}},
		{"name too long", Config{Client: c, Name: strings.Repeat("a", 254), Work: work}},
		{"name too long for its shard Leases", Config{Client: c, Name: strings.Repeat("a", 253), Shards: 2, Work: work}},
		{"namespace with a dot", Config{Client: c, Name: "x", Namespace: "a.b", Work: work}},
	} {
		if _, err := New(tc.cfg); err == nil || !strings.HasPrefix(err.Error(), "leader: ") {
			t.Errorf("%s: New = %v", tc.name, err)
		}
	}
	if _, err := New(Config{Client: c, Work: work}); err == nil || err.Error() != "leader: Config.Name is required" {
		t.Errorf("New with no name = %v, want the required field named", err)
	}
	for _, name := range []string{"widget-operator.example.com", "a", "0-9", strings.Repeat("a", 63) + "." + strings.Repeat("b", 63)} {
		if _, err := New(Config{Client: c, Name: name, Work: work}); err != nil {
			t.Errorf("New with name %q: %v", name, err)
		}
	}
	// The longest Lease name is checked: with one shard the name alone (249
	// characters), with ten the last membership Lease's, name-member-9
	// (244 + 9 = 253 characters, the most an object name may have).
	long := strings.Repeat(strings.Repeat("a", 63)+".", 3)
	for _, cfg := range []Config{{Name: long + strings.Repeat("b", 57), Shards: 1}, {Name: long + strings.Repeat("b", 52), Shards: 10}} {
		cfg.Client, cfg.Work = c, work
		if _, err := New(cfg); err != nil {
			t.Errorf("New with a name of %d characters and %d shards: %v", len(cfg.Name), cfg.Shards, err)
		}
	}
	s, err := New(Config{Client: c, Name: "x", Work: work})
	if err != nil {
		t.Fatal(err)
	}
	if s.cfg.Namespace != "default" || s.cfg.Shards != 1 {
		t.Errorf("defaults: %+v", s.cfg)
	}
	// The timings docs/operating.md promises.
	if LeaseDuration != 15*time.Second || RenewDeadline != 10*time.Second || RetryPeriod != 2*time.Second {
		t.Errorf("timings %v, %v, %v; want 15s, 10s, 2s", LeaseDuration, RenewDeadline, RetryPeriod)
	}
	if len(s.shards) != 1 || s.shards[0].name != "x" || len(s.members) != 0 {
		t.Errorf("one shard: Leases %v and members %v, want x alone", s.shards, s.members)
	}
	host, _ := strings.CutSuffix(s.Identity(), s.Identity()[strings.LastIndexByte(s.Identity(), '_'):])
	if len(s.Identity())-len(host) != 33 {
		t.Errorf("identity %q", s.Identity())
	}
}

// TestStuckLeaderDoesNotRelease: a Work that ignores its context keeps
// the lease from being released; Run still returns, after the renew
// deadline, and the lease is left to expire.
func TestStuckLeaderDoesNotRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &leaseServer{}
		c, _ := k8sapi.New(&k8sapi.Config{Host: "https://leases.test", Transport: srv})
		release := make(chan struct{})
		s, err := New(Config{Client: c, Namespace: "ops", Name: "widget-operator", Identity: "a",
			Work: func(context.Context, int) { <-release }})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		result := make(chan error, 1)
		go func() { result <- s.Run(ctx) }()
		time.Sleep(3 * time.Second)
		cancel()
		begin := time.Now()
		if err := <-result; err != nil {
			t.Errorf("Run = %v", err)
		}
		if d := time.Since(begin); d != RenewDeadline {
			t.Errorf("Run returned %v after cancel, want the %v renew deadline", d, RenewDeadline)
		}
		if l := srv.current(); *l.Spec.HolderIdentity != "a" {
			t.Errorf("lease released while the leader was still working")
		}
		close(release)
	})
}

// TestDeletedLeaseIsRecreated: the leader whose Lease is deleted by hand
// loses it (its work stops), creates it again and leads again, within two
// retry periods.
func TestDeletedLeaseIsRecreated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &leaseServer{}
		a := startCandidate(t, srv, "a")
		time.Sleep(3 * time.Second)
		srv.mu.Lock()
		srv.lease = nil
		srv.mu.Unlock()
		time.Sleep(2 * RetryPeriod)
		synctest.Wait()
		if !a.leads() || a.starts.Load() != 2 || a.workDone.Load() == 0 {
			t.Fatalf("leading %v, work started %d times, stopped %v; want stopped once, then leading again", a.leads(), a.starts.Load(), a.workDone.Load())
		}
		if l := srv.current(); *l.Spec.HolderIdentity != "a" {
			t.Errorf("Lease not recreated for a: %+v", l.Spec)
		}
	})
}
