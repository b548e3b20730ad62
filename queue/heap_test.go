package queue

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestDelayedKeysComeDueInDeadlineOrder gives 64 keys deadlines in a
// scrambled order, moves some earlier, makes some ready at once, and
// checks that the rest become ready in deadline order, ties in the order
// their deadlines were set. Enough keys for a heap of six levels, so that
// a wrong parent or child index breaks the order.
func TestDelayedKeysComeDueInDeadlineOrder(t *testing.T) {
	clock := newFakeClock()
	q := New(Config{Clock: clock})
	const n = 64
	type want struct {
		key string
		due time.Duration
		seq int
	}
	deadlines := map[string]want{}
	seq := 0
	set := func(key string, d time.Duration) {
		q.AddAfter(key, d)
		seq++
		deadlines[key] = want{key, d, seq}
		check(t, q)
	}
	for i := range n {
		// 37 is coprime with 64: every delay from 1s to 64s once, scrambled;
		// keys 0 to 7 share the delay 100s, a tie.
		d := time.Duration(i*37%n+1) * time.Second
		if i < 8 {
			d = 100 * time.Second
		}
		set(fmt.Sprintf("k%02d", i), d)
	}
	// Earlier deadlines for some keys: they move up the heap.
	for i := 8; i < n; i += 5 {
		key := fmt.Sprintf("k%02d", i)
		if d := deadlines[key].due / 3; d > 0 {
			set(key, d)
		}
	}
	// Later deadlines are ignored.
	for i := 9; i < n; i += 7 {
		q.AddAfter(fmt.Sprintf("k%02d", i), time.Hour)
		check(t, q)
	}
	// Some keys become ready now: they leave the heap from the middle.
	for i := 10; i < n; i += 9 {
		key := fmt.Sprintf("k%02d", i)
		q.Add(key)
		delete(deadlines, key)
		check(t, q)
	}
	for _, k := range drain(q) {
		if _, ok := deadlines[k]; ok {
			t.Fatalf("key %q ready before its deadline", k)
		}
	}

	var order []want
	for _, w := range deadlines {
		order = append(order, w)
	}
	slices.SortFunc(order, func(a, b want) int {
		if a.due != b.due {
			return int(a.due - b.due)
		}
		return a.seq - b.seq
	})
	var got, wantKeys []string
	for _, w := range order {
		wantKeys = append(wantKeys, w.key)
	}
	for range 101 {
		clock.Advance(time.Second)
		check(t, q)
		got = append(got, drain(q)...)
	}
	if !slices.Equal(got, wantKeys) {
		t.Fatalf("keys became ready in the order\n%q\nwant\n%q", got, wantKeys)
	}
	if q.Len() != 0 || len(q.waiting) != 0 {
		t.Fatalf("Len = %d, %d waiting after every deadline", q.Len(), len(q.waiting))
	}
}

// Add cancels a key's deadline even when it is the earliest one, at the
// top of the heap: the key is processed once, not again at the deadline.
func TestAddCancelsTheEarliestDeadline(t *testing.T) {
	clock := newFakeClock()
	q := New(Config{Clock: clock})
	q.AddAfter("a", time.Second)
	q.AddAfter("b", 2*time.Second)
	q.Add("a")
	check(t, q)
	if got := drain(q); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("at once: %q, want [a]", got)
	}
	clock.Advance(3 * time.Second)
	if got := drain(q); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("after the deadlines: %q, want [b]: a's deadline was cancelled", got)
	}
	check(t, q)
}

// zeroLimiter is a RateLimiter that never asks for a wait.
type zeroLimiter struct{}

func (zeroLimiter) When(string, time.Time) time.Duration { return 0 }
func (zeroLimiter) Forget(string)                        {}
func (zeroLimiter) NumRequeues(string) int               { return 0 }

// AddAfter with a zero delay, and AddRateLimited when the limiter asks for
// no wait, make the key ready at once: no timer is involved.
func TestZeroDelayIsReadyAtOnce(t *testing.T) {
	clock := newFakeClock()
	q := New(Config{Clock: clock, RateLimiter: zeroLimiter{}})
	q.AddAfter("a", 0)
	q.AddRateLimited("b")
	if got := drain(q); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("ready without the clock moving: %q, want [a b]", got)
	}
	check(t, q)
}

// A key whose deadline moves earlier comes due after the keys already due
// at that same time: ties go in the order the deadlines were set.
func TestMovedDeadlineTiesAfterOlderOnes(t *testing.T) {
	clock := newFakeClock()
	q := New(Config{Clock: clock})
	q.AddAfter("a", 2*time.Second)
	q.AddAfter("b", time.Second)
	q.AddAfter("a", time.Second)
	clock.Advance(time.Second)
	if got := drain(q); !slices.Equal(got, []string{"b", "a"}) {
		t.Fatalf("due together: %q, want [b a]", got)
	}
}

// Ready keys keep their order when the ready ring grows while its first
// key is not at the start of its buffer.
func TestReadyOrderAcrossRingGrowth(t *testing.T) {
	q := New(Config{})
	var want []string
	for i := range 16 {
		q.Add(fmt.Sprintf("k%02d", i))
	}
	for i := range 5 {
		if k := mustGet(t, q); k != fmt.Sprintf("k%02d", i) {
			t.Fatalf("Get %d = %q", i, k)
		}
	}
	for i := 5; i < 40; i++ {
		want = append(want, fmt.Sprintf("k%02d", i))
		if i >= 16 {
			q.Add(fmt.Sprintf("k%02d", i))
		}
	}
	check(t, q)
	var got []string
	for range want {
		got = append(got, mustGet(t, q))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("order after growth:\n%q\nwant\n%q", got, want)
	}
}

// A held key with a pending deadline at shutdown keeps the queue's
// invariants, and is forgotten at Done.
func TestShutDownWithHeldKeyWaiting(t *testing.T) {
	clock := newFakeClock()
	q := New(Config{Clock: clock})
	q.Add("a")
	k := mustGet(t, q)
	q.AddAfter(k, time.Second)
	q.ShutDown()
	check(t, q)
	q.Done(k)
	check(t, q)
	if len(q.entries) != 0 {
		t.Fatalf("%d keys remembered after shutdown and Done", len(q.entries))
	}
}
