package metrics

import (
	"fmt"
	"sync"
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

// get returns the child for values, creating it if needed. It panics if
// the number of values is wrong: that is a programming error.
func (v *vec[M]) get(values []string) *M {
	if len(values) != len(v.d.labels) {
		panic(fmt.Sprintf("metrics: %s: got %d label values for %d label names %q", v.d.name, len(values), len(v.d.labels), v.d.labels))
	}
	var buf [128]byte
	k := appendKey(buf[:0], values)
	v.mu.RLock()
	c := v.child[string(k)]
	v.mu.RUnlock()
	if c != nil {
		return c.m
	}
	clean := make([]string, len(values))
	for i, s := range values {
		clean[i] = cleanValue(s)
	}
	key := string(appendKey(nil, clean))
	v.mu.Lock()
	defer v.mu.Unlock()
	if c := v.child[key]; c != nil {
		return c.m
	}
	c = &labelled[M]{values: clean, m: v.newM()}
	v.child[key] = c
	// Also index the raw values, so that invalid UTF-8 finds its child
	// without cleaning again.
	if raw := string(k); raw != key {
		v.child[raw] = c
	}
	return c.m
}

// delete removes the child for values and reports whether there was one.
func (v *vec[M]) delete(values []string) bool {
	if len(values) != len(v.d.labels) {
		return false
	}
	clean := make([]string, len(values))
	for i, s := range values {
		clean[i] = cleanValue(s)
	}
	raw, key := string(appendKey(nil, values)), string(appendKey(nil, clean))
	v.mu.Lock()
	defer v.mu.Unlock()
	_, ok := v.child[key]
	delete(v.child, key)
	delete(v.child, raw)
	return ok
}

// children returns every child once.
func (v *vec[M]) children() []*labelled[M] {
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := make([]*labelled[M], 0, len(v.child))
	for k, c := range v.child {
		if k == string(appendKey(nil, c.values)) { // skip raw aliases
			out = append(out, c)
		}
	}
	return out
}

func appendKey(b []byte, values []string) []byte {
	for i, s := range values {
		if i > 0 {
			b = append(b, 0xff)
		}
		b = append(b, s...)
	}
	return b
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

// Delete removes the series with the label values and reports whether it
// existed.
func (c *CounterVec) Delete(values ...string) bool { return c.v.delete(values) }

func (c *CounterVec) families() []family {
	return []family{&vecFamily[Counter]{v: c.v, value: (*Counter).Value}}
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

// Delete removes the series with the label values and reports whether it
// existed.
func (g *GaugeVec) Delete(values ...string) bool { return g.v.delete(values) }

func (g *GaugeVec) families() []family {
	return []family{&vecFamily[Gauge]{v: g.v, value: (*Gauge).Value}}
}

// HistogramVec is a family of histograms told apart by label values, all
// with the same buckets. Its methods are safe for concurrent use.
type HistogramVec struct{ v *vec[Histogram] }

// NewHistogramVec returns a histogram family with the given bucket upper
// bounds (see [NewHistogram]) and label names.
func NewHistogramVec(name, help string, buckets []float64, labelNames ...string) *HistogramVec {
	d := newDesc(name, help, typeHistogram, labelNames, trimInf(buckets))
	return &HistogramVec{newVec(d, func() *Histogram { return newHistogram(d.buckets) })}
}

// WithLabelValues returns the histogram for the label values, creating it
// empty if needed. It panics if the number of values is wrong.
func (h *HistogramVec) WithLabelValues(values ...string) *Histogram { return h.v.get(values) }

// Delete removes the series with the label values and reports whether it
// existed.
func (h *HistogramVec) Delete(values ...string) bool { return h.v.delete(values) }

func (h *HistogramVec) families() []family {
	return []family{&vecFamily[Histogram]{v: h.v, hist: (*Histogram).snapshot}}
}

// FuncVec is a family of counters or gauges whose values are read from
// functions when the registry is scraped, told apart by label values. Its
// methods are safe for concurrent use. The functions are called without
// any lock of this package held, possibly from several scrapes at once.
type FuncVec struct {
	d  *desc
	mu sync.RWMutex
	fs map[string]*funcSeries
}

type funcSeries struct {
	values []string
	f      func() float64
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
	return &FuncVec{d: newDesc(name, help, typeGauge, labelNames, nil), fs: make(map[string]*funcSeries)}
}

// NewCounterFuncVec returns a counter family whose series are bound to
// functions with [FuncVec.Bind].
func NewCounterFuncVec(name, help string, labelNames ...string) *FuncVec {
	return &FuncVec{d: newDesc(name, help, typeCounter, labelNames, nil), fs: make(map[string]*funcSeries)}
}

// Bind makes f the source of the series with the label values, replacing
// any earlier function. It panics if the number of values is wrong or f
// is nil.
func (v *FuncVec) Bind(f func() float64, values ...string) {
	if len(values) != len(v.d.labels) || f == nil {
		panic(fmt.Sprintf("metrics: %s: Bind needs a function and %d label values %q, got %d", v.d.name, len(v.d.labels), v.d.labels, len(values)))
	}
	clean := make([]string, len(values))
	for i, s := range values {
		clean[i] = cleanValue(s)
	}
	k := string(appendKey(nil, clean))
	v.mu.Lock()
	v.fs[k] = &funcSeries{values: clean, f: f}
	v.mu.Unlock()
}

// Delete removes the series with the label values and reports whether it
// existed.
func (v *FuncVec) Delete(values ...string) bool {
	clean := make([]string, len(values))
	for i, s := range values {
		clean[i] = cleanValue(s)
	}
	k := string(appendKey(nil, clean))
	v.mu.Lock()
	defer v.mu.Unlock()
	_, ok := v.fs[k]
	delete(v.fs, k)
	return ok
}

func (v *FuncVec) families() []family { return []family{v} }

func (v *FuncVec) desc() *desc { return v.d }

func (v *FuncVec) collect() []series {
	v.mu.RLock()
	fs := make([]*funcSeries, 0, len(v.fs))
	for _, s := range v.fs {
		fs = append(fs, s)
	}
	v.mu.RUnlock()
	out := make([]series, len(fs))
	for i, s := range fs {
		out[i] = series{values: s.values, value: s.f()}
	}
	return out
}
