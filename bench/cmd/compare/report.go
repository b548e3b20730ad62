package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/zerodep-k8s/widget-operator/bench"
)

const (
	ours   = "widget-operator"
	theirs = "controller-runtime"
	tuned  = bench.TunedName
	floor  = bench.FloorName
)

// columns are the operators of the tables, in order, each with its short
// name in ratios and targets.
var columns = []struct{ op, short string }{
	{ours, "ours"}, {theirs, "theirs"}, {tuned, "tuned"}, {floor, "floor"},
}

// short names op as the ratios and targets do.
func short(op string) string {
	for _, c := range columns {
		if c.op == op {
			return c.short
		}
	}
	return op
}

// targetSizes are the Ns at which the targets apply.
var targetSizes = []int{1000, 5000, 10000}

// Targets on the RSS slope, the idle CPU and the live change.
const (
	slopeTarget = 4.0  // KiB of peak RSS per Widget, ours
	idleTarget  = 0.01 // seconds of CPU over the idle window: one tick
	liveTarget  = 1.0  // seconds from a live Widget's create to its status, ours
	limitTarget = 1.2  // CPU to converge under the 64 Mi limit over without, ours
	shardTarget = 0.5  // each sharded replica's peak RSS over one unsharded replica's, ours
)

// runTargets are the targets checked run by run: ours over the other
// operator's figure of the same run, so that both saw the machine alike.
var runTargets = []struct {
	metric string
	value  func(*bench.Result) float64
	goal   goal
}{
	{"time to converge", converge, goal{floor, 1.1}},
	{"CPU to converge", cpu, goal{floor, 2}},
	{"peak RSS", peakRSS, goal{tuned, 0.35}},
}

// goal is a target on a metric: ours/of at most most, at targetSizes.
type goal struct {
	of   string
	most float64
}

func (g goal) String() string { return fmt.Sprintf("≤ %.2f× %s", g.most, short(g.of)) }

// metric is one row of the tables.
type metric struct {
	name   string
	value  func(*bench.Result) float64
	format func(float64) string
	goals  []goal
	floor  bool // the floor measures it too
}

func seconds(v float64) string { return fmt.Sprintf("%.2f s", v) }
func mib(v float64) string     { return fmt.Sprintf("%.1f MiB", v) }
func count(v float64) string   { return fmt.Sprintf("%.0f", v) }

var metrics = []metric{
	{"time to converge", converge, seconds, []goal{{theirs, 0.5}, {floor, 1.1}}, true},
	{"CPU to converge", cpu, seconds, []goal{{theirs, 0.35}, {floor, 2}}, true},
	{"  CPU at the last status", func(r *bench.Result) float64 { return r.CPU.Seconds() }, seconds, nil, false},
	{"  time to quiet", func(r *bench.Result) float64 { return r.Quiet.Seconds() }, seconds, nil, false},
	{"peak RSS (VmHWM)", peakRSS, mib, []goal{{theirs, 0.3}, {tuned, 0.35}}, true},
	{"steady RSS (VmRSS)", func(r *bench.Result) float64 { return float64(r.SteadyRSS) / (1 << 20) }, mib, nil, false},
	{"idle CPU", func(r *bench.Result) float64 { return r.IdleCPU.Seconds() }, seconds, nil, false},
	{"time to /readyz, 0 Widgets", func(r *bench.Result) float64 { return r.Ready.Seconds() }, seconds, nil, false},
	{"API requests", func(r *bench.Result) float64 { return float64(r.Requests.Total) }, count, nil, true},
	{"  writes", func(r *bench.Result) float64 { return float64(r.Requests.Writes) }, count, nil, true},
	{"  lists + watches", func(r *bench.Result) float64 { return float64(r.Requests.Lists + r.Requests.Watches) }, count, nil, true},
	{"  other (gets, discovery)", func(r *bench.Result) float64 { return float64(r.Requests.Other) }, count, nil, true},
	{"restart: time to /readyz", func(r *bench.Result) float64 { return r.RestartReady.Seconds() }, seconds, []goal{{theirs, 0.5}}, false},
	{"restart: writes", func(r *bench.Result) float64 { return float64(r.RestartRequests.Writes) }, count, nil, false},
	{"restart: peak RSS (VmHWM)", func(r *bench.Result) float64 { return float64(r.RestartRSS) / (1 << 20) }, mib, nil, false},
}

func converge(r *bench.Result) float64 { return r.Converge.Seconds() }

// cpu is the CPU to converge: until the operator went quiet after it
// (bench.Result.QuietCPU), or at convergence when that was not measured.
func cpu(r *bench.Result) float64 {
	if r.QuietCPU > 0 {
		return r.QuietCPU.Seconds()
	}
	return r.CPU.Seconds()
}

// slope is the growth of op's median peak RSS per Widget, in KiB, between
// the smallest and the largest N; ok is false with fewer than two Ns.
func slope(runs []*bench.Result, op string) (float64, bool) {
	var ns []int
	for _, n := range countsOf(runs) {
		if _, ok := median(runs, op, n, peakRSS); ok {
			ns = append(ns, n)
		}
	}
	if len(ns) < 2 {
		return 0, false
	}
	lo, hi := ns[0], ns[len(ns)-1]
	a, _ := median(runs, op, lo, peakRSS)
	b, _ := median(runs, op, hi, peakRSS)
	return (b - a) * 1024 / float64(hi-lo), true
}

func peakRSS(r *bench.Result) float64 { return float64(r.PeakRSS) / (1 << 20) }

// median of the metric over the runs of op at n; ok is false when there
// are none.
func median(runs []*bench.Result, op string, n int, value func(*bench.Result) float64) (float64, bool) {
	var vs []float64
	for _, r := range runs {
		if r.Operator == op && r.N == n {
			vs = append(vs, value(r))
		}
	}
	if len(vs) == 0 {
		return 0, false
	}
	return mid(vs), true
}

func countsOf(runs []*bench.Result) []int {
	var ns []int
	for _, r := range runs {
		if !slices.Contains(ns, r.N) {
			ns = append(ns, r.N)
		}
	}
	slices.Sort(ns)
	return ns
}

func write(rep *Report, out string) error {
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	base := filepath.Join(out, rep.Date)
	if err := os.WriteFile(base+".json", append(data, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(base+".svg", []byte(chart(rep)), 0o644); err != nil {
		return err
	}
	return os.WriteFile(base+".md", []byte(markdown(rep)), 0o644)
}

func ratio(a, b float64) string {
	if b == 0 {
		if a == 0 {
			return "="
		}
		return "∞"
	}
	return fmt.Sprintf("%.2f", a/b)
}

func markdown(rep *Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# widget-operator against controller-runtime, %s\n\n", rep.Date)
	fmt.Fprintf(&b, "Measured on %s. The API server, etcd and the operator share the machine.\n\n", rep.Machine)
	b.WriteString("Each run starts a fresh bare control plane (etcd and kube-apiserver; no controllers, so Deployments get no Pods), " +
		"creates the Widgets, then starts the operator: converged means every Widget has its Deployment, its Service and a status phase. " +
		"CPU is utime+stime from /proc; CPU to converge is read once the operator has been quiet for 2 s after convergence " +
		"(its CPU time did not move; the Events that trail the last status included), at most a minute after it; RSS from /proc/<pid>/status; requests from the audit log, by the operator's own ServiceAccount, " +
		"from its start to the end of the idle window. Operators alternate within each run. Figures are medians; the ratios are ours to each other column's. " +
		"Tuned is the same controller-runtime operator with managedFields stripped from its cache (cache.TransformStripManagedFields).\n\n")
	if len(rep.Sizes) > 0 {
		b.WriteString("## Binaries\n\n| operator | stripped size | modules linked |\n|---|---:|---:|\n")
		for _, s := range rep.Sizes {
			fmt.Fprintf(&b, "| %s | %.1f MiB | %d |\n", s.Operator, float64(s.Bytes)/(1<<20), s.Modules)
		}
		if len(rep.Sizes) == 2 && rep.Sizes[1].Bytes > 0 {
			r := float64(rep.Sizes[0].Bytes) / float64(rep.Sizes[1].Bytes)
			fmt.Fprintf(&b, "\nSize ratio ours/theirs: %.2f (target ≤ 0.25: %s).\n", r, verdict(r <= 0.25))
		}
		b.WriteString("\n")
	}
	for _, n := range countsOf(rep.Runs) {
		b.WriteString(nTable(rep.Runs, n))
	}
	b.WriteString(targetsSection(rep.Runs))
	if ns := countsOf(rep.Runs); len(ns) > 1 {
		fmt.Fprintf(&b, "## Peak RSS per Widget, N = %d to %d\n\n| operator | KiB per Widget | target |\n|---|---:|---|\n", ns[0], ns[len(ns)-1])
		for _, op := range []string{ours, theirs, tuned} {
			v, ok := slope(rep.Runs, op)
			if !ok {
				continue
			}
			tg := ""
			if op == ours {
				tg = fmt.Sprintf("≤ %.0f %s", slopeTarget, verdict(v <= slopeTarget))
			}
			fmt.Fprintf(&b, "| %s | %.1f | %s |\n", op, v, tg)
		}
		b.WriteString("\n")
	}
	if len(rep.Runs) > 0 {
		fmt.Fprintf(&b, "Idle CPU is measured over %v, to /proc's resolution of 10 ms.\n\n", rep.Idle)
		b.WriteString("## Every run\n\n| N | operator | converge | CPU (to quiet) | peak RSS | steady RSS | idle CPU | ready | requests | restart: ready, requests |\n|---:|---|---:|---:|---:|---:|---:|---:|---|---|\n")
		for _, r := range rep.Runs {
			fmt.Fprintf(&b, "| %d | %s | %.2f s | %.2f s | %.1f MiB | %.1f MiB | %.2f s | %.3f s | %d: %s | %.3f s, %d: %s |\n",
				r.N, r.Operator, r.Converge.Seconds(), cpu(r), float64(r.PeakRSS)/(1<<20),
				float64(r.SteadyRSS)/(1<<20), r.IdleCPU.Seconds(), r.Ready.Seconds(), r.Requests.Total, r.Requests,
				r.RestartReady.Seconds(), r.RestartRequests.Total, r.RestartRequests)
		}
		b.WriteString("\n")
	}
	b.WriteString(shardedSection(rep.Sharded, rep.Runs))
	b.WriteString(relistSection(rep.Relist))
	b.WriteString(liveSection(rep.Live))
	b.WriteString(memLimitSection(rep.MemLimit, rep.Runs))
	if len(rep.Errors) > 0 {
		b.WriteString("## Failed runs\n\n")
		for _, e := range rep.Errors {
			first, _, _ := strings.Cut(e, "\n")
			fmt.Fprintf(&b, "- %s\n", first)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "![peak RSS and CPU against N](%s.svg)\n", rep.Date)
	return b.String()
}

// nTable is the table of the main runs at n: each operator's medians, the
// ratios of ours to the others and the targets.
func nTable(runs []*bench.Result, n int) string {
	var present []string // the operators measured at n, ours first
	var counts []string
	for _, c := range columns {
		k := 0
		for _, r := range runs {
			if r.N == n && r.Operator == c.op {
				k++
			}
		}
		if k > 0 || c.op == ours {
			present = append(present, c.op)
			counts = append(counts, fmt.Sprintf("%d %s", k, c.short))
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "## N = %d (runs: %s)\n\n| metric |", n, strings.Join(counts, ", "))
	for _, op := range present {
		fmt.Fprintf(&b, " %s |", op)
	}
	for _, op := range present[1:] {
		fmt.Fprintf(&b, " ours/%s |", short(op))
	}
	b.WriteString(" target |\n|---|" + strings.Repeat("---:|", 2*len(present)-1) + "---|\n")
	targeted := slices.Contains(targetSizes, n)
	for _, m := range metrics {
		vals := map[string]float64{}
		for _, op := range present {
			if v, ok := median(runs, op, n, m.value); ok && (op != floor || m.floor) {
				vals[op] = v
			}
		}
		fmt.Fprintf(&b, "| %s |", strings.TrimSpace(m.name))
		for _, op := range present {
			if v, ok := vals[op]; ok {
				fmt.Fprintf(&b, " %s |", m.format(v))
			} else {
				b.WriteString(" – |")
			}
		}
		o, okO := vals[ours]
		for _, op := range present[1:] {
			if v, ok := vals[op]; ok && okO {
				fmt.Fprintf(&b, " %s |", ratio(o, v))
			} else {
				b.WriteString(" – |")
			}
		}
		var goals []string
		for _, g := range m.goals {
			text := g.String()
			if v, ok := vals[g.of]; ok && okO && targeted && v > 0 {
				text += " " + verdict(o/v <= g.most)
			}
			goals = append(goals, text)
		}
		goals = append(goals, oursGoal(m.name, n, o, okO)...)
		fmt.Fprintf(&b, " %s |\n", strings.Join(goals, "; "))
	}
	return b.String() + "\n"
}

// oursGoal is the target of the metric on ours alone, if it has one.
func oursGoal(name string, n int, o float64, ok bool) []string {
	var g string
	var met bool
	switch name {
	case "idle CPU":
		g, met = fmt.Sprintf("≤ %.2f s (ours)", idleTarget), o <= idleTarget
	case "  writes":
		g, met = fmt.Sprintf("= %d (ours)", 3*n), o == float64(3*n)
	case "restart: writes":
		g, met = "0 (ours)", o == 0
	default:
		return nil
	}
	if ok {
		g += " " + verdict(met)
	}
	return []string{g}
}

// numberRuns numbers the runs of results that have none (a report from
// before bench.Result.Run), in order, per N and operator.
func numberRuns(results []*bench.Result) {
	seen := map[string]int{}
	for _, r := range results {
		k := fmt.Sprint(r.N, r.Operator)
		seen[k]++
		if r.Run == 0 {
			r.Run = seen[k]
		}
	}
}

// runRatios returns, for each run at n in which both ours and of were
// measured, in run order, the ratio of ours's value to of's.
func runRatios(runs []*bench.Result, n int, of string, value func(*bench.Result) float64) []float64 {
	var ratios []float64
	for _, o := range runs {
		if o.N != n || o.Operator != ours {
			continue
		}
		for _, t := range runs {
			if t.N == n && t.Operator == of && t.Run == o.Run && value(t) > 0 {
				ratios = append(ratios, value(o)/value(t))
				break
			}
		}
	}
	return ratios
}

// targetsSection checks runTargets in each run at each N: one row per
// target and N, the ratio of each run and how many runs met it.
func targetsSection(runs []*bench.Result) string {
	var b strings.Builder
	for _, n := range countsOf(runs) {
		for _, t := range runTargets {
			ratios := runRatios(runs, n, t.goal.of, t.value)
			if len(ratios) == 0 {
				continue
			}
			var cells []string
			met := 0
			for _, r := range ratios {
				c := fmt.Sprintf("%.2f", r)
				if slices.Contains(targetSizes, n) {
					ok := r <= t.goal.most
					if ok {
						met++
					}
					c += " " + verdict(ok)
				}
				cells = append(cells, c)
			}
			tally := "not a target size"
			if slices.Contains(targetSizes, n) {
				tally = fmt.Sprintf("met in %d of %d", met, len(ratios))
			}
			fmt.Fprintf(&b, "| %d | %s %s | %s | %s |\n", n, t.metric, t.goal, strings.Join(cells, ", "), tally)
		}
	}
	if b.Len() == 0 {
		return ""
	}
	return "## Targets, run by run\n\nEach a ratio of two figures from the same run, in which the operators took turns on the same machine.\n\n" +
		"| N | target | each run | runs |\n|---:|---|---|---|\n" + b.String() + "\n"
}

// memLimitSection is the table of the 64 Mi case, each run beside the
// median of ours without a limit at the same N from the main runs, when
// there are some; empty without runs.
func memLimitSection(limited, main []*bench.Result) string {
	if len(limited) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "## Under a %d Mi memory limit (ours)\n\n"+
		"The operator gets CONTAINER_MEMORY_LIMIT=%d, as manifests/operator.yaml hands it the container's limit, "+
		"and sets its soft memory limit (GOMEMLIMIT) to 90%% of it. Its /metrics (plain HTTP) and /readyz are read every 2 s "+
		"from its start until it is quiet. Beside it, ours without a limit at the same N (median of the main runs, which serve no /metrics).\n\n"+
		"| N | limit | converge | CPU to converge | CPU at the last status | time to quiet | peak RSS | %s = 1 | /readyz memory failed | target |\n"+
		"|---:|---|---:|---:|---:|---:|---:|---:|---:|---|\n", PodMemoryLimit>>20, PodMemoryLimit, bench.MemoryNearLimit)
	for _, r := range limited {
		quiet := seconds(r.Quiet.Seconds())
		if r.NotQuiet {
			quiet = "not quiet"
		}
		tg := fmt.Sprintf("CPU ≤ %.1f× no limit", limitTarget)
		free, ok := median(main, ours, r.N, cpu)
		if ok && free > 0 {
			tg += fmt.Sprintf(": %.2f %s", cpu(r)/free, verdict(cpu(r)/free <= limitTarget))
		}
		fmt.Fprintf(&b, "| %d | soft %.1f MiB | %s | %s | %s | %s | %s | %d of %d scrapes | %d of %d | %s |\n",
			r.N, float64(r.SoftLimit)/(1<<20), seconds(converge(r)), seconds(cpu(r)), seconds(r.CPU.Seconds()), quiet,
			mib(peakRSS(r)), r.NearLimit, r.Scrapes, r.MemoryFailed, r.Scrapes, tg)
		if !ok {
			continue
		}
		cell := func(value func(*bench.Result) float64, format func(float64) string) string {
			v, _ := median(main, ours, r.N, value)
			return format(v)
		}
		fmt.Fprintf(&b, "| %d | none | %s | %s | %s | %s | %s | – | – | |\n", r.N, cell(converge, seconds), cell(cpu, seconds),
			cell(func(r *bench.Result) float64 { return r.CPU.Seconds() }, seconds),
			cell(func(r *bench.Result) float64 { return r.Quiet.Seconds() }, seconds), cell(peakRSS, mib))
	}
	b.WriteString("\n")
	for _, r := range limited {
		b.WriteString(cachesTable(r))
	}
	return b.String()
}

// shardedSection is the table of the sharded case, with its target: each
// replica's peak RSS over one unsharded replica's, that of ours in the
// main runs at the same N (their median) or else of the one-replica
// sharded run; empty without runs.
func shardedSection(sharded, main []*bench.Result) string {
	if len(sharded) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("## Sharded (ours, --shards=6)\n\n" +
		"The same scenario with 1 and 3 replicas sharing six shards, on an API server that serves shard selectors " +
		"(feature gate ShardedListAndWatch), so that each replica caches the Widgets and children of its shards alone. " +
		"CPU is the replicas' sum; peak RSS per replica. " +
		"All replicas share these 2 cores with the API server and etcd, which are the bottleneck here: more replicas " +
		"spread the operator's work, they cannot make the API server faster.\n\n" +
		"Beside each peak, in brackets, the file-backed part of the RSS at convergence (RssFile: the binary's pages, which the kernel may drop and read again).\n\n" +
		"| N | replicas | converge | CPU (sum) | CPU per replica | peak RSS per replica | writes | target |\n|---:|---:|---:|---:|---|---|---:|---|\n")
	for _, r := range sharded {
		var cpus, rss []string
		worst := float64(r.PeakRSS)
		replicas := r.PerReplica
		if len(replicas) == 0 {
			replicas = []bench.ReplicaStat{{CPU: r.CPU, PeakRSS: r.PeakRSS, FileRSS: r.FileRSS}}
		}
		for _, p := range replicas {
			cpus = append(cpus, fmt.Sprintf("%.2f s", p.CPU.Seconds()))
			rss = append(rss, fmt.Sprintf("%.1f MiB (%.1f)", float64(p.PeakRSS)/(1<<20), float64(p.FileRSS)/(1<<20)))
		}
		tg := ""
		if base, file, of := unsharded(sharded, main, r.N); base > 0 && len(r.PerReplica) > 1 {
			tg = fmt.Sprintf("each ≤ %.1f× %s: %.2f %s", shardTarget, of, worst/base, verdict(worst <= shardTarget*base))
			if file > 0 {
				anon := 0.0
				for _, p := range r.PerReplica {
					anon = max(anon, float64(p.PeakRSS-p.FileRSS))
				}
				tg += fmt.Sprintf(" (less the file-backed pages: %.2f)", anon/(base-file))
			}
		}
		fmt.Fprintf(&b, "| %d | %d | %.2f s | %.2f s | %s | %s | %d | %s |\n", r.N, len(replicas),
			r.Converge.Seconds(), r.CPU.Seconds(), strings.Join(cpus, ", "), strings.Join(rss, ", "), r.Requests.Writes, tg)
	}
	return b.String() + "\n"
}

// unsharded returns the peak RSS and the file-backed RSS, in bytes, of
// one unsharded replica at n and what it is: ours in the main runs
// (medians), else the sharded run of one replica; peak is 0 when there is
// neither.
func unsharded(sharded, main []*bench.Result, n int) (peak, file float64, of string) {
	if v, ok := median(main, ours, n, func(r *bench.Result) float64 { return float64(r.PeakRSS) }); ok {
		f, _ := median(main, ours, n, func(r *bench.Result) float64 { return float64(r.FileRSS) })
		return v, f, "unsharded"
	}
	for _, r := range sharded {
		if r.N == n && len(r.PerReplica) <= 1 {
			return float64(r.PeakRSS), float64(r.FileRSS), "one replica"
		}
	}
	return 0, 0, ""
}

// relistSection is the table of the relist memory by mode; empty without
// figures.
func relistSection(rows []Relist) string {
	if len(rows) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("## A relist's memory, streaming or paginated\n\n" +
		"From BenchmarkCacheHeap (internal/operator): the operator's three caches load N Widgets, each with its Deployment and Service, " +
		"from a fake server that replays the list pages kube-apiserver v1.37.2 sent, by a streaming list or by paginated lists " +
		"(the server refusing streams). Heap, not RSS, in bytes per Widget with its children; medians of 5 loads. " +
		"Peak is the most heap in use while they load, goal the GC's highest heap goal (which peak RSS follows), " +
		"both less the heap before; live is what the caches keep.\n\n" +
		"| N | mode | peak heap | GC goal | allocated | live after |\n|---:|---|---:|---:|---:|---:|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %d | %s | %.0f | %.0f | %.0f | %.0f |\n", r.N, r.Mode, r.Peak, r.Goal, r.Alloc, r.Live)
	}
	return b.String() + "\n"
}

// cachesTable is the table of a run's cache metrics; empty without them.
func cachesTable(r *bench.Result) string {
	if len(r.Caches) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Its caches at the last scrape (%s and %s: an estimate of the decoded objects, less than the heap they keep):\n\n"+
		"| resource | objects | bytes | bytes per object |\n|---|---:|---:|---:|\n", bench.CacheObjects, bench.CacheBytes)
	for _, c := range r.Caches {
		per := "–"
		if c.Objects > 0 {
			per = fmt.Sprintf("%d", c.Bytes/c.Objects)
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %s |\n", c.Resource, c.Objects, c.Bytes, per)
	}
	return b.String() + "\n"
}

// liveSection is the table of the live-change case; empty without runs.
func liveSection(runs []*bench.Result) string {
	if len(runs) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "## A live change over a backlog\n\n"+
		"Each operator starts over N Widgets; %s is created 3 s later, while it works them. "+
		"Time from its create request to its status phase, and how many Widgets had a phase by then.\n\n"+
		"| N | operator | time to status | Widgets with a status by then | target |\n|---:|---|---:|---:|---|\n", bench.LiveWidget)
	for _, r := range runs {
		tg := ""
		if r.Operator == ours {
			tg = fmt.Sprintf("≤ %.0f s %s", liveTarget, verdict(r.Live.Seconds() <= liveTarget))
			if t, ok := median(runs, theirs, r.N, func(r *bench.Result) float64 { return r.Live.Seconds() }); ok {
				tg += fmt.Sprintf("; ≤ %s's %s", theirs, verdict(r.Live.Seconds() <= t))
			}
		}
		fmt.Fprintf(&b, "| %d | %s | %.2f s | %d of %d | %s |\n", r.N, r.Operator, r.Live.Seconds(), r.LiveRank, r.N+1, tg)
	}
	return b.String() + "\n"
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "**missed**"
}

// chart draws three panels against N (log scale), one line per operator:
// peak RSS, CPU seconds and time to converge, the last with the floor.
func chart(rep *Report) string {
	const w, h, pw, ph, left, top = 1300, 380, 320, 260, 70, 50
	ns := countsOf(rep.Runs)
	colors := map[string]string{ours: "#1f77b4", theirs: "#d62728", tuned: "#ff7f0e", floor: "#7f7f7f"}
	all := []string{ours, theirs, tuned, floor}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15" text-anchor="middle">widget-operator vs controller-runtime (as written and tuned) and the raw-write floor, %s (medians)</text>`+"\n", w/2, esc(rep.Date))
	panels := []struct {
		title string
		value func(*bench.Result) float64
		ops   []string
	}{
		{"peak RSS (MiB)", peakRSS, all},
		{"CPU seconds to converge", cpu, all},
		{"seconds to converge", converge, all},
	}
	for pi, p := range panels {
		x0 := left + pi*(pw+left+60)
		y0 := top
		ymax := 0.0
		for _, op := range p.ops {
			for _, n := range ns {
				if v, ok := median(rep.Runs, op, n, p.value); ok {
					ymax = math.Max(ymax, v)
				}
			}
		}
		ymax = niceCeil(ymax)
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="13" text-anchor="middle">%s</text>`+"\n", x0+pw/2, y0-10, esc(p.title))
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#888"/>`+"\n", x0, y0, pw, ph)
		for i := 0; i <= 4; i++ {
			v := ymax * float64(i) / 4
			y := y0 + ph - int(float64(ph)*float64(i)/4)
			fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#eee"/>`, x0, y, x0+pw, y)
			fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", x0-6, y+4, trim(v))
		}
		xOf := func(n int) float64 {
			if len(ns) < 2 {
				return float64(x0 + pw/2)
			}
			lo, hi := math.Log10(float64(ns[0])), math.Log10(float64(ns[len(ns)-1]))
			return float64(x0+30) + (math.Log10(float64(n))-lo)/(hi-lo)*float64(pw-60)
		}
		yOf := func(v float64) float64 {
			if ymax == 0 {
				return float64(y0 + ph)
			}
			return float64(y0+ph) - v/ymax*float64(ph)
		}
		for _, n := range ns {
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%d</text>`+"\n", xOf(n), y0+ph+16, n)
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">Widgets (N)</text>`+"\n", x0+pw/2, y0+ph+34)
		for _, op := range p.ops {
			var pts []string
			for _, n := range ns {
				if v, ok := median(rep.Runs, op, n, p.value); ok {
					pts = append(pts, fmt.Sprintf("%.1f,%.1f", xOf(n), yOf(v)))
					fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"><title>%s N=%d: %s</title></circle>`+"\n",
						xOf(n), yOf(v), colors[op], op, n, trim(v))
				}
			}
			if len(pts) > 1 {
				fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(pts, " "), colors[op])
			}
		}
	}
	for i, op := range all {
		x := w/2 - 340 + i*170
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="14" height="4" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n", x, h-18, colors[op], x+20, h-13, op)
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func trim(v float64) string {
	s := fmt.Sprintf("%.2f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s
}

func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
