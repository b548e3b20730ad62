// Package bench measures the operator at scale against a real, bare
// control plane (etcd and kube-apiserver only), alone or side by side with
// the controller-runtime reference operator in bench/controller-runtime.
//
// [Run] is one measurement of one operator binary at one N: a fresh plane,
// the readiness time with zero Widgets, then N Widgets created before the
// operator starts, the time and CPU until every Widget has its Deployment,
// its Service and a status phase, the memory, the idle CPU and the API
// requests the operator made (from the audit log, by its own
// ServiceAccount). bench/cmd/compare runs the full comparison and writes
// the report; scale_test.go is the small smoke check of make test.
//
// The package is for benchmarks and tests only; product code never imports
// it.
package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/testenv/controlplane"
	"github.com/zerodep-k8s/widget-operator/watch"
	"github.com/zerodep-k8s/widget-operator/widget"
)

// WidgetNamespace is the namespace the Widgets are created in.
const WidgetNamespace = "bench"

// Operator is an operator binary to measure.
type Operator struct {
	// Name labels the results, such as "widget-operator".
	Name string
	// Binary is the path of the executable.
	Binary string
	// Namespace and ServiceAccount are the identity the operator runs as:
	// it gets a kubeconfig that reads a token of this ServiceAccount from
	// a file, and its requests are counted by that user in the audit log.
	Namespace, ServiceAccount string
	// ClusterAdmin binds the ServiceAccount to cluster-admin. False means
	// the permissions come from manifests/rbac alone.
	ClusterAdmin bool
	// Args are extra flags, after --kubeconfig, --metrics-bind-address 0
	// and --health-probe-bind-address.
	Args []string
	// Env is added to the bench's environment for the process, as
	// KEY=value. Nil means the bench's environment alone.
	Env []string
	// Floor says the binary is the raw-write floor's (see Floor), which
	// takes flags of its own and is run apart.
	Floor bool
}

// Ours is the widget-operator binary at bin, run as the ServiceAccount and
// with the permissions of manifests/rbac.
func Ours(bin string) Operator {
	return Operator{Name: "widget-operator", Binary: bin, Namespace: "widget-system", ServiceAccount: "widget-operator"}
}

// Reference is the controller-runtime operator at bin, run as a
// ServiceAccount of its own bound to cluster-admin.
func Reference(bin string) Operator {
	return Operator{Name: "controller-runtime", Binary: bin, Namespace: "widget-system",
		ServiceAccount: "widget-operator-cr", ClusterAdmin: true}
}

// TunedName labels the results of Tuned.
const TunedName = "controller-runtime tuned"

// Tuned is the controller-runtime operator at bin with the usual memory
// tuning: its cache strips managedFields from every object it holds
// (--strip-managed-fields). It runs as Reference does.
func Tuned(bin string) Operator {
	op := Reference(bin)
	op.Name, op.Args = TunedName, []string{"--strip-managed-fields"}
	return op
}

// User is the operator's user name in the audit log.
func (o Operator) User() string {
	return "system:serviceaccount:" + o.Namespace + ":" + o.ServiceAccount
}

// Config is one measurement.
type Config struct {
	// N is the number of Widgets. Zero measures readiness alone.
	N int
	// Operator is the binary to measure.
	Operator Operator
	// RepoRoot is the repository's top folder, for manifests/. Empty
	// means the folder this source file is in, one level up.
	RepoRoot string
	// Settle is how long to keep counting requests after the operator is
	// quiet (see QuietFor), to catch trailing writes. Zero means 2 seconds.
	Settle time.Duration
	// Idle is the window over which idle CPU is measured, after Settle.
	// Zero skips the idle measurement.
	Idle time.Duration
	// Replicas is how many processes of the operator run together; zero
	// means 1. More than one makes sense with --shards in Operator.Args.
	// The readiness, idle and restart figures are the first replica's.
	Replicas int
	// Restart, after the idle window, stops the operator and starts it
	// again over the converged Widgets: the time to its first /readyz 200
	// and its requests over Settle plus half the first convergence time
	// (a fixed window: a restart should write nothing) go in the Result.
	Restart bool
	// LiveAfter, when positive, creates one more Widget (LiveWidget) that
	// long after the operator's start, while it works the N existing
	// ones, and times it to its status (Result.Live); convergence then
	// waits for it too. Zero means none. The floor ignores it.
	LiveAfter time.Duration
	// Scrape, when positive, serves the operator's /metrics on plain
	// HTTP (--metrics-secure=false: no TokenReview, so the plane sees no
	// scrape) and reads it and /readyz that often, from the start until
	// quiet (Result.Scrapes). Zero means no scrapes. It takes ours: the
	// flag and the metric names are the Widget operator's.
	Scrape time.Duration
	// APIServerArgs are more flags of the plane's kube-apiserver, such as
	// a feature gate (see ShardGate). Nil means none.
	APIServerArgs []string
	// Timeout bounds the wait for convergence. Zero means 2 minutes plus
	// 100 ms per Widget.
	Timeout time.Duration
	// Log receives progress lines. Nil means they are dropped.
	Log io.Writer
}

// Result is what one measurement found.
type Result struct {
	Operator string
	N        int
	// Run numbers the round of a comparison the result belongs to, from
	// 1, in which each operator measured this N once; zero outside one.
	Run int `json:",omitempty"`
	// Ready is the time from process start to the first /readyz 200, with
	// zero Widgets in the cluster.
	Ready time.Duration
	// Converge is the time from process start until every Widget had its
	// Deployment, its Service and a status phase, as seen by a watch.
	Converge time.Duration
	// CPU is the operator's user plus system CPU time over Converge.
	CPU time.Duration
	// QuietCPU is its CPU time from the start until it went quiet after
	// convergence (its CPU did not move for QuietFor): the work that
	// trails the last status, such as Events, included. Quiet is the time
	// from the start to the reading at which its CPU last moved. When it
	// was not quiet within QuietDeadline of convergence, NotQuiet is set
	// and both are read at that deadline. Zero for the floor, whose CPU
	// is read once its writes are answered.
	QuietCPU, Quiet time.Duration `json:",omitempty"`
	NotQuiet        bool          `json:",omitempty"`
	// PeakRSS is VmHWM at convergence, SteadyRSS is VmRSS at the end of
	// the idle window (or of Settle), in bytes.
	PeakRSS, SteadyRSS int64
	// FileRSS is RssFile at convergence, in bytes: the pages of files
	// mapped in, nearly all of them the binary's, which the kernel may
	// drop and read again, unlike the process's own (anonymous) memory.
	FileRSS int64 `json:",omitempty"`
	// IdleCPU is the CPU time used over Idle; IdleWindow is that window
	// (zero when not measured).
	IdleCPU, IdleWindow time.Duration
	// Requests counts the operator's API requests from its start to the
	// end of the measurement.
	Requests Requests
	// PerReplica has the CPU and peak RSS of each replica at convergence,
	// when there are several; CPU is then their sum and PeakRSS the
	// largest.
	PerReplica []ReplicaStat `json:",omitempty"`
	// RestartReady is the time from the second start (Config.Restart) to
	// the first /readyz 200; RestartRequests its requests over the window.
	RestartReady    time.Duration
	RestartRequests Requests
	// RestartRSS is VmHWM at the end of that window: the peak of a start,
	// and its list or streaming list, over the N converged Widgets.
	RestartRSS int64
	// Live is the time from the create request of the Widget of
	// Config.LiveAfter to its status phase, as a watch sees it; LiveRank
	// is how many Widgets had a phase by then, itself included.
	Live     time.Duration `json:",omitempty"`
	LiveRank int           `json:",omitempty"`
	// Scrapes counts the reads of /metrics and /readyz of Config.Scrape;
	// NearLimit how many of those /metrics had MemoryNearLimit at 1, and
	// MemoryFailed how many /readyz failed their memory check; SoftLimit
	// is the soft memory limit as the operator served it.
	Scrapes, NearLimit, MemoryFailed int   `json:",omitempty"`
	SoftLimit                        int64 `json:",omitempty"`
	// Caches are the cache metrics (CacheObjects, CacheBytes) of the last
	// scrape, one per resource, in the order served.
	Caches []CacheStat `json:",omitempty"`
}

// CacheStat is one cache as the operator's /metrics described it.
type CacheStat struct {
	Resource       string
	Objects, Bytes int64
}

// The Widget operator's cache gauges, by resource, which Config.Scrape
// reads.
const (
	CacheObjects = "widget_operator_cache_objects"
	CacheBytes   = "widget_operator_cache_bytes"
)

// ShardGate is the kube-apiserver flag that serves shard selectors, with
// which each replica of a sharded operator caches only its shards.
const ShardGate = "--feature-gates=ShardedListAndWatch=true"

// LiveWidget names the Widget of Config.LiveAfter.
const LiveWidget = "w-live"

// ReplicaStat is one replica's share of a measurement.
type ReplicaStat struct {
	CPU     time.Duration
	PeakRSS int64
	FileRSS int64 `json:",omitempty"` // as Result.FileRSS
}

// Requests counts API requests by kind.
type Requests struct {
	Total   int
	Lists   int
	Watches int
	Writes  int
	// Events counts the writes of Events (events.k8s.io or core), which
	// Writes leaves out: they report on the work, they are not the work.
	Events int
	// Other is every request that is neither a list, a watch nor a write
	// (gets, discovery).
	Other int
	// Failed counts the requests of any kind that the API server refused
	// (a status code of 400 or more), such as a create that found the
	// object there.
	Failed int `json:",omitempty"`
	// By counts each "verb resource[/subresource]" (or "verb path" for
	// non-resource URLs).
	By map[string]int
}

// Run makes one measurement on a fresh bare control plane, which it stops
// before returning.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.RepoRoot == "" {
		cfg.RepoRoot = RepoRoot()
	}
	if cfg.Settle <= 0 {
		cfg.Settle = 2 * time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2*time.Minute + time.Duration(cfg.N)*100*time.Millisecond
	}
	logf := func(format string, args ...any) {
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, "bench: %s N=%d: %s\n", cfg.Operator.Name, cfg.N, fmt.Sprintf(format, args...))
		}
	}
	p, err := controlplane.Start(ctx, controlplane.Options{Bare: true, APIServerArgs: cfg.APIServerArgs})
	if err != nil {
		return nil, err
	}
	defer p.Stop()
	work, err := os.MkdirTemp("", "widget-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)

	kc, err := install(ctx, p, cfg.RepoRoot, cfg.Operator, work)
	if err != nil {
		return nil, err
	}
	admin, err := adminClient(p)
	if err != nil {
		return nil, err
	}
	res := &Result{Operator: cfg.Operator.Name, N: cfg.N}
	if cfg.Operator.Floor {
		return res, runFloor(ctx, cfg, p, admin, kc, work, res, logf)
	}

	// Readiness with zero Widgets.
	logf("readiness")
	op, err := startOperator(cfg.Operator, kc, work, "ready", false)
	if err != nil {
		return nil, err
	}
	res.Ready, err = op.waitReady(ctx, time.Minute)
	op.stop()
	if err != nil {
		return nil, fmt.Errorf("bench: %s: %w\n%s", cfg.Operator.Name, err, op.tail())
	}
	if cfg.N == 0 {
		return res, nil
	}

	logf("creating %d widgets", cfg.N)
	if _, err := createWidgets(ctx, admin, cfg.N); err != nil {
		return nil, err
	}
	tr := newTracker(admin, cfg.N)
	if cfg.LiveAfter > 0 {
		tr.n++ // LiveWidget too
	}
	trCtx, stopTracker := context.WithCancel(ctx)
	defer stopTracker()
	if err := tr.start(trCtx); err != nil {
		return nil, err
	}

	logf("starting the operator")
	op, err = startOperator(cfg.Operator, kc, work, "scale", cfg.Scrape > 0)
	if err != nil {
		return nil, err
	}
	defer op.stop()
	t0 := op.started
	scrCtx, stopScrapes := context.WithCancel(ctx)
	defer stopScrapes()
	var scraped <-chan scrapes
	if cfg.Scrape > 0 {
		scraped = op.scrape(scrCtx, cfg.Scrape)
	}
	liveErr := make(chan error, 1) // only a failure
	if cfg.LiveAfter > 0 {
		go func() {
			if err := tr.createLive(trCtx, t0.Add(cfg.LiveAfter)); err != nil {
				liveErr <- err
			}
		}()
	}
	others := make([]*process, max(cfg.Replicas, 1)-1)
	for i := range others {
		if others[i], err = startOperator(cfg.Operator, kc, work, fmt.Sprintf("scale-%d", i+2), false); err != nil {
			return nil, err
		}
		defer others[i].stop()
	}
	select {
	case <-tr.done:
	case err := <-liveErr:
		return nil, err
	case <-op.exited:
		return nil, fmt.Errorf("bench: %s exited before convergence\n%s", cfg.Operator.Name, op.tail())
	case <-time.After(cfg.Timeout):
		return nil, fmt.Errorf("bench: %s: not converged within %v: %s\n%s", cfg.Operator.Name, cfg.Timeout, tr.describe(), op.tail())
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	st, err := readProc(op.pid())
	if err != nil {
		return nil, err
	}
	res.Converge = tr.at.Sub(t0)
	res.CPU, res.PeakRSS, res.SteadyRSS, res.FileRSS = st.cpu, st.hwm, st.rss, st.file
	if len(others) > 0 {
		res.PerReplica = append(res.PerReplica, ReplicaStat{st.cpu, st.hwm, st.file})
		for _, o := range others {
			ost, err := readProc(o.pid())
			if err != nil {
				return nil, err
			}
			res.PerReplica = append(res.PerReplica, ReplicaStat{ost.cpu, ost.hwm, ost.file})
			res.CPU += ost.cpu
			res.PeakRSS = max(res.PeakRSS, ost.hwm)
		}
	}
	logf("converged in %v, cpu %v, peak RSS %d MiB", res.Converge.Round(time.Millisecond), res.CPU, res.PeakRSS>>20)
	if cfg.LiveAfter > 0 {
		tr.mu.Lock()
		res.Live, res.LiveRank = tr.liveAt.Sub(tr.liveCreated), tr.liveRank
		tr.mu.Unlock()
		logf("%s: status %v after its create, %d of %d Widgets had one by then", LiveWidget, res.Live.Round(time.Millisecond), res.LiveRank, tr.n)
	}

	if err := waitQuiet(ctx, append([]*process{op}, others...), res, tr.at); err != nil {
		return nil, err
	}
	if scraped != nil {
		stopScrapes()
		sc := <-scraped
		res.Scrapes, res.NearLimit, res.MemoryFailed, res.SoftLimit, res.Caches = sc.n, sc.near, sc.memoryFailed, sc.softLimit, sc.caches
		logf("%d scrapes: %s at 1 in %d, /readyz's memory check failed in %d; soft limit %d B",
			sc.n, MemoryNearLimit, sc.near, sc.memoryFailed, sc.softLimit)
	}
	if res.NotQuiet {
		logf("not quiet within %v of convergence; cpu %v by then", QuietDeadline, res.QuietCPU)
	} else {
		logf("quiet %v after the start, cpu %v", res.Quiet.Round(time.Millisecond), res.QuietCPU)
	}

	// A fixed window to see the absence of trailing work: the last
	// status writes come back as watch events that must change nothing.
	time.Sleep(cfg.Settle)
	if cfg.Idle > 0 {
		before, err := readProc(op.pid())
		if err != nil {
			return nil, err
		}
		// A fixed observation window: idle CPU is what the operator uses
		// over it when nothing changes.
		time.Sleep(cfg.Idle)
		after, err := readProc(op.pid())
		if err != nil {
			return nil, err
		}
		res.IdleCPU, res.IdleWindow = after.cpu-before.cpu, cfg.Idle
		res.SteadyRSS = after.rss
	} else if st, err := readProc(op.pid()); err == nil {
		res.SteadyRSS = st.rss
	}
	end := time.Now()
	stopTracker()

	// The audit log is written as responses complete; give the last ones
	// a moment to land by waiting for an event newer than end.
	events, err := auditAfter(ctx, p, end)
	if err != nil {
		return nil, err
	}
	res.Requests = CountRequests(events, cfg.Operator.User(), t0, end)
	logf("requests: %d (%d lists, %d watches, %d writes, %d other)", res.Requests.Total,
		res.Requests.Lists, res.Requests.Watches, res.Requests.Writes, res.Requests.Other)
	if cfg.Restart {
		op.stop()
		if err := restart(ctx, cfg, p, kc, work, res, logf); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// QuietFor is how long an operator's CPU time must not move for it to be
// quiet; QuietDeadline bounds the wait for that after convergence.
const (
	QuietFor      = 2 * time.Second
	QuietDeadline = time.Minute
)

// waitQuiet reads the CPU time of the processes (their sum) every 100 ms
// from convergence at until it has not moved for QuietFor, or until
// QuietDeadline after at, and sets res's QuietCPU, Quiet and NotQuiet.
// It reads /proc only: the plane does not see it.
func waitQuiet(ctx context.Context, procs []*process, res *Result, at time.Time) error {
	q := quiet{window: QuietFor}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		var cpu time.Duration
		for _, p := range procs {
			st, err := readProc(p.pid())
			if err != nil {
				return err
			}
			cpu += st.cpu
		}
		now := time.Now()
		done := q.add(now, cpu)
		res.QuietCPU, res.Quiet = q.cpu, q.since.Sub(procs[0].started)
		if done {
			return nil
		}
		if now.Sub(at) >= QuietDeadline {
			res.NotQuiet = true
			return nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// quiet finds when a series of CPU readings, taken in time order, stopped
// moving. The zero value, with a window set, has seen no reading.
type quiet struct {
	window time.Duration // how long the CPU must not move; positive
	seen   bool          // a reading was added
	cpu    time.Duration // the last reading
	since  time.Time     // the first reading of cpu's value: the CPU last moved just before it
}

// add takes the reading cpu at t and reports whether the CPU has not moved
// for the window since.
func (q *quiet) add(t time.Time, cpu time.Duration) bool {
	if !q.seen || cpu != q.cpu {
		q.seen, q.cpu, q.since = true, cpu, t
		return false
	}
	return t.Sub(q.since) >= q.window
}

// restart starts the operator again over the converged Widgets, times its
// readiness and counts its requests over a fixed window: Settle plus half
// the first convergence time, long enough for a pass over every Widget.
func restart(ctx context.Context, cfg Config, p *controlplane.Plane, kc, work string, res *Result, logf func(string, ...any)) error {
	logf("restarting the operator")
	op, err := startOperator(cfg.Operator, kc, work, "restart", false)
	if err != nil {
		return err
	}
	defer op.stop()
	if res.RestartReady, err = op.waitReady(ctx, cfg.Timeout); err != nil {
		return fmt.Errorf("bench: %s restart: %w\n%s", cfg.Operator.Name, err, op.tail())
	}
	// A fixed window to see the absence of writes.
	time.Sleep(cfg.Settle + res.Converge/2)
	end := time.Now()
	events, err := auditAfter(ctx, p, end)
	if err != nil {
		return err
	}
	res.RestartRequests = CountRequests(events, cfg.Operator.User(), op.started, end)
	st, err := readProc(op.pid())
	if err != nil {
		return err
	}
	res.RestartRSS = st.hwm
	logf("restart: ready in %v; %d requests, %d writes; peak RSS %.1f MiB", res.RestartReady.Round(time.Millisecond),
		res.RestartRequests.Total, res.RestartRequests.Writes, float64(res.RestartRSS)/(1<<20))
	return nil
}

// RepoRoot is the repository's top folder.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

// install applies the namespace, the CRD and the RBAC, creates the
// Widgets' namespace, gives the operator's ServiceAccount its permissions
// and writes the operator's kubeconfig, which it returns.
func install(ctx context.Context, p *controlplane.Plane, root string, op Operator, dir string) (string, error) {
	if err := kubectl(ctx, p, root, "apply", "-f", "manifests/namespace.yaml", "-f", "manifests/crd.yaml", "-f", "manifests/rbac/"); err != nil {
		return "", err
	}
	if err := kubectl(ctx, p, root, "wait", "--for=condition=Established", "--timeout=60s", "crd/widgets.example.com"); err != nil {
		return "", err
	}
	if err := p.CreateNamespace(ctx, WidgetNamespace); err != nil {
		return "", err
	}
	return grant(ctx, p, root, op, dir)
}

// kubectl runs kubectl as the admin in the folder root.
func kubectl(ctx context.Context, p *controlplane.Plane, root string, args ...string) error {
	cmd := exec.CommandContext(ctx, p.Binaries().Kubectl, append([]string{"--kubeconfig", p.Kubeconfig()}, args...)...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("bench: kubectl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// grant creates the operator's ServiceAccount (in a namespace that
// exists), binds it to cluster-admin when op says so, and writes in dir a
// kubeconfig that reads a token of it from a file; it returns its path.
func grant(ctx context.Context, p *controlplane.Plane, root string, op Operator, dir string) (string, error) {
	if err := p.CreateServiceAccount(ctx, op.Namespace, op.ServiceAccount); err != nil {
		return "", err
	}
	if op.ClusterAdmin {
		if err := kubectl(ctx, p, root, "create", "clusterrolebinding", op.ServiceAccount+"-admin", "--clusterrole=cluster-admin",
			"--serviceaccount="+op.Namespace+":"+op.ServiceAccount); err != nil {
			return "", err
		}
	}
	saDir := filepath.Join(dir, "serviceaccount")
	if err := p.WriteServiceAccountDir(ctx, saDir, op.Namespace, op.ServiceAccount); err != nil {
		return "", err
	}
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: operator
  user:
    tokenFile: %s
contexts:
- name: operator
  context:
    cluster: local
    user: operator
current-context: operator
`, p.Host(), filepath.Join(saDir, "ca.crt"), filepath.Join(saDir, "token"))
	path := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		return "", err
	}
	return path, nil
}

func adminClient(p *controlplane.Plane) (*k8sapi.Client, error) {
	cert, key := p.AdminCertificate()
	return k8sapi.New(&k8sapi.Config{Host: p.Host(), CAData: p.CAData(), CertData: cert, KeyData: key, UserAgent: "widget-bench"})
}

// createWidgets creates n Widgets, w-00000 and on, with a few workers,
// and returns them as created.
func createWidgets(ctx context.Context, c *k8sapi.Client, n int) ([]*widget.Widget, error) {
	created := make([]*widget.Widget, n)
	err := parallel(n, func(i int) error {
		var err error
		created[i], err = createWidget(ctx, c, fmt.Sprintf("w-%05d", i))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("bench: creating widgets: %w", err)
	}
	return created, nil
}

// createWidget creates the Widget name, as every Widget of the bench.
func createWidget(ctx context.Context, c *k8sapi.Client, name string) (*widget.Widget, error) {
	replicas := int32(1)
	w := &widget.Widget{
		TypeMeta:   k8sapi.TypeMeta{APIVersion: widget.WidgetAPIVersion, Kind: widget.WidgetKind},
		ObjectMeta: k8sapi.ObjectMeta{Name: name},
		Spec:       widget.WidgetSpec{Image: "registry.example/widget:1.0", Replicas: &replicas},
	}
	return k8sapi.For[widget.Widget](c, widget.Widgets).Create(ctx, WidgetNamespace, w, k8sapi.WriteOptions{})
}

// parallel calls do for 0 to n-1 with 8 goroutines, and returns the first
// error; it starts no call after one has failed.
func parallel(n int, do func(i int) error) error {
	next := make(chan int)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range next {
				if err := do(i); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		})
	}
	var err error
loop:
	for i := range n {
		select {
		case next <- i:
		case err = <-errs:
			break loop
		}
	}
	close(next)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	return err
}

// tracker watches, as the admin user, for the moment every one of n
// objects is done in each of its sets: for the Widgets, every Widget has a
// status phase, a Deployment and a Service. Its methods are safe for
// concurrent use.
type tracker struct {
	n     int
	c     *k8sapi.Client
	done  chan struct{}
	names []string // what each set holds, for describe

	mu   sync.Mutex
	sets []map[string]bool // per set, the names of the objects done
	at   time.Time         // when done was closed
	// With createLive: when LiveWidget's create was sent, when it got
	// a phase, and how many Widgets had one then.
	liveCreated, liveAt time.Time
	liveRank            int
}

// The sets of a Widget tracker.
const (
	phased = iota
	deploys
	svcs
)

// newTracker tracks n objects in sets of the given names. Nil names means
// the Widgets' three sets.
func newTracker(c *k8sapi.Client, n int, names ...string) *tracker {
	if names == nil {
		names = []string{"Widgets with a phase", "Deployments", "Services"}
	}
	t := &tracker{n: n, c: c, done: make(chan struct{}), names: names}
	for range names {
		t.sets = append(t.sets, map[string]bool{})
	}
	return t
}

// mark says whether the object name is done in the set.
func (t *tracker) mark(set int, name string, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ok {
		t.sets[set][name] = true
	} else {
		delete(t.sets[set], name)
	}
	if ok && set == phased && name == LiveWidget && t.liveAt.IsZero() {
		t.liveAt, t.liveRank = time.Now(), len(t.sets[phased])
	}
	if !t.at.IsZero() {
		return
	}
	for _, s := range t.sets {
		if len(s) < t.n {
			return
		}
	}
	t.at = time.Now()
	close(t.done)
}

// createLive creates LiveWidget at the time at.
func (t *tracker) createLive(ctx context.Context, at time.Time) error {
	select {
	case <-time.After(time.Until(at)):
	case <-ctx.Done():
		return nil
	}
	t.mu.Lock()
	t.liveCreated = time.Now()
	t.mu.Unlock()
	if _, err := createWidget(ctx, t.c, LiveWidget); err != nil && ctx.Err() == nil {
		return fmt.Errorf("bench: creating %s: %w", LiveWidget, err)
	}
	return nil
}

func (t *tracker) describe() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	parts := make([]string, len(t.sets))
	for i, s := range t.sets {
		parts[i] = fmt.Sprintf("%d %s", len(s), t.names[i])
	}
	return fmt.Sprintf("of %d: %s", t.n, strings.Join(parts, ", "))
}

// start runs the three watches of the Widgets and returns once they have
// synced.
func (t *tracker) start(ctx context.Context) error {
	onWidget := func(w *widget.Widget) { t.mark(phased, w.Name, w.Status.Phase != "") }
	widgets := watch.New(watch.Config[widget.Widget]{
		Source:    watch.ClientSource[widget.Widget](t.c, widget.Widgets),
		Namespace: WidgetNamespace,
		Handler: watch.Handler[widget.Widget]{
			OnAdd:    onWidget,
			OnUpdate: func(_, w *widget.Widget) { onWidget(w) },
		},
	})
	deployments := watch.New(watch.Config[k8sapi.Deployment]{
		Source:    watch.ClientSource[k8sapi.Deployment](t.c, k8sapi.Deployments),
		Namespace: WidgetNamespace,
		Handler:   watch.Handler[k8sapi.Deployment]{OnAdd: func(d *k8sapi.Deployment) { t.mark(deploys, d.Name, true) }},
	})
	services := watch.New(watch.Config[k8sapi.Service]{
		Source:    watch.ClientSource[k8sapi.Service](t.c, k8sapi.Services),
		Namespace: WidgetNamespace,
		Handler:   watch.Handler[k8sapi.Service]{OnAdd: func(s *k8sapi.Service) { t.mark(svcs, s.Name, true) }},
	})
	go widgets.Run(ctx)
	go deployments.Run(ctx)
	go services.Run(ctx)
	return waitSynced(ctx, widgets.HasSynced, deployments.HasSynced, services.HasSynced)
}

// waitSynced returns once every synced func reports true, or fails after
// a minute.
func waitSynced(ctx context.Context, synced ...func() bool) error {
	deadline := time.Now().Add(time.Minute)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for _, ok := range synced {
		for !ok() {
			if time.Now().After(deadline) {
				return errors.New("bench: the tracker's watches did not sync within a minute")
			}
			select {
			case <-tick.C:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return nil
}

// process is a running operator.
type process struct {
	cmd     *exec.Cmd
	started time.Time
	exited  chan struct{}
	probe   string // host:port of the probe endpoint
	metrics string // host:port of the plain HTTP metrics endpoint; "" for none
	logPath string
}

// startOperator starts op with a probe endpoint on a free port and, when
// metrics is set, a plain HTTP metrics endpoint on another.
func startOperator(op Operator, kubeconfig, dir, tag string, metrics bool) (*process, error) {
	probe, err := freeAddr()
	if err != nil {
		return nil, err
	}
	metricsAddr, extra := "0", []string(nil)
	if metrics {
		if metricsAddr, err = freeAddr(); err != nil {
			return nil, err
		}
		extra = []string{"--metrics-secure=false"}
	}
	args := append([]string{"--kubeconfig", kubeconfig, "--metrics-bind-address", metricsAddr, "--health-probe-bind-address", probe}, extra...)
	pr, err := spawn(op, append(args, op.Args...), dir, tag)
	if err == nil {
		pr.probe = probe
		if metrics {
			pr.metrics = metricsAddr
		}
	}
	return pr, err
}

// freeAddr returns a loopback host:port that was free a moment ago.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// spawn starts op's binary with args, its output to a log in dir.
func spawn(op Operator, args []string, dir, tag string) (*process, error) {
	logPath := filepath.Join(dir, strings.NewReplacer(" ", "-", "/", "-").Replace(op.Name)+"-"+tag+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(op.Binary, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if op.Env != nil {
		cmd.Env = append(os.Environ(), op.Env...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	pr := &process{cmd: cmd, exited: make(chan struct{}), logPath: logPath}
	pr.started = time.Now()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("bench: starting %s: %w", op.Name, err)
	}
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(pr.exited)
	}()
	return pr, nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

// waitReady polls /readyz every 5 ms and returns the time from the start
// of the process to the first 200.
func (p *process) waitReady(ctx context.Context, timeout time.Duration) (time.Duration, error) {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := client.Get("http://" + p.probe + "/readyz")
		if err == nil {
			code := resp.StatusCode
			resp.Body.Close()
			if code == http.StatusOK {
				return time.Since(p.started), nil
			}
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("not ready within %v", timeout)
		}
		select {
		case <-tick.C:
		case <-p.exited:
			return 0, errors.New("exited before it was ready")
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// MemoryNearLimit is the Widget operator's gauge of its memory check,
// which Config.Scrape reads.
const MemoryNearLimit = "widget_operator_memory_near_limit"

// scrapes is what scrape found (see the scrape fields of Result): n
// reads of both endpoints, near of them with MemoryNearLimit at 1,
// memoryFailed with /readyz's memory check failed, and the soft memory
// limit last served.
type scrapes struct {
	n, near, memoryFailed int
	softLimit             int64
	caches                []CacheStat
}

// scrape reads the process's /metrics and /readyz every interval until
// ctx ends, then sends what it found and closes the channel. A read that
// fails is not counted.
func (p *process) scrape(ctx context.Context, every time.Duration) <-chan scrapes {
	out := make(chan scrapes, 1)
	go func() {
		defer close(out)
		client := &http.Client{Timeout: time.Second}
		get := func(path string, want int) (string, bool) {
			resp, err := client.Get("http://" + path)
			if err != nil {
				return "", false
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			return string(body), err == nil && (resp.StatusCode == http.StatusOK || resp.StatusCode == want)
		}
		var r scrapes
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				out <- r
				return
			case <-tick.C:
			}
			m, okM := get(p.metrics+"/metrics", http.StatusOK)
			rz, okR := get(p.probe+"/readyz", http.StatusServiceUnavailable)
			if !okM || !okR {
				continue
			}
			r.n++
			if v, ok := gauge(m, MemoryNearLimit); ok && v == 1 {
				r.near++
			}
			if strings.Contains(rz, "[-]memory ") {
				r.memoryFailed++
			}
			if v, ok := gauge(m, "go_gc_gomemlimit_bytes"); ok {
				r.softLimit = int64(v)
			}
			if c := caches(m); len(c) > 0 {
				r.caches = c
			}
		}
	}()
	return out
}

// gauge returns the value of the sample named name, without labels, in
// the Prometheus text exposition body; ok is false when there is none.
func gauge(body, name string) (v float64, ok bool) {
	for line := range strings.Lines(body) {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != name {
			continue
		}
		if _, err := fmt.Sscan(f[1], &v); err == nil {
			return v, true
		}
	}
	return 0, false
}

// caches returns the cache gauges of the exposition body, one CacheStat
// per resource label of CacheObjects, with its CacheBytes.
func caches(body string) []CacheStat {
	var out []CacheStat
	at := map[string]int{}
	for line := range strings.Lines(body) {
		name, rest, ok := strings.Cut(line, `{resource="`)
		if !ok || name != CacheObjects && name != CacheBytes {
			continue
		}
		res, value, ok := strings.Cut(rest, `"} `)
		var v float64
		if _, err := fmt.Sscan(value, &v); !ok || err != nil {
			continue
		}
		i, seen := at[res]
		if !seen {
			i, at[res] = len(out), len(out)
			out = append(out, CacheStat{Resource: res})
		}
		if name == CacheObjects {
			out[i].Objects = int64(v)
		} else {
			out[i].Bytes = int64(v)
		}
	}
	return out
}

// stop sends SIGTERM and waits for the exit, killing the process after 30
// seconds.
func (p *process) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// tail returns the end of the process's log.
func (p *process) tail() string {
	data, _ := os.ReadFile(p.logPath)
	if len(data) > 4096 {
		data = data[len(data)-4096:]
	}
	return string(data)
}

// procStat is what /proc tells about a process.
type procStat struct {
	cpu            time.Duration // utime + stime
	hwm, rss, file int64         // VmHWM, VmRSS and RssFile in bytes
}

// clockTick is the unit of utime and stime in /proc/<pid>/stat: USER_HZ,
// which is 100 on every Linux architecture the project supports.
const clockTick = 10 * time.Millisecond

func readProc(pid int) (procStat, error) {
	var st procStat
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return st, fmt.Errorf("bench: %w", err)
	}
	// Fields after the command name, which is in parentheses and may hold
	// spaces: state is field 3, utime 14 and stime 15.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return st, fmt.Errorf("bench: /proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return st, fmt.Errorf("bench: /proc/%d/stat: %d fields", pid, len(f))
	}
	var utime, stime int64
	if _, err := fmt.Sscan(f[11], &utime); err != nil {
		return st, fmt.Errorf("bench: /proc/%d/stat utime: %w", pid, err)
	}
	if _, err := fmt.Sscan(f[12], &stime); err != nil {
		return st, fmt.Errorf("bench: /proc/%d/stat stime: %w", pid, err)
	}
	st.cpu = time.Duration(utime+stime) * clockTick
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return st, fmt.Errorf("bench: %w", err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		var kb int64
		switch {
		case strings.HasPrefix(line, "VmHWM:"):
			fmt.Sscan(strings.TrimPrefix(line, "VmHWM:"), &kb)
			st.hwm = kb << 10
		case strings.HasPrefix(line, "VmRSS:"):
			fmt.Sscan(strings.TrimPrefix(line, "VmRSS:"), &kb)
			st.rss = kb << 10
		case strings.HasPrefix(line, "RssFile:"):
			fmt.Sscan(strings.TrimPrefix(line, "RssFile:"), &kb)
			st.file = kb << 10
		}
	}
	return st, nil
}

// auditAfter reads the audit log once it holds an event received after t,
// or after 10 seconds, whichever is first; the admin's own probe request
// makes such an event.
func auditAfter(ctx context.Context, p *controlplane.Plane, t time.Time) ([]controlplane.AuditEvent, error) {
	_ = p.Do(ctx, http.MethodGet, "/api/v1/namespaces/default", nil, nil)
	deadline := time.Now().Add(10 * time.Second)
	for {
		events, err := p.AuditEvents()
		if err != nil {
			return nil, err
		}
		if len(events) > 0 && events[len(events)-1].Received.After(t) || time.Now().After(deadline) {
			return events, nil
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// CountRequests counts the distinct requests of user received between from
// and to.
func CountRequests(events []controlplane.AuditEvent, user string, from, to time.Time) Requests {
	r := Requests{By: map[string]int{}}
	seen := map[string]bool{}
	for _, e := range events {
		if e.User != user || e.Received.Before(from) || e.Received.After(to) || seen[e.AuditID] {
			continue
		}
		seen[e.AuditID] = true
		r.Total++
		if e.Code >= 400 {
			r.Failed++
		}
		switch e.Verb {
		case "list":
			r.Lists++
		case "watch":
			r.Watches++
		case "create", "update", "patch", "delete", "deletecollection":
			if e.Resource == "events" {
				r.Events++ // Events are reported, not counted as object writes
			} else {
				r.Writes++
			}
		default:
			r.Other++
		}
		what := e.Resource
		if e.Subresource != "" {
			what += "/" + e.Subresource
		}
		if what == "" {
			what = e.RequestURI
			if i := strings.IndexByte(what, '?'); i >= 0 {
				what = what[:i]
			}
		}
		r.By[e.Verb+" "+what]++
	}
	return r
}

// String lists the counts by kind, most first.
func (r Requests) String() string {
	keys := make([]string, 0, len(r.By))
	for k := range r.By {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if r.By[keys[i]] != r.By[keys[j]] {
			return r.By[keys[i]] > r.By[keys[j]]
		}
		return keys[i] < keys[j]
	})
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s: %d", k, r.By[k])
	}
	return b.String()
}
