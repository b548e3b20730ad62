// Package operator wires the Widget operator together: configuration, the
// watches of Widgets and their children, the work queue and the reconciler,
// and the probe endpoints. cmd/widget-operator is a thin shell over Run.
package operator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"time"

	"github.com/zerodep-k8s/widget-operator/internal/events"
	"github.com/zerodep-k8s/widget-operator/internal/leader"
	"github.com/zerodep-k8s/widget-operator/internal/metrics"
	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/queue"
	"github.com/zerodep-k8s/widget-operator/reconcile"
	"github.com/zerodep-k8s/widget-operator/watch"
)

// DefaultShutdownTimeout bounds how long in-flight reconciles may run after
// the operator is told to stop.
const DefaultShutdownTimeout = 30 * time.Second

// ControllerName names the controller in logs and metrics.
const ControllerName = "widget"

// Options configure Run. They mirror the command-line flags.
type Options struct {
	// Kubeconfig and Context select the cluster; empty means the usual
	// order ($KUBECONFIG, in-cluster, ~/.kube/config) and current-context.
	Kubeconfig, Context string
	// InClusterDir overrides the service-account folder; empty means the
	// standard one. For tests that run the operator as its ServiceAccount.
	InClusterDir string
	// Namespace limits the operator to one namespace; empty means all.
	Namespace string
	// Workers is the number of concurrent reconciles; zero means 4.
	Workers int
	// MetricsAddr and ProbeAddr are listen addresses; "" or "0" turns the
	// endpoint off.
	MetricsAddr, ProbeAddr string
	// InsecureMetrics serves /metrics over plain HTTP to anyone. False
	// (the default) serves it over HTTPS, each scrape authenticated by a
	// TokenReview and authorized by a SubjectAccessReview.
	InsecureMetrics bool
	// MetricsCertDir holds tls.crt and tls.key for the metrics endpoint;
	// empty means a self-signed certificate made at start.
	MetricsCertDir string
	// LeaderElect, LeaderElectionNamespace and LeaderElectionID configure
	// leader election with a Lease.
	LeaderElect                               bool
	LeaderElectionNamespace, LeaderElectionID string
	// QPS and Burst limit the client's request rate; zero means no limit.
	QPS   float64
	Burst int
	// ShutdownTimeout bounds in-flight reconciles after ctx ends; zero
	// means DefaultShutdownTimeout. With LeaderElect the bound is at most
	// the lease's renew deadline less its retry period (8s), so that the
	// lease is released after them, not left to expire.
	ShutdownTimeout time.Duration
	// Version is the operator's version, logged at start and sent in the
	// User-Agent "widget-operator/<Version>"; empty means "dev".
	Version string
}

// Run runs the operator until ctx ends, then shuts down gracefully. It
// returns an error when the operator cannot start (bad configuration, an
// unreachable API server, a missing CRD or permission) and nil after a clean
// shutdown.
func Run(ctx context.Context, opts Options, log *slog.Logger) error {
	if opts.Workers <= 0 {
		opts.Workers = 4
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = DefaultShutdownTimeout
	}
	cfg, err := k8sapi.Load(k8sapi.LoadOptions{Kubeconfig: opts.Kubeconfig, Context: opts.Context, InClusterDir: opts.InClusterDir})
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = opts.QPS, opts.Burst
	opts.Version = cmp.Or(opts.Version, "dev")
	cfg.UserAgent = "widget-operator/" + opts.Version
	reg := metrics.NewRegistry()
	apiMetrics := metrics.NewAPIMetrics()
	cfg.WrapTransport = apiMetrics.RoundTripper
	client, err := k8sapi.New(cfg)
	if err != nil {
		return err
	}
	scope := "all namespaces"
	if opts.Namespace != "" {
		scope = "namespace " + opts.Namespace
	}
	log.Info("starting widget-operator", "version", opts.Version, "scope", scope,
		"apiServer", hostOf(cfg.Host), "auth", cfg.AuthMethod(), "workers", opts.Workers,
		"leaderElection", opts.LeaderElect)
	if cfg.Insecure {
		log.Warn("TLS verification of the API server is off (insecure-skip-tls-verify in the kubeconfig)")
	}
	if m := cfg.WithheldAuth(); m != "" {
		log.Warn("the API server's URL is http://: credentials are only sent over TLS, so requests go without them", "withheld", m)
	}

	// Listen before anything else, so that a port in use is a start-up
	// error, not a log line.
	eps, err := openEndpoints(opts, cfg, log)
	if err != nil {
		return err
	}

	if err := preflight(ctx, client, opts.Namespace); err != nil {
		eps.close()
		return err
	}

	// Leader election has a client of its own, without the rate limit:
	// a renewal must not wait behind a burst of reconciles, or a busy
	// leader would miss its renew deadline; nor may the release at
	// shutdown. It sends one request per retry period.
	leaseCfg := *cfg
	leaseCfg.QPS, leaseCfg.Burst = 0, 0
	leaseClient, err := k8sapi.New(&leaseCfg)
	if err != nil {
		eps.close()
		return err
	}

	op, err := newOperator(client, leaseClient, opts, log, reg)
	if err != nil {
		eps.close()
		return err
	}
	reg.MustRegister(apiMetrics)
	servers := op.serve(eps)
	err = op.run(ctx)
	shutdownServers(servers)
	return err
}

// preflight makes the first contact fail fast with a clear reason instead of
// a silent backoff loop: no server, no CRD, no permission.
func preflight(ctx context.Context, c *k8sapi.Client, namespace string) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	_, err := k8sapi.For[reconcile.Widget](c, reconcile.Widgets).List(ctx, namespace, k8sapi.ListOptions{Limit: 1})
	switch {
	case err == nil:
		return nil
	case k8sapi.IsNotFound(err):
		return errors.New("the Widget CRD (widgets.example.com) is not installed: kubectl apply -f manifests/crd.yaml")
	case k8sapi.IsForbidden(err) || k8sapi.IsUnauthorized(err):
		return fmt.Errorf("not allowed to list widgets: %w", err)
	case ctx.Err() != nil && errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("cannot reach the API server at %s: no answer in 15s", c.Host())
	}
	return fmt.Errorf("cannot reach the API server at %s: %w", c.Host(), err)
}

func hostOf(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Host != "" {
		return u.Host
	}
	return raw
}

// operator holds the running parts.
type operator struct {
	opts   Options
	log    *slog.Logger
	client *k8sapi.Client

	widgets     *watch.Cache[reconcile.Widget]
	deployments *watch.Cache[k8sapi.Deployment]
	services    *watch.Cache[k8sapi.Service]
	quotas      *watch.Informer[resourceQuota]
	queue       *queue.Queue
	reconciler  *reconcile.WidgetReconciler
	recorder    *events.Recorder
	elector     *leader.Elector // nil without leader election
	registry    *metrics.Registry
	series      *metrics.ControllerSeries
	started     time.Time
}

// childSelector limits the child caches to objects this operator labels, so
// that unrelated Deployments and Services are never cached.
const childSelector = reconcile.LabelManagedBy + "=" + reconcile.FieldManager

// newOperator builds the operator's parts. leaseClient is for leader
// election only.
func newOperator(client, leaseClient *k8sapi.Client, opts Options, log *slog.Logger, reg *metrics.Registry) (*operator, error) {
	op := &operator{opts: opts, log: log, client: client, registry: reg, started: time.Now()}
	wq := metrics.NewWorkqueueMetrics()
	op.queue = queue.New(queue.Config{Name: ControllerName, Metrics: wq.Queue(ControllerName, ControllerName)})
	wq.PollUnfinished(ControllerName, ControllerName, op.queue.Unfinished)
	op.widgets = watch.NewCache(watch.Config[reconcile.Widget]{
		Source:    watch.ClientSource[reconcile.Widget](client, reconcile.Widgets),
		Namespace: opts.Namespace,
		Name:      "widgets",
		Logger:    log,
		// Our own status writes come back as updates too: a reconcile
		// of an unchanged Widget writes nothing.
		Handler: watch.OnChange(func(w *reconcile.Widget) { op.queue.Add(k8sapi.Key(w.Namespace, w.Name)) }),
	})
	op.deployments = watch.NewCache(watch.Config[k8sapi.Deployment]{
		Source:        watch.ClientSource[k8sapi.Deployment](client, k8sapi.Deployments),
		Namespace:     opts.Namespace,
		LabelSelector: childSelector,
		Name:          "deployments",
		Logger:        log,
		Handler:       watch.OnChange(enqueueOwner[k8sapi.Deployment](op.queue)),
	})
	op.services = watch.NewCache(watch.Config[k8sapi.Service]{
		Source:        watch.ClientSource[k8sapi.Service](client, k8sapi.Services),
		Namespace:     opts.Namespace,
		LabelSelector: childSelector,
		Name:          "services",
		Logger:        log,
		Handler:       watch.OnChange(enqueueOwner[k8sapi.Service](op.queue)),
	})
	// ResourceQuotas only wake the Widgets that wait on one: the cache
	// holds their metadata, and no reconcile waits for it to sync.
	op.quotas = watch.New(watch.Config[resourceQuota]{
		Source:    watch.ClientSource[resourceQuota](client, resourceQuotas),
		Namespace: opts.Namespace,
		Name:      "resourcequotas",
		Logger:    log,
		Handler:   watch.OnChange(func(q *resourceQuota) { op.retryQuotaWaiters(q.Namespace) }),
	})
	rec, err := events.New(events.Config{Client: client, Logger: log})
	if err != nil {
		return nil, err
	}
	op.recorder = rec
	op.reconciler = &reconcile.WidgetReconciler{Client: &clusterAPI{op: op}, Recorder: rec}

	if opts.LeaderElect {
		op.elector, err = leader.New(leader.Config{
			Client:    leaseClient,
			Namespace: opts.LeaderElectionNamespace,
			Name:      opts.LeaderElectionID,
			Logger:    log,
		})
		if err != nil {
			return nil, err
		}
	}

	cm := metrics.NewControllerMetrics()
	op.series = cm.Controller(ControllerName, opts.Workers)
	watchMetrics := metrics.NewWatchMetrics(time.Now)
	watchMetrics.Add("widgets", op.widgets)
	watchMetrics.Add("deployments", op.deployments)
	watchMetrics.Add("services", op.services)
	reg.MustRegister(metrics.NewRuntimeCollector(op.started), cm, wq, watchMetrics,
		metrics.NewLeaderMetric(op.isLeader),
		metrics.NewCounterFunc("widget_operator_events_dropped_total",
			"Events not written: queue full, rate limited or refused by the API server.",
			func() float64 { st := rec.Stats(); return float64(st.Dropped + st.RateLimited + st.Failed) }))
	return op, nil
}

// isLeader reports whether this replica may reconcile: always true without
// leader election.
func (op *operator) isLeader() bool {
	return op.elector == nil || op.elector.IsLeader()
}

func (op *operator) run(ctx context.Context) error {
	// Informers and the event writer run until the very end: they stop
	// only after the workers. Followers keep their caches warm too, so
	// that a takeover is fast.
	bgCtx, stopBackground := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	defer func() {
		stopBackground()
		wg.Wait()
		op.log.Info("stopped")
	}()
	wg.Go(func() { op.recorder.Run(bgCtx) })
	for _, run := range []func(context.Context) error{op.widgets.Run, op.deployments.Run, op.services.Run, op.quotas.Run} {
		wg.Go(func() {
			if err := run(bgCtx); err != nil && !errors.Is(err, context.Canceled) {
				op.log.Error("watch stopped", "err", err)
			}
		})
	}

	if !op.waitForSync(ctx) {
		return nil
	}
	op.log.Info("caches synced", "widgets", op.widgets.Store().Len(),
		"deployments", op.deployments.Store().Len(), "services", op.services.Store().Len())

	if op.elector == nil {
		op.lead(ctx, ctx)
		return nil
	}
	op.log.Info("waiting for leadership", "lease", op.opts.LeaderElectionID, "identity", op.elector.Identity())
	err := op.elector.Run(ctx, func(lctx context.Context) { op.lead(ctx, lctx) }, nil)
	if errors.Is(err, leader.ErrLeaseLost) {
		return errors.New("lost the leader-election lease; exiting so that a fresh start can campaign again")
	}
	return err
}

// lead runs the workers until lctx ends. When the process is shutting down
// (ctx ended), reconciles in flight get up to ShutdownTimeout to finish;
// when leadership was lost, they are cancelled at once, since another
// replica may already be acting.
func (op *operator) lead(ctx, lctx context.Context) {
	op.log.Info("starting workers", "workers", op.opts.Workers)
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(lctx))
	defer cancelWork()
	runner := &queue.Runner{
		Queue:   op.queue,
		Workers: op.opts.Workers,
		Logger:  op.log,
		Func: func(_ context.Context, key string) (queue.Result, error) {
			return op.reconcileKey(workCtx, key)
		},
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = runner.Run(lctx)
	}()
	<-lctx.Done()
	if ctx.Err() == nil {
		op.log.Warn("leadership lost: cancelling reconciles in flight")
		cancelWork()
		<-done
		return
	}
	drain := op.drainTimeout()
	op.log.Info("shutting down: finishing reconciles in flight", "timeout", drain)
	timer := time.NewTimer(drain)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		op.log.Warn("shutdown timeout passed with reconciles still in flight; cancelling them")
		cancelWork()
		<-done
	}
}

// drainTimeout is how long reconciles in flight may run once the process
// is stopping: ShutdownTimeout, but with leader election no longer than
// the renew deadline less a retry period. The lease is not renewed while
// they finish, and the elector waits only the renew deadline for them
// before it gives up releasing the lease; work going on past that could
// outlive the lease and overlap the next leader's.
func (op *operator) drainTimeout() time.Duration {
	if op.elector == nil {
		return op.opts.ShutdownTimeout
	}
	return min(op.opts.ShutdownTimeout, leader.DefaultRenewDeadline-leader.DefaultRetryPeriod)
}

// waitForSync waits until every informer has delivered its first list, or
// ctx ends. It polls: syncing is a one-off at start-up.
func (op *operator) waitForSync(ctx context.Context) bool {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		if op.widgets.HasSynced() && op.deployments.HasSynced() && op.services.HasSynced() {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}

func (op *operator) reconcileKey(ctx context.Context, key string) (queue.Result, error) {
	start := time.Now()
	op.series.WorkerStarted()
	defer op.series.WorkerDone()
	defer func() {
		// Count a panic, then let the queue's runner recover it, log it
		// with the key and retry the key with backoff.
		if r := recover(); r != nil {
			op.series.Panicked()
			panic(r)
		}
	}()
	res, err := op.reconciler.Reconcile(ctx, key)
	ns, name, _ := k8sapi.SplitKey(key)
	class := reconcile.Transient
	if err != nil {
		class = reconcile.Classify(err)
	}
	if err != nil && class == reconcile.Moot {
		// Nothing can be created in a namespace being deleted, and the
		// Widget goes with it: retrying would only fail again.
		op.log.Debug("nothing to do; not retrying", "controller", ControllerName, "namespace", ns, "name", name, "err", err)
		return queue.Result{}, nil
	}
	rv := ""
	if w, ok := op.widgets.Store().Get(ns, name); ok {
		rv = w.ResourceVersion
	}
	result := metrics.ResultSuccess
	switch {
	case err != nil:
		result = metrics.ResultError
	case res.RequeueAfter > 0:
		result = metrics.ResultRequeueAfter
	}
	op.series.Reconciled(time.Since(start), result)
	attrs := []any{"controller", ControllerName, "namespace", ns, "name", name, "resourceVersion", rv,
		"result", result, "duration", time.Since(start)}
	switch {
	case err == nil:
		op.log.Debug("reconciled", attrs...)
		return res, nil
	case class == reconcile.Permanent:
		// The Widget's status says why; a change to it or its children
		// brings it back.
		op.series.TerminalError()
		op.log.Warn("reconcile failed; not retrying until the Widget or a child changes", append(attrs, "err", err)...)
		return queue.Result{}, nil
	case class == reconcile.Waiting && res.RequeueAfter > 0:
		op.log.Warn("reconcile failed; waiting", append(attrs, "retryAfter", res.RequeueAfter, "err", err)...)
		return res, nil
	}
	op.log.Error("reconcile failed", append(attrs, "err", err)...)
	return queue.Result{}, err
}

// enqueueOwner returns a function that queues the key of the Widget that
// controls a child, if one does.
func enqueueOwner[T any, P interface {
	*T
	k8sapi.Object
}](q *queue.Queue) func(*T) {
	return func(obj *T) {
		meta := P(obj).GetObjectMeta()
		if ref := meta.ControllerOf(); ref != nil && ref.Kind == reconcile.WidgetKind && ref.APIVersion == reconcile.WidgetAPIVersion {
			q.Add(k8sapi.Key(meta.Namespace, ref.Name))
		}
	}
}

// retryQuotaWaiters retries at once the Widgets of namespace that wait
// on a ResourceQuota: one of its ResourceQuotas changed.
func (op *operator) retryQuotaWaiters(namespace string) {
	for _, key := range op.reconciler.RetryQuota(namespace) {
		op.queue.Add(key)
	}
}

// resourceQuota is a ResourceQuota reduced to its metadata: the operator
// only needs to know that one changed.
type resourceQuota struct {
	k8sapi.TypeMeta
	k8sapi.ObjectMeta `json:"metadata"`
}

var resourceQuotas = k8sapi.Resource{Version: "v1", Resource: "resourcequotas", Namespaced: true}
