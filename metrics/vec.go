package metrics

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Vec is a family of series told apart by label values: counters,
// gauges, histograms (all with the same buckets) or values read from
// functions. Its methods are safe for concurrent use. The functions of a
// function family are called without any lock of this package held,
// possibly from several scrapes at once.
//
// Constructing a Vec never fails: err holds the first problem found in
// its name, label names or buckets, and Register reports it.
type Vec struct {
	name    string
	help    string
	typ     string
	labels  []string
	buckets []float64 // histograms only: upper bounds without +Inf
	err     error
	fn      bool // the series are read from functions bound with Bind
	mu      sync.Mutex
	child   map[string]*Series // keyed by the label values, each followed by 0xff, which valid UTF-8 never contains
}

func newVec(name, help, typ string, buckets []float64, fn bool, labels []string) *Vec {
	v := &Vec{name: name, help: help, typ: typ, labels: slices.Clone(labels), buckets: slices.Clone(buckets), fn: fn, child: make(map[string]*Series)}
	if !validName(name, false) {
		v.err = fmt.Errorf("metrics: invalid metric name %q", name)
	}
	for i, l := range labels {
		switch {
		case v.err != nil:
		case !validName(l, true):
			v.err = fmt.Errorf("metrics: %s: invalid label name %q", name, l)
		case typ == typeHistogram && l == "le":
			v.err = fmt.Errorf("metrics: %s: label name \"le\" is reserved for histogram buckets", name)
		case slices.Contains(labels[:i], l):
			v.err = fmt.Errorf("metrics: %s: duplicate label name %q", name, l)
		}
	}
	for i, b := range buckets {
		switch {
		case v.err != nil:
		case math.IsNaN(b) || math.IsInf(b, 0):
			v.err = fmt.Errorf("metrics: %s: bucket bound %v is not a finite number", name, b)
		case i > 0 && b <= buckets[i-1]:
			v.err = fmt.Errorf("metrics: %s: bucket bounds must be strictly increasing, %v follows %v", name, b, buckets[i-1])
		}
	}
	return v
}

// names returns the names the family takes: its own and, for a
// histogram, its samples'.
func (v *Vec) names() []string {
	if v.typ == typeHistogram {
		return []string{v.name, v.name + "_bucket", v.name + "_sum", v.name + "_count"}
	}
	return []string{v.name}
}

// NewCounterVec returns a counter family with the given label names.
func NewCounterVec(name, help string, labelNames ...string) *Vec {
	return newVec(name, help, typeCounter, nil, false, labelNames)
}

// NewGaugeVec returns a gauge family with the given label names.
func NewGaugeVec(name, help string, labelNames ...string) *Vec {
	return newVec(name, help, typeGauge, nil, false, labelNames)
}

// NewHistogramVec returns a histogram family with the given bucket upper
// bounds, which must be sorted and distinct (a final +Inf is implied and
// may be left out), and label names.
func NewHistogramVec(name, help string, buckets []float64, labelNames ...string) *Vec {
	if n := len(buckets); n > 0 && math.IsInf(buckets[n-1], 1) {
		buckets = buckets[:n-1]
	}
	return newVec(name, help, typeHistogram, buckets, false, labelNames)
}

// NewGaugeFuncVec returns a gauge family whose series are bound to
// functions with [Vec.Bind].
func NewGaugeFuncVec(name, help string, labelNames ...string) *Vec {
	return newVec(name, help, typeGauge, nil, true, labelNames)
}

// NewGaugeFunc returns an unlabelled gauge whose value is f(), called at
// every scrape.
func NewGaugeFunc(name, help string, f func() float64) *Vec {
	return newFunc(typeGauge, name, help, always(name, f))
}

// NewCounterFunc returns an unlabelled counter whose value is f(), called
// at every scrape. f must never return less than it did before.
func NewCounterFunc(name, help string, f func() float64) *Vec {
	return newFunc(typeCounter, name, help, always(name, f))
}

// newFunc returns an unlabelled family of type typ whose value is f(),
// called at every scrape, and left out when f reports none.
func newFunc(typ, name, help string, f func() (float64, bool)) *Vec {
	v := newVec(name, help, typ, nil, true, nil)
	v.WithLabelValues().f.Store(&f)
	return v
}

// WithLabelValues returns the series for the label values, in the order
// of the label names, creating it at zero if needed. Invalid UTF-8 in a
// value is replaced, since the format requires label values in UTF-8. It
// panics if the number of values is wrong: that is a programming error.
// Keep the result on hot paths: the lookup takes a lock.
func (v *Vec) WithLabelValues(values ...string) *Series {
	if len(values) != len(v.labels) {
		panic(fmt.Sprintf("metrics: %s: got %d label values for %d label names %q", v.name, len(values), len(v.labels), v.labels))
	}
	var buf [128]byte
	k := buf[:0]
	for _, s := range values {
		k = append(k, strings.ToValidUTF8(s, "\uFFFD")...) // s itself, not a copy, when valid
		k = append(k, 0xff)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	s := v.child[string(k)]
	if s == nil {
		clean := strings.Split(string(k), "\xff") // the values, then ""
		s = &Series{values: clean[:len(clean)-1]}
		if v.typ == typeHistogram {
			s.bounds = v.buckets
			s.counts = make([]atomic.Uint64, len(v.buckets)+1)
		}
		v.child[string(k)] = s
	}
	return s
}

// Bind makes f the source of the series with the label values, replacing
// any earlier function. It panics if the number of values is wrong or f
// is nil.
func (v *Vec) Bind(f func() float64, values ...string) {
	g := always(v.name, f)
	v.WithLabelValues(values...).f.Store(&g)
}

// always returns f as a function that always has a value. It panics if f
// is nil: that is a programming error.
func always(name string, f func() float64) func() (float64, bool) {
	if f == nil {
		panic("metrics: " + name + ": nil function")
	}
	return func() (float64, bool) { return f(), true }
}

func (v *Vec) vecs() []*Vec { return []*Vec{v} }
