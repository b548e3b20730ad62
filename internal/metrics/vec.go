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
// values joined with 0xff (which valid UTF-8 never contains).
type vec[M any] struct {
	d     *desc
	newM  func() *M
	mu    sync.RWMutex
	child map[string]*labelled[M]
}

type labelled[M any] struct {
	values []string
	m      *M
}

func newVec[M any](d *desc, newM func() *M) *vec[M] {
	return &vec[M]{d: d, newM: newM, child: make(map[string]*labelled[M])}
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

// family returns the vec's family, whose series sample reads from each
// child. sample is called without the vec's lock held.
func (v *vec[M]) family(sample func(*M) series) family {
	return family{v.d, func() []series {
		v.mu.RLock()
		cs := slices.Collect(maps.Values(v.child))
		v.mu.RUnlock()
		out := make([]series, len(cs))
		for i, c := range cs {
			out[i] = sample(c.m)
			out[i].values = c.values
		}
		return out
	}}
}

// CounterVec is a family of counters told apart by label values. Its
// methods are safe for concurrent use.
type CounterVec struct{ v *vec[Counter] }

// NewCounterVec returns a counter family with the given label names.
func NewCounterVec(name, help string, labelNames ...string) *CounterVec {
	return &CounterVec{newVec(newDesc(name, help, typeCounter, labelNames, nil), func() *Counter { return new(Counter) })}
}

// WithLabelValues returns the counter for the label values, in the order
// of the label names, creating it at zero if needed. It panics if the
// number of values is wrong. Keep the result on hot paths: the lookup
// takes a read lock.
func (c *CounterVec) WithLabelValues(values ...string) *Counter { return c.v.get(values) }

func (c *CounterVec) families() []family {
	return []family{c.v.family(func(c *Counter) series { return series{value: c.Value()} })}
}

// GaugeVec is a family of gauges told apart by label values. Its methods
// are safe for concurrent use.
type GaugeVec struct{ v *vec[Gauge] }

// NewGaugeVec returns a gauge family with the given label names.
func NewGaugeVec(name, help string, labelNames ...string) *GaugeVec {
	return &GaugeVec{newVec(newDesc(name, help, typeGauge, labelNames, nil), func() *Gauge { return new(Gauge) })}
}

// WithLabelValues returns the gauge for the label values, creating it at
// zero if needed. It panics if the number of values is wrong.
func (g *GaugeVec) WithLabelValues(values ...string) *Gauge { return g.v.get(values) }

func (g *GaugeVec) families() []family {
	return []family{g.v.family(func(g *Gauge) series { return series{value: g.Value()} })}
}

// HistogramVec is a family of histograms told apart by label values, all
// with the same buckets. Its methods are safe for concurrent use.
type HistogramVec struct{ v *vec[Histogram] }

// NewHistogramVec returns a histogram family with the given bucket upper
// bounds, which must be sorted and distinct (a final +Inf is implied and
// may be left out), and label names.
func NewHistogramVec(name, help string, buckets []float64, labelNames ...string) *HistogramVec {
	b := slices.Clone(buckets)
	if n := len(b); n > 0 && math.IsInf(b[n-1], 1) {
		b = b[:n-1]
	}
	d := newDesc(name, help, typeHistogram, labelNames, b)
	return &HistogramVec{newVec(d, func() *Histogram {
		return &Histogram{bounds: b, counts: make([]atomic.Uint64, len(b)+1)}
	})}
}

// WithLabelValues returns the histogram for the label values, creating it
// empty if needed. It panics if the number of values is wrong.
func (h *HistogramVec) WithLabelValues(values ...string) *Histogram { return h.v.get(values) }

func (h *HistogramVec) families() []family {
	return []family{h.v.family(func(h *Histogram) series {
		s := h.snapshot()
		return series{hist: &s}
	})}
}

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

// NewGaugeFunc returns an unlabelled gauge whose value is f(), called at
// every scrape.
func NewGaugeFunc(name, help string, f func() float64) *FuncVec {
	v := NewGaugeFuncVec(name, help)
	v.Bind(f)
	return v
}

// NewCounterFunc returns an unlabelled counter whose value is f(), called
// at every scrape. f must never return less than it did before.
func NewCounterFunc(name, help string, f func() float64) *FuncVec {
	v := NewCounterFuncVec(name, help)
	v.Bind(f)
	return v
}

// NewGaugeFuncVec returns a gauge family whose series are bound to
// functions with [FuncVec.Bind].
func NewGaugeFuncVec(name, help string, labelNames ...string) *FuncVec {
	return newFuncVec(name, help, typeGauge, labelNames)
}

// NewCounterFuncVec returns a counter family whose series are bound to
// functions with [FuncVec.Bind].
func NewCounterFuncVec(name, help string, labelNames ...string) *FuncVec {
	return newFuncVec(name, help, typeCounter, labelNames)
}

func newFuncVec(name, help, typ string, labelNames []string) *FuncVec {
	return &FuncVec{newVec(newDesc(name, help, typ, labelNames, nil), func() *funcValue { return new(funcValue) })}
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

func (v *FuncVec) families() []family {
	return []family{v.v.family(func(fv *funcValue) series {
		f := fv.f.Load()
		if f == nil {
			return series{omit: true}
		}
		x, ok := (*f)()
		return series{value: x, omit: !ok}
	})}
}
