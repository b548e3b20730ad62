package reconcile

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/zerodep-k8s/widget-operator/internal/metrics"
	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/queue"
	"github.com/zerodep-k8s/widget-operator/watch"
)

// Reconciler makes the world match the object named by key ("namespace/name",
// or "name" for a cluster-scoped object). A [Controller] never calls it
// twice at once for the same key.
//
// What it returns decides what comes next; see [Controller].
type Reconciler interface {
	Reconcile(ctx context.Context, key string) (queue.Result, error)
}

// ReconcilerFunc adapts a function to a [Reconciler].
type ReconcilerFunc func(ctx context.Context, key string) (queue.Result, error)

// Reconcile calls f(ctx, key).
func (f ReconcilerFunc) Reconcile(ctx context.Context, key string) (queue.Result, error) {
	return f(ctx, key)
}

// DefaultShutdownTimeout is the zero value's meaning of
// [Controller.ShutdownTimeout].
const DefaultShutdownTimeout = 30 * time.Second

// LeaderElection configures leader election with a Lease
// (coordination.k8s.io/v1): only the replica that holds it reconciles.
type LeaderElection struct {
	// Client reads and writes the Lease. Required. Give it no rate limit
	// of its own (k8sapi.Config QPS zero): a renewal must not wait behind
	// a burst of reconciles.
	Client *k8sapi.Client
	// Namespace and Name locate the Lease. Empty Namespace means the
	// client's default namespace; Name is required.
	Namespace, Name string
}

// Controller runs a [Reconciler] over a queue of keys that watch caches
// fill: a primary resource ([WatchPrimary]), the resources it owns
// ([WatchOwned]) and any others ([WatchMapped]).
//
// Set the fields, then make the caches with WatchPrimary, WatchOwned and
// WatchMapped, then call Run once. Do not change the fields after the first
// of those calls. The other methods are safe for concurrent use, with Run
// and with each other.
//
// What Reconcile returns decides what happens to the key, by [Classify]:
//
//   - nil: done, or run again after Result.RequeueAfter if positive;
//   - a Permanent error (a [*TerminalError], a key that is not valid
//     ([k8sapi.ErrInvalidKey]), a 400 or 422 from the API server): not
//     retried until the key is queued again by a change, and counted in
//     controller_runtime_terminal_reconcile_errors_total;
//   - a Moot error (a 404, a terminating namespace): dropped;
//   - a Waiting error with a positive Result.RequeueAfter: run again after
//     RequeueAfter;
//   - any other error: retried with the queue's backoff.
//
// Every reconcile is logged (debug when it succeeds) and measured.
type Controller struct {
	// Name names the controller in logs, in the controller label of its
	// metrics and as its queue's name. Required.
	Name string
	// Reconciler reconciles the keys. Required by Run; it may be set
	// after the caches are made, since they are built before it.
	Reconciler Reconciler
	// Workers is the number of keys reconciled at once. Zero or negative
	// means 1.
	Workers int
	// Logger receives the controller's lines. Nil means no logging.
	Logger *slog.Logger
	// Metrics receives the controller_runtime_* series of the controller,
	// the workqueue_* series of its queue and the widget_operator_watch_*
	// series of its caches. Nil means no metrics.
	Metrics *metrics.Registry
	// LeaderElection, when not nil, makes the controller reconcile only
	// while it holds the Lease. Caches run and sync either way, so that
	// a takeover is fast. Nil means no leader election.
	LeaderElection *LeaderElection
	// ShutdownTimeout bounds how long reconciles in flight may go on
	// once Run's ctx ends; zero means DefaultShutdownTimeout. With leader
	// election the bound is at most the Lease's renew deadline less its
	// retry period (8s), so that the Lease is released after them, not
	// left to expire. Reconciles are cut at once when the Lease is lost.
	ShutdownTimeout time.Duration

	initOnce sync.Once
	initErr  error
	queue    *queue.Queue
}

// Check is one readiness check of a [Controller]: one of its caches.
type Check struct {
	Name string // "watch " and the cache's Config.Name, such as "watch widgets"
	Err  error  // why it fails; nil when it passes
}

// WatchPrimary makes the cache of the primary resource: a change of an
// object queues its own key. The controller runs the cache, waits for it
// to sync before it reconciles, checks it in [Controller.Checks] and logs
// the resourceVersion the cache holds with each reconcile. cfg.Handler is
// replaced. P is inferred: reconcile.WatchPrimary(c, cfg).
func WatchPrimary[T any, P interface {
	*T
	k8sapi.Object
}](c *Controller, cfg watch.Config[T]) *watch.Cache[T] {
	panic("reconcile: not implemented")
}

// WatchOwned makes the cache of a resource the primary one owns: a change
// of an object queues the key of its controller owner when that owner is
// of the given resource and kind (apiVersion owner.GroupVersion()), such
// as k8sapi.Deployments' objects owned by a Widget. A cluster-scoped owner
// (owner.Namespaced false) has the key of its name alone. The controller
// runs the cache as WatchPrimary's; cfg.Handler is replaced.
func WatchOwned[T any, P interface {
	*T
	k8sapi.Object
}](c *Controller, cfg watch.Config[T], owner k8sapi.Resource, kind string) *watch.Cache[T] {
	panic("reconcile: not implemented")
}

// WatchMapped makes the cache of any other resource: a change of an
// object queues the keys that keys returns for it (the new object's, for
// an update). The controller runs the cache as WatchPrimary's;
// cfg.Handler is replaced.
func WatchMapped[T any, P interface {
	*T
	k8sapi.Object
}](c *Controller, cfg watch.Config[T], keys func(obj *T) []string) *watch.Cache[T] {
	panic("reconcile: not implemented")
}

// Enqueue queues key for a reconcile, for a source of changes other than
// the controller's caches (such as an informer it does not run). Keys
// queued before Run are reconciled once it starts.
func (c *Controller) Enqueue(key string) {
	panic("reconcile: not implemented")
}

// Run runs the caches, waits for them to sync, then reconciles with
// Workers workers (once it leads, with leader election) until ctx ends.
// Then it stops taking keys, lets the reconciles in flight finish for up
// to ShutdownTimeout (their ctx is cancelled after that), and stops the
// caches last. It returns nil after such a shutdown, and an error when
// the configuration is incomplete, the metrics cannot be registered, or
// the Lease was lost (the process should exit, and a fresh start campaign
// again).
func (c *Controller) Run(ctx context.Context) error {
	return errors.New("reconcile: not implemented")
}

// IsLeader reports whether the controller may reconcile: always true
// without leader election; with it, whether it holds the Lease.
func (c *Controller) IsLeader() bool {
	panic("reconcile: not implemented")
}

// Checks returns the readiness of each cache, in the order they were made:
// a cache fails while it has not synced, or while its watch is failing or
// has been silent past its deadline (see watch.Informer.Healthy).
func (c *Controller) Checks(now time.Time) []Check {
	panic("reconcile: not implemented")
}

// ApplyChild writes want, a child object of kind kind (such as
// "Deployment") and its controller owner reference, with fieldManager:
// when cache does not hold the child, it creates it; otherwise it
// server-side applies want (forced). The object the server returned goes
// to cache.Wrote, so that the next read sees it, and is returned.
//
// A cache filtered by a label selector may miss an object of the child's
// name that it does not select: when the create is refused because the
// name is taken, the existing object is read, and if its controller is
// not want's controller owner (by UID), ApplyChild writes nothing and
// returns a [*NotControlledError]. Otherwise it applies over it.
//
// want is marshalled as the apply body, and, for a create, into a T.
func ApplyChild[T any, P interface {
	*T
	k8sapi.Object
}](ctx context.Context, cache *watch.Cache[T], client k8sapi.Typed[T], fieldManager, kind string, want k8sapi.Object) (*T, error) {
	return nil, errors.New("reconcile: not implemented")
}
