package bench

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestScaleSmoke runs the operator alone at N = 100 on a bare control plane
// and checks that it converges with exactly three writes per Widget (the
// Deployment create, the Service create and the status patch), at most one
// Event per Widget, and no request other than lists and watches; then that
// a restart over the converged Widgets writes nothing. The full comparison
// with figures is bench/cmd/compare (make bench).
func TestScaleSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	const n = 100
	bin := filepath.Join(t.TempDir(), "widget-operator")
	build := exec.Command("go", "build", "-o", bin, "./cmd/widget-operator")
	build.Dir = RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the operator: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := Run(ctx, Config{N: n, Operator: Ours(bin), Restart: true, Log: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ready %v, converged %v, cpu %v, peak RSS %.1f MiB; requests: %s",
		res.Ready.Round(time.Millisecond), res.Converge.Round(time.Millisecond), res.CPU,
		float64(res.PeakRSS)/(1<<20), res.Requests)
	r := res.Requests
	want := map[string]int{
		"create deployments":   n,
		"create services":      n,
		"patch widgets/status": n,
	}
	for k, v := range want {
		if r.By[k] != v {
			t.Errorf("%s: %d requests, want %d", k, r.By[k], v)
		}
	}
	if r.Writes != 3*n {
		t.Errorf("%d writes, want exactly %d (3 per Widget)", r.Writes, 3*n)
	}
	if r.Events > n {
		t.Errorf("%d Events, want at most one per Widget (%d)", r.Events, n)
	}
	if r.Other != 0 {
		t.Errorf("%d requests that are neither lists, watches nor the writes (want none): %s", r.Other, r)
	}
	if rr := res.RestartRequests; rr.Writes != 0 || rr.Events != 0 || rr.Other != 0 || rr.Lists == 0 {
		t.Errorf("after a restart over converged Widgets: %s; want lists and watches only", rr)
	}
}

// TestFloorSmoke runs the raw-write floor at N = 100: it converges with
// exactly the three writes per Widget and no other request, and the
// kernel accounts for its process.
func TestFloorSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	const n = 100
	bin := filepath.Join(t.TempDir(), "floor")
	if err := Build(RepoRoot(), FloorCmd, bin); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := Run(ctx, Config{N: n, Operator: Floor(bin), Log: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("converged %v, cpu %v, peak RSS %.1f MiB; requests: %s", res.Converge.Round(time.Millisecond), res.CPU,
		float64(res.PeakRSS)/(1<<20), res.Requests)
	if res.CPU <= 0 || res.PeakRSS < 1<<20 {
		t.Errorf("cpu %v, peak RSS %d B: want the floor process's own figures", res.CPU, res.PeakRSS)
	}
	r := res.Requests
	if r.Writes != 3*n || r.Total != 3*n || r.By["patch widgets/status"] != n {
		t.Errorf("requests %s; want exactly %d creates of each child and %d status patches, nothing else", r, n, n)
	}
}

// TestQuotaSmoke runs the kit's quota operator (KitQuota) at N = 50 on a
// bare control plane and checks that every labelled Namespace gets its two
// children with exactly one create each, no request other than lists and
// watches, and none refused. The side-by-side figures with
// controller-runtime are bench/cmd/quota (make bench-quota).
func TestQuotaSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	const n = 50
	bin := filepath.Join(t.TempDir(), "quota")
	if err := Build(RepoRoot(), KitQuota, bin); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	op := QuotaOperator("quota", bin)
	op.Args = KitQuotaArgs
	res, err := RunQuota(ctx, Config{N: n, Operator: op, Log: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	r := res.Requests
	t.Logf("converged %v; requests: %s", res.Converge.Round(time.Millisecond), r)
	if r.By["create resourcequotas"] != n || r.By["create limitranges"] != n || r.Writes != 2*n {
		t.Errorf("%d writes (%s); want exactly one create of each child per Namespace, %d in all", r.Writes, r, 2*n)
	}
	if r.Other != 0 || r.Events != 0 || r.Failed != 0 {
		t.Errorf("%d other requests, %d Events and %d refused (want none): %s", r.Other, r.Events, r.Failed, r)
	}
}

// testWriter sends progress lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// TestQuiet feeds readings of CPU time, one every 100 ms, to quiet with a
// window of 2 s, and checks the reading at which it is quiet and the
// figures it keeps.
func TestQuiet(t *testing.T) {
	tick := 10 * time.Millisecond
	steady := func(k int, cpu time.Duration) []time.Duration {
		var s []time.Duration
		for range k {
			s = append(s, cpu)
		}
		return s
	}
	tests := []struct {
		name      string
		cpu       []time.Duration // one reading every 100 ms
		quietAt   int             // the index of the reading add reports quiet at; -1 for none
		cpu0      time.Duration   // q.cpu after the last reading
		sinceStep int             // q.since, in readings after the first
	}{
		{"quiet from the first reading", steady(21, 5*tick), 20, 5 * tick, 0},
		{"not yet: 1.9 s", steady(20, 5*tick), -1, 5 * tick, 0},
		{"moves, then quiet", append([]time.Duration{tick, 2 * tick, 3 * tick}, steady(21, 4*tick)...), 23, 4 * tick, 3},
		{"one tick resets the window", append(append(steady(15, tick), 2*tick), steady(20, 2*tick)...), 35, 2 * tick, 15},
		{"never quiet", func() []time.Duration {
			var s []time.Duration
			for i := range 50 {
				s = append(s, time.Duration(i/5)*tick) // a tick every 0.5 s
			}
			return s
		}(), -1, 9 * tick, 45},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := quiet{window: 2 * time.Second}
			t0 := time.Unix(1000, 0)
			got := -1
			for i, c := range tt.cpu {
				if q.add(t0.Add(time.Duration(i)*100*time.Millisecond), c) && got < 0 {
					got = i
				}
			}
			if got != tt.quietAt {
				t.Errorf("quiet at reading %d, want %d", got, tt.quietAt)
			}
			if q.cpu != tt.cpu0 || q.since != t0.Add(time.Duration(tt.sinceStep)*100*time.Millisecond) {
				t.Errorf("cpu %v since %v, want %v since reading %d", q.cpu, q.since.Sub(t0), tt.cpu0, tt.sinceStep)
			}
		})
	}
}

// TestGauge reads samples from a Prometheus text body as the operator
// serves it.
func TestGauge(t *testing.T) {
	body := "# HELP widget_operator_memory_near_limit 1 while near.\n" +
		"# TYPE widget_operator_memory_near_limit gauge\n" +
		"widget_operator_memory_near_limit 1\n" +
		"widget_operator_memory_near_limit_total 7\n" +
		"go_gc_gomemlimit_bytes 6.0397977e+07\n" +
		"widget_operator_cache_objects{resource=\"widgets\"} 3\n" +
		"broken_gauge x\n"
	tests := []struct {
		name string
		want float64
		ok   bool
	}{
		{"widget_operator_memory_near_limit", 1, true},
		{"widget_operator_memory_near_limit_total", 7, true},
		{"go_gc_gomemlimit_bytes", 60397977, true},
		{"widget_operator_cache_objects", 0, false}, // labelled samples only
		{"broken_gauge", 0, false},
		{"absent", 0, false},
	}
	for _, tt := range tests {
		if got, ok := gauge(body, tt.name); got != tt.want || ok != tt.ok {
			t.Errorf("gauge(%s) = %v, %v; want %v, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
	if _, ok := gauge("", MemoryNearLimit); ok {
		t.Error("a gauge in an empty body")
	}
}

// TestCaches reads the cache gauges, one per resource, from a body as the
// operator serves it.
func TestCaches(t *testing.T) {
	body := "# HELP widget_operator_cache_objects Objects in the informer's cache.\n" +
		"# TYPE widget_operator_cache_objects gauge\n" +
		"widget_operator_cache_objects{resource=\"widgets\"} 10000\n" +
		"widget_operator_cache_objects{resource=\"deployments\"} 9876\n" +
		"widget_operator_cache_bytes{resource=\"widgets\"} 1.2345e+07\n" +
		"widget_operator_cache_bytes{resource=\"deployments\"} 2048\n" +
		"widget_operator_cache_bytes_total{resource=\"widgets\"} 5\n" +
		"widget_operator_cache_objects{resource=\"services\"} x\n"
	want := []CacheStat{{"widgets", 10000, 12345000}, {"deployments", 9876, 2048}}
	if got := caches(body); !slices.Equal(got, want) {
		t.Errorf("caches = %+v, want %+v", got, want)
	}
	if got := caches("widget_operator_memory_near_limit 1\n"); got != nil {
		t.Errorf("caches of a body without them = %+v", got)
	}
}
