package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
)

const (
	testRevision = "0c312fef75693d1ca1f7e26f52ab6f7b04dc29c2"
	testDigest   = "3853bccab61e1affe44feb6089814ec7b8036a9e454ba261addcad6c2fe67251"
)

// testInfo is the build information of a release build, as go build
// records it in a git clone.
func testInfo() *debug.BuildInfo {
	return &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Path:      "github.com/zerodep-k8s/widget-operator/cmd/widget-operator",
		Main:      debug.Module{Path: "github.com/zerodep-k8s/widget-operator", Version: "v0.0.0-20261201141255-0c312fef7569"},
		Settings: []debug.BuildSetting{
			{Key: "-buildmode", Value: "exe"},
			{Key: "-trimpath", Value: "true"},
			{Key: "CGO_ENABLED", Value: "0"},
			{Key: "GOOS", Value: "linux"},
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: testRevision},
			{Key: "vcs.time", Value: "2026-12-01T15:12:55+01:00"},
			{Key: "vcs.modified", Value: "false"},
		},
	}
}

func testBuild(t *testing.T) build {
	t.Helper()
	b, err := newBuild("widget-operator", testDigest, testInfo(), "bin/widget-operator")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestNewBuildNeedsVCS(t *testing.T) {
	for _, drop := range []string{"vcs.revision", "vcs.time"} {
		info := testInfo()
		info.Settings = slices.DeleteFunc(info.Settings, func(s debug.BuildSetting) bool { return s.Key == drop })
		_, err := newBuild("w", testDigest, info, "bin/w")
		var be *BuildInfoError
		if !errors.As(err, &be) || !strings.Contains(err.Error(), "git clone") {
			t.Errorf("without %s: err %v, want a BuildInfoError that says to build in a git clone", drop, err)
		}
	}
	info := testInfo()
	info.Settings[6].Value = "yesterday"
	if _, err := newBuild("w", testDigest, info, "bin/w"); err == nil {
		t.Error("a vcs.time that is no time: want an error")
	}
	info = testInfo()
	info.Main.Path = ""
	if _, err := newBuild("w", testDigest, info, "bin/w"); err == nil {
		t.Error("no main module: want an error")
	}
}

func TestSPDXDocument(t *testing.T) {
	doc := spdxDocument(testBuild(t))
	if doc.SPDXVersion != "SPDX-2.3" || doc.DataLicense != "CC0-1.0" || doc.SPDXID != "SPDXRef-DOCUMENT" {
		t.Errorf("header %q %q %q", doc.SPDXVersion, doc.DataLicense, doc.SPDXID)
	}
	// The commit's time, in UTC as SPDX wants it: not the clock's.
	if doc.CreationInfo.Created != "2026-12-01T14:12:55Z" {
		t.Errorf("created %q, want the commit's time in UTC, 2026-12-01T14:12:55Z", doc.CreationInfo.Created)
	}
	for _, part := range []string{"github.com/zerodep-k8s/widget-operator", "v0.0.0-20261201141255-0c312fef7569", testDigest} {
		if !strings.Contains(doc.DocumentNamespace, part) {
			t.Errorf("documentNamespace %q lacks %q", doc.DocumentNamespace, part)
		}
	}
	if len(doc.Packages) != 2 {
		t.Fatalf("%d packages, want the binary's module and the toolchain", len(doc.Packages))
	}
	bin, goPkg := doc.Packages[0], doc.Packages[1]
	if bin.Name != "github.com/zerodep-k8s/widget-operator" || bin.VersionInfo != "v0.0.0-20261201141255-0c312fef7569" ||
		bin.PackageFileName != "widget-operator" {
		t.Errorf("binary package %q %q %q", bin.Name, bin.VersionInfo, bin.PackageFileName)
	}
	if len(bin.Checksums) != 1 || bin.Checksums[0] != (spdxChecksum{"SHA256", testDigest}) {
		t.Errorf("binary checksums %v, want its SHA256", bin.Checksums)
	}
	if bin.DownloadLocation != "git+https://github.com/zerodep-k8s/widget-operator@"+testRevision {
		t.Errorf("downloadLocation %q", bin.DownloadLocation)
	}
	if got := bin.ExternalRefs[0].Locator; got != "pkg:golang/github.com/zerodep-k8s/widget-operator@v0.0.0-20261201141255-0c312fef7569" {
		t.Errorf("binary purl %q", got)
	}
	if goPkg.Name != "go" || goPkg.VersionInfo != "go1.26.8" || goPkg.ExternalRefs[0].Locator != "pkg:golang/stdlib@1.26.8" {
		t.Errorf("toolchain package %q %q %v", goPkg.Name, goPkg.VersionInfo, goPkg.ExternalRefs)
	}
	for _, s := range testInfo().Settings {
		if !strings.Contains(goPkg.Comment, "\n"+s.Key+"="+s.Value) {
			t.Errorf("the toolchain's comment lacks the build setting %s=%s", s.Key, s.Value)
		}
	}
	if doc.Relationships[0] != (spdxRelationship{"SPDXRef-DOCUMENT", "DESCRIBES", binaryID}) {
		t.Errorf("first relationship %v, want the document describing the binary", doc.Relationships[0])
	}
}

// TestSPDXDocumentListsEveryModule: a binary that linked a module would
// say so; this project's has none, but the SBOM must not hide one.
func TestSPDXDocumentListsEveryModule(t *testing.T) {
	b := testBuild(t)
	b.info.Deps = []*debug.Module{
		{Path: "example.com/a", Version: "v1.2.3"},
		{Path: "example.com/b", Version: "v0.1.0", Replace: &debug.Module{Path: "example.com/fork", Version: "v0.1.1+incompatible"}},
	}
	doc := spdxDocument(b)
	var got []string
	for _, p := range doc.Packages[2:] {
		got = append(got, p.ExternalRefs[0].Locator)
	}
	want := []string{"pkg:golang/example.com/a@v1.2.3", "pkg:golang/example.com/fork@v0.1.1%2Bincompatible"}
	if !slices.Equal(got, want) {
		t.Errorf("module packages %q, want %q", got, want)
	}
	if n := len(doc.Relationships); n != 5 {
		t.Errorf("%d relationships, want 3 and one per module", n)
	}
}

func TestProvenance(t *testing.T) {
	st := provenance(testBuild(t), "make build")
	if st.Type != "https://in-toto.io/Statement/v1" || st.PredicateType != "https://slsa.dev/provenance/v1" {
		t.Errorf("_type %q predicateType %q", st.Type, st.PredicateType)
	}
	if len(st.Subject) != 1 || st.Subject[0].Name != "widget-operator" || st.Subject[0].Digest["sha256"] != testDigest {
		t.Errorf("subject %+v, want the binary and its sha256", st.Subject)
	}
	bd := st.Predicate.BuildDefinition
	if bd.ExternalParameters.Source.Digest["gitCommit"] != testRevision || bd.ResolvedDependencies[0].Digest["gitCommit"] != testRevision {
		t.Errorf("source %+v, dependencies %+v: want the revision", bd.ExternalParameters.Source, bd.ResolvedDependencies)
	}
	if bd.ExternalParameters.Command != "make build" || bd.InternalParameters.Toolchain != "go1.26.8" {
		t.Errorf("command %q toolchain %q", bd.ExternalParameters.Command, bd.InternalParameters.Toolchain)
	}
	if !slices.Equal(bd.InternalParameters.BuildSettings, settingLines(testInfo())) {
		t.Errorf("build settings %q", bd.InternalParameters.BuildSettings)
	}
}

// TestRunErrors: a missing binary, a file that is no Go binary and an
// empty command are errors, and leave no file behind.
func TestRunErrors(t *testing.T) {
	dir := t.TempDir()
	if err := run(filepath.Join(dir, "missing"), "make build"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing binary: %v, want ErrNotExist", err)
	}
	notGo := filepath.Join(dir, "script")
	if err := os.WriteFile(notGo, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var be *BuildInfoError
	if err := run(notGo, "make build"); !errors.As(err, &be) {
		t.Errorf("a shell script: %v, want a BuildInfoError", err)
	}
	// A Go binary without VCS information: this test's own.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := run(self, "go test"); !errors.As(err, &be) || !strings.Contains(err.Error(), "vcs.revision") {
		t.Errorf("a Go binary without VCS information: %v, want a BuildInfoError about vcs.revision", err)
	}
	if err := run(notGo, ""); err == nil {
		t.Error("no command: want an error")
	}
	if _, err := os.Stat(notGo + ".spdx.json"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed run left %s.spdx.json behind (%v)", notGo, err)
	}
}

// TestWriteJSONIsStable: the same build gives the same bytes.
func TestWriteJSONIsStable(t *testing.T) {
	dir := t.TempDir()
	var files [2][]byte
	for i := range files {
		path := filepath.Join(dir, "p.json")
		if err := writeJSON(path, provenance(testBuild(t), "make build")); err != nil {
			t.Fatal(err)
		}
		var err error
		if files[i], err = os.ReadFile(path); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(files[0], files[1]) || !bytes.HasSuffix(files[0], []byte("}\n")) {
		t.Fatalf("two writes differ, or lack the final newline:\n%s\n%s", files[0], files[1])
	}
	var v map[string]any
	if err := json.Unmarshal(files[0], &v); err != nil {
		t.Fatal(err)
	}
}
