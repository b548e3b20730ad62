package main

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
)

// Relist is the memory of the operator's caches loading N Widgets with
// their children by one mode, in bytes per Widget: medians over the
// loads of BenchmarkCacheHeap.
type Relist struct {
	N                       int
	Mode                    string // "stream" or "list"
	Peak, Goal, Alloc, Live float64
}

// relistLoads is how many times BenchmarkCacheHeap loads each case.
const relistLoads = 5

// relistMemory runs BenchmarkCacheHeap in the repository at root and
// returns its figures.
func relistMemory(root string) ([]Relist, error) {
	cmd := exec.Command("go", "test", "-run=^$", "-bench=^BenchmarkCacheHeap$", "-benchtime=1x",
		"-count="+strconv.Itoa(relistLoads), "./internal/operator")
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("BenchmarkCacheHeap: %w\n%s", err, out)
	}
	rows := parseCacheHeap(string(out))
	if len(rows) == 0 {
		return nil, fmt.Errorf("BenchmarkCacheHeap printed no figures:\n%s", out)
	}
	return rows, nil
}

// parseCacheHeap reads the lines of BenchmarkCacheHeap/N=<n>/<mode> in
// the output of go test and returns one Relist per case, in the order
// first seen, with the median of each unit.
func parseCacheHeap(out string) []Relist {
	type key struct {
		n    int
		mode string
	}
	var order []key
	figures := map[key]map[string][]float64{}
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		name, ok := strings.CutPrefix(f[0], "BenchmarkCacheHeap/N=")
		if !ok {
			continue
		}
		name, _, _ = strings.Cut(name, "-") // the GOMAXPROCS suffix
		ns, mode, ok := strings.Cut(name, "/")
		n, err := strconv.Atoi(ns)
		if !ok || err != nil {
			continue
		}
		k := key{n, mode}
		if figures[k] == nil {
			figures[k] = map[string][]float64{}
			order = append(order, k)
		}
		for i := 2; i+1 < len(f); i += 2 { // value unit pairs after the iterations
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				figures[k][f[i+1]] = append(figures[k][f[i+1]], v)
			}
		}
	}
	rows := make([]Relist, 0, len(order))
	for _, k := range order {
		m := figures[k]
		rows = append(rows, Relist{N: k.n, Mode: k.mode, Peak: mid(m["peakB/widget"]), Goal: mid(m["goalB/widget"]),
			Alloc: mid(m["allocB/widget"]), Live: mid(m["liveB/widget"])})
	}
	return rows
}

// mid is the median of vs, 0 when there are none.
func mid(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	vs = slices.Sorted(slices.Values(vs))
	if len(vs)%2 == 1 {
		return vs[len(vs)/2]
	}
	return (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
}
