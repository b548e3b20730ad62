package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The files `make sbom` writes, in a checkout.
var madeFiles = []string{"bin/widget-operator", "bin/widget-operator.spdx.json", "bin/widget-operator.provenance.json"}

// TestMakeSBOM runs `make sbom` in two clones of HEAD (committed work
// only), in two folders: the binary and both files must be the same bytes.
// Then SPDX's own Go tools, built from a tools module of their own, read
// and validate the SBOM, and what they read must match `go version -m` and
// the binary; broken copies of it must fail them. Last, `make image` in
// both clones must give one image digest, holding the same binary.
func TestMakeSBOM(t *testing.T) {
	for _, tool := range []string{"git", "make"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: cannot build two clones with make sbom", tool)
		}
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	a, b := cloneHead(t, root), cloneHead(t, root)
	makeSBOM(t, a)
	makeSBOM(t, b)
	for _, f := range madeFiles {
		da, db := readFile(t, filepath.Join(a, f)), readFile(t, filepath.Join(b, f))
		if !bytes.Equal(da, db) {
			t.Errorf("%s differs between two clones of one commit: sha256 %s and %s", f, digest(da), digest(db))
			continue
		}
		t.Logf("%s: %d bytes, sha256 %s in both clones", f, len(da), digest(da))
	}

	t.Run("provenance", func(t *testing.T) { checkProvenance(t, a) })
	t.Run("validated", func(t *testing.T) {
		check := installSPDXCheck(t, root)
		summary := spdxCheck(t, check, filepath.Join(a, madeFiles[1]))
		checkSummary(t, a, summary)
		refusesBroken(t, check, readFile(t, filepath.Join(a, madeFiles[1])))
	})
	t.Run("image", func(t *testing.T) { checkImages(t, a, b) })
}

// checkImages runs `make image` in both clones: the same image digest,
// the binary of `make build` inside, and annotations that name the commit
// and the three files' digests.
func checkImages(t *testing.T, a, b string) {
	podman, err := exec.LookPath("podman")
	if err != nil {
		t.Skip("podman is not installed, so make image cannot run (Debian: apt-get install -y podman)")
	}
	var images [2]imageInspect
	for i, dir := range []string{a, b} {
		tag := "localhost/widget-operator-sbom-test:" + string(rune('a'+i))
		t.Cleanup(func() { _ = exec.Command(podman, "rmi", "--force", tag).Run() })
		cmd := exec.Command("make", "--no-print-directory", "image", "IMAGE="+tag)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("make image in %s: %v\n%s", dir, err, out)
		}
		images[i] = inspectImage(t, podman, tag)
	}
	if images[0].Digest != images[1].Digest {
		t.Errorf("make image in two clones of one commit: digests %s and %s", images[0].Digest, images[1].Digest)
	}
	t.Logf("image %s in both clones", images[0].Digest)
	head, err := exec.Command("git", "-C", a, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"org.opencontainers.image.revision":    strings.TrimSpace(string(head)),
		"io.widget-operator.binary.sha256":     digest(readFile(t, filepath.Join(a, madeFiles[0]))),
		"io.widget-operator.spdx.sha256":       digest(readFile(t, filepath.Join(a, madeFiles[1]))),
		"io.widget-operator.provenance.sha256": digest(readFile(t, filepath.Join(a, madeFiles[2]))),
	}
	for k, v := range want {
		if got := images[0].Annotations[k]; got != v {
			t.Errorf("annotation %s = %q, want %q", k, got, v)
		}
	}
	bin := imageBinary(t, podman, "localhost/widget-operator-sbom-test:a")
	if digest(bin) != want["io.widget-operator.binary.sha256"] {
		t.Errorf("the image's /widget-operator has sha256 %s; make build's %s", digest(bin), want["io.widget-operator.binary.sha256"])
	}
}

type imageInspect struct {
	Digest      string
	Annotations map[string]string
}

func inspectImage(t *testing.T, podman, tag string) imageInspect {
	t.Helper()
	out, err := exec.Command(podman, "image", "inspect", tag).Output()
	var ii []imageInspect
	if err == nil {
		err = json.Unmarshal(out, &ii)
	}
	if err != nil || len(ii) != 1 {
		t.Fatalf("podman image inspect %s: %v (%d images)", tag, err, len(ii))
	}
	return ii[0]
}

// imageBinary copies /widget-operator out of a container made from the
// image, never started.
func imageBinary(t *testing.T, podman, tag string) []byte {
	t.Helper()
	out, err := exec.Command(podman, "create", tag).Output()
	if err != nil {
		t.Fatalf("podman create %s: %v", tag, err)
	}
	id := strings.TrimSpace(string(out))
	defer exec.Command(podman, "rm", "--force", id).Run()
	dst := filepath.Join(t.TempDir(), "widget-operator")
	if out, err := exec.Command(podman, "cp", id+":/widget-operator", dst).CombinedOutput(); err != nil {
		t.Fatalf("podman cp: %v\n%s", err, out)
	}
	return readFile(t, dst)
}

func cloneHead(t *testing.T, root string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "src")
	if out, err := exec.Command("git", "clone", "--quiet", "--no-hardlinks", root, dir).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	return dir
}

func makeSBOM(t *testing.T, dir string) {
	t.Helper()
	cmd := exec.Command("make", "--no-print-directory", "sbom")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make sbom in %s: %v\n%s", dir, err, out)
	}
}

// installSPDXCheck builds hack/sbom/spdxcheck, which downloads SPDX's
// tools-golang from the Go module proxy the first time. Only a proxy that
// cannot be reached skips the test.
func installSPDXCheck(t *testing.T, root string) string {
	t.Helper()
	exe := filepath.Join(t.TempDir(), "spdxcheck")
	cmd := exec.Command("go", "build", "-o", exe, ".")
	cmd.Dir = filepath.Join(root, "hack", "sbom", "spdxcheck")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		if unreachable(string(out)) {
			t.Skipf("SPDX's validator (github.com/spdx/tools-golang) cannot be installed: the Go module proxy cannot be reached:\n%s", out)
		}
		t.Fatalf("building hack/sbom/spdxcheck: %v\n%s", err, out)
	}
	return exe
}

// refusesBroken shows that the validator validates: each one-line
// change to a good SBOM must fail it.
func refusesBroken(t *testing.T, check string, good []byte) {
	for _, tc := range []struct{ old, new string }{
		{`"checksumValue"`, `"checksumValu"`},                                 // a field SPDX does not know
		{`"relationshipType": "DESCRIBES"`, `"relationshipType": "CONTAINS"`}, // describes nothing
		{`"relatedSpdxElement": "SPDXRef-Package-go"`, `"relatedSpdxElement": "SPDXRef-Package-gone"`},
		{`"algorithm": "SHA256"`, `"algorithm": "SHA257"`},
		{`"filesAnalyzed": false`, `"filesAnalyzed": "no"`},
		{`"spdxVersion": "SPDX-2.3"`, `"spdxVersion": "SPDX-2.9"`},
		{`"downloadLocation": "NOASSERTION"`, `"downloadLocation": ""`},
	} {
		if !bytes.Contains(good, []byte(tc.old)) {
			t.Errorf("the SBOM has no %s to break", tc.old)
			continue
		}
		bad := filepath.Join(t.TempDir(), "bad.spdx.json")
		if err := os.WriteFile(bad, bytes.Replace(good, []byte(tc.old), []byte(tc.new), 1), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(check, bad).CombinedOutput(); err == nil {
			t.Errorf("spdxcheck accepts the SBOM with %s in place of %s:\n%s", tc.new, tc.old, out)
		}
	}
}

// unreachable tells a download that failed for the network from other
// failures of go build.
func unreachable(out string) bool {
	for _, s := range []string{"dial tcp", "no such host", "connection refused", "i/o timeout", "network is unreachable",
		"TLS handshake timeout", "proxyconnect", "GOPROXY=off", "connection reset"} {
		if strings.Contains(out, s) {
			return true
		}
	}
	return false
}

// summary is what spdxcheck prints.
type summary struct {
	Described []string
	Packages  []struct {
		ID, Name, Version, FileName, Comment string
		PURLs                                []string
		Checksums                            map[string]string
	}
}

func spdxCheck(t *testing.T, exe, file string) summary {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(exe, file)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("spdxcheck %s: %v\n%s", file, err, stderr.Bytes())
	}
	var s summary
	if err := json.Unmarshal(stdout.Bytes(), &s); err != nil {
		t.Fatalf("spdxcheck's summary: %v\n%s", err, stdout.Bytes())
	}
	return s
}

// checkSummary compares what tools-golang read in the SBOM with what
// `go version -m` reads in the binary, and with the binary's digest.
func checkSummary(t *testing.T, dir string, s summary) {
	bin := filepath.Join(dir, madeFiles[0])
	gv := goVersionM(t, bin)
	var modules []string
	for _, p := range s.Packages {
		for _, u := range p.PURLs {
			if m, ok := strings.CutPrefix(u, "pkg:golang/"); ok && !strings.HasPrefix(m, "stdlib@") {
				modules = append(modules, strings.ReplaceAll(m, "%2B", "+"))
			}
		}
	}
	if !slices.Equal(modules, gv.modules) {
		t.Errorf("the SBOM's modules %q, go version -m's %q", modules, gv.modules)
	}
	if len(gv.modules) != 1 {
		t.Errorf("go version -m lists %q: want the main module alone", gv.modules)
	}
	if len(s.Described) != 1 || len(s.Packages) != 2 {
		t.Fatalf("described %q, %d packages: want the binary described, and the toolchain beside it", s.Described, len(s.Packages))
	}
	main, goPkg := s.Packages[0], s.Packages[1]
	if main.ID != s.Described[0] || main.FileName != "widget-operator" || main.Checksums["SHA256"] != digest(readFile(t, bin)) {
		t.Errorf("described package %s (%s), checksums %v: want the binary's SHA256 %s", main.ID, main.FileName, main.Checksums, digest(readFile(t, bin)))
	}
	if goPkg.Name != "go" || goPkg.Version != gv.goVersion {
		t.Errorf("toolchain package %s %s, go version -m says %s", goPkg.Name, goPkg.Version, gv.goVersion)
	}
	for _, setting := range gv.settings {
		if !strings.Contains(goPkg.Comment, "\n"+setting) {
			t.Errorf("the SBOM lacks the build setting %s", setting)
		}
	}
}

// versionInfo is what `go version -m` prints about a binary.
type versionInfo struct {
	goVersion string
	modules   []string // mod and dep lines as path@version, replacements applied
	settings  []string // build lines as key=value
}

func goVersionM(t *testing.T, bin string) versionInfo {
	t.Helper()
	out, err := exec.Command("go", "version", "-m", bin).CombinedOutput()
	if err != nil {
		t.Fatalf("go version -m: %v\n%s", err, out)
	}
	var gv versionInfo
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	_, gv.goVersion, _ = strings.Cut(lines[0], ": ")
	for _, line := range lines[1:] {
		f := strings.Split(strings.TrimPrefix(line, "\t"), "\t")
		switch {
		case len(f) >= 3 && (f[0] == "mod" || f[0] == "dep"):
			gv.modules = append(gv.modules, f[1]+"@"+f[2])
		case len(f) >= 3 && f[0] == "=>":
			gv.modules[len(gv.modules)-1] = f[1] + "@" + f[2]
		case len(f) == 2 && f[0] == "build":
			gv.settings = append(gv.settings, f[1])
		}
	}
	if gv.goVersion == "" || len(gv.settings) == 0 {
		t.Fatalf("cannot read go version -m's output:\n%s", out)
	}
	return gv
}

// checkProvenance reads the provenance as a stranger would, as JSON: the
// statement's type, its subject, and the clone's commit.
func checkProvenance(t *testing.T, dir string) {
	var st struct {
		Type    string `json:"_type"`
		Subject []struct {
			Name   string
			Digest map[string]string
		}
		PredicateType string
		Predicate     struct {
			BuildDefinition struct {
				ExternalParameters struct {
					Source struct {
						Digest map[string]string
					}
					Command string
				}
				InternalParameters struct {
					Toolchain     string
					BuildSettings []string
				}
			}
		}
	}
	if err := json.Unmarshal(readFile(t, filepath.Join(dir, madeFiles[2])), &st); err != nil {
		t.Fatal(err)
	}
	if st.Type != "https://in-toto.io/Statement/v1" || st.PredicateType != "https://slsa.dev/provenance/v1" {
		t.Errorf("_type %q, predicateType %q", st.Type, st.PredicateType)
	}
	bin := readFile(t, filepath.Join(dir, madeFiles[0]))
	if len(st.Subject) != 1 || st.Subject[0].Name != "widget-operator" || st.Subject[0].Digest["sha256"] != digest(bin) {
		t.Errorf("subject %+v, want widget-operator with sha256 %s", st.Subject, digest(bin))
	}
	head, err := exec.Command("git", "-C", dir, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	bd := st.Predicate.BuildDefinition
	if got := bd.ExternalParameters.Source.Digest["gitCommit"]; got != strings.TrimSpace(string(head)) {
		t.Errorf("source revision %q, the clone's HEAD %q", got, head)
	}
	if !strings.Contains(bd.ExternalParameters.Command, "go build -trimpath") {
		t.Errorf("command %q: want the Makefile's go build", bd.ExternalParameters.Command)
	}
	// A clean clone: the build information says so.
	gv := goVersionM(t, filepath.Join(dir, madeFiles[0]))
	if !slices.Equal(bd.InternalParameters.BuildSettings, gv.settings) || !slices.Contains(gv.settings, "vcs.modified=false") {
		t.Errorf("build settings %q, go version -m's %q (want vcs.modified=false)", bd.InternalParameters.BuildSettings, gv.settings)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
