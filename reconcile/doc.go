// Package reconcile is a small kit for writing controllers on top of
// [watch] and [queue].
//
// A [Controller] runs a [Reconciler] over a queue of keys that watch caches
// fill: [WatchPrimary] makes the cache of the primary resource,
// [WatchOwned] that of a resource it controls (mapped to the owner's key
// by the controller owner reference), [WatchMapped] that of any other.
// The Controller waits for its caches to sync, runs the workers, measures
// and logs every reconcile, reports readiness ([Controller.Checks]),
// optionally leads by a Lease, and drains on shutdown. What a reconcile
// returns is sorted by [Classify], or the Controller's own classification:
// a [TerminalError] is not retried until the key is queued again by a
// change. A reconcile queued by the deletion of an owned object first
// checks with the server that the owner still exists, so that an owner
// deleted ahead of its children is not given new ones from a cache that
// lags.
//
// The helpers are for any operator: [ApplyChild] creates or applies a
// child and reports one someone else controls ([NotControlledError]);
// conditions ([SetCondition], [FindCondition], [RemoveCondition],
// [IsConditionTrue], [ConditionsEqual]); controller owner references
// ([NewControllerRef], [SetControllerReference], [IsControlledBy]).
// Package reconcile/finalizer adds a finalizer guarded by JSON patch tests
// against concurrent edits.
//
// Controllers of one process may share their caches ([Caches]: one list
// and one watch for the caches of one name, namespace and selectors) and
// one leader election or set of shards ([Election]); package manager
// runs such a process.
//
// Nothing in the package modifies an object it was given: objects from a
// cache may be passed in as they are.
package reconcile
