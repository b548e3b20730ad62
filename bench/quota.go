package bench

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/testenv/controlplane"
	"github.com/zerodep-k8s/widget-operator/watch"
)

// The quota operator's contract (examples/quota): the label it reads, its
// sizes, and the name and label of the children it keeps.
const (
	QuotaLabel    = "example.com/quota"
	QuotaChild    = "example-quota"
	QuotaSelector = "app.kubernetes.io/managed-by=quota-example"
)

// QuotaSizes are the values of QuotaLabel; the Namespaces of the quota
// scenario take them in turn.
var QuotaSizes = []string{"small", "medium", "large"}

// QuotaOperator is a quota operator binary (examples/quota, or its
// controller-runtime twin in bench/controller-runtime/quota), run as a
// ServiceAccount of its own bound to cluster-admin. It takes --kubeconfig
// and no probe or metrics flags.
func QuotaOperator(name, bin string) Operator {
	return Operator{Name: name, Binary: bin, Namespace: "quota-system", ServiceAccount: "quota-operator", ClusterAdmin: true}
}

// quotaChild is the part of a ResourceQuota or LimitRange the tracker reads.
type quotaChild struct {
	k8sapi.TypeMeta
	k8sapi.ObjectMeta `json:"metadata"`
}

// RunQuota measures one quota operator at cfg.N on a fresh bare control
// plane, which it stops before returning: it creates N Namespaces
// q-00000 and on, labelled with QuotaLabel, then starts the operator and
// waits until each of them has both children. The Result has Converge,
// CPU, PeakRSS and SteadyRSS at that moment, and the Requests of the
// operator from its start to Settle after it. RunQuota reads N, Operator
// (with the flags of QuotaOperator), RepoRoot, Settle, Timeout and Log of
// cfg.
func RunQuota(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.RepoRoot == "" {
		cfg.RepoRoot = RepoRoot()
	}
	if cfg.Settle <= 0 {
		cfg.Settle = 2 * time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2*time.Minute + time.Duration(cfg.N)*100*time.Millisecond
	}
	logf := func(format string, args ...any) {
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, "bench: %s N=%d: %s\n", cfg.Operator.Name, cfg.N, fmt.Sprintf(format, args...))
		}
	}
	p, err := controlplane.Start(ctx, controlplane.Options{Bare: true})
	if err != nil {
		return nil, err
	}
	defer p.Stop()
	work, err := os.MkdirTemp("", "quota-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	if err := p.CreateNamespace(ctx, cfg.Operator.Namespace); err != nil {
		return nil, err
	}
	kc, err := grant(ctx, p, cfg.RepoRoot, cfg.Operator, work)
	if err != nil {
		return nil, err
	}
	admin, err := adminClient(p)
	if err != nil {
		return nil, err
	}

	logf("creating %d labelled namespaces", cfg.N)
	if err := createQuotaNamespaces(ctx, admin, cfg.N); err != nil {
		return nil, err
	}
	tr := newTracker(admin, cfg.N, "ResourceQuotas", "LimitRanges")
	trCtx, stopTracker := context.WithCancel(ctx)
	defer stopTracker()
	if err := tr.startQuota(trCtx); err != nil {
		return nil, err
	}

	logf("starting the operator")
	op, err := spawn(cfg.Operator, append([]string{"--kubeconfig", kc}, cfg.Operator.Args...), work, "quota")
	if err != nil {
		return nil, err
	}
	defer op.stop()
	select {
	case <-tr.done:
	case <-op.exited:
		return nil, fmt.Errorf("bench: %s exited before convergence\n%s", cfg.Operator.Name, op.tail())
	case <-time.After(cfg.Timeout):
		return nil, fmt.Errorf("bench: %s: not converged within %v: %s\n%s", cfg.Operator.Name, cfg.Timeout, tr.describe(), op.tail())
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	st, err := readProc(op.pid())
	if err != nil {
		return nil, err
	}
	res := &Result{Operator: cfg.Operator.Name, N: cfg.N, Converge: tr.at.Sub(op.started),
		CPU: st.cpu, PeakRSS: st.hwm, SteadyRSS: st.rss}
	logf("converged in %v, cpu %v, peak RSS %d MiB", res.Converge.Round(time.Millisecond), res.CPU, res.PeakRSS>>20)

	// A fixed window to catch trailing requests: the children's own watch
	// events wake reconciles that must write nothing.
	time.Sleep(cfg.Settle)
	end := time.Now()
	stopTracker()
	events, err := auditAfter(ctx, p, end)
	if err != nil {
		return nil, err
	}
	res.Requests = CountRequests(events, cfg.Operator.User(), op.started, end)
	logf("requests: %d (%d lists, %d watches, %d writes, %d other)", res.Requests.Total,
		res.Requests.Lists, res.Requests.Watches, res.Requests.Writes, res.Requests.Other)
	return res, nil
}

// createQuotaNamespaces creates n Namespaces, q-00000 and on, labelled
// with the QuotaSizes in turn.
func createQuotaNamespaces(ctx context.Context, c *k8sapi.Client, n int) error {
	namespaces := k8sapi.For[quotaChild](c, k8sapi.Namespaces)
	err := parallel(n, func(i int) error {
		ns := &quotaChild{TypeMeta: k8sapi.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
			ObjectMeta: k8sapi.ObjectMeta{Name: fmt.Sprintf("q-%05d", i), Labels: map[string]string{QuotaLabel: QuotaSizes[i%len(QuotaSizes)]}}}
		_, err := namespaces.Create(ctx, "", ns, k8sapi.WriteOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("bench: creating namespaces: %w", err)
	}
	return nil
}

// startQuota runs the watches of the quota children of every namespace
// and returns once they have synced. Its sets are the namespaces that have
// a ResourceQuota and a LimitRange named QuotaChild.
func (t *tracker) startQuota(ctx context.Context) error {
	var synced []func() bool
	for set, plural := range []string{"resourcequotas", "limitranges"} {
		r := k8sapi.Resource{Version: "v1", Resource: plural, Namespaced: true}
		mark := func(o *quotaChild, ok bool) {
			if o.Name == QuotaChild {
				t.mark(set, o.Namespace, ok)
			}
		}
		inf := watch.New(watch.Config[quotaChild]{
			Source:        watch.ClientSource[quotaChild](t.c, r),
			LabelSelector: QuotaSelector,
			Handler: watch.Handler[quotaChild]{
				OnAdd:    func(o *quotaChild) { mark(o, true) },
				OnDelete: func(o *quotaChild) { mark(o, false) },
			},
		})
		go inf.Run(ctx)
		synced = append(synced, inf.HasSynced)
	}
	return waitSynced(ctx, synced...)
}
