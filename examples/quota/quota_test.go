package main

// An end-to-end test of the quota operator against a real kube-apiserver,
// started by testenv/controlplane. Build its binaries first:
// go run ./hack/localcluster build

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/reconcile"
	"github.com/zerodep-k8s/widget-operator/testenv/controlplane"
)

var plane = controlplane.Shared{Options: controlplane.Options{Bare: true}}

func TestMain(m *testing.M) { os.Exit(plane.Run(m)) }

// eventually polls cond until it holds, or fails the test after a minute.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-time.After(50 * time.Millisecond)
	}
}

func TestQuota(t *testing.T) {
	p := plane.Get(t)
	labelled, plain, typo := p.TestNamespace(t), p.TestNamespace(t), p.TestNamespace(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cert, key := p.AdminCertificate()
	c, err := k8sapi.New(&k8sapi.Config{Host: p.Host(), CAData: p.CAData(), CertData: cert, KeyData: key})
	if err != nil {
		t.Fatal(err)
	}
	namespaces := k8sapi.For[namespace](c, k8sapi.Namespaces)
	quotas := k8sapi.For[object[quotaSpec]](c, k8sapi.Resource{Version: "v1", Resource: "resourcequotas", Namespaced: true})
	limitRanges := k8sapi.For[object[limitRangeSpec]](c, k8sapi.Resource{Version: "v1", Resource: "limitranges", Namespaced: true})
	setLabel := func(ns, key string, value any) {
		t.Helper()
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{key: value}}})
		if _, err := namespaces.Patch(ctx, "", ns, k8sapi.MergePatch, patch, k8sapi.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	label := func(ns string, value any) {
		t.Helper()
		setLabel(ns, sizeLabel, value)
	}
	// children returns the children of ns, nil when missing.
	children := func(ns string) (*object[quotaSpec], *object[limitRangeSpec]) {
		t.Helper()
		q, err := quotas.Get(ctx, ns, childName, k8sapi.GetOptions{})
		if err != nil && !k8sapi.IsNotFound(err) {
			t.Fatal(err)
		}
		lr, err := limitRanges.Get(ctx, ns, childName, k8sapi.GetOptions{})
		if err != nil && !k8sapi.IsNotFound(err) {
			t.Fatal(err)
		}
		return q, lr
	}
	// sized reports whether ns has both children, of the given size.
	sized := func(ns, want string) bool {
		q, lr := children(ns)
		s := sizes[want]
		return q != nil && lr != nil && q.Spec.Hard["pods"] == s.hard["pods"] && q.Spec.Hard["limits.memory"] == s.hard["limits.memory"] &&
			len(lr.Spec.Limits) == 1 && lr.Spec.Limits[0].Max["cpu"] == s.maxima["cpu"] && lr.Spec.Limits[0].Default["memory"] == s.limit["memory"]
	}

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- run(runCtx, []string{"-kubeconfig", p.Kubeconfig(), "-probe-addr", "0", "-metrics-addr", "0"}, t.Output())
	}()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()

	label(typo, "huge")
	label(labelled, "small")
	eventually(t, "small children", func() bool { return sized(labelled, "small") })
	ns, err := namespaces.Get(ctx, "", labelled, k8sapi.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q, lr := children(labelled)
	for _, m := range []*k8sapi.ObjectMeta{&q.ObjectMeta, &lr.ObjectMeta} {
		if !reconcile.IsControlledBy(m, ns.UID) || m.Labels[managedBy] != fieldManager {
			t.Errorf("%s: owners %+v, labels %v", m.Name, m.OwnerReferences, m.Labels)
		}
	}

	// A change of the Namespace that leaves its size alone writes nothing
	// (counted at the end).
	setLabel(labelled, "example.com/unrelated", "yes")

	// A child deleted by hand comes back: its delete wakes its Namespace.
	if err := quotas.Delete(ctx, labelled, childName, k8sapi.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the quota restored", func() bool { q2, _ := children(labelled); return q2 != nil && q2.UID != q.UID })

	label(labelled, "large")
	eventually(t, "large children", func() bool { return sized(labelled, "large") })
	label(labelled, nil) // a merge patch's null removes the label
	eventually(t, "no children", func() bool { q, lr := children(labelled); return q == nil && lr == nil })

	// The quota controller's writes: two creates, one re-create, two applies and
	// two deletes, and nothing for the reconciles that found nothing to
	// change (after each of its own writes, and after the unrelated
	// label). The audit log is written before each response returns.
	// No write may fail: a reconcile woken by the delete of one child does
	// not delete the other again, though the watch may lag, since the
	// cache hides what the operator deleted (watch.Cache.Deleted).
	events, err := p.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	var writes, failed int
	for _, e := range events {
		if e.Stage != "ResponseComplete" || e.UserAgent != fieldManager || e.Namespace != labelled ||
			e.Verb == "get" || e.Verb == "list" || e.Verb == "watch" || e.Resource != "resourcequotas" && e.Resource != "limitranges" {
			continue
		}
		fmt.Fprintf(&log, "\n%s %s %s %d", e.Received.Format(time.StampMicro), e.Verb, e.Resource, e.Code)
		if e.Code < 300 {
			writes++
		} else {
			failed++
		}
	}
	if writes != 7 || failed != 0 {
		t.Errorf("the operator's writes in %s: want 7, all of which succeed:%s", labelled, log.String())
	}

	// By now the operator has listed every namespace and reconciled the
	// others (typo was labelled first); neither an unlabelled namespace nor
	// one of an unknown size gets children.
	for _, ns := range []string{plain, typo} {
		if q, lr := children(ns); q != nil || lr != nil {
			t.Errorf("namespace %s has children: %v %v", ns, q, lr)
		}
	}
}
