package queue

import (
	"runtime"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// mustGet takes the next key, failing if none is ready.
func mustGet(t *testing.T, q *Queue) string {
	t.Helper()
	k, ok, shut := q.tryGet()
	if !ok || shut {
		t.Fatalf("no key ready (shutdown=%v)", shut)
	}
	return k
}

// drain takes and finishes every ready key, returning them in order.
func drain(q *Queue) []string {
	var got []string
	for {
		k, ok, _ := q.tryGet()
		if !ok {
			return got
		}
		got = append(got, k)
		q.Done(k)
	}
}

func check(t *testing.T, q *Queue) {
	t.Helper()
	if err := q.checkInvariants(); err != nil {
		t.Fatal(err)
	}
}

func TestDedup(t *testing.T) {
	q := New(Config{})
	for range 5 {
		q.Add("ns/a")
	}
	q.Add("ns/b")
	q.Add("ns/a")
	if q.Len() != 2 {
		t.Fatalf("Len = %d, want 2", q.Len())
	}
	if got := drain(q); !slices.Equal(got, []string{"ns/a", "ns/b"}) {
		t.Fatalf("processed %q, want each key once", got)
	}
	check(t, q)
}

func TestStingy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Config{})
		q.Add("a")
		k, _ := q.Get()
		q.Add("a") // while held
		q.Add("a")
		if q.Len() != 0 {
			t.Fatalf("held key re-added: Len = %d, want 0", q.Len())
		}
		got := make(chan string)
		go func() {
			k, _ := q.Get()
			got <- k
		}()
		synctest.Wait()
		select {
		case k := <-got:
			t.Fatalf("second worker got %q while it was held", k)
		default:
		}
		q.Done(k)
		if k2 := <-got; k2 != "a" {
			t.Fatalf("after Done got %q, want a", k2)
		}
		q.Done("a")
		check(t, q)
		q.ShutDown()
	})
}

func TestFair(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Config{})
		q.Add("c")
		q.Add("a")
		q.AddAfter("x", 2*time.Second)
		q.AddAfter("y", time.Second)
		q.AddAfter("z", time.Second) // same deadline as y, set later
		q.Add("b")
		q.Add("c") // already ready: keeps its place
		h := mustGet(t, q)
		q.Add(h) // held: ready again at Done, after the others
		time.Sleep(3 * time.Second)
		q.Done(h)
		want := []string{"a", "b", "y", "z", "x", "c"}
		if h != "c" {
			t.Fatalf("first key %q, want c", h)
		}
		if got := drain(q); !slices.Equal(got, want) {
			t.Fatalf("order %q, want %q", got, want)
		}
		check(t, q)
	})
}

func TestAddAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Config{})
		start := time.Now()
		q.AddAfter("a", 10*time.Second)
		q.AddAfter("a", 20*time.Second) // later: ignored
		q.AddAfter("a", 5*time.Second)  // earlier: wins
		q.AddAfter("b", 5*time.Second)
		q.Add("b") // immediate: wins, and cancels the deadline
		if got := drain(q); !slices.Equal(got, []string{"b"}) {
			t.Fatalf("at once: %q, want [b]", got)
		}
		k, _ := q.Get()
		if k != "a" || time.Since(start) != 5*time.Second {
			t.Fatalf("got %q after %v, want a after 5s", k, time.Since(start))
		}
		q.Done(k)
		q.AddAfter("c", 0) // zero: now
		q.AddAfter("c", -time.Second)
		if got := drain(q); !slices.Equal(got, []string{"c"}) {
			t.Fatalf("zero delay: %q, want [c]", got)
		}
		time.Sleep(time.Minute) // nothing else comes: b's deadline was cancelled
		if q.Len() != 0 {
			t.Fatalf("Len = %d after the deadlines, want 0", q.Len())
		}
		// A key that is ready ignores a delayed add.
		q.Add("d")
		q.AddAfter("d", time.Second)
		time.Sleep(2 * time.Second)
		if got := drain(q); !slices.Equal(got, []string{"d"}) {
			t.Fatalf("%q, want [d] once", got)
		}
		// A held key with a deadline becomes ready when the deadline and
		// Done have both happened.
		q.Add("e")
		e := mustGet(t, q)
		q.AddAfter(e, time.Second)
		time.Sleep(2 * time.Second)
		if q.Len() != 0 {
			t.Fatal("held key handed out before Done")
		}
		q.Done(e)
		if got := drain(q); !slices.Equal(got, []string{"e"}) {
			t.Fatalf("%q, want [e]", got)
		}
		check(t, q)
		q.ShutDown()
	})
}

func TestAddRateLimited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Config{})
		for i, want := range []time.Duration{5, 10, 20, 40} {
			start := time.Now()
			q.AddRateLimited("a")
			if n := q.NumRequeues("a"); n != i+1 {
				t.Fatalf("NumRequeues = %d, want %d", n, i+1)
			}
			k, _ := q.Get()
			if waited := time.Since(start); k != "a" || waited != want*time.Millisecond {
				t.Fatalf("retry %d: got %q after %v, want a after %v", i+1, k, waited, want*time.Millisecond)
			}
			q.Done(k)
		}
		q.Forget("a")
		if n := q.NumRequeues("a"); n != 0 {
			t.Fatalf("NumRequeues after Forget = %d", n)
		}
		start := time.Now()
		q.AddRateLimited("a")
		q.Get()
		if waited := time.Since(start); waited != 5*time.Millisecond {
			t.Fatalf("after Forget waited %v, want 5ms", waited)
		}
		q.ShutDown()
	})
}

func TestAddRateLimitedCustomLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Config{RateLimiter: &ExponentialBackoff{Base: time.Second, Max: 3 * time.Second}})
		var waits []time.Duration
		for range 4 {
			start := time.Now()
			q.AddRateLimited("a")
			k, _ := q.Get()
			waits = append(waits, time.Since(start))
			q.Done(k)
		}
		want := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 3 * time.Second}
		if !slices.Equal(waits, want) {
			t.Fatalf("waits %v, want %v", waits, want)
		}
		q.ShutDown()
	})
}

func TestShutDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Config{})
		var wg sync.WaitGroup
		results := make(chan bool, 3)
		for range 3 {
			wg.Go(func() {
				_, shut := q.Get()
				results <- shut
			})
		}
		synctest.Wait() // all three are waiting
		q.AddAfter("later", time.Hour)
		q.ShutDown()
		wg.Wait()
		for range 3 {
			if !<-results {
				t.Fatal("a waiting Get returned shutdown=false")
			}
		}
		q.Add("a")
		q.AddAfter("b", time.Second)
		q.AddRateLimited("c")
		if k, shut := q.Get(); !shut || k != "" {
			t.Fatalf("Get after shutdown = %q, %v", k, shut)
		}
		if !q.ShuttingDown() {
			t.Fatal("ShuttingDown = false")
		}
		q.ShutDown() // twice is fine
		check(t, q)
		// The bubble ends with no goroutine and no pending timer work:
		// synctest.Test would report a leak as a deadlock.
	})
}

func TestShutDownStopsNewWorkAtOnce(t *testing.T) {
	q := New(Config{})
	q.Add("a")
	q.Add("b")
	q.ShutDown()
	if k, shut := q.Get(); !shut {
		t.Fatalf("Get after ShutDown handed out %q", k)
	}
	if q.Len() != 0 {
		t.Fatalf("Len = %d after ShutDown", q.Len())
	}
	check(t, q)
}

func TestShutDownWithDrain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Config{})
		q.Add("a")
		q.Add("b")
		a, _ := q.Get()
		q.Add(a) // re-added while held: dropped by the shutdown
		drained := make(chan struct{})
		go func() {
			q.ShutDownWithDrain()
			close(drained)
		}()
		synctest.Wait()
		select {
		case <-drained:
			t.Fatal("ShutDownWithDrain returned while a key was held")
		default:
		}
		if _, shut := q.Get(); !shut {
			t.Fatal("Get during drain handed out work")
		}
		time.Sleep(time.Second)
		q.Done(a)
		<-drained
		if q.Len() != 0 {
			t.Fatal("re-added key survived the shutdown")
		}
		check(t, q)
		q.mu.Lock()
		n := len(q.entries)
		q.mu.Unlock()
		if n != 0 {
			t.Fatalf("%d keys remembered after drain", n)
		}
		// Nothing held: returns at once.
		New(Config{}).ShutDownWithDrain()
	})
}

func TestDoneOfKeyNotHeld(t *testing.T) {
	q := New(Config{})
	q.Done("never")
	q.Add("a")
	q.Done("a") // ready, not held
	if q.Len() != 1 {
		t.Fatalf("Len = %d, want 1", q.Len())
	}
	k := mustGet(t, q)
	q.Done(k)
	q.Done(k)
	check(t, q)
}

func TestBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Config{})
		keys := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}
		for i := range 10_000 {
			k := keys[i%len(keys)]
			q.Add(k)
			q.AddAfter(k, time.Duration(i%7+1)*time.Second)
			if i%3 == 0 {
				drain(q)
			}
		}
		q.mu.Lock()
		if n := len(q.entries); n > len(keys) {
			t.Errorf("%d entries for %d keys", n, len(keys))
		}
		if n := len(q.waiting); n > len(keys) {
			t.Errorf("%d waiting for %d keys", n, len(keys))
		}
		if n := q.ready.n; n > len(keys) {
			t.Errorf("%d ready for %d keys", n, len(keys))
		}
		q.mu.Unlock()
		drain(q)
		for range 10 {
			q.AddAfter("a", time.Hour) // one deadline, however often
		}
		q.mu.Lock()
		if n := len(q.waiting); n != 1 {
			t.Errorf("%d deadlines for one key", n)
		}
		q.mu.Unlock()
		time.Sleep(2 * time.Hour)
		drain(q)
		q.mu.Lock()
		n, free := len(q.entries), len(q.free)
		q.mu.Unlock()
		if n != 0 || free > len(keys) {
			t.Fatalf("idle queue remembers %d keys, %d free entries", n, free)
		}
		check(t, q)
		q.ShutDown()
	})
}

// recordingMetrics records what the queue reports.
type recordingMetrics struct {
	adds, retries int
	depths        []int
	waited        []time.Duration
	worked        []time.Duration
}

func (m *recordingMetrics) Added()                 { m.adds++ }
func (m *recordingMetrics) Depth(n int)            { m.depths = append(m.depths, n) }
func (m *recordingMetrics) Retried()               { m.retries++ }
func (m *recordingMetrics) Waited(d time.Duration) { m.waited = append(m.waited, d) }
func (m *recordingMetrics) Worked(d time.Duration) { m.worked = append(m.worked, d) }

func TestMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &recordingMetrics{}
		q := New(Config{Name: "widgets", Metrics: m})
		q.Add("a")
		q.Add("a") // deduplicated: not counted
		q.Add("b")
		time.Sleep(time.Second)
		a, _ := q.Get()
		time.Sleep(2 * time.Second)
		b, _ := q.Get()
		if total, longest := q.Unfinished(); total != 2*time.Second || longest != 2*time.Second {
			t.Fatalf("Unfinished = %v, %v; want 2s, 2s", total, longest)
		}
		time.Sleep(time.Second)
		q.Done(a)
		q.AddRateLimited(b) // 5ms
		q.Done(b)
		time.Sleep(5 * time.Millisecond)
		b, _ = q.Get()
		q.Done(b)
		if total, longest := q.Unfinished(); total != 0 || longest != 0 {
			t.Fatalf("idle Unfinished = %v, %v", total, longest)
		}
		if m.adds != 3 || m.retries != 1 {
			t.Errorf("adds=%d retries=%d, want 3 and 1", m.adds, m.retries)
		}
		if want := []int{1, 2, 1, 0, 1, 0}; !slices.Equal(m.depths, want) {
			t.Errorf("depths %v, want %v", m.depths, want)
		}
		if want := []time.Duration{time.Second, 3 * time.Second, 0}; !slices.Equal(m.waited, want) {
			t.Errorf("waited %v, want %v", m.waited, want)
		}
		if want := []time.Duration{3 * time.Second, time.Second, 0}; !slices.Equal(m.worked, want) {
			t.Errorf("worked %v, want %v", m.worked, want)
		}
		q.ShutDown()
	})
}

// TestStress runs 8 workers over 100,000 adds of 1,000 keys. Each add
// first bumps the key's version; a worker reconciles by recording the
// version it reads. No key may be held by two workers at once, and in the
// end every key must have been reconciled at its last version: no add was
// lost.
func TestStress(t *testing.T) {
	const (
		workers = 8
		nkeys   = 1000
		adds    = 100_000
		adders  = 4
	)
	synctest.Test(t, func(t *testing.T) {
		keys := make([]string, nkeys)
		for i := range keys {
			keys[i] = "ns/" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676))
		}
		type state struct {
			mu       sync.Mutex
			version  int // bumped before every add
			observed int // version seen by the latest reconcile
			inFlight int
		}
		states := make([]state, nkeys)
		index := make(map[string]int, nkeys)
		for i, k := range keys {
			index[k] = i
		}
		q := New(Config{})
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for {
					k, shut := q.Get()
					if shut {
						return
					}
					s := &states[index[k]]
					s.mu.Lock()
					s.inFlight++
					if s.inFlight > 1 {
						t.Errorf("key %s held by %d workers", k, s.inFlight)
					}
					s.observed = s.version
					s.mu.Unlock()
					// Widen the windows for a second holder and for an add
					// that comes after the read.
					runtime.Gosched()
					s.mu.Lock()
					s.inFlight--
					s.mu.Unlock()
					q.Done(k)
				}
			})
		}
		var adding sync.WaitGroup
		for a := range adders {
			adding.Go(func() {
				x := uint32(a + 1)
				for range adds / adders {
					x ^= x << 13
					x ^= x >> 17
					x ^= x << 5
					i := int(x % nkeys)
					s := &states[i]
					s.mu.Lock()
					s.version++
					s.mu.Unlock()
					q.Add(keys[i])
				}
			})
		}
		adding.Wait()
		synctest.Wait() // every worker idle in Get
		if q.Len() != 0 {
			t.Fatalf("%d keys still ready with idle workers", q.Len())
		}
		for i := range states {
			if s := &states[i]; s.observed != s.version {
				t.Errorf("key %s: last add (version %d) not processed, saw %d", keys[i], s.version, s.observed)
			}
		}
		check(t, q)
		q.ShutDownWithDrain()
		wg.Wait()
	})
}

// A later deadline is ignored also for the key whose deadline is the
// next one due (the top of the heap).
func TestLaterDeadlineIgnoredForNextDue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Config{})
		start := time.Now()
		q.AddAfter("a", 10*time.Second)
		q.AddAfter("a", 20*time.Second)
		if k, _ := q.Get(); k != "a" || time.Since(start) != 10*time.Second {
			t.Fatalf("got %q after %v, want a after 10s", k, time.Since(start))
		}
	})
}
