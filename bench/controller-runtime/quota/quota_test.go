package main

// An end-to-end test of the controller-runtime quota operator against a
// real kube-apiserver, started by testenv/controlplane (build its binaries
// first: go run ./hack/localcluster build, from the repository root). It
// checks the behaviour examples/quota's test checks, and that a child the
// operator does not control is left alone.

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

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
	labelled, plain, typo, foreign := p.TestNamespace(t), p.TestNamespace(t), p.TestNamespace(t), p.TestNamespace(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cfg, err := clientcmd.BuildConfigFromFlags("", p.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	label := func(ns, value string) {
		t.Helper()
		var n corev1.Namespace
		if err := c.Get(ctx, client.ObjectKey{Name: ns}, &n); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(n.DeepCopy())
		if value == "" {
			delete(n.Labels, sizeLabel)
		} else {
			if n.Labels == nil {
				n.Labels = map[string]string{}
			}
			n.Labels[sizeLabel] = value
		}
		if err := c.Patch(ctx, &n, patch); err != nil {
			t.Fatal(err)
		}
	}
	// children returns the children of ns, nil when missing.
	children := func(ns string) (*corev1.ResourceQuota, *corev1.LimitRange) {
		t.Helper()
		key := client.ObjectKey{Namespace: ns, Name: childName}
		q, lr := &corev1.ResourceQuota{}, &corev1.LimitRange{}
		if err := c.Get(ctx, key, q); apierrors.IsNotFound(err) {
			q = nil
		} else if err != nil {
			t.Fatal(err)
		}
		if err := c.Get(ctx, key, lr); apierrors.IsNotFound(err) {
			lr = nil
		} else if err != nil {
			t.Fatal(err)
		}
		return q, lr
	}
	// sized reports whether ns has both children, of the given size.
	sized := func(ns, want string) bool {
		q, lr := children(ns)
		s := sizes[want]
		return q != nil && lr != nil && q.Spec.Hard.Pods().Equal(*s.hard.Pods()) &&
			q.Spec.Hard.Name(corev1.ResourceLimitsMemory, "").Equal(*s.hard.Name(corev1.ResourceLimitsMemory, "")) &&
			len(lr.Spec.Limits) == 1 && lr.Spec.Limits[0].Max.Cpu().Equal(*s.maxima.Cpu()) &&
			lr.Spec.Limits[0].Default.Memory().Equal(*s.limit.Memory())
	}

	// A LimitRange of that name that the operator does not control.
	theirs := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: foreign, Name: childName},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer, Max: resources("3", "3Gi")}}}}
	if err := c.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}

	t.Setenv("KUBECONFIG", p.Kubeconfig())
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- run(runCtx, 2) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()

	label(typo, "huge")
	label(foreign, "small")
	label(labelled, "small")
	eventually(t, "small children", func() bool { return sized(labelled, "small") })
	var ns corev1.Namespace
	if err := c.Get(ctx, client.ObjectKey{Name: labelled}, &ns); err != nil {
		t.Fatal(err)
	}
	q, lr := children(labelled)
	for _, m := range []metav1.Object{q, lr} {
		if !metav1.IsControlledBy(m, &ns) || m.GetLabels()[managedBy] != fieldManager {
			t.Errorf("%s: owners %+v, labels %v", m.GetName(), m.GetOwnerReferences(), m.GetLabels())
		}
	}

	// The foreign Namespace gets its quota; its LimitRange stays theirs.
	eventually(t, "the foreign namespace's quota", func() bool { q, _ := children(foreign); return q != nil })
	if _, lr := children(foreign); lr == nil || lr.ResourceVersion != theirs.ResourceVersion {
		t.Errorf("the LimitRange the operator does not control was changed: %+v", lr)
	}

	// A change of the Namespace that leaves its size alone writes nothing
	// (counted at the end).
	patch := client.MergeFrom(ns.DeepCopy())
	ns.Labels["example.com/unrelated"] = "yes"
	if err := c.Patch(ctx, &ns, patch); err != nil {
		t.Fatal(err)
	}

	// A child deleted by hand comes back: its delete wakes its Namespace.
	if err := c.Delete(ctx, q); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the quota restored", func() bool { q2, _ := children(labelled); return q2 != nil && q2.UID != q.UID })

	label(labelled, "large")
	eventually(t, "large children", func() bool { return sized(labelled, "large") })
	label(labelled, "") // the label goes
	eventually(t, "no children", func() bool { q, lr := children(labelled); return q == nil && lr == nil })

	// The operator's writes that took: two creates, one re-create, two
	// updates and two deletes, and nothing for the reconciles that found
	// nothing to change. The refused ones (a create of a child its cache
	// did not show yet, a delete of one already gone) are logged.
	events, err := p.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	writes := 0
	for _, e := range events {
		if e.Stage != "ResponseComplete" || e.UserAgent != fieldManager || e.Namespace != labelled ||
			e.Verb == "get" || e.Verb == "list" || e.Verb == "watch" {
			continue
		}
		fmt.Fprintf(&log, "\n%s %s %s %d", e.Received.Format(time.StampMicro), e.Verb, e.Resource, e.Code)
		if e.Code < 300 {
			writes++
		}
	}
	t.Logf("the operator's writes in %s:%s", labelled, log.String())
	if writes != 7 {
		t.Errorf("the operator's writes in %s that took: %d, want 7", labelled, writes)
	}
	for _, ns := range []string{plain, typo} {
		if q, lr := children(ns); q != nil || lr != nil {
			t.Errorf("namespace %s has children: %v %v", ns, q, lr)
		}
	}
}
