// Command quota is the quota operator of examples/quota written the
// conventional way with controller-runtime, for the side-by-side figures
// of docs/benchmarks.md ("The quota operator beside controller-runtime").
// It is a yardstick, not part of the product; the main module never
// imports it.
//
// Same job and same behaviour as examples/quota: for every Namespace
// labelled example.com/quota=small, medium or large it keeps a
// ResourceQuota and a LimitRange named example-quota of that size in it,
// labelled app.kubernetes.io/managed-by=quota-example and controlled by
// the Namespace; it changes them when the label changes and deletes them
// when the label goes. An unknown size, or a child of that name that the
// Namespace does not control, is reported in the log and not retried.
// Like examples/quota it serves no probes and no metrics.
//
//	quota [--kubeconfig FILE] [--workers N]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

const (
	sizeLabel    = "example.com/quota"
	managedBy    = "app.kubernetes.io/managed-by"
	fieldManager = "quota-example"
	childName    = "example-quota"
)

// size is what one value of the label stands for.
type size struct {
	hard                   corev1.ResourceList // the ResourceQuota's
	limit, request, maxima corev1.ResourceList // a container's default limit, default request and maximum
}

func resources(cpu, memory string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
}

func quota(requestsCPU, requestsMemory, limitsCPU, limitsMemory, pods string) corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceRequestsCPU: resource.MustParse(requestsCPU), corev1.ResourceRequestsMemory: resource.MustParse(requestsMemory),
		corev1.ResourceLimitsCPU: resource.MustParse(limitsCPU), corev1.ResourceLimitsMemory: resource.MustParse(limitsMemory),
		corev1.ResourcePods: resource.MustParse(pods),
	}
}

var sizes = map[string]size{
	"small":  {quota("2", "4Gi", "4", "8Gi", "20"), resources("500m", "512Mi"), resources("100m", "128Mi"), resources("1", "2Gi")},
	"medium": {quota("8", "16Gi", "16", "32Gi", "50"), resources("1", "1Gi"), resources("250m", "256Mi"), resources("4", "8Gi")},
	"large":  {quota("32", "64Gi", "64", "128Gi", "200"), resources("2", "2Gi"), resources("500m", "512Mi"), resources("16", "32Gi")},
}

// QuotaReconciler keeps the children of the labelled Namespaces.
type QuotaReconciler struct {
	client.Client
	// APIReader reads around the cache, which holds only the children
	// labelled as ours: it finds a child of that name that is not.
	APIReader client.Reader
}

func (r *QuotaReconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&corev1.Namespace{}).
		Owns(&corev1.ResourceQuota{}).
		Owns(&corev1.LimitRange{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(r)
}

func (r *QuotaReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var ns corev1.Namespace
	if err := r.Get(ctx, req.NamespacedName, &ns); apierrors.IsNotFound(err) {
		// Unlabelled (or gone): the Namespace stays, its children go.
		return ctrl.Result{}, errors.Join(remove[corev1.ResourceQuota](ctx, r, req.Name), remove[corev1.LimitRange](ctx, r, req.Name))
	} else if err != nil {
		return ctrl.Result{}, err
	}
	if !ns.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // the namespace controller deletes everything in it
	}
	s, ok := sizes[ns.Labels[sizeLabel]]
	if !ok {
		return ctrl.Result{}, reconcile.TerminalError(fmt.Errorf("namespace %s: %s=%q is not small, medium or large",
			ns.Name, sizeLabel, ns.Labels[sizeLabel]))
	}
	if err := ensure(ctx, r, &ns, func(q *corev1.ResourceQuota) { q.Spec = corev1.ResourceQuotaSpec{Hard: s.hard} }); err != nil {
		return ctrl.Result{}, err
	}
	item := corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Default: s.limit, DefaultRequest: s.request, Max: s.maxima}
	return ctrl.Result{}, ensure(ctx, r, &ns, func(lr *corev1.LimitRange) { lr.Spec = corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{item}} })
}

// object is a pointer to a child's type T.
type object[T any] interface {
	*T
	client.Object
}

// ensure makes the child of ns of type T have what set gives it: it
// creates it when missing and updates it when it differs, if ns controls it.
func ensure[T any, P object[T]](ctx context.Context, r *QuotaReconciler, ns *corev1.Namespace, set func(P)) error {
	key := client.ObjectKey{Namespace: ns.Name, Name: childName}
	obj := P(new(T))
	err := r.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) {
		obj.SetNamespace(ns.Name)
		obj.SetName(childName)
		set(obj)
		if err = r.own(ns, obj); err != nil {
			return err
		}
		if err = r.Create(ctx, obj); !apierrors.IsAlreadyExists(err) {
			return err
		}
		obj = P(new(T)) // there, but not labelled as ours
		err = r.APIReader.Get(ctx, key, obj)
	}
	if err != nil {
		return err
	}
	if !metav1.IsControlledBy(obj, ns) {
		return reconcile.TerminalError(fmt.Errorf("%T %s/%s is not controlled by its namespace: left alone", obj, ns.Name, childName))
	}
	before := obj.DeepCopyObject()
	set(obj)
	if err := r.own(ns, obj); err != nil {
		return err
	}
	if equality.Semantic.DeepEqual(before, obj) {
		return nil
	}
	return r.Update(ctx, obj)
}

// own gives obj the managed-by label and the controller reference to ns.
func (r *QuotaReconciler) own(ns *corev1.Namespace, obj client.Object) error {
	l := obj.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	l[managedBy] = fieldManager
	obj.SetLabels(l)
	// The namespace controller, not the garbage collector, empties a
	// Namespace: its children need not block its deletion.
	return controllerutil.SetControllerReference(ns, obj, r.Scheme(), controllerutil.WithBlockOwnerDeletion(false))
}

// remove deletes the child of type T of the namespace named ns, if a
// Namespace controls it.
func remove[T any, P object[T]](ctx context.Context, r *QuotaReconciler, ns string) error {
	obj := P(new(T))
	if err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: childName}, obj); err != nil {
		return client.IgnoreNotFound(err)
	}
	if ref := metav1.GetControllerOf(obj); ref == nil || ref.Kind != "Namespace" {
		return nil
	}
	uid := obj.GetUID()
	return client.IgnoreNotFound(r.Delete(ctx, obj, client.Preconditions{UID: &uid}))
}

func main() {
	// --kubeconfig is registered by controller-runtime's config package.
	var workers int
	flag.IntVar(&workers, "workers", 2, "Concurrent reconciles.")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	if err := run(ctrl.SetupSignalHandler(), workers); err != nil {
		ctrl.Log.Error(err, "quota")
		os.Exit(1)
	}
}

func run(ctx context.Context, workers int) error {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	cfg.UserAgent = fieldManager
	labelled, err := labels.NewRequirement(sizeLabel, selection.Exists, nil)
	if err != nil {
		return err
	}
	ours := labels.SelectorFromSet(labels.Set{managedBy: fieldManager})
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Metrics: metricsserver.Options{BindAddress: "0"},
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.Namespace{}:     {Label: labels.NewSelector().Add(*labelled)},
			&corev1.ResourceQuota{}: {Label: ours},
			&corev1.LimitRange{}:    {Label: ours},
		}},
	})
	if err != nil {
		return err
	}
	r := &QuotaReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}
	if err := r.SetupWithManager(mgr, workers); err != nil {
		return err
	}
	return mgr.Start(ctx)
}
