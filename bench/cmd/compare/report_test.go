package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/bench"
)

// result is a main run of op at n in round run.
func result(op string, n, run int, converge, cpu time.Duration, rssMiB int64) *bench.Result {
	return &bench.Result{Operator: op, N: n, Run: run, Converge: converge, CPU: cpu, QuietCPU: cpu, PeakRSS: rssMiB << 20}
}

func TestCPU(t *testing.T) {
	tests := []struct {
		name string
		r    bench.Result
		want float64
	}{
		{"quiet reading wins", bench.Result{CPU: time.Second, QuietCPU: 3 * time.Second}, 3},
		{"at the last status without one", bench.Result{CPU: time.Second}, 1},
	}
	for _, tt := range tests {
		if got := cpu(&tt.r); got != tt.want {
			t.Errorf("%s: cpu = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestRunRatios(t *testing.T) {
	runs := []*bench.Result{
		result(ours, 1000, 1, 10*time.Second, 0, 0),
		result(floor, 1000, 1, 8*time.Second, 0, 0),
		result(ours, 1000, 2, 12*time.Second, 0, 0),
		result(floor, 1000, 2, 10*time.Second, 0, 0),
		result(ours, 1000, 3, 9*time.Second, 0, 0), // the floor failed in run 3
		result(floor, 5000, 3, 9*time.Second, 0, 0),
		result(floor, 1000, 4, 0, 0, 0), // no ours in run 4; a zero is no figure
	}
	got := runRatios(runs, 1000, floor, converge)
	want := []float64{1.25, 1.2}
	if len(got) != len(want) {
		t.Fatalf("ratios %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("ratio %d = %v, want %v", i, got[i], want[i])
		}
	}
}

func TestNumberRuns(t *testing.T) {
	runs := []*bench.Result{{Operator: ours, N: 1}, {Operator: floor, N: 1}, {Operator: ours, N: 1}, {Operator: ours, N: 2}, {Operator: ours, N: 2, Run: 7}}
	numberRuns(runs)
	for i, want := range []int{1, 1, 2, 1, 7} {
		if runs[i].Run != want {
			t.Errorf("result %d: run %d, want %d", i, runs[i].Run, want)
		}
	}
}

func TestTargetsSection(t *testing.T) {
	runs := []*bench.Result{
		result(ours, 1000, 1, 10*time.Second, 3*time.Second, 20),
		result(floor, 1000, 1, 10*time.Second, time.Second, 14),
		result(tuned, 1000, 1, 30*time.Second, 5*time.Second, 50),
		result(ours, 1000, 2, 11*time.Second, 2*time.Second, 17),
		result(floor, 1000, 2, 10*time.Second, time.Second, 14),
		result(tuned, 1000, 2, 30*time.Second, 5*time.Second, 50),
		result(ours, 300, 1, 10*time.Second, 3*time.Second, 20),
		result(floor, 300, 1, 5*time.Second, time.Second, 14),
	}
	got := targetsSection(runs)
	for _, want := range []string{
		"| 1000 | time to converge ≤ 1.10× floor | 1.00 met, 1.10 met | met in 2 of 2 |",
		"| 1000 | CPU to converge ≤ 2.00× floor | 3.00 **missed**, 2.00 met | met in 1 of 2 |",
		"| 1000 | peak RSS ≤ 0.35× tuned | 0.40 **missed**, 0.34 met | met in 1 of 2 |",
		"| 300 | time to converge ≤ 1.10× floor | 2.00 | not a target size |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no row %q in\n%s", want, got)
		}
	}
	if strings.Contains(got, "| 300 | peak RSS") {
		t.Errorf("a peak RSS row at N = 300, where tuned did not run:\n%s", got)
	}
	if targetsSection(runs[:1]) != "" {
		t.Error("a targets section with ours alone")
	}
}

func TestNTable(t *testing.T) {
	runs := []*bench.Result{
		result(ours, 1000, 1, 10*time.Second, 2*time.Second, 17),
		result(theirs, 1000, 1, 30*time.Second, 5*time.Second, 60),
		result(tuned, 1000, 1, 30*time.Second, 5*time.Second, 50),
		result(floor, 1000, 1, 10*time.Second, time.Second, 14),
	}
	got := nTable(runs, 1000)
	for _, want := range []string{
		"## N = 1000 (runs: 1 ours, 1 theirs, 1 tuned, 1 floor)",
		"| metric | widget-operator | controller-runtime | controller-runtime tuned | raw-write floor | ours/theirs | ours/tuned | ours/floor | target |",
		"|---|---:|---:|---:|---:|---:|---:|---:|---|",
		"| peak RSS (VmHWM) | 17.0 MiB | 60.0 MiB | 50.0 MiB | 14.0 MiB | 0.28 | 0.34 | 1.21 | ≤ 0.30× theirs met; ≤ 0.35× tuned met |",
		"| CPU to converge | 2.00 s | 5.00 s | 5.00 s | 1.00 s | 0.40 | 0.40 | 2.00 | ≤ 0.35× theirs **missed**; ≤ 2.00× floor met |",
		"| time to converge | 10.00 s | 30.00 s | 30.00 s | 10.00 s | 0.33 | 0.33 | 1.00 | ≤ 0.50× theirs met; ≤ 1.10× floor met |",
		"| idle CPU | 0.00 s | 0.00 s | 0.00 s | – | = | = | – | ≤ 0.01 s (ours) met |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no line %q in\n%s", want, got)
		}
	}
	// Without the tuned and floor runs, their columns go.
	got = nTable(runs[:2], 1000)
	if want := "| metric | widget-operator | controller-runtime | ours/theirs | target |"; !strings.Contains(got, want) {
		t.Errorf("no header %q in\n%s", want, got)
	}
	if want := "≤ 0.30× theirs met; ≤ 0.35× tuned |"; !strings.Contains(got, want) {
		t.Errorf("no unchecked goal %q in\n%s", want, got)
	}
}

func TestMemLimitSection(t *testing.T) {
	limited := result(ours, 10000, 0, 280*time.Second, 40*time.Second, 61)
	limited.CPU, limited.Quiet = 35*time.Second, 300*time.Second
	limited.Scrapes, limited.NearLimit, limited.MemoryFailed, limited.SoftLimit = 150, 120, 3, 60397977
	main := []*bench.Result{
		result(ours, 10000, 1, 260*time.Second, 30*time.Second, 108),
		result(ours, 10000, 2, 270*time.Second, 34*time.Second, 110),
		result(theirs, 10000, 1, 400*time.Second, 1*time.Second, 200),
	}
	got := memLimitSection([]*bench.Result{limited}, main)
	for _, want := range []string{
		"## Under a 64 Mi memory limit (ours)",
		"CONTAINER_MEMORY_LIMIT=67108864",
		"| 10000 | soft 57.6 MiB | 280.00 s | 40.00 s | 35.00 s | 300.00 s | 61.0 MiB | 120 of 150 scrapes | 3 of 150 | CPU ≤ 1.2× no limit: 1.25 **missed** |",
		"| 10000 | none | 265.00 s | 32.00 s | 32.00 s | 0.00 s | 109.0 MiB | – | – | |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no line %q in\n%s", want, got)
		}
	}
	// Without main runs at that N: the limited run alone, no verdict.
	limited.NotQuiet = true
	got = memLimitSection([]*bench.Result{limited}, main[2:])
	if want := "| 40.00 s | 35.00 s | not quiet | 61.0 MiB | 120 of 150 scrapes | 3 of 150 | CPU ≤ 1.2× no limit |"; !strings.Contains(got, want) || strings.Contains(got, "| none |") {
		t.Errorf("want %q and no unlimited row in\n%s", want, got)
	}
	if memLimitSection(nil, main) != "" {
		t.Error("a section without runs")
	}
}

// TestParseCacheHeap reads BenchmarkCacheHeap's lines as go test prints
// them, with medians over the loads of each case.
func TestParseCacheHeap(t *testing.T) {
	out := "goos: linux\ngoarch: amd64\npkg: github.com/zerodep-k8s/widget-operator/internal/operator\n" +
		"BenchmarkCacheHeap/N=1000/stream-2         \t       1\t 412345678 ns/op\t      3384 liveB/widget\t      5688 peakB/widget\t      7001 goalB/widget\t     11000 allocB/widget\n" +
		"BenchmarkCacheHeap/N=1000/stream-2         \t       1\t 412345678 ns/op\t      3380 liveB/widget\t      5000 peakB/widget\t      7003 goalB/widget\t     11002 allocB/widget\n" +
		"BenchmarkCacheHeap/N=1000/stream-2         \t       1\t 412345678 ns/op\t      3390 liveB/widget\t      6000 peakB/widget\t      7002 goalB/widget\t     11001 allocB/widget\n" +
		"BenchmarkCacheHeap/N=10000/list-2          \t       1\t4123456789 ns/op\t      3149 liveB/widget\t      7791 peakB/widget\t      8919 goalB/widget\t     17733 allocB/widget\n" +
		"PASS\nok  \tgithub.com/zerodep-k8s/widget-operator/internal/operator\t12.3s\n"
	want := []Relist{{N: 1000, Mode: "stream", Peak: 5688, Goal: 7002, Alloc: 11001, Live: 3384}, {N: 10000, Mode: "list", Peak: 7791, Goal: 8919, Alloc: 17733, Live: 3149}}
	if got := parseCacheHeap(out); !slices.Equal(got, want) {
		t.Errorf("parseCacheHeap = %+v\nwant %+v", got, want)
	}
	if got := parseCacheHeap("PASS\n"); len(got) != 0 {
		t.Errorf("parseCacheHeap of no lines = %+v", got)
	}
}

// TestShardedSection judges the worst replica of a sharded run against
// one unsharded replica: ours in the main runs, else one sharded replica.
func TestShardedSection(t *testing.T) {
	one := &bench.Result{Operator: ours, N: 5000, PeakRSS: 60 << 20, FileRSS: 10 << 20}
	three := &bench.Result{Operator: ours, N: 5000, PeakRSS: 31 << 20,
		PerReplica: []bench.ReplicaStat{{PeakRSS: 25 << 20, FileRSS: 10 << 20}, {PeakRSS: 31 << 20, FileRSS: 11 << 20}, {PeakRSS: 20 << 20, FileRSS: 9 << 20}}}
	tests := []struct {
		name string
		main []*bench.Result
		want string
	}{
		{"against one sharded replica", nil, "each ≤ 0.5× one replica: 0.52 **missed** (less the file-backed pages: 0.40)"},
		{"against the main runs", []*bench.Result{result(ours, 5000, 1, 0, 0, 64)}, "each ≤ 0.5× unsharded: 0.48 met"},
	}
	for _, tt := range tests {
		got := shardedSection([]*bench.Result{one, three}, tt.main)
		if !strings.Contains(got, tt.want) || strings.Count(got, "each ≤") != 1 {
			t.Errorf("%s: no single %q in\n%s", tt.name, tt.want, got)
		}
	}
	if shardedSection(nil, nil) != "" {
		t.Error("a section without sharded runs")
	}
}
