package metrics

import (
	"math"
	"sort"
	"sync/atomic"
	"time"
)

// The metric types, as the TYPE line names them.
const (
	typeCounter   = "counter"
	typeGauge     = "gauge"
	typeHistogram = "histogram"
)

// atomicFloat is a float64 updated with compare-and-swap.
type atomicFloat struct{ bits atomic.Uint64 }

func (a *atomicFloat) load() float64 { return math.Float64frombits(a.bits.Load()) }

func (a *atomicFloat) store(v float64) { a.bits.Store(math.Float64bits(v)) }

func (a *atomicFloat) add(v float64) {
	for {
		old := a.bits.Load()
		if a.bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// Series is one series of a family: a counter, a gauge or a histogram,
// as its family's type says, or a value read from a function bound with
// [Vec.Bind]. Inc counts on a counter; Set, Inc and Dec move a gauge;
// Observe feeds a histogram. Its methods are safe for concurrent use, do
// not lock and do not allocate.
type Series struct {
	values []string                               // the label values
	v      atomicFloat                            // a counter's or gauge's value, a histogram's sum
	bounds []float64                              // a histogram's upper bounds, without +Inf
	counts []atomic.Uint64                        // a histogram's counts per bucket, not cumulative; last is +Inf
	f      atomic.Pointer[func() (float64, bool)] // the source of a function-backed series
}

// Inc adds one.
func (s *Series) Inc() { s.v.add(1) }

// Dec subtracts one.
func (s *Series) Dec() { s.v.add(-1) }

// Set sets the value to v.
func (s *Series) Set(v float64) { s.v.store(v) }

// Value returns the current value: a histogram's sum.
func (s *Series) Value() float64 { return s.v.load() }

// Observe adds one observation of v: it counts v in the first bucket
// whose upper bound is at least v, and adds v to the sum.
func (s *Series) Observe(v float64) {
	i := sort.SearchFloat64s(s.bounds, v)
	s.counts[i].Add(1)
	s.v.add(v)
}

// ObserveDuration observes d in seconds.
func (s *Series) ObserveDuration(d time.Duration) { s.Observe(d.Seconds()) }
