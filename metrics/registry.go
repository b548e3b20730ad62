package metrics

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync"
)

// ContentType is the Content-Type of the text exposition format 0.0.4.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// Collector is anything a [Registry] can hold: the [Vec] families of
// this package, the collectors it returns (such as
// [NewRuntimeCollector]) and the standard family sets.
type Collector interface {
	vecs() []*Vec
}

// collectors is a set of families registered as one.
type collectors []*Vec

func (cs collectors) vecs() []*Vec { return cs }

// add adds v to the set and returns its series of the label values.
func (cs *collectors) add(v *Vec, values ...string) *Series {
	*cs = append(*cs, v)
	return v.WithLabelValues(values...)
}

// Registry holds collectors and writes their families in the text
// exposition format. The zero value is not usable; call [NewRegistry]. A
// Registry is safe for concurrent use: registering, scraping and updating
// metrics may all happen at once.
//
// A Registry is also an http.Handler serving the exposition.
type Registry struct {
	mu       sync.RWMutex
	families []*Vec
	names    map[string]string // sample name -> family name
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{names: make(map[string]string)}
}

// Register adds c's families. It returns an error, and adds nothing, if a
// name, label name or bucket list is invalid, or if a family's name or
// one of its sample names (name_bucket, name_sum and name_count for a
// histogram) is already taken, but by a family registered before of the
// same name, type, help, label names and buckets, with labels: the two
// are written as one, such as the families of two controllers (their
// series must differ in their label values).
func (r *Registry) Register(c Collector) error {
	if c == nil {
		return fmt.Errorf("metrics: Register: nil collector")
	}
	fs := c.vecs()
	r.mu.Lock()
	defer r.mu.Unlock()
	names := maps.Clone(r.names)
	for _, f := range fs {
		if f.err != nil {
			return f.err
		}
		for _, n := range f.names() {
			if other, ok := names[n]; ok && (other != f.name || !r.alike(f)) {
				return fmt.Errorf("metrics: %s: name %q already used by family %s", f.name, n, other)
			}
			names[n] = f.name
		}
	}
	r.names = names
	r.families = append(r.families, fs...)
	slices.SortStableFunc(r.families, func(a, b *Vec) int { return cmp.Compare(a.name, b.name) })
	return nil
}

// alike reports whether a family registered has f's name, type, help,
// label names and buckets, and labels.
func (r *Registry) alike(f *Vec) bool {
	i := slices.IndexFunc(r.families, func(g *Vec) bool { return g.name == f.name })
	return i >= 0 && len(f.labels) > 0 && r.families[i].typ == f.typ && r.families[i].help == f.help &&
		slices.Equal(r.families[i].labels, f.labels) && slices.Equal(r.families[i].buckets, f.buckets)
}

// MustRegister registers each collector and panics on the first error.
// Use it at start-up, where an error is a programming mistake.
func (r *Registry) MustRegister(cs ...Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// WriteTo writes every family to w in the text exposition format 0.0.4,
// families sorted by name and series by label values. Function-backed
// values are read now, without the registry's lock held.
func (r *Registry) WriteTo(w io.Writer) (int64, error) {
	r.mu.RLock()
	fs := slices.Clone(r.families)
	r.mu.RUnlock()
	var b []byte
	for i, f := range fs {
		b = f.appendTo(b, i == 0 || fs[i-1].name != f.name)
	}
	n, err := w.Write(b)
	return int64(n), err
}

// ServeHTTP serves the exposition with [ContentType], whatever the
// request's method: route only GET (and so HEAD) to it, as a
// [http.ServeMux] pattern "GET /metrics" does.
func (r *Registry) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	var buf bytes.Buffer
	r.WriteTo(&buf) // a bytes.Buffer does not fail
	w.Header().Set("Content-Type", ContentType)
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.Write(buf.Bytes()) // net/http's server sends no body for HEAD
}

// appendTo appends the family, its series sorted by label values, after
// its HELP and TYPE lines if header. The
// functions of function-backed series are called without v's lock held;
// a series whose function reports no value, or that has none in a
// function family, is left out. A histogram's count is its last
// cumulative bucket count, so buckets and count always agree even while
// observations go on.
func (v *Vec) appendTo(b []byte, header bool) []byte {
	v.mu.Lock()
	ss := slices.Collect(maps.Values(v.child))
	v.mu.Unlock()
	slices.SortFunc(ss, func(x, y *Series) int { return slices.Compare(x.values, y.values) })
	if header {
		b = fmt.Appendf(b, "# HELP %s %s\n# TYPE %s %s\n", v.name, helpEscaper.Replace(v.help), v.name, v.typ)
	}
	for _, s := range ss {
		if f := s.f.Load(); f != nil {
			if x, ok := (*f)(); ok {
				b = appendSample(b, v.name, v.labels, s.values, x)
			}
			continue
		}
		switch {
		case v.fn:
		case s.counts == nil:
			b = appendSample(b, v.name, v.labels, s.values, s.v.load())
		default:
			sum := s.v.load()
			labels := append(slices.Clip(v.labels), "le")
			values := append(slices.Clip(s.values), "+Inf")
			var total uint64
			for i := range s.counts {
				total += s.counts[i].Load()
				if i < len(v.buckets) {
					values[len(values)-1] = string(appendFloat(nil, v.buckets[i]))
				} else {
					values[len(values)-1] = "+Inf"
				}
				b = appendSample(b, v.name+"_bucket", labels, values, float64(total))
			}
			b = appendSample(b, v.name+"_sum", v.labels, s.values, sum)
			b = appendSample(b, v.name+"_count", v.labels, s.values, float64(total))
		}
	}
	return b
}

// appendSample appends one sample line.
func appendSample(b []byte, name string, labels, values []string, v float64) []byte {
	b = append(b, name...)
	sep := byte('{')
	for i, l := range labels {
		b = fmt.Appendf(b, "%c%s=\"%s\"", sep, l, labelEscaper.Replace(values[i]))
		sep = ','
	}
	if len(labels) > 0 {
		b = append(b, '}')
	}
	b = append(b, ' ')
	b = appendFloat(b, v)
	return append(b, '\n')
}
