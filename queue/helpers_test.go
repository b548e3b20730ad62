package queue

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// fakeClock is a k8sapi.Clock whose time moves only when Advance is called.
// Advance runs the due timer functions synchronously, in deadline order, in
// the caller's goroutine, so it must not be called with the queue's lock
// held.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	c      *fakeClock
	when   time.Time
	f      func()
	active bool
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) k8sapi.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, when: c.now.Add(d), f: f, active: true}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.active
	t.active = false
	return was
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.active
	t.when, t.active = t.c.now.Add(d), true
	return was
}

// Advance moves the time forward by d and runs the timers that became due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*fakeTimer
	for _, t := range c.timers {
		if t.active && !t.when.After(c.now) {
			t.active = false
			due = append(due, t)
		}
	}
	c.mu.Unlock()
	slices.SortStableFunc(due, func(a, b *fakeTimer) int { return a.when.Compare(b.when) })
	for _, t := range due {
		t.f()
	}
}

// checkInvariants verifies the invariants documented on Queue's fields.
func (q *Queue) checkInvariants() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for k, e := range q.entries {
		if e.key != k {
			return fmt.Errorf("entries[%q] holds key %q", k, e.key)
		}
		if !e.dirty && !e.processing && e.heapIdx < 0 {
			return fmt.Errorf("key %q is remembered but idle", k)
		}
		if e.heapIdx >= 0 {
			if e.heapIdx >= len(q.waiting) || q.waiting[e.heapIdx] != e {
				return fmt.Errorf("key %q: heapIdx %d does not point back", k, e.heapIdx)
			}
			if e.dirty {
				return fmt.Errorf("key %q is both dirty and waiting", k)
			}
		}
		if q.shuttingDown && (e.dirty || !e.processing) {
			return fmt.Errorf("key %q remembered after shutdown: dirty=%v processing=%v", k, e.dirty, e.processing)
		}
	}
	inReady := make(map[*entry]*list)
	for _, l := range []*list{&q.ready, &q.backlog} {
		n := 0
		prev := &l.root
		for e := l.root.next; e != nil && e != &l.root; prev, e = e, e.next {
			if n++; n > len(q.entries) || e.prev != prev {
				return fmt.Errorf("list broken at key %q", e.key)
			}
			if inReady[e] != nil {
				return fmt.Errorf("key %q twice in the bands", e.key)
			}
			inReady[e] = l
			if q.entries[e.key] != e {
				return fmt.Errorf("ready key %q not in entries", e.key)
			}
			if e.backlog != (l == &q.backlog) {
				return fmt.Errorf("key %q in the wrong band: backlog=%v", e.key, e.backlog)
			}
		}
		if n != l.n || (l.root.next != nil && l.root.prev != prev) {
			return fmt.Errorf("list of %d entries counts %d, last linked: %v", n, l.n, l.root.prev == prev)
		}
	}
	for _, e := range q.entries {
		if want := e.dirty && !e.processing; (inReady[e] != nil) != want {
			return fmt.Errorf("key %q: in a band=%v, dirty=%v processing=%v", e.key, inReady[e] != nil, e.dirty, e.processing)
		}
		if e.backlog && !e.dirty {
			return fmt.Errorf("key %q in the backlog band but not dirty", e.key)
		}
		if inReady[e] == nil && (e.prev != nil || e.next != nil) {
			return fmt.Errorf("key %q linked but in no band", e.key)
		}
	}
	if q.streak < 0 || q.streak >= backlogShare {
		return fmt.Errorf("streak %d", q.streak)
	}
	for i, e := range q.waiting {
		if e.heapIdx != i {
			return fmt.Errorf("waiting[%d] has heapIdx %d", i, e.heapIdx)
		}
		if q.entries[e.key] != e {
			return fmt.Errorf("waiting key %q not in entries", e.key)
		}
		if i > 0 && q.waiting.Less(i, (i-1)/2) {
			return fmt.Errorf("heap order broken at %d", i)
		}
	}
	if len(q.waiting) > 0 && !q.shuttingDown {
		// A timer of the fake clock says when it is armed for.
		if t, ok := q.timer.(*fakeTimer); ok {
			t.c.mu.Lock()
			active, when := t.active, t.when
			t.c.mu.Unlock()
			if !active || when.After(q.waiting[0].due) {
				return fmt.Errorf("timer armed=%v for %v, first deadline %v", active, when, q.waiting[0].due)
			}
		}
	}
	if q.shuttingDown && (q.depth() > 0 || len(q.waiting) > 0) {
		return fmt.Errorf("shut down with %d ready and %d waiting", q.depth(), len(q.waiting))
	}
	for _, e := range q.free {
		if *e != (entry{}) {
			return fmt.Errorf("free entry not zeroed: %+v", *e)
		}
	}
	return nil
}

// tryGet is Get without waiting: ok is false when no key is ready.
func (q *Queue) tryGet() (key string, ok, shutdown bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shuttingDown {
		return "", false, true
	}
	if q.depth() == 0 {
		return "", false, false
	}
	return q.take(), true, false
}
