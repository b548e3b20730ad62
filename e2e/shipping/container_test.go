package shipping

import (
	"archive/tar"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/e2e/harness"
	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/testenv/logbuf"
)

// containersConf is podman's configuration here: runc under cgroupfs (no
// systemd), no default ulimits to raise, events to a file.
const containersConf = `[containers]
default_ulimits = []
[engine]
cgroup_manager = "cgroupfs"
runtime = "runc"
events_logger = "file"
`

// podmanCmd runs podman with CONTAINERS_CONF pointing at containersConf.
type podmanCmd struct {
	bin string
	env []string
}

func newPodman(t *testing.T) *podmanCmd {
	t.Helper()
	bin, err := exec.LookPath("podman")
	if err != nil {
		t.Skip("podman is not installed, so the image is neither built nor run (Debian: apt-get install -y podman busybox-static)")
	}
	conf := filepath.Join(t.TempDir(), "containers.conf")
	if err := os.WriteFile(conf, []byte(containersConf), 0o644); err != nil {
		t.Fatal(err)
	}
	return &podmanCmd{bin: bin, env: append(os.Environ(), "CONTAINERS_CONF="+conf)}
}

func (pc *podmanCmd) command(args ...string) *exec.Cmd {
	cmd := exec.Command(pc.bin, args...)
	cmd.Env = pc.env
	cmd.Dir = harness.RepoRoot()
	return cmd
}

// run runs podman and returns its standard output; a failure fails the
// test with everything podman said.
func (pc *podmanCmd) run(t *testing.T, args ...string) string {
	t.Helper()
	cmd := pc.command(args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("podman %s: %v\n%s%s", strings.Join(args, " "), err, harness.Tail(stdout.String(), 4096), harness.Tail(stderr.String(), 4096))
	}
	return stdout.String()
}

// imageConfig is the part of `podman image inspect` the test reads.
type imageConfig struct {
	Size         int64
	Os           string
	Architecture string
	Config       struct {
		User       string
		Entrypoint []string
		Cmd        []string
	}
}

// TestImageRunsInPodman builds the Dockerfile with podman on a builder
// image made from this machine's Go toolchain (no registry is reachable),
// checks that the image holds the binary alone, the same bytes as a host
// build, then runs it as the operator's pod would: read-only, user 65532,
// no capabilities, the ServiceAccount folder mounted where a pod has it
// and the in-cluster environment, against the local plane. The operator
// must take a Widget to Ready from inside the container.
func TestImageRunsInPodman(t *testing.T) {
	pc := newPodman(t)
	const version = "e2e"
	tag := "localhost/widget-operator:" + version

	// The builder image: GOROOT and a static busybox.
	img := exec.Command("go", "run", "./hack/image")
	img.Dir, img.Env = harness.RepoRoot(), pc.env
	var imgErr bytes.Buffer
	img.Stderr = &imgErr
	out, err := img.Output()
	if err != nil {
		t.Fatalf("go run ./hack/image: %v\n%s", err, imgErr.Bytes())
	}
	builder := strings.TrimSpace(string(out))
	t.Logf("builder image %s (%s)", builder, strings.TrimSpace(imgErr.String()))

	// The build context is a checkout of HEAD, so that the host build
	// below sees the very same sources. No intermediate images are kept
	// (--layers=false): the Dockerfile's cache mount makes a rebuild fast
	// without them.
	src := cloneHead(t)
	began := time.Now()
	pc.run(t, "build", "--pull=never", "--layers=false", "--network", "host", "--build-arg", "GO_IMAGE="+builder,
		"--build-arg", "VERSION="+version, "-t", tag, "-f", filepath.Join(src, "Dockerfile"), src)
	t.Logf("podman build: %s", time.Since(began).Round(time.Second))

	var inspect []imageConfig
	if err := json.Unmarshal([]byte(pc.run(t, "image", "inspect", tag)), &inspect); err != nil || len(inspect) != 1 {
		t.Fatalf("podman image inspect: %v (%d images)", err, len(inspect))
	}
	ic := inspect[0]
	if ic.Config.User != "65532:65532" || strings.Join(ic.Config.Entrypoint, " ") != "/widget-operator" || len(ic.Config.Cmd) != 0 {
		t.Errorf("image config: user %q entrypoint %q cmd %q; want 65532:65532, [/widget-operator], none",
			ic.Config.User, ic.Config.Entrypoint, ic.Config.Cmd)
	}
	if ic.Os != "linux" || ic.Architecture != runtime.GOARCH {
		t.Errorf("image platform %s/%s, want linux/%s", ic.Os, ic.Architecture, runtime.GOARCH)
	}

	// The image's files, from `podman save`: the binary and nothing else.
	archive := filepath.Join(t.TempDir(), "image.tar")
	pc.run(t, "save", "--format", "docker-archive", "-o", archive, tag)
	files, bin := imageFiles(t, archive)
	t.Logf("image %s: %d bytes (%.2f MiB) by podman, archive %d bytes; files %q; binary %d bytes (%.2f MiB)",
		tag, ic.Size, mib(int(ic.Size)), fileSize(t, archive), files, len(bin), mib(len(bin)))
	if len(files) != 1 || files[0] != "widget-operator" {
		t.Errorf("the image holds %q; want the binary alone", files)
	}
	if ic.Size > maxSize {
		t.Errorf("the image is %.2f MiB, over %.2f MiB", mib(int(ic.Size)), mib(maxSize))
	}
	// Built in the container from the same sources with the same flags:
	// the same bytes as on this machine.
	host := readFile(t, goBuild(t, src, t.TempDir(), "linux", runtime.GOARCH, version))
	if !bytes.Equal(bin, host) {
		t.Errorf("the image's binary (%d bytes, %s) differs from a host build (%d bytes, %s)", len(bin), sha(bin), len(host), sha(host))
	}

	// Run it against the plane, in-cluster.
	p := env.Plane.Get(t)
	env.Install(t, p)
	saDir := filepath.Join(t.TempDir(), "serviceaccount")
	ctx := ctxFor(t, 5*time.Minute)
	if err := p.WriteServiceAccountDir(ctx, saDir, harness.OperatorNamespace, harness.OperatorSA); err != nil {
		t.Fatal(err)
	}
	// As a pod's projected volume: readable by the container's user.
	for _, f := range []string{"", "token", "ca.crt", "namespace"} {
		mode := os.FileMode(0o644)
		if f == "" {
			mode = 0o755
		}
		if err := os.Chmod(filepath.Join(saDir, f), mode); err != nil {
			t.Fatal(err)
		}
	}
	u, err := url.Parse(p.Host())
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr, healthAddr := harness.FreeAddr(t), harness.FreeAddr(t)
	name := "widget-operator-e2e-" + randomHex(4)
	run := pc.command("run", "--rm", "--name", name,
		"--read-only", "--user", "65532:65532", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
		"--network", "host",
		"-v", saDir+":/var/run/secrets/kubernetes.io/serviceaccount:ro",
		"-e", "KUBERNETES_SERVICE_HOST="+u.Hostname(), "-e", "KUBERNETES_SERVICE_PORT="+u.Port(),
		tag, "--leader-elect", "--log-level=debug",
		"--metrics-bind-address="+metricsAddr, "--health-probe-bind-address="+healthAddr)
	var logs logbuf.Buffer
	run.Stdout, run.Stderr = &logs, &logs
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = run.Wait(); close(exited) }()
	t.Cleanup(func() {
		stop := pc.command("stop", "--time", "20", name)
		_ = stop.Run()
		select {
		case <-exited:
		case <-time.After(40 * time.Second):
			_ = pc.command("rm", "--force", name).Run()
			<-exited
		}
		if t.Failed() {
			t.Logf("container log (last 4 KiB):\n%s", harness.Tail(logs.String(), 4096))
		}
	})

	eventually(t, 90*time.Second, func() (bool, string) {
		select {
		case <-exited:
			t.Fatalf("the container exited:\n%s", harness.Tail(logs.String(), 2048))
		default:
		}
		code, body, err := harness.Readyz(healthAddr)
		return err == nil && code == 200, fmt.Sprintf("/readyz: %d %q %v", code, body, err)
	})
	if uids, err := containerUIDs(pc, name); err != nil {
		t.Errorf("cannot tell which user the operator runs as: %v", err)
	} else if uids != "65532 65532 65532 65532" {
		t.Errorf("the operator runs with uids (real, effective, saved, fs) %q, want all 65532", uids)
	}

	tail := newAuditTail(t, p)
	ns := p.TestNamespace(t)
	c := harness.Admin(t, p)
	if _, err := harness.Widgets(c).Create(ctx, ns, harness.NewWidget("boxed", pauseImage, 2), k8sapi.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.WaitReady(t, c, ns, "boxed", 2, readyDeadline)
	// /metrics as the image serves it by default: HTTPS, a self-signed
	// certificate, each scrape reviewed.
	m, err := harness.MetricsTLS(metricsAddr, env.MetricsReaderToken(t, p))
	if err != nil {
		t.Fatal(err)
	}
	if m["widget_operator_leader"] != 1 {
		t.Errorf("widget_operator_leader = %v, want 1", m["widget_operator_leader"])
	}
	events, err := tail.next()
	if err != nil {
		t.Fatal(err)
	}
	var mine, refused int
	for _, e := range events {
		if e.User == harness.OperatorUser && strings.HasPrefix(e.UserAgent, "widget-operator/"+version) {
			mine++
			if e.Code == 403 || e.Code == 401 {
				refused++
			}
		}
	}
	if mine == 0 || refused > 0 {
		t.Errorf("%d requests from the container as %s, %d refused; want some, none refused", mine, harness.OperatorUser, refused)
	}
	if err := harness.Widgets(c).Delete(ctx, ns, "boxed", k8sapi.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// imageFiles lists the files of every layer of a docker-archive and
// returns the content of /widget-operator.
func imageFiles(t *testing.T, archive string) ([]string, []byte) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	members := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		members[h.Name] = b
	}
	var manifest []struct{ Layers []string }
	if err := json.Unmarshal(members["manifest.json"], &manifest); err != nil || len(manifest) != 1 {
		t.Fatalf("manifest.json: %v (%d images)", err, len(manifest))
	}
	var files []string
	var bin []byte
	for _, l := range manifest[0].Layers {
		data, ok := members[l]
		if !ok {
			t.Fatalf("layer %s missing from the archive", l)
		}
		lr := tar.NewReader(bytes.NewReader(data))
		for {
			h, err := lr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("layer %s: %v", l, err)
			}
			name := strings.TrimPrefix(strings.TrimPrefix(h.Name, "./"), "/")
			if name == "" {
				continue // the root folder itself
			}
			files = append(files, name)
			if name == "widget-operator" {
				if bin, err = io.ReadAll(lr); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	return files, bin
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// containerUIDs returns the real, effective, saved and filesystem user ids
// of the container's main process, read from /proc on the host (the tests
// run as root, in the host's PID namespace).
func containerUIDs(pc *podmanCmd, name string) (string, error) {
	out, err := pc.command("inspect", "--format", "{{.State.Pid}}", name).Output()
	if err != nil {
		return "", fmt.Errorf("podman inspect: %w", err)
	}
	pid := strings.TrimSpace(string(out))
	status, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			return strings.Join(strings.Fields(rest), " "), nil
		}
	}
	return "", fmt.Errorf("no Uid line in /proc/%s/status", pid)
}
