package manager

import (
	"context"
	"errors"
	"log/slog"
	rtmetrics "runtime/metrics"
	"time"
)

// defaultMemoryInterval is the default of Config.MemoryInterval.
const defaultMemoryInterval = 10 * time.Second

// The marks of the memory check: shares of the soft memory limit, which
// the live heap reaches (nearLimit) and goes back under (farLimit), and
// shares of the CPU that the process used, which the garbage collector
// takes over an interval while the limit is near (gcBusy) and goes back
// under (gcCalm); with a fifth of each mark as the least share of the
// CPU time GOMAXPROCS allows, so that a process near the limit but idle,
// whose few GCs are most of its little CPU, is not stuck. A state is
// left under a lower mark than the one it is entered at, so that a figure
// on a mark does not log every interval.
const (
	nearLimit, farLimit = 0.9, 0.8
	gcBusy, gcCalm      = 0.5, 0.25
)

// errGCBusy is the reason of the memory check of /readyz while it fails.
var errGCBusy = errors.New("memory: near the soft memory limit, the garbage collector takes most of the CPU")

// memorySample is one reading of the runtime's figures.
type memorySample struct {
	live, limit float64 // bytes: the live heap with the runtime's own memory (see readMemory), the soft memory limit
	// CPU seconds since the start: of the GC, used (not idle), and all that
	// GOMAXPROCS allows.
	gcCPU, used, cpu float64
}

// memoryState is what the memory check knows, from one sample to the
// next. stuck implies near.
type memoryState struct {
	near  bool // the live heap reached nearLimit of the limit, and has not gone under farLimit
	stuck bool // near, the GC took gcBusy of the CPU in an interval, and not under gcCalm since
}

// next returns the state that follows st when the sample cur comes after
// prev and, when the state changed, the line to log, with its level (msg
// is "" when it did not).
func (st memoryState) next(prev, cur memorySample) (next memoryState, level slog.Level, msg string) {
	ofUsed, ofAll := gcShares(prev, cur)
	busy := func(mark float64) bool { return ofUsed >= mark && ofAll >= mark/5 }
	next.near = cur.live >= nearLimit*cur.limit || st.near && cur.live >= farLimit*cur.limit
	next.stuck = next.near && (busy(gcBusy) || st.stuck && busy(gcCalm))
	switch {
	case next == st:
		return next, 0, ""
	case next.stuck && !st.stuck:
		return next, slog.LevelWarn, errGCBusy.Error() + "; /readyz fails"
	case next.near && !st.near:
		return next, slog.LevelWarn, "memory: the live heap is near the soft memory limit"
	case next.near:
		return next, slog.LevelInfo, "memory: the garbage collector no longer takes most of the CPU; /readyz passes"
	}
	return next, slog.LevelInfo, "memory: the live heap is back under the soft memory limit"
}

// gcShares returns the GC's shares of the CPU used and of the CPU time
// GOMAXPROCS allows between two samples: 0 when the runtime's figures did
// not move (they move at each GC).
func gcShares(prev, cur memorySample) (ofUsed, ofAll float64) {
	gc := cur.gcCPU - prev.gcCPU
	if d := cur.cpu - prev.cpu; d > 0 {
		ofUsed, ofAll = gc/max(cur.used-prev.used, gc), gc/d
	}
	return ofUsed, ofAll
}

// readMemory reads a sample of the runtime's figures, which every
// runtime of go.mod's version serves. The soft limit bounds all the
// memory the runtime holds, so the live heap is counted with what the
// runtime holds beside the heap's objects and room (its stacks and
// metadata): the total less the heap's released, free, unused and
// object bytes. The GC's CPU includes the scavenger's, which returns
// memory to the system, the more so near the limit.
func readMemory() memorySample {
	s := []rtmetrics.Sample{{Name: "/gc/gomemlimit:bytes"}, {Name: "/cpu/classes/gc/total:cpu-seconds"},
		{Name: "/cpu/classes/total:cpu-seconds"}, {Name: "/cpu/classes/idle:cpu-seconds"},
		{Name: "/cpu/classes/scavenge/total:cpu-seconds"}, {Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"}, {Name: "/memory/classes/heap/free:bytes"},
		{Name: "/memory/classes/heap/unused:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
	rtmetrics.Read(s)
	live := float64(s[5].Value.Uint64() + s[6].Value.Uint64())
	for _, heap := range s[7:] {
		live -= float64(heap.Value.Uint64())
	}
	cpu := s[2].Value.Float64()
	return memorySample{limit: float64(s[0].Value.Uint64()), gcCPU: s[1].Value.Float64() + s[4].Value.Float64(), used: cpu - s[3].Value.Float64(), cpu: cpu, live: live}
}

// watchMemory samples the runtime's figures every Config.MemoryInterval
// until ctx ends, and keeps and logs the state that follows.
func (m *Manager) watchMemory(ctx context.Context) {
	if m.cfg.MemoryInterval < 0 {
		return
	}
	t := time.NewTicker(m.cfg.MemoryInterval)
	defer t.Stop()
	prev := readMemory()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cur := readMemory()
		m.mu.Lock()
		st, level, msg := m.memory.next(prev, cur)
		m.memory = st
		m.mu.Unlock()
		if msg != "" {
			ofUsed, ofAll := gcShares(prev, cur)
			m.log.Log(ctx, level, msg, "live_bytes", cur.live, "limit_bytes", cur.limit, "gc_cpu_share", ofUsed, "gc_gomaxprocs_share", ofAll)
		}
		prev = cur
	}
}

// memoryState returns the state of the memory check.
func (m *Manager) memoryState() memoryState {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.memory
}
