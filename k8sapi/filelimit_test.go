package k8sapi

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A file of exactly the limit is read; one byte more is refused, with
// the limit in the message, in KiB as every size limit of the package.
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
