package manager_test

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/manager"
	"github.com/zerodep-k8s/widget-operator/queue"
	"github.com/zerodep-k8s/widget-operator/reconcile"
	"github.com/zerodep-k8s/widget-operator/watch"
)

// An operator process of two controllers that watch the labelled
// Namespaces through one cache (one list and one watch), elect one
// leader, write Events as "team-operator" and serve /readyz and, over
// HTTPS for authorized scrapers, /metrics (team_operator_*).
func Example() {
	cfg, err := k8sapi.Load(k8sapi.LoadOptions{})
	if err != nil {
		return
	}
	client, err := k8sapi.New(cfg)
	if err != nil {
		return
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	m, err := manager.New(manager.Config{Name: "team-operator", Client: client, Logger: log,
		LeaderElection: &reconcile.LeaderElection{Client: client, Name: "team-operator"},
		ProbeAddr:      ":8081", MetricsAddr: ":8443"})
	if err != nil {
		log.Error("cannot start", "err", err)
		return
	}
	type namespace struct {
		k8sapi.TypeMeta
		k8sapi.ObjectMeta `json:"metadata"`
	}
	teams := watch.Config[namespace]{Source: watch.ClientSource[namespace](client, k8sapi.Namespaces),
		LabelSelector: "example.com/team", Name: "namespaces"}
	for _, name := range []string{"quota", "policy"} {
		c := &reconcile.Controller{Name: name}
		if err := m.Add(c); err != nil { // before its caches are made
			return
		}
		namespaces := reconcile.WatchPrimary(c, teams) // the same cache for both
		c.Reconciler = reconcile.ReconcilerFunc(func(ctx context.Context, key string) (queue.Result, error) {
			if ns, ok := namespaces.Get("", key); ok {
				m.Recorder().Event(k8sapi.ObjectReference{APIVersion: "v1", Kind: "Namespace", Name: ns.Name, UID: ns.UID},
					"Normal", "Seen", name+" saw the Namespace")
			}
			return queue.Result{}, nil
		})
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := m.Run(ctx); err != nil {
		log.Error("stopped", "err", err)
	}
}
