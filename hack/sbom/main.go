// Command sbom writes the SBOM and the provenance of a widget-operator
// binary, from the binary alone: its SHA-256 and the build information the
// Go toolchain records in it (what `go version -m` prints).
//
//	go run ./hack/sbom -bin bin/widget-operator -command 'go build ...'
//
// writes, next to the binary:
//
//   - widget-operator.spdx.json: an SPDX 2.3 JSON document that names the
//     binary (the main module, with its version and the binary's SHA-256),
//     the Go toolchain that built it with its build settings, and no other
//     module;
//   - widget-operator.provenance.json: an in-toto Statement v1 with a SLSA
//     v1 provenance predicate, whose subject is the binary and which records
//     the source revision, the build command, the toolchain and the build
//     settings.
//
// Nothing in either file comes from the clock or the machine: the SBOM's
// creation time is the commit's, and its namespace is derived from the
// module, its version and the binary's digest. Two builds of one commit
// give the same files, byte for byte.
//
// The binary must carry VCS information (vcs.revision and vcs.time): go
// build stamps it in a git clone, not in a git worktree, an unpacked
// archive or under -buildvcs=false.
package main

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"
)

func main() {
	bin := flag.String("bin", "bin/widget-operator", "the binary to describe")
	command := flag.String("command", "", "the command that built the binary, recorded in the provenance")
	flag.Parse()
	if err := run(*bin, *command); err != nil {
		fmt.Fprintln(os.Stderr, "sbom:", err)
		os.Exit(1)
	}
}

func run(bin, command string) error {
	if command == "" {
		return errors.New("-command is empty: say how the binary was built")
	}
	b, err := readBuild(bin)
	if err != nil {
		return err
	}
	if err := writeJSON(bin+".spdx.json", spdxDocument(b)); err != nil {
		return err
	}
	return writeJSON(bin+".provenance.json", provenance(b, command))
}

// A build is what both files describe: one binary and its build
// information.
type build struct {
	file     string // the binary's base name, such as "widget-operator"
	sha256   string // the binary's digest, in lower-case hex
	info     *debug.BuildInfo
	revision string // vcs.revision, never empty
	time     string // vcs.time, as SPDX writes it: 2006-01-02T15:04:05Z
}

// A BuildInfoError reports a binary whose build information cannot be
// described.
type BuildInfoError struct {
	Path   string
	Reason string
}

func (e *BuildInfoError) Error() string { return e.Path + ": " + e.Reason }

// readBuild reads the binary at path once: its digest, then its build
// information from the same bytes.
func readBuild(path string) (build, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return build{}, err
	}
	info, err := buildinfo.Read(bytes.NewReader(data))
	if err != nil {
		return build{}, &BuildInfoError{path, "no Go build information: " + err.Error()}
	}
	sum := sha256.Sum256(data)
	return newBuild(filepath.Base(path), hex.EncodeToString(sum[:]), info, path)
}

// newBuild checks that info says what the files need to record.
func newBuild(file, digest string, info *debug.BuildInfo, path string) (build, error) {
	b := build{file: file, sha256: digest, info: info}
	if info.Main.Path == "" || info.GoVersion == "" {
		return b, &BuildInfoError{path, "the build information names no main module or no Go version"}
	}
	b.revision, b.time = setting(info, "vcs.revision"), setting(info, "vcs.time")
	if b.revision == "" || b.time == "" {
		return b, &BuildInfoError{path, "the build information has no vcs.revision or vcs.time: " +
			"build it in a git clone (go stamps none in a git worktree, an unpacked archive, or with -buildvcs=false)"}
	}
	t, err := time.Parse(time.RFC3339, b.time)
	if err != nil {
		return b, &BuildInfoError{path, "vcs.time: " + err.Error()}
	}
	b.time = t.UTC().Format("2006-01-02T15:04:05Z")
	return b, nil
}

func setting(info *debug.BuildInfo, key string) string {
	for _, s := range info.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return ""
}

// settingLines lists the build settings as `go version -m` does, one
// key=value a line, in the binary's order.
func settingLines(info *debug.BuildInfo) []string {
	lines := make([]string, len(info.Settings))
	for i, s := range info.Settings {
		lines[i] = s.Key + "=" + s.Value
	}
	return lines
}

// repoURL is the main module's repository: the module path of a module
// hosted where its path says, as this one is.
func (b build) repoURL() string { return "https://" + b.info.Main.Path }

// stdlibPURL is the package URL of the standard library of the toolchain.
func (b build) stdlibPURL() string {
	return "pkg:golang/stdlib@" + strings.TrimPrefix(b.info.GoVersion, "go")
}

// modules lists the main module and every dependency as path@version:
// what the SBOM's module packages must be.
func (b build) modules() []debug.Module {
	mods := []debug.Module{b.info.Main}
	for _, d := range b.info.Deps {
		if d.Replace != nil {
			d = d.Replace
		}
		mods = append(mods, *d)
	}
	return mods
}

// writeJSON writes v indented, with a final newline. encoding/json writes
// struct fields in their order and map keys sorted, so the bytes depend on
// v alone.
func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}
