// Command quota is a second operator on the controller kit, of another
// shape than the Widget's: its primary resource is the Namespace (built in
// and cluster-scoped) and its children are namespaced. For every Namespace
// labelled example.com/quota=small, medium or large, it keeps a
// ResourceQuota and a LimitRange named example-quota of that size in it,
// changes them when the label changes and deletes them when the label goes.
//
//	quota [-kubeconfig FILE] [-context NAME] [-workers N] [-network-policies=false]
//	      [-probe-addr ADDR] [-metrics-addr ADDR] [-leader-elect=false] [-lease-namespace NS]
//
// The sizes (the quota's hard limits; a container's default limit,
// default request and maximum in the LimitRange):
//
//	size    requests.cpu/memory  limits.cpu/memory  pods  default     request     max
//	small   2 / 4Gi              4 / 8Gi            20    500m/512Mi  100m/128Mi  1/2Gi
//	medium  8 / 16Gi             16 / 32Gi          50    1/1Gi       250m/256Mi  4/8Gi
//	large   32 / 64Gi            64 / 128Gi         200   2/2Gi       500m/512Mi  16/32Gi
//
// The children have the label app.kubernetes.io/managed-by=quota-example
// and a controller owner reference to their Namespace, by which a change
// to one wakes the Namespace's reconcile. An unknown size is reported in
// the log and by a Warning Event (UnknownSize), and not retried; the
// children keep their last size, so that a typo does not lift a quota. A child of that name that the operator does
// not control is left alone, and reported the same way.
//
// The same process runs a second controller, of package netpol, on the
// same cache of the labelled Namespaces: it keeps a default-deny
// NetworkPolicy in each of them, so that a tenant's Namespace is isolated
// as well as bounded (-network-policies=false turns it off).
//
// The process is the kit's manager: the controllers share the caches
// (one list and one watch of the Namespaces), one Lease (quota-example,
// in -lease-namespace) elects the replica that reconciles (unless
// -leader-elect=false: then run one replica), /healthz and
// /readyz are served on -probe-addr, /metrics (quota_example_* besides
// the controller_runtime_* and workqueue_* families) over HTTPS on
// -metrics-addr to the users that may get the non-resource URL /metrics
// (by TokenReview and SubjectAccessReview), and Events are reported as
// quota-example.
//
// RBAC: namespaces list and watch; resourcequotas and limitranges get,
// list, watch, create, patch and delete; what package netpol names; events
// (group events.k8s.io) create and patch; leases (group
// coordination.k8s.io) get, create and update; tokenreviews and
// subjectaccessreviews create. Replicas beyond the first wait as
// followers, with warm caches.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"reflect"
	"syscall"

	"example.com/examples/netpol"
	"github.com/zerodep-k8s/widget-operator/events"
	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/manager"
	"github.com/zerodep-k8s/widget-operator/queue"
	"github.com/zerodep-k8s/widget-operator/reconcile"
	"github.com/zerodep-k8s/widget-operator/watch"
)

const (
	sizeLabel    = "example.com/quota"
	managedBy    = "app.kubernetes.io/managed-by"
	fieldManager = "quota-example"
	childName    = "example-quota"
)

// size is what one value of the label stands for.
type size struct {
	hard                   map[string]string // the ResourceQuota's
	limit, request, maxima map[string]string // a container's default limit, default request and maximum
}

func resources(cpu, memory string) map[string]string {
	return map[string]string{"cpu": cpu, "memory": memory}
}

func quota(requestsCPU, requestsMemory, limitsCPU, limitsMemory, pods string) map[string]string {
	return map[string]string{"requests.cpu": requestsCPU, "requests.memory": requestsMemory,
		"limits.cpu": limitsCPU, "limits.memory": limitsMemory, "pods": pods}
}

// The quantities are in the API server's canonical form, so that the
// objects it returns compare equal to the ones wanted.
var sizes = map[string]size{
	"small":  {quota("2", "4Gi", "4", "8Gi", "20"), resources("500m", "512Mi"), resources("100m", "128Mi"), resources("1", "2Gi")},
	"medium": {quota("8", "16Gi", "16", "32Gi", "50"), resources("1", "1Gi"), resources("250m", "256Mi"), resources("4", "8Gi")},
	"large":  {quota("32", "64Gi", "64", "128Gi", "200"), resources("2", "2Gi"), resources("500m", "512Mi"), resources("16", "32Gi")},
}

// namespace is the part of a Namespace the operator reads.
type namespace struct {
	k8sapi.TypeMeta
	k8sapi.ObjectMeta `json:"metadata"`
}

// object is a child with the spec S: its status is not read.
type object[S any] struct {
	k8sapi.TypeMeta
	k8sapi.ObjectMeta `json:"metadata"`
	Spec              S `json:"spec"`
}

type quotaSpec struct {
	Hard map[string]string `json:"hard"`
}

type limitRangeSpec struct {
	Limits []limitRangeItem `json:"limits"`
}

type limitRangeItem struct {
	Type           string            `json:"type"`
	Default        map[string]string `json:"default,omitempty"`
	DefaultRequest map[string]string `json:"defaultRequest,omitempty"`
	Max            map[string]string `json:"max,omitempty"`
}

// children is one kind of child: its cache and its verbs.
type children[S any] struct {
	cache *watch.Cache[object[S]]
	api   k8sapi.Typed[object[S]]
}

func watchChildren[S any](c *reconcile.Controller, client *k8sapi.Client, kind, plural string) children[S] {
	r := k8sapi.Resource{Version: "v1", Resource: plural, Namespaced: true, Kind: kind}
	cache := reconcile.WatchOwned(c, watch.Config[object[S]]{Source: watch.ClientSource[object[S]](client, r),
		LabelSelector: managedBy + "=" + fieldManager, Name: plural}, k8sapi.Namespaces)
	return children[S]{cache: cache, api: k8sapi.For[object[S]](client, r)}
}

// apply makes the child of ns have spec, unless it has it already.
func (ch children[S]) apply(ctx context.Context, ns *namespace, spec S) error {
	cur, ok := ch.cache.Get(ns.Name, childName)
	if ok && reconcile.IsControlledBy(&cur.ObjectMeta, ns.UID) && reflect.DeepEqual(cur.Spec, spec) {
		return nil
	}
	ref := reconcile.NewControllerRef(k8sapi.Namespaces, &ns.ObjectMeta)
	ref.BlockOwnerDeletion = nil // the namespace controller, not the garbage collector, empties a Namespace
	want := &object[S]{TypeMeta: k8sapi.TypeMeta{APIVersion: "v1", Kind: ch.api.Resource.Kind}, Spec: spec,
		ObjectMeta: k8sapi.ObjectMeta{Namespace: ns.Name, Name: childName, Labels: map[string]string{managedBy: fieldManager},
			OwnerReferences: []k8sapi.OwnerReference{ref}}}
	_, err := reconcile.ApplyChild(ctx, ch.cache, ch.api, fieldManager, want)
	if nc := (*reconcile.NotControlledError)(nil); errors.As(err, &nc) {
		return &reconcile.TerminalError{Err: err}
	}
	return err
}

// remove deletes the child of the namespace named ns, if it has one that
// a Namespace controls.
func (ch children[S]) remove(ctx context.Context, ns string) error {
	cur, ok := ch.cache.Get(ns, childName)
	if !ok {
		return nil
	}
	if reconcile.ControllerOf(&cur.ObjectMeta, k8sapi.Namespaces) == nil {
		return nil
	}
	err := ch.api.Delete(ctx, ns, childName, k8sapi.DeleteOptions{Preconditions: &k8sapi.Preconditions{UID: cur.UID}})
	if err == nil || k8sapi.IsNotFound(err) {
		ch.cache.Deleted(cur) // gone: the next reconcile must not delete it again
		return nil
	}
	return err
}

type reconciler struct {
	recorder    *events.Recorder
	namespaces  *watch.Cache[namespace]
	quotas      children[quotaSpec]
	limitRanges children[limitRangeSpec]
}

// Reconcile makes the children of the Namespace named key match its label.
func (r *reconciler) Reconcile(ctx context.Context, key string) (queue.Result, error) {
	ns, ok := r.namespaces.Get("", key)
	if !ok { // unlabelled (or gone): the Namespace stays, its children go
		return queue.Result{}, errors.Join(r.quotas.remove(ctx, key), r.limitRanges.remove(ctx, key))
	}
	if ns.DeletionTimestamp != nil {
		return queue.Result{}, nil // the namespace controller deletes everything in it
	}
	s, ok := sizes[ns.Labels[sizeLabel]]
	if !ok {
		note := fmt.Sprintf("%s=%q is not small, medium or large", sizeLabel, ns.Labels[sizeLabel])
		r.recorder.Event(k8sapi.ObjectReference{APIVersion: "v1", Kind: "Namespace", Name: key, UID: ns.UID}, "Warning", "UnknownSize", note)
		return queue.Result{}, &reconcile.TerminalError{Err: fmt.Errorf("quota: namespace %s: %s", key, note)}
	}
	if err := r.quotas.apply(ctx, ns, quotaSpec{Hard: s.hard}); err != nil {
		return queue.Result{}, err
	}
	item := limitRangeItem{Type: "Container", Default: s.limit, DefaultRequest: s.request, Max: s.maxima}
	return queue.Result{}, r.limitRanges.apply(ctx, ns, limitRangeSpec{Limits: []limitRangeItem{item}})
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "quota:", err)
		os.Exit(1)
	}
}

// run is main without the process: it runs the operator with the flags in
// args, logging to logw, until ctx ends.
func run(ctx context.Context, args []string, logw io.Writer) error {
	fs := flag.NewFlagSet("quota", flag.ContinueOnError)
	fs.SetOutput(logw)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file; empty means $KUBECONFIG, in-cluster, ~/.kube/config")
	kubecontext := fs.String("context", "", "kubeconfig context; empty means the current one")
	workers := fs.Int("workers", 2, "concurrent reconciles of each controller")
	policies := fs.Bool("network-policies", true, "keep a default-deny NetworkPolicy in each labelled Namespace")
	probeAddr := fs.String("probe-addr", ":8081", "address of /healthz and /readyz; 0 means none")
	metricsAddr := fs.String("metrics-addr", ":8443", "address of /metrics (HTTPS, TokenReview and SubjectAccessReview); 0 means none")
	leaderElect := fs.Bool("leader-elect", true, "reconcile only while holding the Lease quota-example")
	leaseNamespace := fs.String("lease-namespace", "", "namespace of the Lease; empty means the kubeconfig's")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := k8sapi.Load(k8sapi.LoadOptions{Kubeconfig: *kubeconfig, Context: *kubecontext})
	if err != nil {
		return err
	}
	cfg.UserAgent = "quota-example"
	client, err := k8sapi.New(cfg)
	if err != nil {
		return err
	}
	mc := manager.Config{Name: "quota-example", Client: client, Logger: slog.New(slog.NewTextHandler(logw, nil)), ProbeAddr: *probeAddr, MetricsAddr: *metricsAddr}
	if *leaderElect {
		mc.LeaderElection = &reconcile.LeaderElection{Client: client, Namespace: *leaseNamespace, Name: "quota-example"}
	}
	m, err := manager.New(mc)
	if err != nil {
		return err
	}
	namespaces := watch.Config[namespace]{Source: watch.ClientSource[namespace](client, k8sapi.Namespaces), LabelSelector: sizeLabel, Name: "namespaces"}
	c := &reconcile.Controller{Name: "quota", Workers: *workers}
	if err := m.Add(c); err != nil {
		return err
	}
	c.Reconciler = &reconciler{recorder: m.Recorder(), namespaces: reconcile.WatchPrimary(c, namespaces),
		quotas:      watchChildren[quotaSpec](c, client, "ResourceQuota", "resourcequotas"),
		limitRanges: watchChildren[limitRangeSpec](c, client, "LimitRange", "limitranges"),
	}
	if *policies {
		deny := &reconcile.Controller{Name: "default-deny", Workers: *workers}
		if err := m.Add(deny); err != nil {
			return err
		}
		netpol.Watch(deny, namespaces, netpol.Config{Client: client, FieldManager: fieldManager, Recorder: m.Recorder()})
	}
	return m.Run(ctx)
}
