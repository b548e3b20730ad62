package queue

import (
	"slices"
	"testing"
	"time"
)

// model is a plain, slow statement of the queue's semantics: slices and
// maps scanned linearly. The fuzz test runs it next to a Queue and expects
// the same keys in the same order.
type model struct {
	now        time.Time
	ready      []string // the live band
	low        []string // the backlog band
	streak     int      // live keys taken in a row while low had keys
	dirty      map[string]bool
	backlog    map[string]bool // dirty in the backlog band
	processing map[string]bool
	waiting    map[string]modelWait
	seq        uint64
	shut       bool
	limiter    RateLimiter
}

type modelWait struct {
	due time.Time
	seq uint64
}

func newModel(now time.Time) *model {
	return &model{
		now:        now,
		dirty:      map[string]bool{},
		backlog:    map[string]bool{},
		processing: map[string]bool{},
		waiting:    map[string]modelWait{},
		limiter:    DefaultRateLimiter(),
	}
}

func (m *model) add(k string) { m.addBand(k, false) }

func (m *model) addBand(k string, backlog bool) {
	if m.shut {
		return
	}
	if m.dirty[k] {
		if m.backlog[k] && !backlog { // promoted
			m.backlog[k] = false
			if !m.processing[k] {
				m.low = slices.DeleteFunc(m.low, func(l string) bool { return l == k })
				m.ready = append(m.ready, k)
			}
		}
		return
	}
	delete(m.waiting, k)
	m.dirty[k] = true
	m.backlog[k] = backlog
	if !m.processing[k] {
		m.push(k)
	}
}

// push appends k to its band.
func (m *model) push(k string) {
	if m.backlog[k] {
		m.low = append(m.low, k)
	} else {
		m.ready = append(m.ready, k)
	}
}

func (m *model) addAfter(k string, d time.Duration) {
	if d <= 0 {
		m.add(k)
		return
	}
	if m.shut || m.dirty[k] {
		return
	}
	due := m.now.Add(d)
	if w, ok := m.waiting[k]; ok && !due.Before(w.due) {
		return
	}
	m.seq++
	m.waiting[k] = modelWait{due, m.seq}
}

func (m *model) advance(d time.Duration) {
	m.now = m.now.Add(d)
	if m.shut {
		return
	}
	var due []string
	for k, w := range m.waiting {
		if !w.due.After(m.now) {
			due = append(due, k)
		}
	}
	slices.SortFunc(due, func(a, b string) int {
		wa, wb := m.waiting[a], m.waiting[b]
		if c := wa.due.Compare(wb.due); c != 0 {
			return c
		}
		return int(wa.seq) - int(wb.seq)
	})
	for _, k := range due {
		delete(m.waiting, k)
		m.add(k)
	}
}

func (m *model) get() (string, bool) {
	if m.shut || len(m.ready)+len(m.low) == 0 {
		return "", false
	}
	band := &m.ready
	switch {
	case len(m.low) == 0:
		m.streak = 0
	case len(m.ready) == 0 || m.streak == 7: // the backlog's one Get in 8
		band, m.streak = &m.low, 0
	default:
		m.streak++
	}
	k := (*band)[0]
	*band = (*band)[1:]
	m.dirty[k], m.backlog[k] = false, false
	m.processing[k] = true
	return k, true
}

func (m *model) done(k string) {
	if !m.processing[k] {
		return
	}
	m.processing[k] = false
	if !m.shut && m.dirty[k] {
		m.push(k)
	}
}

func (m *model) shutDown() {
	m.shut = true
	m.ready, m.low = nil, nil
	clear(m.waiting)
	clear(m.dirty)
	clear(m.backlog)
}

// remembered returns the number of keys the queue should remember.
func (m *model) remembered() int {
	n := 0
	for _, k := range []string{"a", "b", "c", "d"} {
		if m.dirty[k] || m.processing[k] {
			n++
		} else if _, ok := m.waiting[k]; ok {
			n++
		}
	}
	return n
}

// FuzzQueue runs random sequences of operations against a Queue with a
// fake clock and against the model. After every operation the queue's
// invariants must hold, Get must return the model's key, no key may be
// handed to two holders, and the queue must remember exactly the keys in
// flight.
func FuzzQueue(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 0, 2, 3, 0, 3, 0, 4, 0, 6, 5})
	f.Add([]byte{8, 0, 8, 1, 8, 2, 0, 1, 3, 0, 8, 0, 0, 0, 3, 0, 4, 0, 4, 1, 3, 0, 8, 3, 3, 0})
	f.Add([]byte{8, 0, 8, 1, 0, 2, 3, 0, 4, 0, 0, 2, 3, 0, 4, 0, 0, 2, 3, 0, 4, 0, 0, 2, 3, 0, 4, 0,
		0, 2, 3, 0, 4, 0, 0, 2, 3, 0, 4, 0, 0, 2, 3, 0, 4, 0, 0, 2, 3, 0, 4, 0, 0, 2, 3, 0, 4, 0, 3, 0})
	f.Add([]byte{1, 0, 9, 1, 1, 3, 1, 0, 2, 6, 4, 3, 0, 3, 0})
	f.Add([]byte{2, 1, 2, 1, 2, 1, 6, 200, 3, 0, 4, 0, 5, 1, 2, 1, 6, 255})
	f.Add([]byte{0, 0, 3, 0, 0, 0, 1, 0, 5, 4, 0, 7, 0, 4, 0, 3, 0})
	f.Add([]byte{0, 0, 0, 1, 3, 0, 3, 0, 0, 0, 1, 0, 9, 4, 0, 4, 1, 6, 20, 3, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		keys := []string{"a", "b", "c", "d"}
		clock := newFakeClock()
		q := New(Config{Clock: clock})
		m := newModel(clock.Now())
		var held []string // keys handed out and not yet Done, in Get order
		next := func() byte {
			if len(ops) == 0 {
				return 0
			}
			b := ops[0]
			ops = ops[1:]
			return b
		}
		for step := 0; len(ops) > 0; step++ {
			op, arg := next()%9, next()
			k := keys[arg%4]
			d := time.Duration(int(arg)-16) * time.Millisecond // some zero or negative
			switch op {
			case 0:
				q.Add(k)
				m.add(k)
			case 1:
				q.AddAfter(k, d)
				m.addAfter(k, d)
			case 2:
				q.AddRateLimited(k)
				if !m.shut {
					m.addAfter(k, m.limiter.When(k, m.now))
				}
			case 3:
				got, ok, shut := q.tryGet()
				want, wantOK := m.get()
				if got != want || ok != wantOK || shut != m.shut {
					t.Fatalf("step %d: Get = %q, %v, shutdown=%v; model %q, %v, shutdown=%v",
						step, got, ok, shut, want, wantOK, m.shut)
				}
				if ok {
					if slices.Contains(held, got) {
						t.Fatalf("step %d: key %q handed out while held", step, got)
					}
					held = append(held, got)
				}
			case 4:
				if len(held) > 0 {
					k = held[int(arg)%len(held)]
					held = slices.DeleteFunc(held, func(h string) bool { return h == k })
				}
				q.Done(k)
				m.done(k)
			case 5:
				q.Forget(k)
				m.limiter.Forget(k)
				if q.NumRequeues(k) != 0 {
					t.Fatalf("step %d: NumRequeues(%q) = %d after Forget", step, k, q.NumRequeues(k))
				}
			case 6:
				d := time.Duration(arg) * time.Millisecond
				clock.Advance(d)
				m.advance(d)
			case 7:
				if arg == 7 { // rare, so that sequences get long
					q.ShutDown()
					m.shutDown()
				}
			case 8:
				q.AddBacklog(k)
				m.addBand(k, true)
			}
			if err := q.checkInvariants(); err != nil {
				t.Fatalf("step %d (op %d %q): %v", step, op, k, err)
			}
			if q.Len() != len(m.ready)+len(m.low) {
				t.Fatalf("step %d: Len = %d, model %d", step, q.Len(), len(m.ready)+len(m.low))
			}
			q.mu.Lock()
			n := len(q.entries)
			q.mu.Unlock()
			if n != m.remembered() {
				t.Fatalf("step %d: queue remembers %d keys, model %d", step, n, m.remembered())
			}
			for _, k := range keys {
				if q.NumRequeues(k) != m.limiter.NumRequeues(k) {
					t.Fatalf("step %d: NumRequeues(%q) = %d, model %d", step, k, q.NumRequeues(k), m.limiter.NumRequeues(k))
				}
			}
		}
	})
}
