package metrics

import (
	"os"
	"syscall"
	"testing"
)

func TestOpenFDs(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("no /proc/self/fd")
	}
	got, ok := openFDs()
	// Count the open descriptors another way: each that fstat accepts.
	want := 0
	var st syscall.Stat_t
	for fd := 0; fd < 4096; fd++ {
		if syscall.Fstat(fd, &st) == nil {
			want++
		}
	}
	if !ok || got != float64(want) {
		t.Errorf("openFDs = %v, %v; fstat finds %d open", got, ok, want)
	}
}
