// Command image makes the local builder image that the Dockerfile's build
// stage can run on a machine that cannot pull images: the Go toolchain of
// this machine (GOROOT) and a static busybox for /bin/sh, imported into
// podman as one layer.
//
//	go run ./hack/image                       # localhost/widget-go-builder:1.26
//	podman build --build-arg GO_IMAGE=localhost/widget-go-builder:1.26 -t widget-operator:dev .
//
// The image carries a label with the Go version; when an image of that
// name and version exists already, nothing is done (-force makes it anew).
// It prints the image's name on success.
package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// versionLabel is the image label that records the Go version inside.
const versionLabel = "io.widget-operator.go-version"

func main() {
	var o options
	flag.StringVar(&o.name, "name", "", "image name; empty means localhost/widget-go-builder:<go major.minor>")
	flag.StringVar(&o.goroot, "goroot", "", "Go toolchain to package; empty means `go env GOROOT`")
	flag.StringVar(&o.busybox, "busybox", "/bin/busybox", "a statically linked busybox (Debian: busybox-static)")
	flag.StringVar(&o.podman, "podman", "podman", "the podman command")
	flag.BoolVar(&o.force, "force", false, "make the image even when one of the same Go version exists")
	flag.Parse()
	name, err := run(o, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	fmt.Println(name)
}

type options struct {
	name, goroot, busybox, podman string
	force                         bool
}

func run(o options, log io.Writer) (string, error) {
	if o.goroot == "" {
		out, err := exec.Command("go", "env", "GOROOT").Output()
		if err != nil {
			return "", fmt.Errorf("go env GOROOT: %w", err)
		}
		o.goroot = strings.TrimSpace(string(out))
	}
	version, err := goVersion(o.goroot)
	if err != nil {
		return "", err
	}
	if o.name == "" {
		o.name = "localhost/widget-go-builder:" + majorMinor(version)
	}
	if err := checkStatic(o.busybox); err != nil {
		return "", err
	}
	if !o.force {
		out, err := exec.Command(o.podman, "image", "inspect", "--format", "{{index .Labels \""+versionLabel+"\"}}", o.name).Output()
		if err == nil && strings.TrimSpace(string(out)) == version {
			fmt.Fprintf(log, "image: %s has %s already\n", o.name, version)
			return o.name, nil
		}
	}

	fmt.Fprintf(log, "image: importing %s (%s from %s, busybox from %s)\n", o.name, version, o.goroot, o.busybox)
	cmd := exec.Command(o.podman, "import",
		"--change", "ENV PATH=/usr/local/go/bin:/bin",
		"--change", "ENV HOME=/root",
		"--change", "ENV GOTOOLCHAIN=local",
		"--change", "WORKDIR /",
		"--change", "LABEL "+versionLabel+"="+version,
		"-", o.name)
	pr, pw := io.Pipe()
	cmd.Stdin = pr
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("podman import: %w", err)
	}
	werr := writeRootfs(pw, o.goroot, o.busybox)
	pw.CloseWithError(werr)
	if err := cmd.Wait(); err != nil {
		if werr != nil {
			return "", werr
		}
		return "", fmt.Errorf("podman import: %w\n%s", err, out.Bytes())
	}
	if werr != nil {
		return "", werr
	}
	return o.name, nil
}

// goVersion reads the first line of GOROOT/VERSION, such as "go1.26.8".
func goVersion(goroot string) (string, error) {
	data, err := os.ReadFile(filepath.Join(goroot, "VERSION"))
	if err != nil {
		return "", fmt.Errorf("not a Go toolchain: %w", err)
	}
	v, _, _ := strings.Cut(string(data), "\n")
	if !strings.HasPrefix(v, "go1.") {
		return "", fmt.Errorf("%s/VERSION: unexpected %q", goroot, v)
	}
	return v, nil
}

// majorMinor turns "go1.26.8" into "1.26".
func majorMinor(v string) string {
	v = strings.TrimPrefix(v, "go")
	if i := strings.IndexByte(v, '.'); i >= 0 {
		if j := strings.IndexByte(v[i+1:], '.'); j >= 0 {
			return v[:i+1+j]
		}
	}
	return v
}

// checkStatic makes sure path is an ELF program of this architecture that
// needs no dynamic loader: the image has no libc.
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("busybox %s: %w (install busybox-static)", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("busybox %s is dynamically linked; install busybox-static", path)
		}
	}
	if want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[runtime.GOARCH]; want != 0 && f.Machine != want {
		return fmt.Errorf("busybox %s is for %s, not %s", path, f.Machine, runtime.GOARCH)
	}
	return nil
}

// skipped are the parts of GOROOT a build does not read.
var skipped = map[string]bool{"api": true, "doc": true, "misc": true, "test": true}

// writeRootfs writes the image's file system as a tar stream: /bin/busybox
// with /bin/sh, empty /tmp and /root, and GOROOT as /usr/local/go.
func writeRootfs(w io.Writer, goroot, busybox string) error {
	tw := tar.NewWriter(w)
	dir := func(name string, mode int64) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode})
	}
	for _, d := range []string{"bin", "root", "usr", "usr/local"} {
		if err := dir(d, 0o755); err != nil {
			return err
		}
	}
	if err := dir("tmp", 0o1777); err != nil {
		return err
	}
	if err := addFile(tw, busybox, "bin/busybox"); err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/sh", Linkname: "busybox", Mode: 0o777}); err != nil {
		return err
	}
	err := filepath.WalkDir(goroot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(goroot, path)
		if err != nil {
			return err
		}
		if d.IsDir() && (skipped[rel] || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		name := "usr/local/go"
		if rel != "." {
			name += "/" + filepath.ToSlash(rel)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return dir(name, int64(info.Mode().Perm()))
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777})
		case info.Mode().IsRegular():
			return addFile(tw, path, name)
		}
		return nil // sockets, devices: not part of a toolchain
	})
	if err != nil {
		return fmt.Errorf("packaging %s: %w", goroot, err)
	}
	return tw.Close()
}

func addFile(tw *tar.Writer, path, name string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return errors.New(path + ": not a regular file")
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: int64(info.Mode().Perm()), Size: info.Size(), ModTime: info.ModTime()}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if _, err := io.Copy(tw, f); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
