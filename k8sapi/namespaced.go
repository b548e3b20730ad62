package k8sapi

import (
	"context"
	"iter"
)

// Namespaced is [Typed] bound to one namespace, so that calls do not pass
// it. Make one with [Typed.In]. Like Typed it is a small value, safe for
// concurrent use when its Client is.
//
// For a cluster-scoped resource the namespace is ignored. On a namespaced
// resource an empty Namespace means all namespaces, which only List,
// ListAll, All, Watch and Events accept.
type Namespaced[T any] struct {
	Typed     Typed[T]
	Namespace string
}

// In returns t's verbs bound to namespace.
func (t Typed[T]) In(namespace string) Namespaced[T] {
	return Namespaced[T]{Typed: t, Namespace: namespace}
}

// Get reads one object; see [Typed.Get].
func (n Namespaced[T]) Get(ctx context.Context, name string, opts GetOptions) (*T, error) {
	return n.Typed.Get(ctx, n.Namespace, name, opts)
}

// List reads one page; see [Typed.List].
func (n Namespaced[T]) List(ctx context.Context, opts ListOptions) (*List[T], error) {
	return n.Typed.List(ctx, n.Namespace, opts)
}

// ListAll reads every page; see [Typed.ListAll].
func (n Namespaced[T]) ListAll(ctx context.Context, opts ListOptions) (*List[T], error) {
	return n.Typed.ListAll(ctx, n.Namespace, opts)
}

// All iterates over every object, page by page; see [Typed.All].
func (n Namespaced[T]) All(ctx context.Context, opts ListOptions) iter.Seq2[*T, error] {
	return n.Typed.All(ctx, n.Namespace, opts)
}

// Create creates obj; see [Typed.Create].
func (n Namespaced[T]) Create(ctx context.Context, obj *T, opts WriteOptions) (*T, error) {
	return n.Typed.Create(ctx, n.Namespace, obj, opts)
}

// Update replaces the object, keeping the fields T lacks; see [Typed.Update].
func (n Namespaced[T]) Update(ctx context.Context, name string, obj *T, opts WriteOptions) (*T, error) {
	return n.Typed.Update(ctx, n.Namespace, name, obj, opts)
}

// Patch changes the object; see [Typed.Patch].
func (n Namespaced[T]) Patch(ctx context.Context, name string, pt PatchType, data []byte, opts PatchOptions) (*T, error) {
	return n.Typed.Patch(ctx, n.Namespace, name, pt, data, opts)
}

// Apply is server-side apply; see [Typed.Apply].
func (n Namespaced[T]) Apply(ctx context.Context, name string, obj any, opts PatchOptions) (*T, error) {
	return n.Typed.Apply(ctx, n.Namespace, name, obj, opts)
}

// Delete deletes the object; see [Typed.Delete].
func (n Namespaced[T]) Delete(ctx context.Context, name string, opts DeleteOptions) error {
	return n.Typed.Delete(ctx, n.Namespace, name, opts)
}

// Watch opens a watch; see [Typed.Watch].
func (n Namespaced[T]) Watch(ctx context.Context, opts ListOptions) (*Watcher[T], error) {
	return n.Typed.Watch(ctx, n.Namespace, opts)
}

// Events iterates over a watch's events; see [Typed.Events].
func (n Namespaced[T]) Events(ctx context.Context, opts ListOptions) iter.Seq2[WatchEvent[T], error] {
	return n.Typed.Events(ctx, n.Namespace, opts)
}
