// Package manager runs one operator process: its controllers
// ([reconcile.Controller]) with one cache per resource shared between
// them, one leader election or set of shards for them all, the probe
// endpoints (/healthz, /readyz), /metrics (over HTTPS, each scrape
// authenticated by a TokenReview and authorized by a SubjectAccessReview,
// by default), the Event recorder, and a graceful drain when it stops.
package manager

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/zerodep-k8s/widget-operator/events"
	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/metrics"
	"github.com/zerodep-k8s/widget-operator/reconcile"
)

// Config configures a [Manager].
type Config struct {
	// Name names the operator, such as "my-operator": the reporting
	// controller of its Events and, with each '-' as '_', the default
	// MetricsPrefix. Required.
	Name string
	// Client writes the Events. Required.
	Client *k8sapi.Client
	// ReviewClient sends the TokenReview and SubjectAccessReview of each
	// scrape of /metrics. Give it no rate limit (k8sapi.Config QPS zero),
	// as the LeaderElection's client, so that a scrape does not wait
	// behind reconciles. Nil means Client.
	ReviewClient *k8sapi.Client
	// Logger receives the lines of the manager and, unless they have their
	// own, of its controllers. Nil means no logging.
	Logger *slog.Logger
	// MetricsPrefix starts the names of the operator's own series:
	// <prefix>_leader, <prefix>_watch_*, <prefix>_cache_*,
	// <prefix>_events_dropped_total, <prefix>_memory_near_limit and, with shards, <prefix>_shards_held and
	// <prefix>_shard_transitions_total. Empty means Name with '-' as '_'.
	MetricsPrefix string
	// LeaderElection, when not nil, elects one leader (or shares shards)
	// for every controller: see [reconcile.LeaderElection]. Nil means no
	// leader election.
	LeaderElection *reconcile.LeaderElection
	// ProbeAddr and MetricsAddr are the listen addresses of the probe
	// endpoints and of /metrics; "" or "0" turns one off.
	ProbeAddr, MetricsAddr string
	// InsecureMetrics serves /metrics over plain HTTP to anyone. False
	// (the default) serves it over HTTPS, each scrape authenticated by a
	// TokenReview and authorized by a SubjectAccessReview.
	InsecureMetrics bool
	// MetricsCertDir holds tls.crt and tls.key for /metrics; empty means
	// a self-signed certificate made at start.
	MetricsCertDir string
	// ShutdownTimeout is the ShutdownTimeout of each controller that has
	// none. Zero means reconcile.DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// MemoryInterval is how often the manager checks the live heap and
	// the runtime's own memory against the soft memory limit, and the
	// garbage collector's share of the CPU (see [Manager.Run]). Zero
	// means 10 seconds; a negative interval turns the check off.
	MemoryInterval time.Duration
	// Runnables run beside the controllers, such as a webhook server
	// (package manager/webhook): Run runs each until its context ends,
	// an error of one stops the others as a controller's does, and
	// /readyz answers for their checks too. Nil means none.
	Runnables []Runnable
}

// A Runnable runs with the controllers of a [Manager] and reports its
// readiness, as a [reconcile.Controller] does: Run returns when ctx
// ends, nil after a clean stop; Checks is called from /readyz at any
// time, before, during and after Run.
type Runnable interface {
	Run(ctx context.Context) error
	Checks(now time.Time) []reconcile.Check
}

// Manager runs the controllers of one operator process. Make it with
// [New], add controllers with [Manager.Add], then call [Manager.Run]
// once. Its methods are safe for concurrent use.
type Manager struct {
	cfg      Config
	log      *slog.Logger // Config.Logger, or one that discards
	registry *metrics.Registry
	recorder *events.Recorder
	caches   *reconcile.Caches
	election *reconcile.Election

	mu      sync.Mutex
	ctrls   []*reconcile.Controller // in the order added
	running bool                    // Run was called: no more Add
	memory  memoryState             // as of the last sample (see watchMemory)
}

// New returns a manager for cfg, or an error when cfg is incomplete.
func New(cfg Config) (*Manager, error) {
	if cfg.Name == "" || cfg.Client == nil {
		return nil, errors.New("manager: Config.Name and Config.Client are required")
	}
	m := &Manager{cfg: cfg, log: cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler)), registry: metrics.NewRegistry()}
	prefix := cmp.Or(cfg.MetricsPrefix, strings.ReplaceAll(cfg.Name, "-", "_"))
	m.cfg.MetricsPrefix = prefix
	m.cfg.MemoryInterval = cmp.Or(cfg.MemoryInterval, defaultMemoryInterval)
	rec, err := events.New(events.Config{Client: cfg.Client, Controller: cfg.Name, Logger: m.log})
	if err != nil {
		return nil, err
	}
	m.recorder = rec
	m.caches = &reconcile.Caches{Metrics: metrics.NewWatchMetrics(prefix)}
	m.election = &reconcile.Election{LeaderElection: cfg.LeaderElection, Logger: m.log, Metrics: m.registry, MetricsPrefix: prefix}
	for _, c := range []metrics.Collector{m.caches.Metrics, metrics.NewRuntimeCollector(time.Now()),
		metrics.NewCounterFunc(prefix+"_events_dropped_total",
			"Events not written: queue full, rate limited or refused by the API server.",
			func() float64 { return notWritten(rec.Stats()) }),
		metrics.NewGaugeFunc(prefix+"_memory_near_limit",
			"1 while the heap live after a GC, with the runtime's stacks and metadata, is near the soft memory limit (from 90% of it until back under 80%), else 0.",
			func() float64 {
				if m.memoryState().near {
					return 1
				}
				return 0
			})} {
		if err := m.registry.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Recorder returns the Event recorder, which reports as Config.Name and
// runs with the manager.
func (m *Manager) Recorder() *events.Recorder { return m.recorder }

// Registry returns the metrics registry that /metrics serves.
func (m *Manager) Registry() *metrics.Registry { return m.registry }

// Add adds a controller for Run to run, and gives it the manager's
// shared caches and election, and the manager's registry, metric prefix,
// logger and shutdown timeout where it has none of its own. Call it
// before the controller's first WatchPrimary, WatchOwned or WatchMapped,
// and before Run. It returns an error for a controller without a name,
// with a name taken, with caches, an election or a LeaderElection of its
// own, or added after Run.
func (m *Manager) Add(c *reconcile.Controller) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.running {
		return errors.New("manager: Add after Run")
	}
	if c == nil || c.Name == "" || c.Caches != nil || c.Election != nil || c.LeaderElection != nil ||
		slices.ContainsFunc(m.ctrls, func(o *reconcile.Controller) bool { return o.Name == c.Name }) {
		return errors.New("manager: Add: a controller needs a Name no other has, and no Caches, Election or LeaderElection (see Config.LeaderElection)")
	}
	c.Caches, c.Election = m.caches, m.election
	c.Metrics = cmp.Or(c.Metrics, m.registry)
	c.MetricsPrefix = cmp.Or(c.MetricsPrefix, m.cfg.MetricsPrefix)
	c.Logger = cmp.Or(c.Logger, m.cfg.Logger)
	c.ShutdownTimeout = cmp.Or(c.ShutdownTimeout, m.cfg.ShutdownTimeout)
	m.ctrls = append(m.ctrls, c)
	return nil
}

// Run serves the endpoints, then runs the shared caches, the election,
// the Event writer, every controller and Config.Runnables until ctx
// ends; then the controllers drain their reconciles in flight (see
// reconcile.Controller.ShutdownTimeout), and the caches, the election
// (which releases its Leases), the Event writer and the endpoints stop
// after them. It returns an error when an endpoint cannot start (such
// as a port in use), or when a controller or a Runnable cannot (which
// stops the others), and nil after a clean shutdown.
//
// Meanwhile, every Config.MemoryInterval, it checks the heap live after
// the last GC, with the runtime's own memory (its stacks and metadata,
// which the limit bounds too), against the soft memory limit
// (debug.SetMemoryLimit, GOMEMLIMIT). When they reach 90% of the limit,
// it logs a warning and sets <prefix>_memory_near_limit to 1, until they
// go back under 80%, which it logs too. While the limit is near, an
// interval in which the garbage collector (with the scavenger) takes
// half of the CPU the process used, or more (and a tenth of the CPU
// time GOMAXPROCS allows), is one in which the operator can hardly make
// progress: it logs that, and /readyz fails a check named "memory",
// until the collector's share goes under a quarter (or a twentieth).
func (m *Manager) Run(ctx context.Context) error {
	m.mu.Lock()
	ctrls, running := m.ctrls, m.running // no Add from now on
	m.running = true
	m.mu.Unlock()
	if running {
		return errors.New("manager: Run called twice")
	}
	runs := slices.Clone(m.cfg.Runnables)
	for _, c := range ctrls {
		runs = append(runs, c)
	}
	servers, err := m.serve(runs)
	if err != nil {
		return err
	}
	defer shutdownServers(servers)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The shared parts run until the very end: they stop only after the
	// controllers' workers.
	// The election's one error, a Lease's bad configuration, is each
	// controller's too.
	bgCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	var bg, wg sync.WaitGroup
	for _, run := range []func(context.Context){m.caches.Run, m.election.Run, m.recorder.Run, m.watchMemory} {
		bg.Go(func() { run(bgCtx) })
	}
	errs := make([]error, len(runs))
	for i, c := range runs {
		wg.Go(func() {
			if errs[i] = c.Run(ctx); errs[i] != nil {
				cancel()
			}
		})
	}
	wg.Wait()
	stop()
	bg.Wait()
	return cmp.Or(errs...)
}

// notWritten counts the Events of st that were not written: dropped from a
// full queue, refused by a rate limit, or refused by the API server.
func notWritten(st events.Stats) float64 {
	return float64(st.Dropped + st.RateLimited + st.Failed)
}
