// Package queue is a work queue of keys (usually "namespace/name") that sits
// between the watch and the reconciler.
package queue
