// Command versions is an operator of a custom resource served in two API
// versions, on the controller kit and its webhook server
// (manager/webhook). The Route (group versions.example.com) is stored in
// v1, where its target is one string, "host:port", and served in v1 and
// v2, where the target is split into host and port and a weight is added:
//
//	v1: spec: {target: "db.internal:5432"}
//	v2: spec: {target: {host: db.internal, port: 5432}, weight: 10}
//
// The API server converts between the two through the operator's
// conversion webhook (/convert), which round-trips every object without
// loss: what v1 cannot hold, the weight and a target its string would not
// give back, is kept in the annotation versions.example.com/v2-spec of
// the v1 object, as Kubernetes' own conversions keep a newer version's
// fields.
//
// A mutating webhook (/default) gives a target without a port port 80,
// and a validating webhook (/validate) refuses a Route whose target another
// Route already has, in any namespace: a rule CEL cannot express, as it
// sees one object at a time. It reads the other Routes from the
// controller's cache, so two Routes created at the same moment may both
// get in (an update of the later one is then refused).
//
// The controller writes each Route's status.url, http://<target>.
//
//	versions [-kubeconfig FILE] [-webhook-addr ADDR] [-cert-dir DIR] [-ca-bundle-file FILE]
//	         [-install URL] [-probe-addr ADDR]
//
// With -install, the operator creates or updates, at start, the Route
// CRD and the webhook configurations (validating and mutating) at URL (such
// as https://127.0.0.1:9443), with the CA bundle of its certificate: the
// self-signed one, or -ca-bundle-file's with -cert-dir.
//
// RBAC: routes get, list, watch, and patch of routes/status; with
// -install, customresourcedefinitions, validatingwebhookconfigurations and
// mutatingwebhookconfigurations patch.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/manager"
	"github.com/zerodep-k8s/widget-operator/manager/webhook"
	"github.com/zerodep-k8s/widget-operator/queue"
	"github.com/zerodep-k8s/widget-operator/reconcile"
	"github.com/zerodep-k8s/widget-operator/watch"
)

// byTarget indexes the Routes by their v1 target.
const byTarget = "target"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "versions:", err)
		os.Exit(1)
	}
}

// run is main without the process: it runs the operator with the flags in
// args, logging to logw, until ctx ends.
func run(ctx context.Context, args []string, logw io.Writer) error {
	fs := flag.NewFlagSet("versions", flag.ContinueOnError)
	fs.SetOutput(logw)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file; empty means $KUBECONFIG, in-cluster, ~/.kube/config")
	webhookAddr := fs.String("webhook-addr", webhook.DefaultAddr, "address of the webhooks (HTTPS)")
	certDir := fs.String("cert-dir", "", "folder of tls.crt and tls.key; empty means a self-signed certificate")
	caBundle := fs.String("ca-bundle-file", "", "with -cert-dir, the CA bundle that signed it, for -install; without, where to write the self-signed one")
	install := fs.String("install", "", "base URL of the webhooks: install the CRD and webhook configuration for it")
	probeAddr := fs.String("probe-addr", ":8081", "address of /healthz and /readyz; 0 means none")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := k8sapi.Load(k8sapi.LoadOptions{Kubeconfig: *kubeconfig})
	if err != nil {
		return err
	}
	cfg.UserAgent = "versions-example"
	client, err := k8sapi.New(cfg)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(logw, nil))
	c := &reconcile.Controller{Name: "routes", Logger: log}
	cache := reconcile.WatchPrimary(c, watch.Config[RouteV1]{Source: watch.ClientSource[RouteV1](client, routes), Name: "routes",
		Indexers: map[string]watch.IndexFunc[RouteV1]{byTarget: func(r *RouteV1) []string { return []string{r.Spec.Target} }}})
	c.Reconciler = &reconciler{cache: cache, api: k8sapi.For[RouteV1](client, routes)}
	hooks, err := webhook.New(webhook.Config{Addr: *webhookAddr, CertDir: *certDir, CABundleFile: bundleFile(*certDir, *caBundle), Logger: log,
		Admission:  map[string]webhook.AdmitFunc{"/validate": webhook.Validate(uniqueTarget(cache)), "/default": webhook.Mutate(defaultPort)},
		Conversion: map[string]webhook.ConvertFunc{"/convert": webhook.Converter(webhook.Hub[RouteV1](group+"/v1"), webhook.VersionOf(group+"/v2", toV1, toV2))}})
	if err != nil {
		return err
	}
	m, err := manager.New(manager.Config{Name: "versions-example", Client: client, Logger: log, ProbeAddr: *probeAddr, Runnables: []manager.Runnable{hooks}})
	if err == nil {
		err = errors.Join(m.Add(c), hooks.Register(m.Registry()))
	}
	if err != nil {
		return err
	}
	if *install != "" {
		bundle := hooks.CABundle()
		if *certDir != "" {
			if bundle, err = os.ReadFile(*caBundle); err != nil {
				return err
			}
		}
		if err := Install(ctx, client, *install, bundle); err != nil {
			return err
		}
	}
	return m.Run(ctx)
}

// bundleFile is the file the webhook server writes the self-signed CA
// bundle to: -ca-bundle-file, unless it is the bundle of -cert-dir.
func bundleFile(certDir, caBundle string) string {
	if certDir != "" {
		return ""
	}
	return caBundle
}

// uniqueTarget is the validating hook: a Route created may not have the
// target of another Route, in any namespace, nor a Route updated that of
// an older one.
func uniqueTarget(cache *watch.Cache[RouteV1]) func(context.Context, *webhook.AdmissionRequest, *RouteV1, *RouteV1) error {
	return func(_ context.Context, req *webhook.AdmissionRequest, r, _ *RouteV1) error {
		if r == nil {
			return nil // a DELETE
		}
		for _, o := range cache.Store().ByIndex(byTarget, r.Spec.Target) {
			if o.UID != r.UID && (req.Operation == "CREATE" || older(o, r)) {
				return fmt.Errorf("target %q is taken by Route %s/%s", r.Spec.Target, o.Namespace, o.Name)
			}
		}
		return nil
	}
}

// defaultPort is the mutating hook: a Route whose target has no port gets
// port 80. A default that depends on the field's own value: the CRD's
// schema can only default a field that is missing.
func defaultPort(_ context.Context, _ *webhook.AdmissionRequest, r *RouteV1) error {
	if t := split(r.Spec.Target); t.Port == 0 && t.Host != "" {
		r.Spec.Target = join(Target{t.Host, 80})
	}
	return nil
}

// older reports whether a was created before b, by name at the same time.
func older(a, b *RouteV1) bool {
	if a.CreationTimestamp == nil || b.CreationTimestamp == nil || a.CreationTimestamp.Equal(*b.CreationTimestamp) {
		return k8sapi.Key(a.Namespace, a.Name) < k8sapi.Key(b.Namespace, b.Name)
	}
	return a.CreationTimestamp.Before(*b.CreationTimestamp)
}

type reconciler struct {
	cache *watch.Cache[RouteV1]
	api   k8sapi.Typed[RouteV1]
}

// Reconcile writes the Route's status.url, http://<target>, unless it has
// it already.
func (r *reconciler) Reconcile(ctx context.Context, key string) (queue.Result, error) {
	ns, name, err := k8sapi.SplitKey(key)
	route, ok := r.cache.Get(ns, name)
	if err != nil || !ok || route.Status.URL == "http://"+route.Spec.Target {
		return queue.Result{}, err
	}
	patch, _ := json.Marshal(map[string]any{"status": RouteStatus{URL: "http://" + route.Spec.Target}})
	_, err = r.api.Patch(ctx, ns, name, k8sapi.MergePatch, patch, k8sapi.PatchOptions{Subresource: "status"})
	if k8sapi.IsNotFound(err) {
		return queue.Result{}, nil
	}
	return queue.Result{}, err
}
