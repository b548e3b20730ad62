package metrics

import (
	"bytes"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"
)

var update = os.Getenv("UPDATE_GOLDEN") != ""

// trickyRegistry holds every kind of family, with label values that need
// escaping, registered out of order.
func trickyRegistry(t *testing.T) *Registry {
	t.Helper()
	r := NewRegistry()
	cv := NewCounterVec("test_requests_total", "Requests.\nSecond line with a \\ backslash and \"quotes\".", "path", "code")
	cv.WithLabelValues(`C:\dir`, "500").Inc()
	cv.WithLabelValues(`C:\dir`, "500").Inc()
	cv.WithLabelValues("say \"hi\"\nbye", "200").Inc()
	cv.WithLabelValues("", "200").Inc()
	cv.WithLabelValues("bad\xffutf8", "404").Inc()
	gv := NewGaugeVec("test_temperature", "Temperature.", "room")
	gv.WithLabelValues("b").Set(math.Inf(1))
	gv.WithLabelValues("a").Set(-0.25)
	gv.WithLabelValues("c").Set(math.NaN())
	gv.WithLabelValues("d").Set(1e21)
	gv.WithLabelValues("e").Set(123456789)
	hv := NewHistogramVec("test_latency_seconds", "Latency.", []float64{0.1, 1, 10, math.Inf(1)}, "op")
	for _, v := range []float64{0.05, 0.1, 0.5, 5, 50} {
		hv.WithLabelValues("read").Observe(v)
	}
	hv.WithLabelValues("write")
	h := NewHistogramVec("test_plain_seconds", "Plain histogram.", []float64{1e-08, 1e-07, 1e-06})
	h.WithLabelValues().Observe(1e-8)
	c := NewCounterVec("test_a_total", "First by name.")
	c.WithLabelValues().Inc()
	g := NewGaugeVec("test_z", "Last by name.")
	g.WithLabelValues().Set(3)
	fv := NewGaugeFuncVec("test_func", "Func-backed.", "k")
	fv.Bind(func() float64 { return 7 }, "y")
	fv.Bind(func() float64 { return 8 }, "x")
	r.MustRegister(g, hv, cv, fv, c, gv, h, NewCounterFunc("test_funccount_total", "Func counter.", func() float64 { return 42 }))
	return r
}

func scrape(t *testing.T, r *Registry) string {
	t.Helper()
	var b bytes.Buffer
	if _, err := r.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestExpositionParses(t *testing.T) {
	out := scrape(t, trickyRegistry(t))
	fams := parseExposition(t, out)
	var names []string
	for _, f := range fams {
		names = append(names, f.name)
	}
	want := "test_a_total test_func test_funccount_total test_latency_seconds test_plain_seconds test_requests_total test_temperature test_z"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("families = %s\nwant       %s", got, want)
	}
	// The tricky label values read back as they were set.
	got := map[string]bool{}
	for _, s := range fams[5].samples {
		got[s.labels[0][1]] = true
	}
	for _, v := range []string{`C:\dir`, "say \"hi\"\nbye", "", "bad\uFFFDutf8"} {
		if !got[v] {
			t.Errorf("label value %q did not round-trip; have %v", v, got)
		}
	}
	if fams[5].help != "Requests.\nSecond line with a \\ backslash and \"quotes\"." {
		t.Errorf("help did not round-trip: %q", fams[5].help)
	}
}

func TestExpositionGolden(t *testing.T) {
	out := scrape(t, trickyRegistry(t))
	if again := scrape(t, trickyRegistry(t)); again != out {
		t.Fatalf("output not stable:\n%s\nvs\n%s", out, again)
	}
	golden := filepath.Join("testdata", "tricky.prom")
	if update {
		if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with UPDATE_GOLDEN=1 to create it)", err)
	}
	if out != string(want) {
		t.Errorf("output differs from %s:\n%s", golden, out)
	}
}

func TestAppendFloat(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{0, "0"}, {math.Copysign(0, -1), "0"}, {1, "1"}, {-1, "-1"}, {1e6, "1000000"},
		{123456789, "123456789"}, {1 << 53, "9007199254740992"}, {1e21, "1e+21"},
		{0.5, "0.5"}, {1e-8, "1e-08"}, {2.5e-5, "2.5e-05"}, {0.1, "0.1"},
		{math.Inf(1), "+Inf"}, {math.Inf(-1), "-Inf"}, {math.NaN(), "NaN"},
	} {
		if got := string(appendFloat(nil, tc.v)); got != tc.want {
			t.Errorf("appendFloat(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

func TestRegisterErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Collector
		want string
	}{
		{"bad metric name", NewCounterVec("1abc", "h"), "invalid metric name"},
		{"empty metric name", NewGaugeVec("", "h"), "invalid metric name"},
		{"bad label", NewCounterVec("x_total", "h", "a-b"), "invalid label name"},
		{"reserved label", NewCounterVec("x_total", "h", "__name"), "invalid label name"},
		{"duplicate label", NewGaugeVec("x", "h", "a", "a"), "duplicate label"},
		{"le on histogram", NewHistogramVec("x", "h", []float64{1}, "le"), "reserved"},
		{"unsorted buckets", NewHistogramVec("x", "h", []float64{2, 1}), "strictly increasing"},
		{"NaN bucket", NewHistogramVec("x", "h", []float64{math.NaN()}), "finite"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := NewRegistry().Register(tc.c)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "metrics: ") {
				t.Errorf("Register = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestRegisterNameClash(t *testing.T) {
	r := NewRegistry()
	if err := r.Register(NewHistogramVec("rpc", "h", nil)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []Collector{NewCounterVec("rpc", "h"), NewGaugeVec("rpc_count", "h"), NewCounterVec("rpc_bucket", "h")} {
		if err := r.Register(c); err == nil {
			t.Errorf("Register(%s) clashed with histogram rpc but succeeded", c.vecs()[0].name)
		}
	}
	// Two families of one name in one Register clash too.
	if err := r.Register(collectors{NewCounterVec("twice", "h"), NewGaugeVec("twice", "h")}); err == nil {
		t.Errorf("Register of two families named twice succeeded")
	}
	// A failed Register adds nothing.
	if err := r.Register(NewGaugeVec("rpc_other", "h")); err != nil {
		t.Errorf("unrelated name refused: %v", err)
	}
	out := scrape(t, r)
	if strings.Count(out, "# TYPE") != 2 {
		t.Errorf("want 2 families:\n%s", out)
	}
}

func TestWrongLabelCountPanics(t *testing.T) {
	v := NewCounterVec("x_total", "h", "a", "b")
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "got 1 label values for 2") {
			t.Errorf("recover() = %v", r)
		}
	}()
	v.WithLabelValues("only one")
}

func TestHandler(t *testing.T) {
	r := trickyRegistry(t)
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if ct := rec.Header().Get("Content-Type"); ct != "text/plain; version=0.0.4; charset=utf-8" {
		t.Errorf("Content-Type = %q", ct)
	}
	if rec.Body.String() != scrape(t, r) {
		t.Errorf("handler body differs from WriteTo")
	}
	// HEAD over a real server: the headers of GET, no body.
	srv := httptest.NewServer(r)
	defer srv.Close()
	resp, err := http.Head(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.ContentLength != int64(len(scrape(t, r))) || len(body) != 0 {
		t.Errorf("HEAD: code %d, Content-Length %d, %d bytes of body", resp.StatusCode, resp.ContentLength, len(body))
	}
}

// TestConcurrent updates, creates series, registers and scrapes at once;
// run with -race. The final counts must be exact.
func TestConcurrent(t *testing.T) {
	r := NewRegistry()
	cv := NewCounterVec("c_total", "h", "w")
	hv := NewHistogramVec("h_seconds", "h", []float64{0.5, 1}, "w")
	gv := NewGaugeVec("g", "h")
	g := gv.WithLabelValues()
	r.MustRegister(cv, hv, gv)
	const workers, n = 4, 1000
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lv := string(rune('a' + w))
			for i := range n {
				cv.WithLabelValues(lv).Inc()
				cv.WithLabelValues("shared").Inc()
				hv.WithLabelValues("shared").Observe(float64(i%3) / 2)
				g.Inc()
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 20 {
			parseExposition(t, scrape(t, r))
			r.Register(NewGaugeVec("late_"+string(rune('a'+i)), "h"))
		}
	}()
	wg.Wait()
	if got := cv.WithLabelValues("shared").Value(); got != workers*n {
		t.Errorf("shared counter = %v", got)
	}
	if got := g.Value(); got != workers*n {
		t.Errorf("gauge = %v", got)
	}
	fams := parseExposition(t, scrape(t, r))
	for _, f := range fams {
		if f.name == "h_seconds" && f.samples[len(f.samples)-1].value != workers*n {
			t.Errorf("histogram count = %v", f.samples[len(f.samples)-1].value)
		}
	}
}

func TestObserveDoesNotAllocate(t *testing.T) {
	h := NewHistogramVec("x", "h", WorkqueueBuckets, "a").WithLabelValues("v")
	c := NewCounterVec("y_total", "h", "a", "b")
	if n := testing.AllocsPerRun(100, func() { h.Observe(0.3) }); n != 0 {
		t.Errorf("Observe allocates %v times", n)
	}
	c.WithLabelValues("p", "q")
	if n := testing.AllocsPerRun(100, func() { c.WithLabelValues("p", "q").Inc() }); n != 0 {
		t.Errorf("WithLabelValues of an existing child allocates %v times", n)
	}
}

func TestRuntimeCollector(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(123 << 20))
	runtime.GC() // so that a GC has marked the live heap
	r := NewRegistry()
	start := time.Unix(1700000000, 500_000_000)
	r.MustRegister(NewRuntimeCollector(start))
	fams := parseExposition(t, scrape(t, r))
	got := map[string]float64{}
	for _, f := range fams {
		for _, s := range f.samples {
			got[s.name] = s.value
		}
	}
	if got["go_goroutines"] < 1 || got["go_memstats_heap_alloc_bytes"] <= 0 || got["process_start_time_seconds"] != 1700000000.5 || got["go_info"] != 1 {
		t.Errorf("runtime figures: %v", got)
	}
	if got["go_gc_gomemlimit_bytes"] != 123<<20 || got["go_gc_heap_live_bytes"] <= 0 {
		t.Errorf("memory limit and live heap: %v", got)
	}
	if _, err := os.Stat("/proc/self/statm"); err == nil {
		if got["process_resident_memory_bytes"] < float64(os.Getpagesize()) || got["process_open_fds"] < 3 {
			t.Errorf("process figures: %v", got)
		}
		if _, ok := got["process_cpu_seconds_total"]; !ok {
			t.Errorf("no process_cpu_seconds_total")
		}
	}
}

func BenchmarkHistogramObserve(b *testing.B) {
	h := NewHistogramVec("x", "h", ReconcileTimeBuckets).WithLabelValues()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		v := 0.0
		for pb.Next() {
			h.Observe(v)
			v += 0.01
		}
	})
}

func BenchmarkCounterInc(b *testing.B) {
	c := NewCounterVec("x_total", "h").WithLabelValues()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c.Inc()
		}
	})
}

func BenchmarkScrape(b *testing.B) {
	r := NewRegistry()
	cm := NewControllerMetrics("c", 2)
	wm := NewWorkqueueMetrics("q", "c", func() (time.Duration, time.Duration) { return 0, 0 })
	r.MustRegister(cm, wm, NewRuntimeCollector(time.Now()))
	cm.Reconciled(time.Millisecond, ResultSuccess)
	wm.Waited(time.Millisecond)
	var buf bytes.Buffer
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		r.WriteTo(&buf)
	}
	b.ReportMetric(float64(buf.Len()), "bytes/scrape")
}

// The families of two controllers, alike but for their series, are
// written as one; a family of the same name that differs in anything
// else clashes.
func TestRegisterAlikeFamilies(t *testing.T) {
	r := NewRegistry()
	r.MustRegister(NewControllerMetrics("a", 1), NewControllerMetrics("b", 2))
	out := scrape(t, r)
	if n := strings.Count(out, "# TYPE controller_runtime_max_concurrent_reconciles "); n != 1 {
		t.Errorf("%d TYPE lines of one family, want 1:\n%s", n, out)
	}
	for _, want := range []string{`controller_runtime_max_concurrent_reconciles{controller="a"} 1`, `controller_runtime_max_concurrent_reconciles{controller="b"} 2`} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("no %s in:\n%s", want, out)
		}
	}
	for _, c := range []Collector{NewGaugeVec("controller_runtime_active_workers", "other help", "controller"),
		NewCounterVec("controller_runtime_active_workers", "How many of a controller's workers are reconciling now.", "controller"),
		NewGaugeVec("controller_runtime_active_workers", "How many of a controller's workers are reconciling now.", "name")} {
		if err := r.Register(c); err == nil {
			t.Errorf("Register(%+v) of a family not alike succeeded", c)
		}
	}
	r.MustRegister(NewGaugeVec("plain", "h"))
	if err := r.Register(NewGaugeVec("plain", "h")); err == nil {
		t.Error("a family without labels registered twice")
	}
}

func TestStatCPU(t *testing.T) {
	// A /proc/self/stat line as Linux 6.1 writes it, less the pid and the
	// command name: utime 250 and stime 150 ticks.
	const stat = "S 1 1 1 0 -1 4194560 1206 0 0 0 250 150 0 0 20 0 9 0 4567 1266888704 5126 18446744073709551615"
	if got, ok := statCPU(strings.Fields(stat)); !ok || got != 4 {
		t.Errorf("statCPU = %v, %v; want 4 s (400 ticks of 1/100 s)", got, ok)
	}
	if _, ok := statCPU(strings.Fields("S 1 1 1 0 -1 4194560 1206 0 0 0 250")); ok {
		t.Error("statCPU of a line cut before stime: ok")
	}
	if _, ok := number([]string{"1"}, 1); ok {
		t.Error("number past the last field: ok")
	}
}

func TestValidName(t *testing.T) {
	for _, tc := range []struct {
		name         string
		metric, labl bool
	}{
		{"a", true, true}, {"z", true, true}, {"A", true, true}, {"Z", true, true},
		{"_x", true, true}, {"x0", true, true}, {"x9", true, true},
		{"a:b", true, false}, {":a", true, false}, {"__x", true, false},
		{"", false, false}, {"0x", false, false}, {"9x", false, false},
		{"a`", false, false}, {"a{", false, false}, {"a@", false, false},
		{"a[", false, false}, {"a/", false, false}, {"a;", false, false},
		{"a-b", false, false}, {"a.b", false, false},
	} {
		if got := validName(tc.name, false); got != tc.metric {
			t.Errorf("validName(%q) as a metric name = %v, want %v", tc.name, got, tc.metric)
		}
		if got := validName(tc.name, true); got != tc.labl {
			t.Errorf("validName(%q) as a label name = %v, want %v", tc.name, got, tc.labl)
		}
	}
}
