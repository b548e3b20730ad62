package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestMajorMinor(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"go1.26.8", "1.26"},
		{"go1.26", "1.26"},
		{"go1.27rc1", "1.27rc1"},
		{"go2", "2"},
	} {
		if got := majorMinor(tc.in); got != tc.want {
			t.Errorf("majorMinor(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestGoVersion(t *testing.T) {
	dir := t.TempDir()
	if _, err := goVersion(dir); err == nil {
		t.Fatal("no VERSION file: want an error")
	}
	write(t, filepath.Join(dir, "VERSION"), "go1.26.8\ntime 2026-08-28T16:20:06Z\n")
	if v, err := goVersion(dir); err != nil || v != "go1.26.8" {
		t.Fatalf("goVersion = %q, %v", v, err)
	}
	write(t, filepath.Join(dir, "VERSION"), "devel +abc\n")
	if _, err := goVersion(dir); err == nil {
		t.Fatal("a devel VERSION: want an error")
	}
}

func TestCheckStaticRejectsNonELF(t *testing.T) {
	path := filepath.Join(t.TempDir(), "busybox")
	write(t, path, "#!/bin/sh\n")
	if err := checkStatic(path); err == nil {
		t.Fatal("a shell script passed as busybox: want an error")
	}
	if err := checkStatic(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("a missing busybox: want an error")
	}
}

// TestWriteRootfs packs a small fake GOROOT and reads the stream back.
func TestWriteRootfs(t *testing.T) {
	goroot := t.TempDir()
	for _, f := range []string{"VERSION", "bin/go", "pkg/tool/linux_amd64/compile", "src/fmt/print.go",
		"src/fmt/testdata/x.txt", "test/big_test.go", "doc/go_spec.html", "api/go1.txt", "misc/wasm/x.js"} {
		write(t, filepath.Join(goroot, f), f)
	}
	busybox := filepath.Join(t.TempDir(), "busybox")
	write(t, busybox, "static busybox")
	var buf bytes.Buffer
	if err := writeRootfs(&buf, goroot, busybox); err != nil {
		t.Fatal(err)
	}
	var names []string
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Name == "bin/sh" && (h.Typeflag != tar.TypeSymlink || h.Linkname != "busybox") {
			t.Errorf("bin/sh: type %c link %q", h.Typeflag, h.Linkname)
		}
		if h.Name == "tmp/" && h.Mode != 0o1777 {
			t.Errorf("tmp/ mode %o", h.Mode)
		}
	}
	for _, want := range []string{"bin/busybox", "bin/sh", "tmp/", "root/", "usr/local/go/VERSION",
		"usr/local/go/bin/go", "usr/local/go/pkg/tool/linux_amd64/compile", "usr/local/go/src/fmt/print.go"} {
		if !slices.Contains(names, want) {
			t.Errorf("%s missing from %q", want, names)
		}
	}
	for _, skipped := range []string{"usr/local/go/src/fmt/testdata/x.txt", "usr/local/go/test/big_test.go",
		"usr/local/go/doc/go_spec.html", "usr/local/go/api/go1.txt", "usr/local/go/misc/wasm/x.js"} {
		if slices.Contains(names, skipped) {
			t.Errorf("%s packed; it is not needed to build", skipped)
		}
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
