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
		{"blank-lines-8MiB", []byte(strings.Repeat(" \n", 4<<20))},
		{"comments-8MiB", []byte(strings.Repeat("#\n", 4<<20))},
		{"literal-of-newlines-8MiB", []byte("a: |\n" + strings.Repeat("\n", 8<<20) + "  x\n")},
		{"quoted-of-newlines-8MiB", []byte("a: \"" + strings.Repeat("\n", 8<<20) + " x\"\n")},
		{"quoted-text-8MiB", []byte("a: \"" + strings.Repeat("x", 8<<20) + "\"\n")},
		{"plain-continued-8MiB", []byte("a: x\n" + strings.Repeat(" x\n", 8<<20/3))},
		{"flow-list-of-lines-8MiB", []byte("[\n" + strings.Repeat("1,\n", 8<<20/3) + "]\n")},
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
				// An error is the MaxValues limit, tested elsewhere.
				Parse(c.doc)
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
	// Text that is only lines costs at most five times its size: a copy,
	// and the value it makes in a buffer that doubles as it grows.
	for _, c := range worstCases() {
		if strings.HasPrefix(c.name, "flow-") {
			continue
		}
		if got := allocated(t, c.doc); got > 5*uint64(len(c.doc)) {
			t.Errorf("%s: %d bytes allocated, want at most %d", c.name, got, 5*len(c.doc))
		}
	}
	// A quoted value of ordinary characters is added a run at a time, not
	// a byte at a time into a buffer that doubles: a copy and the value.
	quoted := []byte("a: \"" + strings.Repeat("x", 8<<20) + "\"\n")
	if got := allocated(t, quoted); got > 3*uint64(len(quoted)) {
		t.Errorf("quoted text: %d bytes allocated, want at most %d", got, 3*len(quoted))
	}
	// A tree holds at most MaxValues entries and items, whatever the
	// text: 8 MiB of list items is refused at the limit.
	list := worstCases()[len(worstCases())-1]
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := Parse(list.doc)
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "more than 262144") {
		t.Errorf("%s: error %v, want the MaxValues limit", list.name, err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 64<<20 {
		t.Errorf("%s: %d bytes allocated, want at most 64 MiB", list.name, got)
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
