// Command compare measures widget-operator against the controller-runtime
// reference operator (bench/controller-runtime) and writes the report:
//
//	go run ./bench/cmd/compare                 # what make bench runs
//	go run ./bench/cmd/compare -n 100 -runs 1  # a quick look
//	go run ./bench/cmd/compare -from bench/results/2026-01-02.json  # redraw
//
// It runs the unit benchmarks of ./k8sapi, ./watch and ./queue (output
// saved for benchstat), builds both operators stripped (-s -w, -trimpath)
// to compare sizes and linked modules, and the raw-write floor
// (bench/cmd/floor), then runs the scale scenario of package bench for
// every N and run, each column once per run, in alternating order, each
// on a fresh bare control plane. The columns are ours, the reference as
// written, the reference tuned (managedFields stripped from its cache)
// and the floor. It writes <date>.md (the tables), <date>.svg (peak RSS,
// CPU and time against N), <date>.json (every run, to redraw from) and
// <date>-unit.txt under -out. The live-change case (-live) starts ours
// and the reference over N Widgets and creates one more 3 s later, timed
// to its status; the 64 Mi case (-memlimit) runs ours under a 64 Mi
// container limit.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/zerodep-k8s/widget-operator/bench"
)

// Report is everything one comparison measured.
type Report struct {
	Date    string
	Machine string
	Sizes   []Size
	Runs    []*bench.Result
	// Sharded are the runs of the sharded case, kept apart from Runs.
	Sharded []*bench.Result `json:",omitempty"`
	// Live are the runs of the live-change case (bench.Config.LiveAfter).
	Live []*bench.Result `json:",omitempty"`
	// MemLimit are the runs of ours under a 64 Mi memory limit.
	MemLimit []*bench.Result `json:",omitempty"`
	// Relist is the relist memory by mode, from BenchmarkCacheHeap.
	Relist []Relist `json:",omitempty"`
	Errors []string `json:",omitempty"`
	Idle   time.Duration
}

// Size is one operator binary.
type Size = bench.Size

func main() {
	ns := flag.String("n", "1000,5000,10000", "comma-separated Widget counts")
	runs := flag.Int("runs", 3, "runs per N and operator")
	idle := flag.Duration("idle", 60*time.Second, "idle CPU window")
	out := flag.String("out", filepath.Join(bench.RepoRoot(), "bench", "results"), "output folder")
	unit := flag.Bool("unit", true, "run the unit benchmarks, and BenchmarkCacheHeap for the relist memory by mode")
	cr := flag.Bool("cr", true, "compare with the controller-runtime reference, as written and tuned")
	tuned := flag.Bool("tuned", true, "with -cr, measure the reference tuned too (managedFields stripped from its cache)")
	withFloor := flag.Bool("floor", true, "measure the raw-write floor")
	sharded := flag.Int("sharded", 5000, "N of the sharded case (ours with --shards=6, 1 and 3 replicas, the API server serving shard selectors); 0 skips it")
	live := flag.String("live", "1000,5000,10000", "comma-separated N of the live-change case (one more Widget 3 s after the start, timed to its status); empty skips it")
	memlimit := flag.Int("memlimit", 10000, "N of the 64 Mi case (ours once, its soft memory limit set from a 64 Mi container limit); 0 skips it")
	from := flag.String("from", "", "redraw the report from this JSON file instead of measuring")
	profile := flag.String("profile", "", "instead of comparing, run this bench/cmd/opprof binary once per N and write CPU profiles to -out")
	flag.Parse()
	if *profile != "" {
		if err := profileRuns(*ns, *profile, *out); err != nil {
			fmt.Fprintln(os.Stderr, "compare:", err)
			os.Exit(1)
		}
		return
	}
	cfg := config{ns: *ns, runs: *runs, idle: *idle, out: *out, unit: *unit, cr: *cr, tuned: *cr && *tuned, floor: *withFloor,
		sharded: *sharded, live: *live, memlimit: *memlimit, from: *from}
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

// config is what the flags ask for.
type config struct {
	ns                     string // -n
	runs                   int
	idle                   time.Duration
	out                    string
	unit, cr, tuned, floor bool
	sharded, memlimit      int
	live, from             string
}

func run(cfg config) error {
	if cfg.from != "" {
		data, err := os.ReadFile(cfg.from)
		if err != nil {
			return err
		}
		var rep Report
		if err := json.Unmarshal(data, &rep); err != nil {
			return fmt.Errorf("%s: %w", cfg.from, err)
		}
		numberRuns(rep.Runs)
		return write(&rep, cfg.out)
	}
	ns, err := counts("-n", cfg.ns)
	if err != nil {
		return err
	}
	liveNs, err := counts("-live", cfg.live)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return err
	}
	rep := &Report{Date: time.Now().UTC().Format("2006-01-02"), Machine: machine(), Idle: cfg.idle}
	root := bench.RepoRoot()
	ctx := context.Background()

	if cfg.unit {
		path := filepath.Join(cfg.out, rep.Date+"-unit.txt")
		logf("unit benchmarks -> %s", path)
		cmd := exec.Command("go", "test", "-run=^$", "-bench", ".", "-benchmem", "./k8sapi", "./watch", "./queue")
		cmd.Dir = root
		cmd.Stderr = os.Stderr
		data, err := cmd.Output()
		if err != nil {
			return fmt.Errorf("unit benchmarks: %w\n%s", err, data)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return err
		}
		logf("relist memory by mode (BenchmarkCacheHeap)")
		if rep.Relist, err = relistMemory(root); err != nil {
			return err
		}
	}

	binDir, err := os.MkdirTemp("", "widget-compare-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(binDir)
	ours := bench.Ours(filepath.Join(binDir, "widget-operator"))
	logf("building %s", ours.Name)
	if err := bench.Build(root, bench.Target{Dir: ".", Package: "./cmd/widget-operator"}, ours.Binary); err != nil {
		return err
	}
	ops := []bench.Operator{ours}
	if cfg.cr {
		ref := bench.Reference(filepath.Join(binDir, "controller-runtime"))
		logf("building %s (its own module; slow when cold)", ref.Name)
		if err := bench.Build(root, bench.Target{Dir: "bench/controller-runtime", Package: "."}, ref.Binary); err != nil {
			return err
		}
		ops = append(ops, ref)
	}
	for _, op := range ops {
		s, err := bench.MeasureSize(op)
		if err != nil {
			return err
		}
		rep.Sizes = append(rep.Sizes, s)
	}
	if cfg.tuned {
		ops = append(ops, bench.Tuned(ops[1].Binary)) // the reference's binary, flagged
	}

	if cfg.floor {
		fl := bench.Floor(filepath.Join(binDir, "floor"))
		if err := bench.Build(root, bench.FloorCmd, fl.Binary); err != nil {
			return err
		}
		ops = append(ops, fl)
	}
	for _, n := range ns {
		for i := range cfg.runs {
			// Each run starts with another operator: the first goes
			// first in run 1, the second in run 2, and so on.
			order := append(slices.Clone(ops[i%len(ops):]), ops[:i%len(ops)]...)
			for _, op := range order {
				logf("N=%d run %d/%d: %s", n, i+1, cfg.runs, op.Name)
				res, err := bench.Run(ctx, bench.Config{N: n, Operator: op, Idle: cfg.idle, Restart: true, Log: os.Stderr})
				if err != nil {
					msg := fmt.Sprintf("N=%d run %d %s: %v", n, i+1, op.Name, err)
					logf("FAILED %s", msg)
					rep.Errors = append(rep.Errors, msg)
					continue
				}
				res.Run = i + 1
				rep.Runs = append(rep.Runs, res)
				// Save as we go: a long comparison that fails late keeps
				// what it measured.
				if err := write(rep, cfg.out); err != nil {
					return err
				}
			}
		}
	}
	if err := runLive(rep, cfg.out, liveNs, ops); err != nil {
		return err
	}
	if cfg.memlimit > 0 {
		if err := runMemLimit(rep, cfg.out, cfg.memlimit, ours); err != nil {
			return err
		}
	}
	if cfg.sharded > 0 {
		for _, replicas := range []int{1, 3} {
			op := ours
			op.Name = fmt.Sprintf("%s --shards=6 ×%d", ours.Name, replicas)
			op.Args = []string{"--shards=6", "--leader-election-namespace", op.Namespace}
			logf("sharded N=%d: %s", cfg.sharded, op.Name)
			res, err := bench.Run(ctx, bench.Config{N: cfg.sharded, Operator: op, Replicas: replicas,
				APIServerArgs: []string{bench.ShardGate}, Log: os.Stderr})
			if err != nil {
				msg := fmt.Sprintf("sharded N=%d %s: %v", cfg.sharded, op.Name, err)
				logf("FAILED %s", msg)
				rep.Errors = append(rep.Errors, msg)
				continue
			}
			rep.Sharded = append(rep.Sharded, res)
			if err := write(rep, cfg.out); err != nil {
				return err
			}
		}
	}
	return write(rep, cfg.out)
}

// counts parses the comma-separated Widget counts of flag; empty means
// none.
func counts(flag, list string) ([]int, error) {
	var ns []int
	for f := range strings.SplitSeq(list, ",") {
		if list == "" {
			break
		}
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%s: bad count %q", flag, f)
		}
		ns = append(ns, n)
	}
	return ns, nil
}

// runLive runs the live-change case at each N, once per operator of ops
// (the floor aside), and adds the results to rep.
func runLive(rep *Report, out string, ns []int, ops []bench.Operator) error {
	for _, n := range ns {
		for _, op := range ops {
			if op.Name == bench.FloorName || op.Name == bench.TunedName {
				continue // the floor knows its Widgets; tuning does not change the queue
			}
			logf("live change over N=%d: %s", n, op.Name)
			res, err := bench.Run(context.Background(), bench.Config{N: n, Operator: op, LiveAfter: 3 * time.Second, Log: os.Stderr})
			if err != nil {
				msg := fmt.Sprintf("live change over N=%d %s: %v", n, op.Name, err)
				logf("FAILED %s", msg)
				rep.Errors = append(rep.Errors, msg)
				continue
			}
			rep.Live = append(rep.Live, res)
			if err := write(rep, out); err != nil {
				return err
			}
		}
	}
	return nil
}

// PodMemoryLimit is the container memory limit of the 64 Mi case, which
// the operator reads as manifests/operator.yaml hands it the pod's.
const PodMemoryLimit = 64 << 20

// runMemLimit runs ours once at n with PodMemoryLimit, its /metrics and
// /readyz scraped every 2 s, and adds the result to rep.
func runMemLimit(rep *Report, out string, n int, ours bench.Operator) error {
	op := ours
	op.Env = []string{fmt.Sprintf("CONTAINER_MEMORY_LIMIT=%d", PodMemoryLimit)}
	logf("N=%d under a %d MiB memory limit: %s", n, PodMemoryLimit>>20, op.Name)
	res, err := bench.Run(context.Background(), bench.Config{N: n, Operator: op, Scrape: 2 * time.Second, Log: os.Stderr})
	if err != nil {
		msg := fmt.Sprintf("N=%d under %d MiB %s: %v", n, PodMemoryLimit>>20, op.Name, err)
		logf("FAILED %s", msg)
		rep.Errors = append(rep.Errors, msg)
		return nil
	}
	rep.MemLimit = append(rep.MemLimit, res)
	return write(rep, out)
}

// profileRuns runs the scenario with the profiling build of the operator,
// once per N, and leaves a CPU profile of each run in out.
func profileRuns(nlist, bin, out string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	ns, err := counts("-n", nlist)
	if err != nil {
		return err
	}
	for _, n := range ns {
		op := bench.Ours(bin)
		path, err := filepath.Abs(filepath.Join(out, fmt.Sprintf("cpu-N%d.pprof", n)))
		if err != nil {
			return err
		}
		op.Args = []string{"--cpuprofile", path}
		res, err := bench.Run(context.Background(), bench.Config{N: n, Operator: op, Log: os.Stderr})
		if err != nil {
			return err
		}
		logf("N=%d: converged %v, cpu %v; profile %s", n, res.Converge, res.CPU, path)
	}
	return nil
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "compare: "+format+"\n", args...)
}

// machine describes the host in one line.
func machine() string {
	model := "unknown CPU"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := ""
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		if _, v, ok := strings.Cut(strings.SplitN(string(data), "\n", 2)[0], ":"); ok {
			fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(v), " kB"), &kb)
			mem = fmt.Sprintf(", %.1f GiB RAM", float64(kb)/(1<<20))
		}
	}
	kernel := ""
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = ", Linux " + strings.TrimSpace(string(data))
	}
	return fmt.Sprintf("%s, %d cores%s%s, %s/%s, %s", model, runtime.NumCPU(), mem, kernel, runtime.GOOS, runtime.GOARCH, runtime.Version())
}
