package metrics

import (
	"fmt"
	"math"
	"slices"
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

// desc describes one family: its name, help, type and label names. err
// holds the first problem found at construction, reported by Register.
type desc struct {
	name    string
	help    string
	typ     string
	labels  []string
	buckets []float64 // histograms only: upper bounds without +Inf
	err     error
}

func newDesc(name, help, typ string, labels []string, buckets []float64) *desc {
	d := &desc{name: name, help: help, typ: typ, labels: slices.Clone(labels), buckets: buckets}
	if !validName(name, false) {
		d.err = fmt.Errorf("metrics: invalid metric name %q", name)
	}
	for i, l := range labels {
		switch {
		case d.err != nil:
		case !validName(l, true):
			d.err = fmt.Errorf("metrics: %s: invalid label name %q", name, l)
		case typ == typeHistogram && l == "le":
			d.err = fmt.Errorf("metrics: %s: label name \"le\" is reserved for histogram buckets", name)
		case slices.Contains(labels[:i], l):
			d.err = fmt.Errorf("metrics: %s: duplicate label name %q", name, l)
		}
	}
	if typ == typeHistogram && d.err == nil {
		d.err = checkBuckets(name, buckets)
	}
	return d
}

// names returns the names the family takes: its own and, for a
// histogram, its samples'.
func (d *desc) names() []string {
	if d.typ == typeHistogram {
		return []string{d.name, d.name + "_bucket", d.name + "_sum", d.name + "_count"}
	}
	return []string{d.name}
}

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

// Counter is a value that only goes up, such as a number of requests: a
// child of a [CounterVec]. Its methods are safe for concurrent use and do
// not lock.
type Counter struct{ n atomic.Uint64 }

// Inc adds one.
func (c *Counter) Inc() { c.n.Add(1) }

// Value returns the current count.
func (c *Counter) Value() float64 { return float64(c.n.Load()) }

func (c *Counter) sample() series { return series{value: c.Value()} }

// Gauge is a value that goes up and down, such as a number of workers: a
// child of a [GaugeVec]. Its methods are safe for concurrent use and do
// not lock.
type Gauge struct{ v atomicFloat }

// Set sets the gauge to v.
func (g *Gauge) Set(v float64) { g.v.store(v) }

// Inc adds one.
func (g *Gauge) Inc() { g.v.add(1) }

// Dec subtracts one.
func (g *Gauge) Dec() { g.v.add(-1) }

// Value returns the current value.
func (g *Gauge) Value() float64 { return g.v.load() }

func (g *Gauge) sample() series { return series{value: g.Value()} }

// Histogram counts observations, such as durations, in buckets: a child
// of a [HistogramVec]. Its methods are safe for concurrent use, do not
// lock and do not allocate.
type Histogram struct {
	bounds []float64
	counts []atomic.Uint64 // per bucket, not cumulative; last is +Inf
	sum    atomicFloat
}

func checkBuckets(name string, b []float64) error {
	for i, v := range b {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("metrics: %s: bucket bound %v is not a finite number", name, v)
		}
		if i > 0 && v <= b[i-1] {
			return fmt.Errorf("metrics: %s: bucket bounds must be strictly increasing, %v follows %v", name, v, b[i-1])
		}
	}
	return nil
}

// Observe adds one observation of v: it counts v in the first bucket
// whose upper bound is at least v, and adds v to the sum.
func (h *Histogram) Observe(v float64) {
	i := sort.SearchFloat64s(h.bounds, v)
	h.counts[i].Add(1)
	h.sum.add(v)
}

// ObserveDuration observes d in seconds.
func (h *Histogram) ObserveDuration(d time.Duration) { h.Observe(d.Seconds()) }

// sample returns the cumulative bucket counts and the sum. The count is
// the last cumulative value, so buckets and count always agree even while
// observations go on.
func (h *Histogram) sample() series {
	s := series{cumulative: make([]uint64, len(h.counts))}
	var total uint64
	for i := range h.counts {
		total += h.counts[i].Load()
		s.cumulative[i] = total
	}
	s.value = h.sum.load()
	return s
}

// ExponentialBuckets returns count bucket bounds starting at start, each
// factor times the previous, computed by repeated multiplication so that
// the bounds (and so the le labels) match other Prometheus clients'. It
// returns nil, which means a lone +Inf bucket, if count < 1, start <= 0 or
// factor <= 1.
func ExponentialBuckets(start, factor float64, count int) []float64 {
	if count < 1 || start <= 0 || factor <= 1 {
		return nil
	}
	b := make([]float64, count)
	for i := range b {
		b[i] = start
		start *= factor
	}
	return b
}
