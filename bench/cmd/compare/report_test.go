package main

import (
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
