package leader

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"path"
	"slices"
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

func TestShardOf(t *testing.T) {
	// FNV-1a of the key, modulo the count: fixed values, so that a change
	// of hash (which would move every key at an upgrade) fails here.
	for _, c := range []struct {
		key    string
		shards int
		want   int
	}{
		{"default/web", 1, 0},
		{"default/web", 0, 0},
		{"", 7, 2166136261 % 7},
		{"default/web", 6, 3},
		{"team-a/w-00001", 6, 0},
		{"team-a/w-00002", 6, 1},
	} {
		if got := ShardOf(c.key, c.shards); got != c.want {
			t.Errorf("ShardOf(%q, %d) = %d, want %d", c.key, c.shards, got, c.want)
		}
	}
	// The keys of the bench spread evenly enough over 6 shards.
	count := make([]int, 6)
	for i := range 3000 {
		count[ShardOf(fmt.Sprintf("bench/w-%05d", i), 6)]++
	}
	for k, n := range count {
		if n < 400 || n > 600 {
			t.Errorf("shard %d has %d of 3000 keys; want about 500: %v", k, n, count)
		}
	}
}

func TestBalance(t *testing.T) {
	for _, c := range []struct {
		name    string
		self    string
		members string // comma-separated
		holders string // one letter per shard, '.' for free
		take    int    // how many free shards it takes (which depends on its identity)
		give    []int
	}{
		{"alone takes all", "a", "a", "......", 6, nil},
		{"fair share of free shards", "a", "a,b,c", "......", 2, nil},
		{"takes up to its share", "a", "a,b,c", "abb...", 1, nil},
		{"stable: nothing moves", "a", "a,b,c", "aabbcc", 0, nil},
		{"stable with a remainder", "a", "a,b,c", "aaabbcc", 0, nil},
		{"gives extras when one joins", "a", "a,b,c", "aaaaaa", 0, []int{5, 4, 3, 2}},
		{"over the share rounded down, one free", "a", "a,b", "aaab.", 0, nil},
		{"does not take others' shards", "c", "a,b,c", "aaabbb", 0, nil},
		{"over the share rounded up", "b", "a,b,c", "aaabbb", 0, []int{5}},
		{"the richest gives one to the needy", "a", "a,b,c", "aaabbbc", 0, []int{2}},
		{"a tie: only the smaller identity gives", "b", "a,b,c", "aaabbbc", 0, nil},
		{"the needy takes nothing held", "c", "a,b,c", "aaabbbc", 0, nil},
		{"shards of a dead replica stay until they expire", "a", "a", "xx....", 4, nil},
		{"at its share beside a dead replica's shards: nothing moves", "a", "a,b", "aaxx", 0, nil},
		{"unknown holders are not free", "a", "a,b", "??....", 3, nil},
		{"one shard, two replicas", "b", "a,b", "a", 0, nil},
		{"one shard, free", "b", "a,b", ".", 1, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var holders []string
			for _, h := range c.holders {
				if h == '.' {
					holders = append(holders, "")
				} else {
					holders = append(holders, string(h))
				}
			}
			take, give := balance(c.self, strings.Split(c.members, ","), holders)
			if len(take) != c.take {
				t.Errorf("take %v, want %d shards", take, c.take)
			}
			for _, k := range take {
				if holders[k] != "" {
					t.Errorf("takes shard %d, held by %q", k, holders[k])
				}
			}
			if !slices.Equal(give, c.give) {
				t.Errorf("give %v, want %v", give, c.give)
			}
		})
	}
}

// leaseStore is a fake API server, in memory, that stores Leases by name
// in one namespace: an http.RoundTripper serving GET, POST (create), PUT
// (update, conditional on resourceVersion) and DELETE, as the API server
// does them. It keeps no goroutine and no connection, so it runs inside a
// synctest bubble.
type leaseStore struct {
	mu     sync.Mutex
	leases map[string]*k8sapi.Lease
	rv     int
}

const leaseDir = "/apis/coordination.k8s.io/v1/namespaces/ops/leases"

func (s *leaseStore) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		req.Body.Close()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.leases == nil {
		s.leases = map[string]*k8sapi.Lease{}
	}
	name := path.Base(req.URL.Path)
	var l k8sapi.Lease
	if len(body) > 0 {
		if err := json.Unmarshal(body, &l); err != nil {
			return status(req, http.StatusBadRequest, "BadRequest"), nil
		}
	}
	have := s.leases[name]
	switch {
	case req.Method == http.MethodPost && req.URL.Path == leaseDir:
		if s.leases[l.Name] != nil {
			return status(req, http.StatusConflict, "AlreadyExists"), nil
		}
		return s.store(req, &l, http.StatusCreated), nil
	case path.Dir(req.URL.Path) != leaseDir:
	case have == nil:
		return status(req, http.StatusNotFound, "NotFound"), nil
	case req.Method == http.MethodGet:
		return object(req, http.StatusOK, have), nil
	case req.Method == http.MethodPut && l.ResourceVersion != have.ResourceVersion:
		return status(req, http.StatusConflict, "Conflict"), nil
	case req.Method == http.MethodPut:
		return s.store(req, &l, http.StatusOK), nil
	case req.Method == http.MethodDelete:
		delete(s.leases, name)
		return status(req, http.StatusOK, ""), nil
	}
	return status(req, http.StatusNotFound, "NotFound"), nil
}

func (s *leaseStore) store(req *http.Request, l *k8sapi.Lease, code int) *http.Response {
	s.rv++
	l.ResourceVersion = strconv.Itoa(s.rv)
	s.leases[l.Name] = l
	return object(req, code, l)
}

func (s *leaseStore) delete(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.leases, name)
}

func object(req *http.Request, code int, v any) *http.Response {
	b, _ := json.Marshal(v)
	return &http.Response{StatusCode: code, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(bytes.NewReader(b)), ContentLength: int64(len(b)), Request: req, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}
}

func status(req *http.Request, code int, reason string) *http.Response {
	return object(req, code, k8sapi.Status{Status: "Failure", Reason: reason, Code: int32(code), Message: reason})
}

// cutOff is a replica's own link to the leaseStore, which a test can cut:
// then every request fails, as in a network partition.
type cutOff struct {
	rt  http.RoundTripper
	cut atomic.Bool
}

func (c *cutOff) RoundTrip(req *http.Request) (*http.Response, error) {
	if c.cut.Load() {
		return nil, fmt.Errorf("cut off")
	}
	return c.rt.RoundTrip(req)
}

// workLog checks the one rule of sharding: no two replicas work on one
// shard at the same time. Work enters when it starts and leaves when its
// context has ended.
type workLog struct {
	t     *testing.T
	mu    sync.Mutex
	owner map[int]string
	most  map[string]int // the most shards each replica worked on at once
}

func (w *workLog) work(id string) func(context.Context, int) {
	return func(ctx context.Context, k int) {
		w.mu.Lock()
		if o := w.owner[k]; o != "" {
			w.t.Errorf("%s starts work on shard %d while %s works on it", id, k, o)
		}
		w.owner[k] = id
		n := 0
		for _, o := range w.owner {
			if o == id {
				n++
			}
		}
		if w.most != nil {
			w.most[id] = max(w.most[id], n)
		}
		w.mu.Unlock()
		<-ctx.Done()
		w.mu.Lock()
		delete(w.owner, k)
		w.mu.Unlock()
	}
}

type replica struct {
	s      *Shards
	link   *cutOff
	log    *logbuf.Buffer
	cancel context.CancelFunc
	done   chan struct{}
}

const testShards = 6

func startReplica(t *testing.T, store *leaseStore, wl *workLog, id string) *replica {
	t.Helper()
	link := &cutOff{rt: store}
	c, err := k8sapi.New(&k8sapi.Config{Host: "https://leases.test", Transport: link})
	if err != nil {
		t.Fatal(err)
	}
	log := &logbuf.Buffer{}
	s, err := New(Config{Client: c, Namespace: "ops", Name: "widget-operator", Shards: testShards,
		Identity: id, Work: wl.work(id), Logger: slog.New(slog.NewTextHandler(log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{s: s, link: link, log: log, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		s.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-r.done })
	return r
}

// held lists how many shards each replica holds.
func held(rs ...*replica) []int {
	var out []int
	for _, r := range rs {
		out = append(out, r.s.Held())
	}
	return out
}

// waitFor advances the fake clock a retry period at a time until cond
// holds, and fails after limit.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			t.Fatalf("not within %v: %s", limit, what)
		}
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
	}
	return time.Since(start)
}

func TestShardsSpreadAndStay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, wl := &leaseStore{}, &workLog{t: t, owner: map[int]string{}}
		a := startReplica(t, store, wl, "a")
		b := startReplica(t, store, wl, "b")
		c := startReplica(t, store, wl, "c")
		waitFor(t, time.Minute, "2 shards each", func() bool { return slices.Equal(held(a, b, c), []int{2, 2, 2}) })
		moves := a.s.Transitions() + b.s.Transitions() + c.s.Transitions()
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if got := held(a, b, c); !slices.Equal(got, []int{2, 2, 2}) {
			t.Errorf("after two stable minutes: %v", got)
		}
		if m := a.s.Transitions() + b.s.Transitions() + c.s.Transitions(); m != moves {
			t.Errorf("%d shard moves while membership was stable", m-moves)
		}
	})
}

// Replicas that start together each take their share at once: none
// works on more shards than its share first and gives the rest back,
// which with split caches would cache every shard's objects on the way.
func TestShardsStartedTogetherTakeTheirShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, wl := &leaseStore{}, &workLog{t: t, owner: map[int]string{}, most: map[string]int{}}
		a := startReplica(t, store, wl, "a")
		b := startReplica(t, store, wl, "b")
		c := startReplica(t, store, wl, "c")
		waitFor(t, time.Minute, "2 shards each", func() bool { return slices.Equal(held(a, b, c), []int{2, 2, 2}) })
		wl.mu.Lock()
		defer wl.mu.Unlock()
		if want := map[string]int{"a": 2, "b": 2, "c": 2}; !maps.Equal(wl.most, want) {
			t.Errorf("the most shards each worked on at once: %v, want %v", wl.most, want)
		}
	})
}

func TestShardsOfACutOffReplicaAreTaken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, wl := &leaseStore{}, &workLog{t: t, owner: map[int]string{}}
		a := startReplica(t, store, wl, "a")
		b := startReplica(t, store, wl, "b")
		c := startReplica(t, store, wl, "c")
		waitFor(t, time.Minute, "2 shards each", func() bool { return slices.Equal(held(a, b, c), []int{2, 2, 2}) })
		c.link.cut.Store(true)
		cut := time.Now()
		// c stops work at its renew deadline; a and b take its shards
		// once they have seen them unchanged for the lease duration,
		// within two retry periods more. The workLog fails the test if
		// a shard is worked on twice at once.
		waitFor(t, time.Minute, "c stops", func() bool { return c.s.Held() == 0 })
		if d := time.Since(cut); d > RenewDeadline {
			t.Errorf("c stopped work %v after it was cut off; want within the renew deadline %v", d, RenewDeadline)
		}
		waitFor(t, time.Minute, "a and b take all", func() bool { return a.s.Held()+b.s.Held() == testShards })
		if d, most := time.Since(cut), LeaseDuration+2*RetryPeriod; d > most {
			t.Errorf("shards taken %v after the cut; want within %v", d, most)
		}
		if got := held(a, b); !slices.Equal(got, []int{3, 3}) {
			t.Errorf("a and b hold %v; want 3 each", got)
		}
		// Each shard moved says from whom.
		if n := strings.Count(a.log.String()+b.log.String(), `msg="leader: took the lease" identity=`); n < testShards {
			t.Errorf("%d \"leader: took the lease\" lines; want at least %d", n, testShards)
		}
		if n := strings.Count(a.log.String()+b.log.String(), "from=c\n"); n != 2 {
			t.Errorf("%d shards logged as taken from c; want its 2:\n%s%s", n, a.log, b.log)
		}
		if n := strings.Count(c.log.String(), `msg="leader: lost the lease"`); n != 2 {
			t.Errorf("c logged %d lost shards; want 2:\n%s", n, c.log)
		}
	})
}

func TestShardsScaleOutAndIn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, wl := &leaseStore{}, &workLog{t: t, owner: map[int]string{}}
		a := startReplica(t, store, wl, "a")
		waitFor(t, time.Minute, "a holds all", func() bool { return a.s.Held() == testShards })
		b := startReplica(t, store, wl, "b")
		c := startReplica(t, store, wl, "c")
		waitFor(t, time.Minute, "2 shards each", func() bool { return slices.Equal(held(a, b, c), []int{2, 2, 2}) })
		// Scale in: b and c shut down and release; a takes all back at
		// its next rounds, not after a lease duration.
		b.cancel()
		c.cancel()
		<-b.done
		<-c.done
		d := waitFor(t, time.Minute, "a holds all again", func() bool { return a.s.Held() == testShards })
		if most := LeaseDuration; d >= most {
			t.Errorf("released shards taken back after %v; want well within a lease duration", d)
		}
	})
}

func TestShardsDeletedLeaseIsRecovered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, wl := &leaseStore{}, &workLog{t: t, owner: map[int]string{}}
		a := startReplica(t, store, wl, "a")
		b := startReplica(t, store, wl, "b")
		waitFor(t, time.Minute, "3 shards each", func() bool { return slices.Equal(held(a, b), []int{3, 3}) })
		moves := a.s.Transitions() + b.s.Transitions()
		store.delete("widget-operator-shard-0")
		waitFor(t, time.Minute, "shard 0 recreated and held", func() bool {
			store.mu.Lock()
			l := store.leases["widget-operator-shard-0"]
			store.mu.Unlock()
			return l != nil && a.s.Held()+b.s.Held() == testShards && (a.s.held[0].Load() || b.s.held[0].Load())
		})
		// Its holder does not quietly recreate it: it stops work on the
		// shard, which is then taken again as a free one.
		if m := a.s.Transitions() + b.s.Transitions() - moves; m != 2 {
			t.Errorf("%d shard moves after the deletion; want 2 (lost, then taken)", m)
		}
	})
}

func TestShardsShutdownReleases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, wl := &leaseStore{}, &workLog{t: t, owner: map[int]string{}}
		a := startReplica(t, store, wl, "a")
		waitFor(t, time.Minute, "a holds all", func() bool { return a.s.Held() == testShards })
		a.cancel()
		<-a.done
		store.mu.Lock()
		defer store.mu.Unlock()
		for name, l := range store.leases {
			if h := l.Spec.HolderIdentity; h != nil && *h != "" {
				t.Errorf("%s still held by %q after shutdown", name, *h)
			}
		}
		if len(store.leases) != testShards+1 {
			t.Errorf("%d leases; want %d shards and one membership", len(store.leases), testShards)
		}
	})
}
