package manager

import (
	"context"
	"log/slog"
	"math"
	"net/http"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/testenv/logbuf"
)

func TestMemoryStateNext(t *testing.T) {
	near, stuck := memoryState{near: true}, memoryState{near: true, stuck: true}
	// A sample of live bytes against a limit of 100, after an interval in
	// which the process used 10 CPU seconds of the 20 GOMAXPROCS allowed,
	// and the GC took gc of them.
	sample := func(live, gc float64) memorySample {
		return memorySample{live: live, limit: 100, gcCPU: 5 + gc, used: 15, cpu: 30}
	}
	prev := memorySample{gcCPU: 5, used: 5, cpu: 10}
	for _, tc := range []struct {
		name     string
		st       memoryState
		cur      memorySample
		want     memoryState
		level    slog.Level
		msgStart string // "" when no line is due
	}{
		{"far from the limit", memoryState{}, sample(50, 9), memoryState{}, 0, ""},
		{"reaches 90%", memoryState{}, sample(90, 1), near, slog.LevelWarn, "memory: the live heap is near"},
		{"between the marks, near", near, sample(85, 1), near, 0, ""},
		{"between the marks, not near", memoryState{}, sample(85, 1), memoryState{}, 0, ""},
		{"under 80%", near, sample(79, 1), memoryState{}, slog.LevelInfo, "memory: the live heap is back under"},
		{"no limit", memoryState{}, memorySample{live: 1e12, limit: math.MaxInt64, gcCPU: 14, used: 15, cpu: 30}, memoryState{}, 0, ""},
		{"GC busy, not near", memoryState{}, sample(50, 9), memoryState{}, 0, ""},
		{"GC busy, near", near, sample(95, 5), stuck, slog.LevelWarn, "memory: near the soft memory limit, the garbage collector"},
		{"GC busy at once", memoryState{}, sample(95, 6), stuck, slog.LevelWarn, "memory: near the soft memory limit, the garbage collector"},
		{"GC between the marks, stuck", stuck, sample(95, 3), stuck, 0, ""},
		{"GC between the marks, not stuck", near, sample(95, 3), near, 0, ""},
		{"GC calm", stuck, sample(95, 2), near, slog.LevelInfo, "memory: the garbage collector no longer"},
		{"stuck, then under 80%", stuck, sample(70, 9), memoryState{}, slog.LevelInfo, "memory: the live heap is back under"},
		{"figures unmoved", stuck, memorySample{live: 95, limit: 100, gcCPU: 5, used: 5, cpu: 10}, near, slog.LevelInfo, "memory: the garbage collector no longer"},
		{"GC most of little CPU", near, memorySample{live: 95, limit: 100, gcCPU: 6.5, used: 7, cpu: 30}, near, 0, ""},
		{"GC most of little CPU, stuck", stuck, memorySample{live: 95, limit: 100, gcCPU: 5.9, used: 6, cpu: 30}, near, slog.LevelInfo, "memory: the garbage collector no longer"},
	} {
		got, level, msg := tc.st.next(prev, tc.cur)
		if got != tc.want || level != tc.level || !strings.HasPrefix(msg, tc.msgStart) || (msg == "") != (tc.msgStart == "") {
			t.Errorf("%s: %+v, %v %q; want %+v, %v %q...", tc.name, got, level, msg, tc.want, tc.level, tc.msgStart)
		}
	}
}

// The loop logs when the live heap reaches a tight soft limit, and when
// the limit is lifted.
func TestWatchMemory(t *testing.T) {
	var logs logbuf.Buffer
	m := &Manager{cfg: Config{MemoryInterval: time.Millisecond}, log: slog.New(slog.NewTextHandler(&logs, nil))}
	runtime.GC()
	live := readMemory().live
	// Under the live heap, which varies: near, whatever it does.
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(int64(live * 0.9)))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { m.watchMemory(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	// With the limit under the live heap, the GC may take most of the CPU
	// from the first interval, and the line of entry is then the one of a
	// stuck GC. Both warnings, and no other line, say "near the soft
	// memory limit".
	waitFor(t, "the line of the limit near", func() bool {
		return strings.Contains(logs.String(), "near the soft memory limit") && m.memoryState().near
	})
	debug.SetMemoryLimit(math.MaxInt64)
	runtime.GC()
	waitFor(t, "the line of the limit lifted", func() bool { return strings.Contains(logs.String(), "back under") && !m.memoryState().near })
	if n := strings.Count(logs.String(), "the live heap is near"); n > 1 {
		t.Errorf("%d lines for one episode:\n%s", n, logs.String())
	}
}

// /readyz fails its memory check while the GC is stuck, and
// <prefix>_memory_near_limit says whether the limit is near.
func TestMemoryReadyzAndMetric(t *testing.T) {
	client, err := k8sapi.New(&k8sapi.Config{Host: "https://apiserver.test"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Name: "test-operator", Client: client, ProbeAddr: freeAddr(t), MetricsAddr: freeAddr(t), InsecureMetrics: true}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	servers, err := m.serve(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer shutdownServers(servers)
	for _, tc := range []struct {
		st     memoryState
		code   int
		readyz string
		metric string
	}{
		{memoryState{}, http.StatusOK, "ok\n", "test_operator_memory_near_limit 0\n"},
		{memoryState{near: true}, http.StatusOK, "ok\n", "test_operator_memory_near_limit 1\n"},
		{memoryState{near: true, stuck: true}, http.StatusServiceUnavailable, "[-]memory failed: reason withheld\nreadyz check failed\n", "test_operator_memory_near_limit 1\n"},
	} {
		m.mu.Lock()
		m.memory = tc.st
		m.mu.Unlock()
		if code, body := get(t, "http://"+cfg.ProbeAddr+"/readyz"); code != tc.code || body != tc.readyz {
			t.Errorf("%+v: /readyz = %d %q, want %d %q", tc.st, code, body, tc.code, tc.readyz)
		}
		if _, body := get(t, "http://"+cfg.MetricsAddr+"/metrics"); !strings.Contains(body, tc.metric) {
			t.Errorf("%+v: /metrics has no %q", tc.st, tc.metric)
		}
	}
}

// waitFor checks cond every 10ms until it holds, or fails the test
// after 30s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			t.Fatalf("timed out after 30s waiting for %s", what)
		case <-tick.C:
		}
	}
}

// The marks are inclusive: a figure exactly on one counts, so that a state
// is entered at its mark and left only under the lower one.
func TestMemoryMarksExact(t *testing.T) {
	idle := memorySample{}
	at := func(live float64) memorySample { return memorySample{live: live, limit: 100, cpu: 10} }
	if st, _, _ := (memoryState{}).next(idle, at(90)); !st.near {
		t.Error("live at 90% of the limit: not near")
	}
	if st, _, _ := (memoryState{near: true}).next(idle, at(80)); !st.near {
		t.Error("near, then live at 80%: no longer near")
	}
	// The GC took exactly half of the CPU used and a tenth of all.
	busy := memorySample{live: 95, limit: 100, gcCPU: 1, used: 2, cpu: 10}
	if st, _, _ := (memoryState{}).next(idle, busy); !st.stuck {
		t.Errorf("GC at exactly the busy marks: %+v, want stuck", st)
	}
}

func TestGCShares(t *testing.T) {
	prev := memorySample{gcCPU: 1, used: 4, cpu: 5}
	if ofUsed, ofAll := gcShares(prev, memorySample{gcCPU: 2, used: 8, cpu: 10}); ofUsed != 0.25 || ofAll != 0.2 {
		t.Errorf("gcShares = %v, %v; want 0.25 of the CPU used, 0.2 of all", ofUsed, ofAll)
	}
	if ofUsed, ofAll := gcShares(prev, prev); ofUsed != 0 || ofAll != 0 {
		t.Errorf("gcShares of figures that did not move = %v, %v; want 0, 0", ofUsed, ofAll)
	}
}

func TestReadMemory(t *testing.T) {
	runtime.GC()
	s := readMemory()
	if s.live <= 0 || s.limit <= 0 || s.gcCPU < 0 || s.used <= 0 || s.used > s.cpu {
		t.Errorf("readMemory = %+v: want live, limit and used above 0, used at most cpu", s)
	}
}
