package k8sapi

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A file of exactly the limit is read; one byte more is refused, with
// the limit in the message.
func TestReadFileLimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte(strings.Repeat("x", 2048)), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := readFileLimit(path, 2048); err != nil || len(b) != 2048 {
		t.Errorf("at the limit: %d bytes, %v", len(b), err)
	}
	if _, err := readFileLimit(path, 2047); err == nil || err.Error() != "larger than 1 KiB" {
		t.Errorf("over the limit: %v, want larger than 1 KiB", err)
	}
}

// A limit is written in MiB when it is a whole number of them, else in
// KiB.
func TestSizeString(t *testing.T) {
	tests := []struct {
		n    int64
		want string
	}{
		{1 << 20, "1 MiB"},
		{3 << 20, "3 MiB"},
		{64 << 10, "64 KiB"},
		{1<<20 + 512<<10, "1536 KiB"},
		{1<<20 - 1<<10, "1023 KiB"},
	}
	for _, tt := range tests {
		if got := sizeString(tt.n); got != tt.want {
			t.Errorf("sizeString(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}
