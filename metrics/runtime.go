package metrics

import (
	"bytes"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"
)

// NewRuntimeCollector returns a collector of the Go runtime's and the
// process's basic figures, read at every scrape:
//
//	go_goroutines                   goroutines that exist now
//	go_info{version}                1, labelled with the Go version
//	go_memstats_heap_alloc_bytes    bytes of allocated heap objects
//	go_gc_heap_live_bytes           bytes of heap objects live after the last GC
//	go_gc_gomemlimit_bytes          the soft memory limit (debug.SetMemoryLimit)
//	process_resident_memory_bytes   resident set size, from /proc/self/statm
//	process_virtual_memory_bytes    virtual memory size, from /proc/self/statm
//	process_cpu_seconds_total       user and system CPU time, from /proc/self/stat
//	process_open_fds                open file descriptors, from /proc/self/fd
//	process_start_time_seconds      start, seconds since the Unix epoch
//
// start is the process's start time as the caller knows it (time.Now()
// early in main is close enough). The process_* samples other than the
// start time are left out where /proc cannot be read.
func NewRuntimeCollector(start time.Time) Collector {
	info := NewGaugeVec("go_info", "Information about the Go environment.", "version")
	info.WithLabelValues(runtime.Version()).Set(1)
	return collectors{
		NewGaugeFunc("go_goroutines", "Number of goroutines that currently exist.", func() float64 {
			return float64(runtime.NumGoroutine())
		}),
		info,
		newFunc(typeGauge, "go_memstats_heap_alloc_bytes", "Number of heap bytes allocated and still in use.", runtimeBytes("/memory/classes/heap/objects:bytes").read),
		newFunc(typeGauge, "go_gc_heap_live_bytes", "Heap memory occupied by live objects that were marked by the previous GC.", runtimeBytes("/gc/heap/live:bytes").read),
		newFunc(typeGauge, "go_gc_gomemlimit_bytes", "Go runtime memory limit configured by the user, otherwise math.MaxInt64.", runtimeBytes("/gc/gomemlimit:bytes").read),
		newFunc(typeGauge, "process_resident_memory_bytes", "Resident memory size in bytes.", func() (float64, bool) { return statm(1) }),
		newFunc(typeGauge, "process_virtual_memory_bytes", "Virtual memory size in bytes.", func() (float64, bool) { return statm(0) }),
		newFunc(typeCounter, "process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", cpuSeconds),
		newFunc(typeGauge, "process_open_fds", "Number of open file descriptors.", openFDs),
		NewGaugeFunc("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", func() float64 { return float64(start.UnixNano()) / 1e9 }),
	}
}

// runtimeBytes names a runtime metric, a number of bytes; its read method
// reads it without stopping the world, one body for all the metrics.
// /memory/classes/heap/objects:bytes is the figure runtime.MemStats calls
// HeapAlloc.
type runtimeBytes string

func (name runtimeBytes) read() (float64, bool) {
	s := []metrics.Sample{{Name: string(name)}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0, false
	}
	return float64(s[0].Value.Uint64()), true
}

// procFields returns the fields of a /proc file, or nil if it cannot be
// read. Of /proc/self/stat it returns those after the command name, field
// 2, which is in parentheses and may hold spaces.
func procFields(name string) []string {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil
	}
	return strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
}

// number returns f[i] as a number, if there is one.
func number(f []string, i int) (float64, bool) {
	if i >= len(f) {
		return 0, false
	}
	n, err := strconv.ParseUint(f[i], 10, 64)
	return float64(n), err == nil
}

// statm returns field i of /proc/self/statm, in pages, as bytes.
func statm(i int) (float64, bool) {
	n, ok := number(procFields("/proc/self/statm"), i)
	return n * float64(os.Getpagesize()), ok
}

// userHZ is the unit of the CPU times in /proc/<pid>/stat: fixed at 100
// by the Linux ABI.
const userHZ = 100

func cpuSeconds() (float64, bool) { return statCPU(procFields("/proc/self/stat")) }

// statCPU returns utime + stime of the fields of a /proc/<pid>/stat after
// the command name: fields 14 and 15, the 12th and 13th of f.
func statCPU(f []string) (float64, bool) {
	u, uok := number(f, 11)
	s, sok := number(f, 12)
	return (u + s) / userHZ, uok && sok
}

func openFDs() (float64, bool) {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0, false
	}
	return float64(len(fds) - 1), true // less the one opened to read it
}
