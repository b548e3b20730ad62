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
	floor  = bench.FloorName
)

// targetSizes are the Ns at which the targets apply.
var targetSizes = []int{1000, 5000, 10000}

// Targets on the RSS slope, the idle CPU and the time against the floor.
const (
	slopeTarget = 4.0  // KiB of peak RSS per Widget, ours
	idleTarget  = 0.01 // seconds of CPU over the idle window: one tick
	floorTarget = 1.1  // time to converge, ours/floor
	liveTarget  = 1.0  // seconds from a live Widget's create to its status, ours
)

// metric is one row of the tables.
type metric struct {
	name   string
	value  func(*bench.Result) float64
	format func(float64) string
	target float64 // the most ours/theirs may be at targetSizes; 0 for none
	floor  bool    // the floor measures it too
}

func seconds(v float64) string { return fmt.Sprintf("%.2f s", v) }
func mib(v float64) string     { return fmt.Sprintf("%.1f MiB", v) }
func count(v float64) string   { return fmt.Sprintf("%.0f", v) }

var metrics = []metric{
	{"time to converge", func(r *bench.Result) float64 { return r.Converge.Seconds() }, seconds, 0.5, true},
	{"CPU to converge", func(r *bench.Result) float64 { return r.CPU.Seconds() }, seconds, 0.35, false},
	{"peak RSS (VmHWM)", func(r *bench.Result) float64 { return float64(r.PeakRSS) / (1 << 20) }, mib, 0.3, false},
	{"steady RSS (VmRSS)", func(r *bench.Result) float64 { return float64(r.SteadyRSS) / (1 << 20) }, mib, 0, false},
	{"idle CPU", func(r *bench.Result) float64 { return r.IdleCPU.Seconds() }, seconds, 0, false},
	{"time to /readyz, 0 Widgets", func(r *bench.Result) float64 { return r.Ready.Seconds() }, seconds, 0, false},
	{"API requests", func(r *bench.Result) float64 { return float64(r.Requests.Total) }, count, 0, true},
	{"  writes", func(r *bench.Result) float64 { return float64(r.Requests.Writes) }, count, 0, true},
	{"  lists + watches", func(r *bench.Result) float64 { return float64(r.Requests.Lists + r.Requests.Watches) }, count, 0, true},
	{"  other (gets, discovery)", func(r *bench.Result) float64 { return float64(r.Requests.Other) }, count, 0, true},
	{"restart: time to /readyz", func(r *bench.Result) float64 { return r.RestartReady.Seconds() }, seconds, 0.5, false},
	{"restart: writes", func(r *bench.Result) float64 { return float64(r.RestartRequests.Writes) }, count, 0, false},
	{"restart: peak RSS (VmHWM)", func(r *bench.Result) float64 { return float64(r.RestartRSS) / (1 << 20) }, mib, 0, false},
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
	slices.Sort(vs)
	if len(vs)%2 == 1 {
		return vs[len(vs)/2], true
	}
	return (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2, true
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
		"CPU is utime+stime from /proc; RSS from /proc/<pid>/status; requests from the audit log, by the operator's own ServiceAccount, " +
		"from its start to the end of the idle window. Operators alternate within each run. Figures are medians; the ratio is ours/theirs.\n\n")
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
		runsOf := func(op string) int {
			k := 0
			for _, r := range rep.Runs {
				if r.N == n && r.Operator == op {
					k++
				}
			}
			return k
		}
		fmt.Fprintf(&b, "## N = %d (runs: %d ours, %d theirs, %d floor)\n\n", n, runsOf(ours), runsOf(theirs), runsOf(floor))
		b.WriteString("| metric | widget-operator | controller-runtime | raw-write floor | ours/theirs | ours/floor | target |\n|---|---:|---:|---:|---:|---:|---|\n")
		targeted := slices.Contains(targetSizes, n)
		for _, m := range metrics {
			o, okO := median(rep.Runs, ours, n, m.value)
			t, okT := median(rep.Runs, theirs, n, m.value)
			f, okF := median(rep.Runs, floor, n, m.value)
			okF = okF && m.floor
			cell := func(v float64, ok bool) string {
				if !ok {
					return "–"
				}
				return m.format(v)
			}
			rt, rf, tg := "–", "–", ""
			if okO && okT {
				rt = ratio(o, t)
			}
			if okO && okF {
				rf = ratio(o, f)
			}
			var goals []string
			if m.target > 0 {
				g := fmt.Sprintf("≤ %.2f× theirs", m.target)
				if targeted && okO && okT && t > 0 {
					g += " " + verdict(o/t <= m.target)
				}
				goals = append(goals, g)
			}
			switch m.name {
			case "time to converge":
				g := fmt.Sprintf("≤ %.1f× floor", floorTarget)
				if targeted && okO && okF && f > 0 {
					g += " " + verdict(o/f <= floorTarget)
				}
				goals = append(goals, g)
			case "idle CPU":
				g := fmt.Sprintf("≤ %.2f s (ours)", idleTarget)
				if okO {
					g += " " + verdict(o <= idleTarget)
				}
				goals = append(goals, g)
			case "  writes":
				g := fmt.Sprintf("= %d (ours)", 3*n)
				if okO {
					g += " " + verdict(o == float64(3*n))
				}
				goals = append(goals, g)
			case "restart: writes":
				g := "0 (ours)"
				if okO {
					g += " " + verdict(o == 0)
				}
				goals = append(goals, g)
			}
			tg = strings.Join(goals, "; ")
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", strings.TrimSpace(m.name), cell(o, okO), cell(t, okT), cell(f, okF), rt, rf, tg)
		}
		b.WriteString("\n")
	}
	if ns := countsOf(rep.Runs); len(ns) > 1 {
		fmt.Fprintf(&b, "## Peak RSS per Widget, N = %d to %d\n\n| operator | KiB per Widget | target |\n|---|---:|---|\n", ns[0], ns[len(ns)-1])
		for _, op := range []string{ours, theirs} {
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
		b.WriteString("## Every run\n\n| N | operator | converge | CPU | peak RSS | steady RSS | idle CPU | ready | requests | restart: ready, requests |\n|---:|---|---:|---:|---:|---:|---:|---:|---|---|\n")
		for _, r := range rep.Runs {
			fmt.Fprintf(&b, "| %d | %s | %.2f s | %.2f s | %.1f MiB | %.1f MiB | %.2f s | %.3f s | %d: %s | %.3f s, %d: %s |\n",
				r.N, r.Operator, r.Converge.Seconds(), r.CPU.Seconds(), float64(r.PeakRSS)/(1<<20),
				float64(r.SteadyRSS)/(1<<20), r.IdleCPU.Seconds(), r.Ready.Seconds(), r.Requests.Total, r.Requests,
				r.RestartReady.Seconds(), r.RestartRequests.Total, r.RestartRequests)
		}
		b.WriteString("\n")
	}
	if len(rep.Sharded) > 0 {
		b.WriteString("## Sharded (ours, --shards=6)\n\n" +
			"The same scenario with 1 and 3 replicas sharing six shards. CPU is the replicas' sum; peak RSS per replica. " +
			"All replicas share these 2 cores with the API server and etcd, which are the bottleneck here: more replicas " +
			"spread the operator's work, they cannot make the API server faster.\n\n" +
			"| N | replicas | converge | CPU (sum) | CPU per replica | peak RSS per replica | writes |\n|---:|---:|---:|---:|---|---|---:|\n")
		for _, r := range rep.Sharded {
			var cpus, rss []string
			for _, p := range r.PerReplica {
				cpus = append(cpus, fmt.Sprintf("%.2f s", p.CPU.Seconds()))
				rss = append(rss, fmt.Sprintf("%.1f MiB", float64(p.PeakRSS)/(1<<20)))
			}
			if len(r.PerReplica) == 0 {
				cpus, rss = []string{fmt.Sprintf("%.2f s", r.CPU.Seconds())}, []string{fmt.Sprintf("%.1f MiB", float64(r.PeakRSS)/(1<<20))}
			}
			fmt.Fprintf(&b, "| %d | %d | %.2f s | %.2f s | %s | %s | %d |\n", r.N, max(len(r.PerReplica), 1),
				r.Converge.Seconds(), r.CPU.Seconds(), strings.Join(cpus, ", "), strings.Join(rss, ", "), r.Requests.Writes)
		}
		b.WriteString("\n")
	}
	b.WriteString(liveSection(rep.Live))
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
	colors := map[string]string{ours: "#1f77b4", theirs: "#d62728", floor: "#7f7f7f"}
	both, all := []string{ours, theirs}, []string{ours, theirs, floor}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15" text-anchor="middle">widget-operator vs controller-runtime and the raw-write floor, %s (medians)</text>`+"\n", w/2, esc(rep.Date))
	panels := []struct {
		title string
		value func(*bench.Result) float64
		ops   []string
	}{
		{"peak RSS (MiB)", peakRSS, both},
		{"CPU seconds to converge", func(r *bench.Result) float64 { return r.CPU.Seconds() }, both},
		{"seconds to converge", func(r *bench.Result) float64 { return r.Converge.Seconds() }, all},
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
		x := w/2 - 250 + i*170
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
