// Package netpol is a controller that isolates Namespaces: in each
// Namespace of a cache it keeps a NetworkPolicy named default-deny that
// selects every Pod of the Namespace and allows no ingress and no egress,
//
//	apiVersion: networking.k8s.io/v1
//	kind: NetworkPolicy
//	metadata: {name: default-deny}
//	spec: {podSelector: {}, policyTypes: [Ingress, Egress]}
//
// and deletes it when the Namespace leaves the cache (its label went).
// NetworkPolicies add up, so what a Namespace's Pods may reach (DNS, for
// a start) is for its owner to allow, with policies of their own.
//
// The Namespace cache is the caller's, of a type of its own: a controller
// of the same [reconcile.Caches] that names the same cache shares its one
// list and watch. The policy has a controller owner reference to its
// Namespace, and the label app.kubernetes.io/managed-by=<FieldManager>,
// by which the controller selects its policies; a change to one wakes its
// Namespace's reconcile. A policy of that name that the controller does
// not control is left alone, and reported (a Warning Event and the log).
//
// RBAC: networkpolicies (group networking.k8s.io) get, list, watch,
// create, patch and delete; events (group events.k8s.io) create and
// patch; and what the Namespace cache needs.
package netpol

import (
	"context"
	"errors"
	"reflect"

	"github.com/zerodep-k8s/widget-operator/events"
	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/queue"
	"github.com/zerodep-k8s/widget-operator/reconcile"
	"github.com/zerodep-k8s/widget-operator/watch"
)

// Name is the name of the policy in each Namespace.
const Name = "default-deny"

// NetworkPolicies is the resource of the policies.
var NetworkPolicies = k8sapi.Resource{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies", Namespaced: true, Kind: "NetworkPolicy"}

// Policy is the part of a NetworkPolicy the controller writes and reads.
type Policy struct {
	k8sapi.TypeMeta
	k8sapi.ObjectMeta `json:"metadata"`
	Spec              PolicySpec `json:"spec"`
}

// PolicySpec is a NetworkPolicy's spec without rules: what it selects
// and which directions it isolates.
type PolicySpec struct {
	PodSelector k8sapi.LabelSelector `json:"podSelector"`
	PolicyTypes []string             `json:"policyTypes"`
}

// DefaultDeny is the spec of every policy the controller keeps.
func DefaultDeny() PolicySpec {
	return PolicySpec{PolicyTypes: []string{"Ingress", "Egress"}}
}

// Config configures the controller.
type Config struct {
	// Client reads and writes the policies. Required.
	Client *k8sapi.Client
	// FieldManager names the controller's writes and is the value of the
	// app.kubernetes.io/managed-by label of its policies. Required.
	FieldManager string
	// Recorder receives an Event about the Namespace for each policy
	// created or deleted, and one for a policy it does not control. Nil
	// means no Events.
	Recorder *events.Recorder
}

const managedBy = "app.kubernetes.io/managed-by"

// Watch makes c the controller: it adds to c the cache that namespaces
// configures (each of its Namespaces gets a policy) and the cache of the
// policies, and sets c.Reconciler. Call it instead of making c's caches.
func Watch[T any, P reconcile.Object[T]](c *reconcile.Controller, namespaces watch.Config[T], cfg Config) {
	r := &reconciler[T, P]{cfg: cfg, api: k8sapi.For[Policy](cfg.Client, NetworkPolicies)}
	r.namespaces = reconcile.WatchPrimary[T, P](c, namespaces)
	r.policies = reconcile.WatchOwned(c, watch.Config[Policy]{Source: watch.ClientSource[Policy](cfg.Client, NetworkPolicies),
		LabelSelector: managedBy + "=" + cfg.FieldManager, Name: "networkpolicies"}, k8sapi.Namespaces)
	c.Reconciler = r
}

type reconciler[T any, P reconcile.Object[T]] struct {
	cfg        Config
	api        k8sapi.Typed[Policy]
	namespaces *watch.Cache[T]
	policies   *watch.Cache[Policy]
}

// Reconcile makes the Namespace named key have its policy if the cache
// holds it, and not have it otherwise.
func (r *reconciler[T, P]) Reconcile(ctx context.Context, key string) (queue.Result, error) {
	obj, ok := r.namespaces.Get("", key)
	if !ok {
		return queue.Result{}, r.remove(ctx, key)
	}
	ns := P(obj).GetObjectMeta()
	if ns.DeletionTimestamp != nil {
		return queue.Result{}, nil // the namespace controller deletes everything in it
	}
	cur, had := r.policies.Get(key, Name)
	if had && reconcile.IsControlledBy(&cur.ObjectMeta, ns.UID) && reflect.DeepEqual(cur.Spec, DefaultDeny()) {
		return queue.Result{}, nil
	}
	ref := reconcile.NewControllerRef(k8sapi.Namespaces, ns)
	ref.BlockOwnerDeletion = nil // the namespace controller, not the garbage collector, empties a Namespace
	want := &Policy{TypeMeta: k8sapi.TypeMeta{APIVersion: NetworkPolicies.GroupVersion(), Kind: NetworkPolicies.Kind}, Spec: DefaultDeny(),
		ObjectMeta: k8sapi.ObjectMeta{Namespace: key, Name: Name, Labels: map[string]string{managedBy: r.cfg.FieldManager},
			OwnerReferences: []k8sapi.OwnerReference{ref}}}
	_, err := reconcile.ApplyChild(ctx, r.policies, r.api, r.cfg.FieldManager, want)
	if nc := (*reconcile.NotControlledError)(nil); errors.As(err, &nc) {
		r.event(ns, "Warning", "NotControlled", nc.Reason())
		return queue.Result{}, &reconcile.TerminalError{Err: err}
	}
	if err == nil && !had {
		r.event(ns, "Normal", "Isolated", "created NetworkPolicy "+Name)
	}
	return queue.Result{}, err
}

// remove deletes the policy of the Namespace named ns, if it has one that
// a Namespace controls.
func (r *reconciler[T, P]) remove(ctx context.Context, ns string) error {
	cur, ok := r.policies.Get(ns, Name)
	if !ok {
		return nil
	}
	owner := reconcile.ControllerOf(&cur.ObjectMeta, k8sapi.Namespaces)
	if owner == nil {
		return nil
	}
	err := r.api.Delete(ctx, ns, Name, k8sapi.DeleteOptions{Preconditions: &k8sapi.Preconditions{UID: cur.UID}})
	if err != nil && !k8sapi.IsNotFound(err) {
		return err
	}
	r.policies.Deleted(cur) // gone: the next reconcile must not delete it again
	if err == nil {
		r.event(&k8sapi.ObjectMeta{Name: ns, UID: owner.UID}, "Normal", "Unisolated", "deleted NetworkPolicy "+Name)
	}
	return nil
}

func (r *reconciler[T, P]) event(ns *k8sapi.ObjectMeta, eventType, reason, note string) {
	if r.cfg.Recorder != nil {
		r.cfg.Recorder.Event(k8sapi.ObjectReference{APIVersion: "v1", Kind: "Namespace", Name: ns.Name, UID: ns.UID}, eventType, reason, note)
	}
}
