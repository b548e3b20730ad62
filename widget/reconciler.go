package widget

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/queue"
	"github.com/zerodep-k8s/widget-operator/reconcile"
)

// Reader reads the objects of one kind, as a watch.Cache does: Get
// returns the object namespace/name, or nil and false when there is none.
// A read from a cache cannot fail. Objects it returns are never modified
// by the Reconciler.
type Reader[T any] interface {
	Get(namespace, name string) (*T, bool)
}

// API is what the Reconciler writes, to the API server.
type API interface {
	// ApplyDeployment server-side applies d (Content-Type
	// application/apply-patch+yaml, field manager FieldManager, force)
	// and returns the Deployment the server stored. Over a Deployment
	// of d's name that d's controller owner does not control, it writes
	// nothing and returns a *reconcile.NotControlledError, as
	// reconcile.ApplyChild does.
	ApplyDeployment(ctx context.Context, d *DeploymentApply) (*k8sapi.Deployment, error)
	// ApplyService server-side applies s as ApplyDeployment does.
	ApplyService(ctx context.Context, s *ServiceApply) (*k8sapi.Service, error)
	// PatchWidgetStatus sends patch, a JSON merge patch
	// (application/merge-patch+json), to the Widget's status subresource.
	PatchWidgetStatus(ctx context.Context, namespace, name string, patch []byte) error
}

// EventRecorder records Kubernetes Events. Event should not block for
// long; failing to record an Event is the recorder's to handle (it is not a
// reconcile failure).
type EventRecorder interface {
	// Event records an Event about regarding. eventType is "Normal" or
	// "Warning"; reason is CamelCase; note is a human-readable message.
	Event(regarding k8sapi.ObjectReference, eventType, reason, note string)
}

// Reconciler makes the world match one Widget at a time. Reconcile is safe
// to call from several goroutines at once for different keys, as long as
// its Readers, Client and Recorder are; the caller (a work queue) must not
// run the same key twice at once. A Reconciler must not be copied after first use.
//
// A Reconciler makes no write call when the world already matches: it
// compares the observed Deployment and Service with the desired ones and
// the computed status with the stored one before writing anything. Nor
// does it ask again for a write the API server refused while nothing has
// changed: it remembers, per Widget, the last refusal and the state of the
// Widget and its children it was given for (see Reconcile). That memory
// is the only state it keeps; it is dropped when the Widget succeeds or
// goes away.
type Reconciler struct {
	// Widgets, Deployments and Services read the objects, from watch
	// caches. Required.
	Widgets     Reader[Widget]
	Deployments Reader[k8sapi.Deployment]
	Services    Reader[k8sapi.Service]
	// Client writes the objects. Required.
	Client API
	// Recorder records Events about the Widget: Normal Created and
	// Updated when a child is applied, Warning when the Widget fails or a
	// write fails (ReasonReconcileError). Nil records nothing.
	Recorder EventRecorder

	failed reconcile.Refusals[state, Problem] // the writes refused, per key
}

// state is the state of a Widget and its children that a refusal of its
// writes was made in: the Widget's UID and generation and the children's
// resourceVersions ("" for none).
type state struct {
	uid                 string
	generation          int64
	deploymentRV, svcRV string
}

// Reconcile brings the Widget named by key ("namespace/name") and its
// children in line:
//
//  1. A Widget that does not exist, or is being deleted, is done: garbage
//     collection removes its children.
//  2. A Widget that fails ValidateWidget gives phase Failed with reason
//     InvalidSpec and nothing is applied.
//  3. Otherwise the Deployment, then the Service, are applied, each only
//     when the observed one does not already hold the desired fields,
//     which one that this Widget does not control (by UID) never does.
//     A child the Client refuses to write over, as it is not controlled
//     by this Widget, gives phase Failed with reason OwnershipConflict;
//     a Deployment applied before a conflicting Service stays.
//  4. The status is computed by StatusFor and merge-patched only when it
//     differs from the stored one. When the Widget newly fails, or fails
//     for a new reason, a Warning Event is recorded.
//
// Each child applied is recorded as a Normal Event, Created when it was
// missing and Updated when it differed.
//
// A write of a child that fails is sorted by Classify:
//
//   - Permanent (the server refused the child as invalid): phase Failed
//     with reason ChildRejected and the server's message; Reconcile
//     returns a *TerminalError. The write is not sent again until the
//     Widget's generation or one of its children changes.
//   - Waiting (a quota exceeded, a 403): phase Failed with reason
//     QuotaExceeded or Forbidden; Reconcile returns the *reconcile.Error and a
//     [queue.Result].RequeueAfter, the time to the next attempt
//     (FirstWait, doubling with each refusal in a row up to MaxWait).
//     A reconcile before then, with nothing changed, sends nothing;
//     RetryQuota ends a quota's wait early.
//   - Moot (the namespace is terminating, the object is gone): nothing
//     to do; Reconcile returns nil.
//   - Transient: Reconcile returns the *reconcile.Error, for the caller to retry
//     with backoff, and records a Warning Event with reason
//     ReconcileError, unless ctx ended. Once the failures have lasted
//     TransientGrace, the status says Failed with reason ReconcileError
//     too.
//
// Invalid specs and conflicts return no error: retrying cannot fix them, a
// change to the Widget or its children will. A key that is not
// "namespace/name" returns an *reconcile.Error wrapping
// [k8sapi.ErrInvalidKey], which a [queue.Runner] drops.
func (r *Reconciler) Reconcile(ctx context.Context, key string) (queue.Result, error) {
	ns, name, err := k8sapi.SplitKey(key)
	if err != nil {
		return queue.Result{}, &reconcile.Error{Op: "split key", Name: key, Err: err}
	}
	w, _ := r.Widgets.Get(ns, name)
	if w == nil || w.DeletionTimestamp != nil {
		r.failed.Forget(key)
		return queue.Result{}, nil
	}
	p := &pass{key: key, ns: ns, name: name, w: w, now: time.Now()}
	p.d, _ = r.Deployments.Get(ns, name)
	p.svc, _ = r.Services.Get(ns, name)
	var o outcome
	if msg := ValidateWidget(w); msg != "" {
		o.problem = &Problem{Reason: ReasonInvalidSpec, Message: msg}
	} else if rf, wait, ok := r.failed.Standing(key, state{w.UID, w.Generation, rvOf(p.d), rvOf(p.svc)}, p.now); ok {
		// Refused before, and nothing has changed since: report it again
		// without asking again.
		o = outcome{problem: &rf, res: queue.Result{RequeueAfter: wait}}
	} else if kind, err := r.applyChildren(ctx, p); err != nil {
		if o = r.writeFailed(ctx, p, kind, err); o.final {
			return o.res, o.err
		}
	}
	if o.problem == nil || o.problem.Reason == ReasonInvalidSpec || o.problem.Reason == ReasonOwnershipConflict {
		r.failed.Forget(key)
	}
	return r.report(ctx, p, o)
}

// pass is one Reconcile of a Widget: its key, the objects read and when.
type pass struct {
	key, ns, name string
	w             *Widget
	d             *k8sapi.Deployment // as observed, then as applied
	svc           *k8sapi.Service
	now           time.Time
}

// outcome is what a Reconcile found before the status: the problem the
// status gives (nil for none), and the result and error Reconcile returns
// once the status says so, or at once if final.
type outcome struct {
	problem *Problem
	res     queue.Result
	err     error
	final   bool
}

// writeFailed sorts the failed write of the Widget's child kind by
// Classify (see Reconcile).
func (r *Reconciler) writeFailed(ctx context.Context, p *pass, kind string, err error) outcome {
	e := &reconcile.Error{Op: "apply " + strings.ToLower(kind), Namespace: p.ns, Name: p.name, Err: err}
	var nc *reconcile.NotControlledError
	switch class := reconcile.Classify(err); {
	case errors.As(err, &nc):
		return outcome{problem: &Problem{Reason: ReasonOwnershipConflict, Message: nc.Reason()}}
	case class == reconcile.Moot:
		r.failed.Forget(p.key)
		return outcome{final: true}
	case class == reconcile.Permanent || class == reconcile.Waiting:
		o := outcome{problem: refusalProblem(class, kind, p.key, err), err: &reconcile.TerminalError{Err: e}}
		st := state{p.w.UID, p.w.Generation, rvOf(p.d), rvOf(p.svc)} // p.d as applied
		o.res.RequeueAfter = r.failed.Refused(p.key, st, class, err, *o.problem, p.now)
		if class == reconcile.Waiting {
			o.err = e
		}
		return o
	case ctx.Err() != nil:
		return outcome{err: e, final: true}
	}
	since := r.failed.FailingSince(p.key, p.now)
	if p.now.Sub(since) < TransientGrace {
		return outcome{err: r.warn(ctx, p.w, e), final: true}
	}
	return outcome{err: e, problem: &Problem{Reason: ReasonReconcileError, Message: reconcile.TrimMessage(fmt.Sprintf(
		"%s; failing since %s, retrying with backoff", e.Error(), since.UTC().Format(time.RFC3339)))}}
}

// warn records e, the failure of a write, as a Warning Event on w, unless
// the write was cut short because the caller is stopping, and returns it.
func (r *Reconciler) warn(ctx context.Context, w *Widget, e *reconcile.Error) error {
	if ctx.Err() == nil {
		r.event(w, "Warning", ReasonReconcileError, e.Error())
	}
	return e
}

// report patches the Widget's status to the one StatusFor computes, if
// it differs from the stored one, and returns o's result and error. A
// Widget that newly fails, or fails for a new reason, gets a Warning
// Event.
func (r *Reconciler) report(ctx context.Context, p *pass, o outcome) (queue.Result, error) {
	d := p.d
	if d != nil && !reconcile.IsControlledBy(&d.ObjectMeta, p.w.UID) {
		d = nil // not ours: its status says nothing about this Widget
	}
	st := StatusFor(p.w, d, o.problem, p.now)
	if StatusEqual(st, p.w.Status) {
		return o.res, o.err
	}
	patch, err := StatusPatch(st)
	if err != nil {
		return queue.Result{}, &reconcile.Error{Op: "encode widget status", Namespace: p.ns, Name: p.name, Err: err}
	}
	if err := r.Client.PatchWidgetStatus(ctx, p.ns, p.name, patch); err != nil {
		if reconcile.Classify(err) == reconcile.Moot {
			r.failed.Forget(p.key)
			return queue.Result{}, nil
		}
		return queue.Result{}, r.warn(ctx, p.w, &reconcile.Error{Op: "patch widget status", Namespace: p.ns, Name: p.name, Err: err})
	}
	if st.Phase == PhaseFailed {
		newC, _ := reconcile.FindCondition(st.Conditions, ConditionReady)
		oldC, had := reconcile.FindCondition(p.w.Status.Conditions, ConditionReady)
		if !had || oldC.Reason != newC.Reason || oldC.Message != newC.Message {
			r.event(p.w, "Warning", newC.Reason, newC.Message)
		}
	}
	return o.res, o.err
}

// applyChildren applies the Deployment, then the Service, of the Widget,
// each only when the observed one does not hold the desired fields, and
// records an Event for what it applied, such as "Created Deployment and
// Service ns/name". p.d becomes the Deployment the server returned. When
// a write fails it stops there and returns the child's kind and the
// error.
func (r *Reconciler) applyChildren(ctx context.Context, p *pass) (string, error) {
	// applied[true] are the kinds created, applied[false] those updated.
	applied := map[bool][]string{}
	defer func() {
		if len(applied[true]) > 0 {
			r.event(p.w, "Normal", ReasonCreated, "Created "+strings.Join(applied[true], " and ")+" "+p.key)
		}
		if len(applied[false]) > 0 {
			r.event(p.w, "Normal", ReasonUpdated, "Updated "+strings.Join(applied[false], " and ")+" "+p.key)
		}
	}()
	if want := DesiredDeployment(p.w); p.d == nil || !DeploymentUpToDate(p.d, want) {
		got, err := r.Client.ApplyDeployment(ctx, want)
		if err != nil {
			return "Deployment", err
		}
		applied[p.d == nil] = append(applied[p.d == nil], "Deployment")
		p.d = got
	}
	if want := DesiredService(p.w); p.svc == nil || !ServiceUpToDate(p.svc, want) {
		if _, err := r.Client.ApplyService(ctx, want); err != nil {
			return "Service", err
		}
		applied[p.svc == nil] = append(applied[p.svc == nil], "Service")
	}
	return "", nil
}

// RetryQuota ends the wait of every Widget of namespace whose write a
// ResourceQuota refused, and returns their keys for the controller to
// queue (see reconcile.Refusals.RetryQuota). A controller calls it when
// a ResourceQuota of namespace changes.
func (r *Reconciler) RetryQuota(namespace string) []string { return r.failed.RetryQuota(namespace) }

// rvOf is the resourceVersion of a child, or "" for none.
func rvOf[T any, P reconcile.Object[T]](obj P) string {
	if obj == nil {
		return ""
	}
	return obj.GetObjectMeta().ResourceVersion
}

// Reasons of the Events the Reconciler records besides those of the Ready
// condition.
const (
	ReasonCreated        = "Created"        // a missing child was created
	ReasonUpdated        = "Updated"        // a child that differed was brought in line
	ReasonReconcileError = "ReconcileError" // a write failed; the reconcile is retried
)

// event records an Event about w, if there is a Recorder.
func (r *Reconciler) event(w *Widget, eventType, reason, note string) {
	if r.Recorder == nil {
		return
	}
	r.Recorder.Event(k8sapi.ObjectReference{
		APIVersion:      WidgetAPIVersion,
		Kind:            WidgetKind,
		Namespace:       w.Namespace,
		Name:            w.Name,
		UID:             w.UID,
		ResourceVersion: w.ResourceVersion,
	}, eventType, reason, note)
}

// StatusPatch returns the JSON merge patch that sets a Widget's whole
// status to st: {"status":{...}}.
func StatusPatch(st WidgetStatus) ([]byte, error) {
	return json.Marshal(struct {
		Status WidgetStatus `json:"status"`
	}{st})
}
