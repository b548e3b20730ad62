package metrics

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// vec holds the labelled children of one family, keyed by their label
// values joined with 0xff (which valid UTF-8 never contains). Each kind
// of family embeds one.
type vec[M any] struct {
	d      *desc
	newM   func() *M
	sample func(*M) series // called without the lock held
	mu     sync.RWMutex
	child  map[string]*labelled[M]
}

type labelled[M any] struct {
	values []string
	m      *M
}

func newVec[M any](d *desc, newM func() *M, sample func(*M) series) *vec[M] {
	return &vec[M]{d: d, newM: newM, sample: sample, child: make(map[string]*labelled[M])}
}

// get returns the child for values, creating it if needed. Invalid UTF-8
// in a value is replaced, since the format requires label values in
// UTF-8. It panics if the number of values is wrong: that is a
// programming error.
func (v *vec[M]) get(values []string) *M {
	if len(values) != len(v.d.labels) {
		panic(fmt.Sprintf("metrics: %s: got %d label values for %d label names %q", v.d.name, len(values), len(v.d.labels), v.d.labels))
	}
	if slices.ContainsFunc(values, func(s string) bool { return !utf8.ValidString(s) }) {
		values = slices.Clone(values)
		for i, s := range values {
			values[i] = strings.ToValidUTF8(s, "\uFFFD")
		}
	}
	var buf [128]byte
	k := buf[:0]
	for i, s := range values {
		if i > 0 {
			k = append(k, 0xff)
		}
		k = append(k, s...)
	}
	v.mu.RLock()
	c := v.child[string(k)]
	v.mu.RUnlock()
	if c != nil {
		return c.m
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if c := v.child[string(k)]; c != nil {
		return c.m
	}
	c = &labelled[M]{values: slices.Clone(values), m: v.newM()}
	v.child[string(k)] = c
	return c.m
}

func (v *vec[M]) families() []family {
	return []family{{v.d, func() []series {
		v.mu.RLock()
		cs := slices.Collect(maps.Values(v.child))
		v.mu.RUnlock()
		out := make([]series, len(cs))
		for i, c := range cs {
			out[i] = v.sample(c.m)
			out[i].values = c.values
		}
		return out
	}}}
}

// CounterVec is a family of counters told apart by label values. Its
// methods are safe for concurrent use.
type CounterVec struct{ *vec[Counter] }

// NewCounterVec returns a counter family with the given label names.
func NewCounterVec(name, help string, labelNames ...string) *CounterVec {
	d := newDesc(name, help, typeCounter, labelNames, nil)
	return &CounterVec{newVec(d, func() *Counter { return new(Counter) }, (*Counter).sample)}
}

// WithLabelValues returns the counter for the label values, in the order
// of the label names, creating it at zero if needed. It panics if the
// number of values is wrong. Keep the result on hot paths: the lookup
// takes a read lock.
func (c *CounterVec) WithLabelValues(values ...string) *Counter { return c.get(values) }

// GaugeVec is a family of gauges told apart by label values. Its methods
// are safe for concurrent use.
type GaugeVec struct{ *vec[Gauge] }

// NewGaugeVec returns a gauge family with the given label names.
func NewGaugeVec(name, help string, labelNames ...string) *GaugeVec {
	d := newDesc(name, help, typeGauge, labelNames, nil)
	return &GaugeVec{newVec(d, func() *Gauge { return new(Gauge) }, (*Gauge).sample)}
}

// WithLabelValues returns the gauge for the label values, creating it at
// zero if needed. It panics if the number of values is wrong.
func (g *GaugeVec) WithLabelValues(values ...string) *Gauge { return g.get(values) }

// HistogramVec is a family of histograms told apart by label values, all
// with the same buckets. Its methods are safe for concurrent use.
type HistogramVec struct{ *vec[Histogram] }

// NewHistogramVec returns a histogram family with the given bucket upper
// bounds, which must be sorted and distinct (a final +Inf is implied and
// may be left out), and label names.
func NewHistogramVec(name, help string, buckets []float64, labelNames ...string) *HistogramVec {
	b := slices.Clone(buckets)
	if n := len(b); n > 0 && math.IsInf(b[n-1], 1) {
		b = b[:n-1]
	}
	d := newDesc(name, help, typeHistogram, labelNames, b)
	newH := func() *Histogram {
		return &Histogram{bounds: b, counts: make([]atomic.Uint64, len(b)+1)}
	}
	return &HistogramVec{newVec(d, newH, (*Histogram).sample)}
}

// WithLabelValues returns the histogram for the label values, creating it
// empty if needed. It panics if the number of values is wrong.
func (h *HistogramVec) WithLabelValues(values ...string) *Histogram { return h.get(values) }

// FuncVec is a family of counters or gauges whose values are read from
// functions when the registry is scraped, told apart by label values. Its
// methods are safe for concurrent use. The functions are called without
// any lock of this package held, possibly from several scrapes at once.
type FuncVec struct{ v *vec[funcValue] }

// funcValue is the function of one series; nil until it is bound. A
// false ok leaves the sample out of the scrape.
type funcValue struct {
	f atomic.Pointer[func() (v float64, ok bool)]
}

func (fv *funcValue) sample() series {
	f := fv.f.Load()
	if f == nil {
		return series{omit: true}
	}
	x, ok := (*f)()
	return series{value: x, omit: !ok}
}

// NewGaugeFunc returns an unlabelled gauge whose value is f(), called at
// every scrape.
func NewGaugeFunc(name, help string, f func() float64) *FuncVec {
	return newFunc(typeGauge, name, help, f)
}

// NewCounterFunc returns an unlabelled counter whose value is f(), called
// at every scrape. f must never return less than it did before.
func NewCounterFunc(name, help string, f func() float64) *FuncVec {
	return newFunc(typeCounter, name, help, f)
}

// NewGaugeFuncVec returns a gauge family whose series are bound to
// functions with [FuncVec.Bind].
func NewGaugeFuncVec(name, help string, labelNames ...string) *FuncVec {
	return newFuncVec(name, help, typeGauge, labelNames)
}

func newFuncVec(name, help, typ string, labelNames []string) *FuncVec {
	d := newDesc(name, help, typ, labelNames, nil)
	return &FuncVec{newVec(d, func() *funcValue { return new(funcValue) }, (*funcValue).sample)}
}

// newFunc returns an unlabelled family of type typ whose value is f(),
// called at every scrape.
func newFunc(typ, name, help string, f func() float64) *FuncVec {
	v := newFuncVec(name, help, typ, nil)
	v.Bind(f)
	return v
}

// Bind makes f the source of the series with the label values, replacing
// any earlier function. It panics if the number of values is wrong or f
// is nil.
func (v *FuncVec) Bind(f func() float64, values ...string) {
	if f == nil {
		panic("metrics: " + v.v.d.name + ": Bind with a nil function")
	}
	v.bind(func() (float64, bool) { return f(), true }, values...)
}

// bind is Bind for a function that may have no value.
func (v *FuncVec) bind(f func() (float64, bool), values ...string) {
	v.v.get(values).f.Store(&f)
}

func (v *FuncVec) families() []family { return v.v.families() }
