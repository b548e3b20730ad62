// Command controller-runtime is the reference operator of the benchmarks:
// the Widget job done the conventional way, with controller-runtime. It is
// a yardstick, not part of the product; the main module never imports it.
package main

import (
	"context"
	"errors"
	"flag"
	"net/http"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

func main() {
	// --kubeconfig is registered by controller-runtime's config package.
	var metricsAddr, probeAddr string
	var workers int
	var stripManagedFields bool
	flag.StringVar(&metricsAddr, "metrics-bind-address", "0", "The address the metrics endpoint binds to; 0 turns it off.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "The address the probe endpoint binds to.")
	flag.IntVar(&workers, "workers", 4, "Concurrent reconciles.")
	flag.BoolVar(&stripManagedFields, "strip-managed-fields", false, "Drop managedFields from every object the cache holds (the usual memory tuning).")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("setup")

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		log.Error(err, "scheme")
		os.Exit(1)
	}
	if err := addToScheme(scheme); err != nil {
		log.Error(err, "scheme")
		os.Exit(1)
	}

	// QPS -1 is controller-runtime's default: no client-side rate limit.
	cfg := ctrl.GetConfigOrDie()
	var cacheOpts cache.Options
	if stripManagedFields {
		cacheOpts.DefaultTransform = cache.TransformStripManagedFields()
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  cacheOpts,
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: probeAddr,
		LeaderElection:         false,
	})
	if err != nil {
		log.Error(err, "unable to create the manager")
		os.Exit(1)
	}
	if err := (&WidgetReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr, workers); err != nil {
		log.Error(err, "unable to create the controller")
		os.Exit(1)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		log.Error(err, "healthz")
		os.Exit(1)
	}
	// Ready once the caches have synced, as the operator under test is;
	// healthz.Ping alone would answer before the first list.
	synced := func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), 100*time.Millisecond)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return errors.New("caches not synced")
		}
		return nil
	}
	if err := mgr.AddReadyzCheck("readyz", synced); err != nil {
		log.Error(err, "readyz")
		os.Exit(1)
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "manager stopped")
		os.Exit(1)
	}
}
