package yaml

import (
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// worstCases are inputs that once cost time or memory out of proportion
// to their size.
func worstCases() []struct {
	name string
	doc  []byte
} {
	var flowKeys strings.Builder
	flowKeys.WriteString("a: {")
	for i := range 80_000 {
		flowKeys.WriteString("k" + strconv.Itoa(i) + ": v, ")
	}
	flowKeys.WriteString("}\n")
	return []struct {
		name string
		doc  []byte
	}{
		{"newlines-8MiB", []byte(strings.Repeat("\n", 8<<20))},
		{"flow-keys-80k", []byte(flowKeys.String())},
	}
}

// BenchmarkWorstCases reports the time and memory Parse spends on its
// worst inputs; -benchmem gives the bytes per run, B/op.
func BenchmarkWorstCases(b *testing.B) {
	for _, c := range worstCases() {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.doc)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Parse(c.doc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// allocated returns the bytes Parse allocates for doc.
func allocated(t *testing.T, doc []byte) uint64 {
	t.Helper()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := Parse(doc); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestWorstCaseMemory bounds the memory Parse allocates: blank lines cost
// no more than a copy of the text, and a flow map's cost grows in
// proportion to its keys. (The time of the same inputs is the benchmark's.)
func TestWorstCaseMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates tens of megabytes")
	}
	newlines := []byte(strings.Repeat("\n", 8<<20))
	if got := allocated(t, newlines); got > 2*uint64(len(newlines)) {
		t.Errorf("8 MiB of newlines: %d bytes allocated, want at most %d", got, 2*len(newlines))
	}
	flowMap := func(n int) []byte {
		var b strings.Builder
		b.WriteString("{")
		for i := range n {
			b.WriteString("k" + strconv.Itoa(i) + ": v, ")
		}
		b.WriteString("}")
		return []byte(b.String())
	}
	small, large := allocated(t, flowMap(20_000)), allocated(t, flowMap(80_000))
	if large > 5*small {
		t.Errorf("a flow map of 80k keys allocates %d bytes, 20k keys %d: more than linear", large, small)
	}
}
