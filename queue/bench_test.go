package queue

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkCycle measures Get+Done+Add cycles of keys the queue has seen
// before, with 1, 4 and 16 workers sharing one queue. Keys circulate like
// tokens: a worker re-adds the key it just finished, so no add is merged
// and no worker can starve. It reports cycles/s; allocs/op is per cycle.
func BenchmarkCycle(b *testing.B) {
	for _, workers := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			benchCycle(b, workers, nil)
		})
	}
}

// BenchmarkCycleMetrics is BenchmarkCycle with a Metrics hook that does
// nothing, to show what measuring costs.
func BenchmarkCycleMetrics(b *testing.B) {
	for _, workers := range []int{1, 4} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			benchCycle(b, workers, nopMetrics{})
		})
	}
}

type nopMetrics struct{}

func (nopMetrics) Added()               {}
func (nopMetrics) Depth(int)            {}
func (nopMetrics) Retried()             {}
func (nopMetrics) Waited(time.Duration) {}
func (nopMetrics) Worked(time.Duration) {}

func benchCycle(b *testing.B, workers int, m Metrics) {
	q := New(Config{Metrics: m})
	const nkeys = 256
	for i := range nkeys {
		key := fmt.Sprintf("default/widget-%d", i)
		q.Add(key)
		k, _ := q.Get() // warm the free list and the map
		q.Done(k)
		q.Add(k)
	}
	var n atomic.Int64
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	for range workers {
		wg.Go(func() {
			for n.Add(1) <= int64(b.N) {
				k, _ := q.Get()
				q.Done(k)
				q.Add(k)
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cycles/s")
	q.ShutDown()
}

// BenchmarkAddMerged measures an Add of a key that is already ready.
func BenchmarkAddMerged(b *testing.B) {
	q := New(Config{})
	q.Add("default/a")
	b.ReportAllocs()
	for b.Loop() {
		q.Add("default/a")
	}
}

// BenchmarkAddAfter measures delayed adds of 1,000 known keys with
// distinct deadlines, the heap's steady state.
func BenchmarkAddAfter(b *testing.B) {
	q := New(Config{})
	defer q.ShutDown()
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprintf("default/widget-%d", i)
		q.AddAfter(keys[i], time.Hour+time.Duration(i))
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		// Always earlier than the key's pending deadline: a real update.
		q.AddAfter(keys[i%len(keys)], time.Hour-time.Duration(i))
		i++
	}
}

// BenchmarkCycleBacklog is BenchmarkCycle with one worker whose keys go
// round through both bands: a key done is added to the backlog, then
// live, a promotion that leaves a stale slot behind.
func BenchmarkCycleBacklog(b *testing.B) {
	q := New(Config{})
	defer q.ShutDown()
	for i := range 256 {
		q.AddBacklog(fmt.Sprintf("default/widget-%d", i))
	}
	b.ReportAllocs()
	for b.Loop() {
		k, _ := q.Get()
		q.Done(k)
		q.AddBacklog(k)
		q.Add(k)
	}
}
