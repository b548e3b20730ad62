package reconcile_test

import (
	"context"
	"log/slog"
	"maps"
	"os"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/queue"
	"github.com/zerodep-k8s/widget-operator/reconcile"
	"github.com/zerodep-k8s/widget-operator/watch"
)

// An operator that keeps a ConfigMap "<name>-copy" for every ConfigMap
// labelled example.com/copy=true: the labelled ConfigMaps are the primary
// resource, the copies are owned by them.
func ExampleController() {
	client, err := k8sapi.New(&k8sapi.Config{Host: "https://127.0.0.1:6443"})
	if err != nil {
		return
	}
	type configMap struct {
		k8sapi.TypeMeta
		k8sapi.ObjectMeta `json:"metadata"`
		Data              map[string]string `json:"data,omitempty"`
	}
	c := &reconcile.Controller{Name: "copier", Workers: 2, Logger: slog.New(slog.NewJSONHandler(os.Stderr, nil))}
	originals := reconcile.WatchPrimary(c, watch.Config[configMap]{
		Source:        watch.ClientSource[configMap](client, k8sapi.ConfigMaps),
		LabelSelector: "example.com/copy=true",
		Name:          "originals",
	})
	copies := reconcile.WatchOwned(c, watch.Config[configMap]{
		Source:        watch.ClientSource[configMap](client, k8sapi.ConfigMaps),
		LabelSelector: "example.com/copy-of",
		Name:          "copies",
	}, k8sapi.ConfigMaps)
	c.Reconciler = reconcile.ReconcilerFunc(func(ctx context.Context, key string) (queue.Result, error) {
		ns, name, err := k8sapi.SplitKey(key)
		if err != nil {
			return queue.Result{}, err
		}
		orig, ok := originals.Get(ns, name)
		if !ok {
			return queue.Result{}, nil // gone: garbage collection removes the copy
		}
		want := &configMap{
			TypeMeta: k8sapi.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: k8sapi.ObjectMeta{Namespace: ns, Name: name + "-copy",
				Labels:          map[string]string{"example.com/copy-of": name},
				OwnerReferences: []k8sapi.OwnerReference{reconcile.NewControllerRef(k8sapi.ConfigMaps, &orig.ObjectMeta)}},
			Data: orig.Data,
		}
		if cp, ok := copies.Get(ns, name+"-copy"); ok && maps.Equal(cp.Data, want.Data) {
			return queue.Result{}, nil // nothing to write
		}
		_, err = reconcile.ApplyChild(ctx, copies, k8sapi.For[configMap](client, k8sapi.ConfigMaps), "copier", want)
		return queue.Result{}, err
	})
	ctx, stop := context.WithCancel(context.Background())
	stop() // a real operator stops on SIGTERM
	_ = c.Run(ctx)
}
