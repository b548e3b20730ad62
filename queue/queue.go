package queue

import (
	"cmp"
	"container/heap"
	"sync"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// Config configures a Queue. The zero value is a useful configuration.
type Config struct {
	// Name names the queue in the log lines of its Runner. Empty
	// is allowed.
	Name string
	// Clock supplies the time and the timer for delayed adds. Nil means
	// the real clock.
	Clock k8sapi.Clock
	// RateLimiter decides the waits of AddRateLimited. Nil means
	// DefaultRateLimiter().
	RateLimiter RateLimiter
	// Metrics receives measurements. Nil means none are taken.
	Metrics Metrics
}

// A Queue is a deduplicating, fair work queue of string keys, in two
// bands: live and backlog. See the package documentation for its
// guarantees. Create one with [New]. A Queue is safe for concurrent use by
// any number of adders and workers. Once shut down it stays shut down.
type Queue struct {
	name    string
	clock   k8sapi.Clock
	limiter RateLimiter
	metrics Metrics // nil means none

	mu   sync.Mutex
	cond sync.Cond // on mu; signalled when a key becomes ready, broadcast on shutdown and when the last held key is Done during shutdown

	// entries maps each key the queue remembers to its state. A key is
	// present exactly while it is dirty, processing or waiting
	// (e.dirty || e.processing || e.heapIdx >= 0): memory is bounded by the
	// keys in flight.
	entries map[string]*entry
	// ready and backlog are the FIFOs of keys a worker may take, the live
	// band and the backlog band. They hold exactly the entries with
	// dirty && !processing, each once, in the order they became ready:
	// those with e.backlog in backlog, the others in ready. Their lengths
	// add up to the queue's depth.
	ready, backlog list
	// streak counts the keys Get took from ready in a row while backlog
	// had keys; it is below backlogShare.
	streak int
	// waiting is a min-heap of delayed entries ordered by (due, seq). An
	// entry is in it exactly when heapIdx >= 0, and then waiting[heapIdx]
	// is that entry and the entry is not dirty.
	waiting waitHeap
	// seq numbers deadlines so that equal deadlines come out in the order
	// they were set.
	seq uint64
	// timer calls q.fire; it is made stopped by New. When waiting is
	// non-empty and the queue is not shut down, the timer is armed for a
	// time not after waiting[0].due: it is armed for that deadline whenever
	// an entry becomes waiting[0], and fire re-arms it.
	timer k8sapi.Timer
	// shuttingDown is set once by ShutDown. Afterwards ready and waiting
	// are empty, no entry is dirty and only processing entries remain, so
	// len(entries) counts the held keys.
	shuttingDown bool
	// free holds zeroed entries for reuse, so a steady workload does not
	// allocate. It never grows beyond the largest number of keys that
	// were in flight at once.
	free []*entry
}

// entry is the state of one key. It is guarded by Queue.mu.
type entry struct {
	key string
	// dirty is set when the key must be processed (again): by Add,
	// AddBacklog or a due AddAfter. Get clears it.
	dirty bool
	// backlog is set while the key is dirty in the backlog band: by
	// AddBacklog of a key not dirty. An Add of the key clears it (a
	// promotion), and so does Get.
	backlog bool
	// processing is set while a worker holds the key, between Get and
	// Done.
	processing bool
	// heapIdx is the entry's index in Queue.waiting, or -1.
	heapIdx int
	// prev and next link the entry into Queue.ready or Queue.backlog
	// while it is in one (see list); nil otherwise.
	prev, next *entry
	// due and seq order the entry in Queue.waiting.
	due time.Time
	seq uint64
	// readyAt is when the entry last entered Queue.ready and startedAt is
	// when the last Get returned it. Both are set only when metrics are
	// on, so that the hot path does not read the clock otherwise.
	readyAt   time.Time
	startedAt time.Time
}

// New returns a new, empty Queue configured by cfg. It makes the queue's
// timer from the Clock, so a test in a testing/synctest bubble makes its
// queue inside the bubble.
func New(cfg Config) *Queue {
	q := &Queue{
		name:    cfg.Name,
		clock:   cmp.Or[k8sapi.Clock](cfg.Clock, k8sapi.RealClock{}),
		limiter: cmp.Or(cfg.RateLimiter, DefaultRateLimiter()),
		metrics: cfg.Metrics,
		entries: make(map[string]*entry),
	}
	q.cond.L = &q.mu
	q.timer = q.clock.AfterFunc(time.Hour, q.fire)
	q.timer.Stop()
	return q
}

// Add makes key ready now in the live band, unless it is ready already
// there; a key ready in the backlog band moves up to the live band,
// behind the live keys ready before it. If a worker holds the key, it
// becomes ready when that worker calls Done. Add cancels a pending delayed
// add of key. After shutdown Add does nothing.
func (q *Queue) Add(key string) {
	q.AddAfter(key, 0)
}

// AddBacklog is Add in the backlog band, whose keys Get hands out after
// the live ones (see the package documentation): for the keys of a list
// of existing objects, rather than of a change seen as it happened. A key
// ready in the live band, or held and re-added there, stays there.
func (q *Queue) AddBacklog(key string) {
	q.mu.Lock()
	q.add(key, 0, true)
	q.mu.Unlock()
}

// AddAfter makes key ready in the live band once d has passed, unless it
// is already due sooner: a key has at most one pending deadline and the
// earliest wins. A key that is ready, or held and re-added, is due now, so
// AddAfter then does nothing. AddAfter with d <= 0 is Add. After shutdown
// AddAfter does nothing.
func (q *Queue) AddAfter(key string, d time.Duration) {
	q.mu.Lock()
	q.add(key, d, false)
	q.mu.Unlock()
}

// add is AddAfter, or with backlog AddBacklog, with q.mu held.
func (q *Queue) add(key string, d time.Duration, backlog bool) {
	if q.shuttingDown {
		return
	}
	e := q.entry(key)
	if e.dirty {
		if e.backlog && !backlog && d <= 0 {
			q.promote(e)
		}
		return
	}
	if d <= 0 {
		if e.heapIdx >= 0 {
			// The timer may now fire early; fire copes.
			heap.Remove(&q.waiting, e.heapIdx)
		}
		q.makeDirty(e, backlog)
		return
	}
	due := q.clock.Now().Add(d)
	if e.heapIdx >= 0 && !due.Before(e.due) {
		return
	}
	q.seq++
	e.due, e.seq = due, q.seq
	if e.heapIdx >= 0 {
		heap.Fix(&q.waiting, e.heapIdx)
	} else {
		heap.Push(&q.waiting, e)
	}
	if e.heapIdx == 0 {
		q.timer.Reset(d)
	}
}

// AddRateLimited adds key after the wait its RateLimiter asks for, and
// records the retry. See AddAfter for how deadlines combine.
func (q *Queue) AddRateLimited(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shuttingDown { // record no retry that will not happen
		return
	}
	if q.metrics != nil {
		q.metrics.Retried()
	}
	q.add(key, q.limiter.When(key, q.clock.Now()), false)
}

// Forget tells the RateLimiter to forget key's retries. Call it when a key
// was processed successfully.
func (q *Queue) Forget(key string) { q.limiter.Forget(key) }

// NumRequeues reports how many retries of key the RateLimiter recorded
// since it was last forgotten.
func (q *Queue) NumRequeues(key string) int { return q.limiter.NumRequeues(key) }

// Get waits until a key is ready and hands it to the caller, who holds it
// until calling Done. It returns shutdown=true, at once and to every
// waiting caller, once the queue is shut down.
func (q *Queue) Get() (key string, shutdown bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.depth() == 0 && !q.shuttingDown {
		q.cond.Wait()
	}
	if q.shuttingDown {
		return "", true
	}
	return q.take(), false
}

// backlogShare bounds the live band's precedence: while keys are ready
// in both bands, at least one Get in backlogShare takes a backlog key.
const backlogShare = 8

// take pops the first ready key of the live band, or of the backlog band
// when the live band is empty or has had its streak, and marks it held.
// q.mu must be held and a key must be ready.
func (q *Queue) take() string {
	l := &q.ready
	switch {
	case q.backlog.n == 0:
		q.streak = 0
	case q.ready.n == 0 || q.streak == backlogShare-1:
		l, q.streak = &q.backlog, 0
	default:
		q.streak++
	}
	e := l.root.next
	l.remove(e)
	e.dirty, e.backlog = false, false
	e.processing = true
	if q.metrics != nil {
		e.startedAt = q.clock.Now()
		q.metrics.Depth(q.depth())
		q.metrics.Waited(e.startedAt.Sub(e.readyAt))
	}
	return e.key
}

// Done releases key, which the caller got from Get. If the key was added
// while held, it becomes ready again now. Done of a key that is not held
// does nothing.
func (q *Queue) Done(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	e := q.entries[key]
	if e == nil || !e.processing {
		return
	}
	e.processing = false
	if q.metrics != nil {
		q.metrics.Worked(q.clock.Now().Sub(e.startedAt))
	}
	switch {
	case q.shuttingDown:
		q.release(e)
		if len(q.entries) == 0 {
			q.cond.Broadcast()
		}
	case e.dirty:
		q.pushReady(e)
	case e.heapIdx < 0:
		q.release(e)
	}
}

// Len returns the number of ready keys, of both bands: the queue's depth.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.depth()
}

// depth is Len with q.mu held.
func (q *Queue) depth() int { return q.ready.n + q.backlog.n }

// Unfinished reports, over the keys held by workers now, the sum of how
// long each has been held and the longest of them. Poll it for
// workqueue_unfinished_work_seconds and
// workqueue_longest_running_processor_seconds. It takes time proportional
// to the number of keys the queue remembers. It reports zeros unless
// Config.Metrics was set: without metrics the queue does not time its
// keys.
func (q *Queue) Unfinished() (total, longest time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.metrics == nil {
		return 0, 0
	}
	now := q.clock.Now()
	for _, e := range q.entries {
		if e.processing {
			d := now.Sub(e.startedAt)
			total += d
			longest = max(longest, d)
		}
	}
	return total, longest
}

// ShutDown stops new work at once: Get returns shutdown=true to every
// caller, waiting or not; keys not yet handed out and pending delayed adds
// are dropped; later adds are ignored. Workers holding keys may still call
// Done. ShutDown may be called more than once.
func (q *Queue) ShutDown() {
	q.mu.Lock()
	q.shutDown()
	q.mu.Unlock()
}

func (q *Queue) shutDown() {
	if q.shuttingDown {
		return
	}
	q.shuttingDown = true
	// Nothing is due any more, not even a held key re-added: only the
	// held keys stay, until their Done.
	for _, e := range q.entries {
		e.dirty, e.backlog = false, false
		e.heapIdx = -1
		if !e.processing {
			q.release(e)
		}
	}
	q.ready, q.backlog = list{}, list{}
	q.waiting = nil
	q.timer.Stop()
	if q.metrics != nil {
		q.metrics.Depth(0)
	}
	q.cond.Broadcast()
}

// ShutDownWithDrain shuts the queue down like ShutDown and then waits until
// every held key is Done. It waits forever for a worker that never calls
// Done; bound it by making workers stop, for example through a context.
func (q *Queue) ShutDownWithDrain() {
	q.mu.Lock()
	q.shutDown()
	for len(q.entries) > 0 {
		q.cond.Wait()
	}
	q.mu.Unlock()
}

// ShuttingDown reports whether the queue was shut down.
func (q *Queue) ShuttingDown() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.shuttingDown
}

// entry returns key's entry, creating it if needed. q.mu must be held.
func (q *Queue) entry(key string) *entry {
	if e := q.entries[key]; e != nil {
		return e
	}
	var e *entry
	if n := len(q.free); n > 0 {
		e, q.free = q.free[n-1], q.free[:n-1]
	} else {
		e = new(entry)
	}
	e.key = key
	e.heapIdx = -1
	q.entries[key] = e
	return e
}

// release forgets e, which must be neither dirty, processing nor waiting.
func (q *Queue) release(e *entry) {
	delete(q.entries, e.key)
	*e = entry{}
	q.free = append(q.free, e)
}

// makeDirty marks e due now, in the backlog band if backlog. e must not be
// dirty or waiting.
func (q *Queue) makeDirty(e *entry, backlog bool) {
	e.dirty, e.backlog = true, backlog
	if q.metrics != nil {
		q.metrics.Added()
	}
	if !e.processing {
		q.pushReady(e)
	}
}

// pushReady appends e, which is dirty and not processing, to its band.
func (q *Queue) pushReady(e *entry) {
	if e.backlog {
		q.backlog.push(e)
	} else {
		q.ready.push(e)
	}
	if q.metrics != nil {
		e.readyAt = q.clock.Now()
		q.metrics.Depth(q.depth())
	}
	q.cond.Signal()
}

// promote moves e, dirty in the backlog band, to the live band.
func (q *Queue) promote(e *entry) {
	e.backlog = false
	if !e.processing { // else Done makes it ready in the live band
		q.backlog.remove(e)
		q.ready.push(e)
	}
}

// fire moves the due entries from waiting to ready and re-arms the timer.
// It may be called early or more than once; it then only re-arms. After
// shutdown waiting is empty, so it does nothing.
func (q *Queue) fire() {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.clock.Now()
	for len(q.waiting) > 0 && !q.waiting[0].due.After(now) {
		q.makeDirty(heap.Pop(&q.waiting).(*entry), false) // a retry is live
	}
	if len(q.waiting) > 0 {
		q.timer.Reset(q.waiting[0].due.Sub(now))
	}
}

// waitHeap is the heap of delayed entries for container/heap, ordered by
// (due, seq). Swap, Push and Pop keep each entry's heapIdx its index.
type waitHeap []*entry

func (h waitHeap) Len() int { return len(h) }

func (h waitHeap) Less(i, j int) bool {
	return cmp.Or(h[i].due.Compare(h[j].due), cmp.Compare(h[i].seq, h[j].seq)) < 0
}

func (h waitHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIdx = i
	h[j].heapIdx = j
}

func (h *waitHeap) Push(x any) {
	e := x.(*entry)
	e.heapIdx = len(*h)
	*h = append(*h, e)
}

func (h *waitHeap) Pop() any {
	n := len(*h) - 1
	e := (*h)[n]
	(*h)[n] = nil
	*h = (*h)[:n]
	e.heapIdx = -1
	return e
}

// list is a FIFO of entries, linked through their prev and next fields
// in a ring around root, made on the first push: root.next is the first
// entry, root.prev the last.
type list struct {
	root entry
	n    int // number of entries
}

func (l *list) push(e *entry) {
	if l.root.next == nil {
		l.root.prev, l.root.next = &l.root, &l.root
	}
	e.prev, e.next = l.root.prev, &l.root
	l.root.prev.next, l.root.prev = e, e
	l.n++
}

// remove unlinks e, which is in l.
func (l *list) remove(e *entry) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
	l.n--
}
