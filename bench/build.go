package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Target is a Go package to build: Package, as go build names it, in the
// folder Dir of the repository (a module's root).
type Target struct {
	Dir, Package string
}

// KitQuota is the kit's quota operator. It is the one place that says
// where it is built from.
var KitQuota = Target{Dir: "examples", Package: "./quota"}

// KitQuotaArgs make the kit's quota operator do what its
// controller-runtime twin does: the quota controller alone, no Lease, no
// probe or metrics endpoint.
var KitQuotaArgs = []string{"-network-policies=false", "-leader-elect=false", "-probe-addr", "0", "-metrics-addr", "0"}

// CRQuota is the quota operator written with controller-runtime, in the
// bench's controller-runtime module.
var CRQuota = Target{Dir: "bench/controller-runtime", Package: "./quota"}

// Source is the target's package folder under the repository root.
func (t Target) Source(root string) string { return filepath.Join(root, t.Dir, t.Package) }

// Build compiles t, from the repository at root, as a stripped static
// binary at bin: CGO_ENABLED=0, -trimpath, -ldflags "-s -w".
func Build(root string, t Target, bin string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, t.Package)
	cmd.Dir = filepath.Join(root, t.Dir)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s in %s: %w\n%s", t.Package, t.Dir, err, out)
	}
	return nil
}

// Size is one operator binary.
type Size struct {
	Operator string
	Bytes    int64
	Modules  int // modules linked, the main module included
}

// MeasureSize measures the binary of op and counts the modules it links
// (go version -m: the mod line and one dep line each).
func MeasureSize(op Operator) (Size, error) {
	fi, err := os.Stat(op.Binary)
	if err != nil {
		return Size{}, err
	}
	out, err := exec.Command("go", "version", "-m", op.Binary).Output()
	if err != nil {
		return Size{}, fmt.Errorf("go version -m %s: %w", op.Binary, err)
	}
	mods := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 0 && (f[0] == "mod" || f[0] == "dep") {
			mods++
		}
	}
	return Size{Operator: op.Name, Bytes: fi.Size(), Modules: mods}, nil
}

// CodeLines counts the code lines of the Go package in dir as make lines
// does: the lines of its non-test files that are neither blank nor a //
// comment.
func CodeLines(dir string) (int, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			return 0, err
		}
		for _, line := range strings.Split(string(data), "\n") {
			if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "//") {
				n++
			}
		}
	}
	if n == 0 {
		return 0, fmt.Errorf("bench: no Go code in %s", dir)
	}
	return n, nil
}
