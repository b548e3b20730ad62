package controlplane

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
)

// The pinned versions. They must match the tools modules under
// hack/controlplane; a unit test checks that they do.
const (
	KubernetesVersion = "v1.37.2"
	EtcdVersion       = "v3.7.3"
	KwokVersion       = "v0.8.0"
)

// mainModule is the module path of the repository that holds the tools
// modules.
const mainModule = "github.com/zerodep-k8s/widget-operator"

// buildFormat changes when the way binaries are built changes, so that a
// new builder rebuilds the cache.
const buildFormat = "1"

// ErrNotBuilt is wrapped by the error [FindBinaries] returns when the
// binaries have not been built.
var ErrNotBuilt = errors.New("controlplane: binaries not built; run: go run ./hack/localcluster build")

// Binaries are the paths of a built control plane.
type Binaries struct {
	Dir                   string // the folder that holds all of them
	Etcd                  string
	KubeAPIServer         string
	KubeControllerManager string
	KubeScheduler         string
	Kubectl               string
	Kwok                  string
	// KwokStages is a multi-document YAML file of the kwok Stages that make
	// a Node Ready and take Pods through ready, complete and delete.
	KwokStages string
}

// DefaultDir returns the folder that holds the binaries of the pinned
// versions: ${XDG_CACHE_HOME:-~/.cache}/widget-operator/controlplane/<versions>.
func DefaultDir() (string, error) {
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("controlplane: no cache folder: %w", err)
		}
		base = filepath.Join(home, ".cache")
	}
	name := fmt.Sprintf("kubernetes-%s_etcd-%s_kwok-%s", KubernetesVersion, EtcdVersion, KwokVersion)
	return filepath.Join(base, "widget-operator", "controlplane", name), nil
}

func binariesIn(dir string) *Binaries {
	bin := filepath.Join(dir, "bin")
	return &Binaries{
		Dir:                   bin,
		Etcd:                  filepath.Join(bin, "etcd"),
		KubeAPIServer:         filepath.Join(bin, "kube-apiserver"),
		KubeControllerManager: filepath.Join(bin, "kube-controller-manager"),
		KubeScheduler:         filepath.Join(bin, "kube-scheduler"),
		Kubectl:               filepath.Join(bin, "kubectl"),
		Kwok:                  filepath.Join(bin, "kwok"),
		KwokStages:            filepath.Join(dir, "kwok-stages.yaml"),
	}
}

// FindBinaries returns the binaries built in dir ("" means [DefaultDir])
// without building anything. The error wraps [ErrNotBuilt] when the build
// stamp or a binary is missing.
func FindBinaries(dir string) (*Binaries, error) {
	if dir == "" {
		var err error
		if dir, err = DefaultDir(); err != nil {
			return nil, err
		}
	}
	if _, err := os.Stat(filepath.Join(dir, stampName)); err != nil {
		return nil, fmt.Errorf("%w (no build in %s)", ErrNotBuilt, dir)
	}
	b := binariesIn(dir)
	for _, p := range []string{b.Etcd, b.KubeAPIServer, b.KubeControllerManager, b.KubeScheduler, b.Kubectl, b.Kwok, b.KwokStages} {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("%w (%v)", ErrNotBuilt, err)
		}
	}
	return b, nil
}

const stampName = "stamp"

// BuildOptions say where and how [Build] works. The zero value builds the
// pinned versions into [DefaultDir], finding the tools modules from the
// working directory, and prints nothing.
type BuildOptions struct {
	// ToolsDir is the hack/controlplane folder of this repository. Empty
	// means found by walking up from the working directory to the main
	// module's go.mod.
	ToolsDir string
	// Dir is where the binaries go. Empty means [DefaultDir].
	Dir string
	// Log receives progress lines. Nil means they are dropped.
	Log io.Writer
	// Force rebuilds even when the stamp matches.
	Force bool
}

// tool is one tools module and what is built from it.
type tool struct {
	sub     string   // folder under ToolsDir, "" for ToolsDir itself
	pkgs    []string // main packages
	out     string   // "-o" target: a folder ending in "/" or a file name
	ldflags string
}

func tools() []tool {
	var ld []string
	for _, p := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		minor := strings.Split(strings.TrimPrefix(KubernetesVersion, "v"), ".")[1]
		ld = append(ld,
			"-X", p+".gitVersion="+KubernetesVersion,
			"-X", p+".gitMajor=1",
			"-X", p+".gitMinor="+minor,
			"-X", p+".gitTreeState=clean",
			// A fixed date keeps the build reproducible.
			"-X", p+".buildDate=1970-01-01T00:00:00Z")
	}
	return []tool{
		{
			sub: "",
			pkgs: []string{
				"k8s.io/kubernetes/cmd/kube-apiserver",
				"k8s.io/kubernetes/cmd/kube-controller-manager",
				"k8s.io/kubernetes/cmd/kube-scheduler",
				"k8s.io/kubernetes/cmd/kubectl",
			},
			out:     "",
			ldflags: "-s -w " + strings.Join(ld, " "),
		},
		{sub: "etcd", pkgs: []string{"go.etcd.io/etcd/server/v3"}, out: "etcd", ldflags: "-s -w"},
		{sub: "kwok", pkgs: []string{"sigs.k8s.io/kwok/cmd/kwok"}, out: "kwok", ldflags: "-s -w"},
	}
}

// kwokStages are the Stage files copied out of the kwok module.
var kwokStages = []string{
	"kustomize/stage/node/fast/node-initialize.yaml",
	"kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
	"kustomize/stage/pod/fast/pod-ready.yaml",
	"kustomize/stage/pod/fast/pod-complete.yaml",
	"kustomize/stage/pod/fast/pod-delete.yaml",
}

// FindToolsDir walks up from the working directory to the main module's
// go.mod and returns its hack/controlplane folder.
func FindToolsDir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("controlplane: %w", err)
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && modulePath(data) == mainModule {
			return filepath.Join(dir, "hack", "controlplane"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("controlplane: no go.mod of %s above the working directory", mainModule)
		}
		dir = parent
	}
}

func modulePath(gomod []byte) string {
	for line := range strings.Lines(string(gomod)) {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`)
		}
	}
	return ""
}

// stamp hashes every input of the build: the Go version, the target, the
// builder's format and each tools module's go.mod and go.sum.
func stamp(toolsDir string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "format %s\ngo %s %s/%s\n", buildFormat, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	for _, t := range tools() {
		fmt.Fprintf(h, "tool %s %q %q %q\n", t.sub, t.pkgs, t.out, t.ldflags)
		for _, f := range []string{"go.mod", "go.sum"} {
			data, err := os.ReadFile(filepath.Join(toolsDir, t.sub, f))
			if err != nil {
				return "", fmt.Errorf("controlplane: tools module: %w", err)
			}
			fmt.Fprintf(h, "%s/%s %d\n", t.sub, f, len(data))
			h.Write(data)
		}
	}
	fmt.Fprintf(h, "stages %q\n", kwokStages)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Build builds the pinned control plane binaries unless the stamp in the
// target folder says they were built from the same inputs. It prints
// progress to opts.Log while it works. A cold build downloads the modules
// and takes about ten minutes on two cores; a warm one takes well under a
// second.
func Build(ctx context.Context, opts BuildOptions) (*Binaries, error) {
	logw := opts.Log
	if logw == nil {
		logw = io.Discard
	}
	toolsDir := opts.ToolsDir
	if toolsDir == "" {
		var err error
		if toolsDir, err = FindToolsDir(); err != nil {
			return nil, err
		}
	}
	dir := opts.Dir
	if dir == "" {
		var err error
		if dir, err = DefaultDir(); err != nil {
			return nil, err
		}
	}
	want, err := stamp(toolsDir)
	if err != nil {
		return nil, err
	}
	if !opts.Force {
		if got, err := os.ReadFile(filepath.Join(dir, stampName)); err == nil && strings.TrimSpace(string(got)) == want {
			if b, err := FindBinaries(dir); err == nil {
				fmt.Fprintf(logw, "controlplane: up to date in %s\n", dir)
				return b, nil
			}
		}
	}

	goBin, err := goCommand()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	// Build into a fresh folder beside the target and move it into place
	// at the end, so that an interrupted build leaves nothing half done.
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".build-")
	if err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	defer os.RemoveAll(tmp)
	b := binariesIn(tmp)
	if err := os.MkdirAll(b.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}

	start := time.Now()
	fmt.Fprintf(logw, "controlplane: building kubernetes %s, etcd %s, kwok %s into %s (a cold build takes 10 to 30 minutes on two cores, about 10 on idle ones)\n",
		KubernetesVersion, EtcdVersion, KwokVersion, dir)
	for _, t := range tools() {
		modDir := filepath.Join(toolsDir, t.sub)
		step := time.Now()
		fmt.Fprintf(logw, "controlplane: downloading modules of %s\n", modDir)
		if err := runGo(ctx, goBin, modDir, logw, 0, "mod", "download"); err != nil {
			return nil, err
		}
		fmt.Fprintf(logw, "controlplane: building %s\n", strings.Join(t.pkgs, " "))
		args := []string{"build", "-v", "-trimpath", "-ldflags", t.ldflags, "-o", filepath.Join(b.Dir, t.out) + string(filepath.Separator)}
		if t.out != "" {
			args[len(args)-1] = filepath.Join(b.Dir, t.out)
		}
		args = append(args, t.pkgs...)
		// The number of packages involved, for the progress lines; a
		// failure here is left for go build to report.
		total := 0
		if out, err := goOutput(ctx, goBin, modDir, append([]string{"list", "-deps"}, t.pkgs...)...); err == nil {
			total = strings.Count(out, "\n")
		}
		if err := runGo(ctx, goBin, modDir, logw, total, args...); err != nil {
			return nil, err
		}
		fmt.Fprintf(logw, "controlplane: built %s in %s\n", strings.Join(t.pkgs, " "), time.Since(step).Round(time.Second))
	}

	kwokDir, err := goOutput(ctx, goBin, filepath.Join(toolsDir, "kwok"), "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kwok")
	if err != nil {
		return nil, err
	}
	var stages bytes.Buffer
	for i, f := range kwokStages {
		data, err := os.ReadFile(filepath.Join(strings.TrimSpace(kwokDir), filepath.FromSlash(f)))
		if err != nil {
			return nil, fmt.Errorf("controlplane: kwok stage: %w", err)
		}
		if i > 0 {
			stages.WriteString("---\n")
		}
		stages.Write(data)
		if !bytes.HasSuffix(data, []byte("\n")) {
			stages.WriteString("\n")
		}
	}
	if err := os.WriteFile(b.KwokStages, stages.Bytes(), 0o644); err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	if err := os.WriteFile(filepath.Join(tmp, stampName), []byte(want+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}

	// Swap the new build in. Another builder may have finished first; its
	// result is as good as ours.
	old := dir + ".old"
	os.RemoveAll(old)
	if err := os.Rename(dir, old); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		if fb, ferr := FindBinaries(dir); ferr == nil {
			return fb, nil
		}
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	os.RemoveAll(old)
	fmt.Fprintf(logw, "controlplane: built in %s\n", time.Since(start).Round(time.Second))
	return binariesIn(dir), nil
}

func goCommand() (string, error) {
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	p, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("controlplane: the go command is needed to build: %w", err)
	}
	return p, nil
}

// goEnv is the environment of every go command the build runs: the local
// toolchain only, module mode that may update go.sum in memory, no
// workspace, and no cgo, so that no C compiler is needed.
func goEnv() []string {
	return append(os.Environ(),
		"GOTOOLCHAIN=local",
		"GOFLAGS=-mod=mod",
		"GOWORK=off",
		"CGO_ENABLED=0",
	)
}

// runGo runs one go command in dir. Every 15 seconds it reports how many
// lines (packages, for go build -v) it has printed, out of total when
// total > 0. On failure it returns the last lines printed.
func runGo(ctx context.Context, goBin, dir string, logw io.Writer, total int, args ...string) error {
	cmd := exec.CommandContext(ctx, goBin, args...)
	cmd.Dir = dir
	cmd.Env = goEnv()
	pr, pw := io.Pipe()
	cmd.Stdout = pw
	cmd.Stderr = pw

	var (
		mu    sync.Mutex
		count int
		tail  []string
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			mu.Lock()
			count++
			tail = append(tail, sc.Text())
			if len(tail) > 40 {
				tail = tail[1:]
			}
			mu.Unlock()
		}
		io.Copy(io.Discard, pr)
	}()
	if err := cmd.Start(); err != nil {
		pw.Close()
		<-done
		return fmt.Errorf("controlplane: go %s: %w", args[0], err)
	}
	waitErr := make(chan error, 1)
	go func() { waitErr <- cmd.Wait(); pw.Close() }()
	start := time.Now()
	tick := time.NewTicker(15 * time.Second)
	defer tick.Stop()
	for {
		select {
		case err := <-waitErr:
			<-done
			if err != nil {
				mu.Lock()
				defer mu.Unlock()
				return fmt.Errorf("controlplane: go %s in %s: %w\n%s", strings.Join(args, " "), dir, err, strings.Join(tail, "\n"))
			}
			return nil
		case <-tick.C:
			mu.Lock()
			n := count
			mu.Unlock()
			of := ""
			if total > 0 {
				of = fmt.Sprintf(" of %d", total)
			}
			fmt.Fprintf(logw, "controlplane:   go %s: %d%s packages compiled, %s\n", args[0], n, of, time.Since(start).Round(time.Second))
		}
	}
}

func goOutput(ctx context.Context, goBin, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, goBin, args...)
	cmd.Dir = dir
	cmd.Env = goEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("controlplane: go %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}
