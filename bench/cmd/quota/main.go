// Command quota sets the kit's quota operator (examples/quota) beside the
// same operator written with controller-runtime
// (bench/controller-runtime/quota) and prints the table of
// docs/benchmarks.md ("The quota operator beside controller-runtime"):
//
//	go run ./bench/cmd/quota               # what make bench-quota runs
//	go run ./bench/cmd/quota -n 100 -runs 1  # a quick look
//
// It counts the code lines of each operator's own package (as make lines
// does), builds both stripped (-trimpath -ldflags='-s -w') for their sizes
// and linked modules, then runs the quota scenario of package bench
// (bench.RunQuota: N labelled Namespaces, a fresh bare control plane per
// run) -runs times for each, in alternating order, and prints the medians
// of the time and CPU to converge, the peak RSS and the API requests from
// the audit log. Progress goes to stderr, the table to stdout.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/zerodep-k8s/widget-operator/bench"
)

// side is one of the two operators.
type side struct {
	op     bench.Operator
	target bench.Target
	lines  int
	size   bench.Size
	runs   []*bench.Result
}

func main() {
	n := flag.Int("n", 1000, "labelled Namespaces")
	runs := flag.Int("runs", 3, "runs per operator")
	flag.Parse()
	if err := run(os.Stdout, *n, *runs); err != nil {
		fmt.Fprintln(os.Stderr, "quota:", err)
		os.Exit(1)
	}
}

func run(w io.Writer, n, runs int) error {
	if n <= 0 || runs <= 0 {
		return fmt.Errorf("-n %d, -runs %d: both must be positive", n, runs)
	}
	root := bench.RepoRoot()
	binDir, err := os.MkdirTemp("", "quota-compare-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(binDir)
	sides := []*side{
		{op: bench.QuotaOperator("kit", filepath.Join(binDir, "quota-kit")), target: bench.KitQuota},
		{op: bench.QuotaOperator("controller-runtime", filepath.Join(binDir, "quota-cr")), target: bench.CRQuota},
	}
	sides[0].op.Args = bench.KitQuotaArgs
	for _, s := range sides {
		logf("building %s (%s in %s)", s.op.Name, s.target.Package, s.target.Dir)
		if err := bench.Build(root, s.target, s.op.Binary); err != nil {
			return err
		}
		if s.size, err = bench.MeasureSize(s.op); err != nil {
			return err
		}
		if s.lines, err = bench.CodeLines(s.target.Source(root)); err != nil {
			return err
		}
	}
	for i := range runs {
		// Each run starts with the other operator.
		order := sides
		if i%2 == 1 {
			order = []*side{sides[1], sides[0]}
		}
		for _, s := range order {
			logf("run %d/%d: %s", i+1, runs, s.op.Name)
			res, err := bench.RunQuota(context.Background(), bench.Config{N: n, Operator: s.op, Log: os.Stderr})
			if err != nil {
				return err
			}
			s.runs = append(s.runs, res)
		}
	}
	report(w, n, runs, sides[0], sides[1])
	return nil
}

// report prints the table: the kit, controller-runtime, and their ratio.
func report(w io.Writer, n, runs int, kit, cr *side) {
	mib := func(b float64) string { return fmt.Sprintf("%.1f MiB", b/(1<<20)) }
	sec := func(v float64) string { return fmt.Sprintf("%.2f s", v) }
	num := func(v float64) string { return fmt.Sprintf("%.0f", v) }
	fmt.Fprintf(w, "| %d labelled Namespaces, median of %d runs | the kit (examples/quota) | controller-runtime | kit / controller-runtime |\n", n, runs)
	fmt.Fprintln(w, "|---|--:|--:|--:|")
	row := func(name string, format func(float64) string, a, b float64) {
		ratio := "-"
		if b != 0 {
			ratio = fmt.Sprintf("%.2f", a/b)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", name, format(a), format(b), ratio)
	}
	row("lines of code", num, float64(kit.lines), float64(cr.lines))
	row("stripped binary", mib, float64(kit.size.Bytes), float64(cr.size.Bytes))
	row("modules linked", num, float64(kit.size.Modules), float64(cr.size.Modules))
	for _, m := range []struct {
		name   string
		format func(float64) string
		value  func(*bench.Result) float64
	}{
		{"peak RSS (VmHWM)", mib, func(r *bench.Result) float64 { return float64(r.PeakRSS) }},
		{"time to converge", sec, func(r *bench.Result) float64 { return r.Converge.Seconds() }},
		{"CPU to converge", sec, func(r *bench.Result) float64 { return r.CPU.Seconds() }},
		{"API requests to converge", num, func(r *bench.Result) float64 { return float64(r.Requests.Total) }},
		{"  writes", num, func(r *bench.Result) float64 { return float64(r.Requests.Writes) }},
		{"  lists + watches", num, func(r *bench.Result) float64 { return float64(r.Requests.Lists + r.Requests.Watches) }},
		{"  other (gets, discovery)", num, func(r *bench.Result) float64 { return float64(r.Requests.Other) }},
		{"  refused by the API server", num, func(r *bench.Result) float64 { return float64(r.Requests.Failed) }},
	} {
		row(m.name, m.format, median(kit.runs, m.value), median(cr.runs, m.value))
	}
	for _, s := range []*side{kit, cr} {
		fmt.Fprintf(w, "\n%s, last run's requests: %s\n", s.op.Name, s.runs[len(s.runs)-1].Requests)
	}
}

// median of value over runs, which are not empty.
func median(runs []*bench.Result, value func(*bench.Result) float64) float64 {
	v := make([]float64, len(runs))
	for i, r := range runs {
		v[i] = value(r)
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "quota: %s: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}
