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
	"maps"
	"net/url"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/manager"
	"github.com/zerodep-k8s/widget-operator/metrics"
	"github.com/zerodep-k8s/widget-operator/reconcile"
	"github.com/zerodep-k8s/widget-operator/watch"
	"github.com/zerodep-k8s/widget-operator/widget"
)

// ControllerName names the controller in logs and metrics.
const ControllerName = "widget"

// metricsPrefix starts the names of the operator's own series.
const metricsPrefix = "widget_operator"

// Options configure Run. They mirror the command-line flags.
type Options struct {
	// Config gives the endpoints' addresses (MetricsAddr, ProbeAddr),
	// InsecureMetrics, MetricsCertDir and ShutdownTimeout (bounded, with
	// leader election, by the Lease's renew deadline less its retry
	// period: 8s). Run sets the rest.
	manager.Config
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
	// LeaderElect, LeaderElectionNamespace and LeaderElectionID configure
	// leader election with a Lease.
	LeaderElect                               bool
	LeaderElectionNamespace, LeaderElectionID string
	// Shards, above 1, splits the Widgets into that many shards, each a
	// Lease <LeaderElectionID>-shard-<k> in LeaderElectionNamespace, and
	// the replicas share them (reconcile.LeaderElection.Shards) instead
	// of electing one leader. Zero or 1 means no sharding.
	Shards int
	// QPS and Burst limit the client's request rate; zero means no limit.
	QPS   float64
	Burst int
	// Version is the operator's version, logged at start and sent in the
	// User-Agent "widget-operator/<Version>"; empty means "dev".
	Version string
}

// Run runs the operator until ctx ends, then shuts down gracefully. It
// returns an error when the operator cannot start (bad configuration, an
// unreachable API server, a missing CRD or permission) and nil after a clean
// shutdown.
func Run(ctx context.Context, opts Options, log *slog.Logger) error {
	opts.Workers = cmp.Or(max(opts.Workers, 0), 4)
	cfg, err := k8sapi.Load(k8sapi.LoadOptions{Kubeconfig: opts.Kubeconfig, Context: opts.Context, InClusterDir: opts.InClusterDir})
	if err != nil {
		return err
	}
	opts.Version = cmp.Or(opts.Version, "dev")
	cfg.UserAgent = "widget-operator/" + opts.Version
	identity := ""
	if opts.Shards > 1 {
		// Replicas share one ServiceAccount: their identity in the
		// User-Agent tells them apart in the API server's audit log.
		if identity, err = reconcile.NewIdentity(); err != nil {
			return err
		}
		cfg.UserAgent += " (" + identity + ")"
	}
	apiMetrics := metrics.NewAPIMetrics(metricsPrefix)
	cfg.WrapTransport = apiMetrics.RoundTripper
	// Leader election, sharding and the metrics endpoint's reviews share a
	// client without the rate limit (Load sets none): a renewal must not
	// wait behind a burst of reconciles, or a busy leader would miss its
	// renew deadline; nor may the release at shutdown, nor a scrape. The
	// Leases cost one request per retry period; the review filter bounds
	// its own.
	unlimited, err := k8sapi.New(cfg)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = opts.QPS, opts.Burst
	client, err := k8sapi.New(cfg)
	if err != nil {
		return err
	}
	logStart(log, opts, cfg)
	if err := preflight(ctx, client, opts.Namespace); err != nil {
		return err
	}
	split := splitCaches(ctx, client, opts, log)
	mcfg := opts.Config
	mcfg.Name, mcfg.Client, mcfg.ReviewClient, mcfg.Logger, mcfg.MetricsPrefix = "widget-operator", client, unlimited, log, metricsPrefix
	mcfg.LeaderElection = leaderElection(opts, unlimited, identity)
	if split { // with shards, so with Leases
		mcfg.LeaderElection.SplitCaches = true
	}
	m, err := manager.New(mcfg)
	if err != nil {
		return err
	}
	if err := newOperator(m, client, opts, log, split); err != nil {
		return err
	}
	m.Registry().MustRegister(apiMetrics)
	// A port in use is a start-up error, not a log line.
	err = m.Run(ctx)
	log.Info("stopped")
	return err
}

// logStart logs what the operator starts with, and warns of an API server
// whose TLS certificate goes unchecked or that gets no credentials.
func logStart(log *slog.Logger, opts Options, cfg *k8sapi.Config) {
	scope := "all namespaces"
	if opts.Namespace != "" {
		scope = "namespace " + opts.Namespace
	}
	log.Info("starting widget-operator", "version", opts.Version, "scope", scope,
		"apiServer", hostOf(cfg.Host), "auth", cfg.AuthMethod(), "workers", opts.Workers,
		"leaderElection", opts.LeaderElect, "shards", max(opts.Shards, 1))
	if cfg.Insecure {
		log.Warn("TLS verification of the API server is off (insecure-skip-tls-verify in the kubeconfig)")
	}
	if m := cfg.WithheldAuth(); m != "" {
		log.Warn("the API server's URL is http://: credentials are only sent over TLS, so requests go without them", "withheld", m)
	}
}

// leaderElection returns the Leases that opts ask for, written with client
// as identity: with LeaderElect or Shards above 1 (shards need their
// Leases without LeaderElect too), else none.
func leaderElection(opts Options, client *k8sapi.Client, identity string) *reconcile.LeaderElection {
	if !opts.LeaderElect && opts.Shards <= 1 {
		return nil
	}
	return &reconcile.LeaderElection{Client: client, Namespace: opts.LeaderElectionNamespace,
		Name: opts.LeaderElectionID, Shards: opts.Shards, Identity: identity}
}

// splitCaches reports whether each replica may cache the objects of its
// shards alone: with shards, when the API server serves shard selectors
// (asked of Deployments, which the operator lists anyway). It logs which.
func splitCaches(ctx context.Context, c *k8sapi.Client, opts Options, log *slog.Logger) bool {
	if opts.Shards <= 1 {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	ok, err := k8sapi.ServesShardSelector(ctx, c, k8sapi.Deployments, opts.Namespace)
	if ok {
		log.Info("shard selectors served: each replica caches the Widgets and children of its shards only")
	} else {
		log.Info("shard selectors not served: each replica caches every Widget and child", "err", err)
	}
	return ok
}

// preflight makes the first contact fail fast with a clear reason instead of
// a silent backoff loop: no server, no CRD, no permission.
func preflight(ctx context.Context, c *k8sapi.Client, namespace string) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	_, err := k8sapi.For[widget.Widget](c, widget.Widgets).List(ctx, namespace, k8sapi.ListOptions{Limit: 1})
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

// operator holds the running parts. With split caches, the children it
// applies carry widget.LabelOwnerBucket.
type operator struct {
	ctrl        *reconcile.Controller
	widgets     reconcile.CacheView[widget.Widget]
	deployments reconcile.CacheView[k8sapi.Deployment]
	services    reconcile.CacheView[k8sapi.Service]
	reconciler  *widget.Reconciler
	split       bool
}

// childSelector limits the child caches to objects this operator labels, so
// that unrelated Deployments and Services are never cached.
const childSelector = widget.LabelManagedBy + "=" + widget.FieldManager

// newOperator builds the Widget controller and adds it to m.
func newOperator(m *manager.Manager, client *k8sapi.Client, opts Options, log *slog.Logger, split bool) error {
	op := &operator{ctrl: &reconcile.Controller{Name: ControllerName, Workers: opts.Workers}, split: split}
	if err := m.Add(op.ctrl); err != nil {
		return err
	}
	// Our own status writes come back as updates too: a reconcile of an
	// unchanged Widget writes nothing.
	op.widgets = reconcile.WatchPrimaryShards(op.ctrl, watchConfig(client, widget.Widgets, "", opts.Namespace, log, widget.TrimWidget))
	op.deployments = reconcile.WatchOwnedShards(op.ctrl, watchConfig(client, k8sapi.Deployments, childSelector, opts.Namespace, log, op.trimDeployment),
		widget.Widgets, widget.LabelOwnerBucket)
	op.services = reconcile.WatchOwnedShards(op.ctrl, watchConfig(client, k8sapi.Services, childSelector, opts.Namespace, log, op.trimService),
		widget.Widgets, widget.LabelOwnerBucket)
	// ResourceQuotas only wake the Widgets that wait on one: the informer
	// holds their metadata, and no reconcile waits for it to sync. A
	// change retries at once the Widgets of its namespace that wait on a
	// ResourceQuota.
	quotas := watchConfig(client, resourceQuotas, "", opts.Namespace, log, func(q *resourceQuota) { watch.TrimMeta(&q.ObjectMeta) })
	quotas.Handler = watch.OnChange(func(q *resourceQuota) {
		for _, key := range op.reconciler.RetryQuota(q.Namespace) {
			op.ctrl.Enqueue(key)
		}
	})
	quotaInformer := watch.New(quotas)
	// Run fails only without a Source, and quotas has one.
	op.ctrl.Background = []func(context.Context){func(ctx context.Context) { quotaInformer.Run(ctx) }}
	op.reconciler = &widget.Reconciler{Widgets: op.widgets, Deployments: op.deployments, Services: op.services,
		Client: &clusterAPI{op: op, client: client}, Recorder: m.Recorder()}
	op.ctrl.Reconciler = op.reconciler
	return nil
}

// trimDeployment is the Transform of the Deployments' cache:
// widget.TrimDeployment, after which the labels and selector take the maps
// of the Widget's Service, when the Services' cache holds it with equal
// ones, so that the two caches hold them once. trimService is the same the
// other way. Cached objects are never changed, so they may share maps.
func (op *operator) trimDeployment(d *k8sapi.Deployment) {
	widget.TrimDeployment(d)
	if s, ok := op.services.Get(d.Namespace, d.Name); ok && d.Spec.Selector != nil {
		share(&d.Labels, s.Labels)
		share(&d.Spec.Template.Labels, s.Labels)
		share(&d.Spec.Selector.MatchLabels, s.Spec.Selector)
	}
}

func (op *operator) trimService(s *k8sapi.Service) {
	widget.TrimService(s)
	if d, ok := op.deployments.Get(s.Namespace, s.Name); ok && d.Spec.Selector != nil {
		share(&s.Labels, d.Labels)
		share(&s.Spec.Selector, d.Spec.Selector.MatchLabels)
	}
}

// share makes *m other when the two are equal.
func share(m *map[string]string, other map[string]string) {
	if maps.Equal(*m, other) {
		*m = other
	}
}

// watchConfig configures the watch of res in namespace ("" for all),
// limited to the objects that selector selects ("" for all), named after
// res.Resource, whose cache keeps of each object what trim leaves.
func watchConfig[T any](client *k8sapi.Client, res k8sapi.Resource, selector, namespace string, log *slog.Logger, trim func(*T)) watch.Config[T] {
	return watch.Config[T]{
		Transform:     trim,
		Source:        watch.ClientSource[T](client, res),
		Namespace:     namespace,
		LabelSelector: selector,
		Name:          res.Resource,
		Logger:        log,
	}
}

// resourceQuota is a ResourceQuota reduced to its metadata: the operator
// only needs to know that one changed.
type resourceQuota struct {
	k8sapi.TypeMeta
	k8sapi.ObjectMeta `json:"metadata"`
}

var resourceQuotas = k8sapi.Resource{Version: "v1", Resource: "resourcequotas", Namespaced: true, Kind: "ResourceQuota"}
