package metrics

import (
	"errors"
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
	switch {
	case !validMetricName(name):
		d.err = fmt.Errorf("metrics: invalid metric name %q", name)
	}
	seen := make(map[string]bool, len(labels))
	for _, l := range labels {
		switch {
		case d.err != nil:
		case !validLabelName(l):
			d.err = fmt.Errorf("metrics: %s: invalid label name %q", name, l)
		case typ == typeHistogram && l == "le":
			d.err = fmt.Errorf("metrics: %s: label name \"le\" is reserved for histogram buckets", name)
		case seen[l]:
			d.err = fmt.Errorf("metrics: %s: duplicate label name %q", name, l)
		}
		seen[l] = true
	}
	if typ == typeHistogram && d.err == nil {
		d.err = checkBuckets(name, buckets)
	}
	return d
}

// sampleNames returns the names the family's samples use.
func (d *desc) sampleNames() []string {
	if d.typ == typeHistogram {
		return []string{d.name + "_bucket", d.name + "_sum", d.name + "_count"}
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

// Counter is a value that only goes up, such as a number of requests. Its
// methods are safe for concurrent use and do not lock.
type Counter struct {
	d *desc // set for a counter made by NewCounter; nil for a vec's child
	n atomic.Uint64
	f atomicFloat
}

// NewCounter returns an unlabelled counter; register it with
// [Registry.Register].
func NewCounter(name, help string) *Counter {
	return &Counter{d: newDesc(name, help, typeCounter, nil, nil)}
}

// Inc adds one.
func (c *Counter) Inc() { c.n.Add(1) }

// Add adds v. It panics if v is negative: a counter never goes down.
func (c *Counter) Add(v float64) {
	if v < 0 {
		panic("metrics: counter cannot decrease")
	}
	if v == math.Trunc(v) && v < 1<<53 {
		c.n.Add(uint64(v))
		return
	}
	c.f.add(v)
}

// Value returns the current count.
func (c *Counter) Value() float64 { return float64(c.n.Load()) + c.f.load() }

func (c *Counter) families() []family {
	if c.d == nil {
		return nil
	}
	return []family{&singleFamily{d: c.d, value: c.Value}}
}

// Gauge is a value that goes up and down, such as a number of workers.
// Its methods are safe for concurrent use and do not lock.
type Gauge struct {
	d *desc // nil for a vec's child
	v atomicFloat
}

// NewGauge returns an unlabelled gauge; register it with
// [Registry.Register].
func NewGauge(name, help string) *Gauge {
	return &Gauge{d: newDesc(name, help, typeGauge, nil, nil)}
}

// Set sets the gauge to v.
func (g *Gauge) Set(v float64) { g.v.store(v) }

// Add adds v, which may be negative.
func (g *Gauge) Add(v float64) { g.v.add(v) }

// Inc adds one.
func (g *Gauge) Inc() { g.v.add(1) }

// Dec subtracts one.
func (g *Gauge) Dec() { g.v.add(-1) }

// Value returns the current value.
func (g *Gauge) Value() float64 { return g.v.load() }

func (g *Gauge) families() []family {
	if g.d == nil {
		return nil
	}
	return []family{&singleFamily{d: g.d, value: g.Value}}
}

// Histogram counts observations, such as durations, in buckets. Its
// methods are safe for concurrent use, do not lock and do not allocate.
type Histogram struct {
	d      *desc // nil for a vec's child
	bounds []float64
	counts []atomic.Uint64 // per bucket, not cumulative; last is +Inf
	sum    atomicFloat
}

// NewHistogram returns an unlabelled histogram with the given bucket upper
// bounds, which must be sorted and distinct; a final +Inf is implied and
// may be left out. Register it with [Registry.Register].
func NewHistogram(name, help string, buckets []float64) *Histogram {
	d := newDesc(name, help, typeHistogram, nil, trimInf(buckets))
	h := newHistogram(d.buckets)
	h.d = d
	return h
}

func newHistogram(bounds []float64) *Histogram {
	return &Histogram{bounds: bounds, counts: make([]atomic.Uint64, len(bounds)+1)}
}

// trimInf returns a copy of b without a trailing +Inf.
func trimInf(b []float64) []float64 {
	b = slices.Clone(b)
	if n := len(b); n > 0 && math.IsInf(b[n-1], 1) {
		b = b[:n-1]
	}
	return b
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

// snapshot returns the cumulative bucket counts and the sum. The count is
// the last cumulative value, so buckets and count always agree even while
// observations go on.
func (h *Histogram) snapshot() histSnapshot {
	s := histSnapshot{bounds: h.bounds, cumulative: make([]uint64, len(h.counts))}
	var total uint64
	for i := range h.counts {
		total += h.counts[i].Load()
		s.cumulative[i] = total
	}
	s.sum = h.sum.load()
	return s
}

func (h *Histogram) families() []family {
	if h.d == nil {
		return nil
	}
	return []family{&singleFamily{d: h.d, hist: h.snapshot}}
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

// errNoFamilies is returned by Register for a value that holds no family,
// such as a child of a vec.
var errNoFamilies = errors.New("metrics: nothing to register: a vec's child is registered through its vec")
