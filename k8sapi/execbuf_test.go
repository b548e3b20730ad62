package k8sapi

import (
	"strings"
	"testing"
)

// A plugin's stdout is kept up to its limit: output that fills it exactly
// is whole; one byte more is an overflow, reported once, and what does not
// fit is dropped while every write still succeeds.
func TestBoundedBuffer(t *testing.T) {
	calls := 0
	w := &boundedBuffer{max: 4, overflow: func() { calls++ }}
	for _, p := range []string{"ab", "cd"} {
		if n, err := w.Write([]byte(p)); n != len(p) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", p, n, err)
		}
	}
	if string(w.b) != "abcd" || w.over || calls != 0 {
		t.Fatalf("at the limit: %q, over=%v, %d overflow calls", w.b, w.over, calls)
	}
	for _, p := range []string{"e", "fgh"} {
		if n, err := w.Write([]byte(p)); n != len(p) || err != nil {
			t.Fatalf("Write(%q) past the limit = %d, %v", p, n, err)
		}
		if string(w.b) != "abcd" || !w.over || calls != 1 {
			t.Fatalf("after Write(%q) past the limit: %q, over=%v, %d overflow calls, want 1", p, w.b, w.over, calls)
		}
	}

	w = &boundedBuffer{max: 4}
	w.Write([]byte("abc"))
	w.Write([]byte("de"))
	if string(w.b) != "abcd" || !w.over {
		t.Fatalf("a write across the limit: %q, over=%v; want what fits kept", w.b, w.over)
	}
}

// truncate cuts a string over n bytes to n and marks the cut.
func TestTruncate(t *testing.T) {
	s := strings.Repeat("v", 80)
	if got := truncate(s, 80); got != s {
		t.Errorf("80 bytes cut to 80: %q", got)
	}
	if got := truncate(s+"w", 80); got != s+"..." {
		t.Errorf("81 bytes cut to 80: %q", got)
	}
}
