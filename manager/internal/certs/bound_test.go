package certs

import (
	"os"
	"path/filepath"
	"testing"
)

// A file of exactly maxPEMSize bytes is read; one byte more is refused.
func TestReadFileAtItsBound(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tls.crt")
	if err := os.WriteFile(path, make([]byte, maxPEMSize), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := readFile(path); err != nil || len(b) != maxPEMSize {
		t.Errorf("file of maxPEMSize bytes: %d bytes, %v", len(b), err)
	}
}
