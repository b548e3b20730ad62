// Package namespaced binds [k8sapi.Typed]'s verbs to one namespace, so that
// calls do not pass it, and adds iterators over every object of a paged
// list and over a watch's events.
//
//	shop := namespaced.In(k8sapi.For[k8sapi.Deployment](c, k8sapi.Deployments), "shop")
//	d, err := shop.Get(ctx, "web", k8sapi.GetOptions{})
//
// A namespace of "" means all namespaces, which only List, ListAll, All,
// Watch and Events accept, or a cluster-scoped resource, whose verbs ignore
// the namespace.
//
// The package is built on k8sapi's exported API alone.
package namespaced

import (
	"cmp"
	"context"
	"errors"
	"iter"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// Handle is [k8sapi.Typed] bound to one namespace. Like Typed it is a small
// value, safe for concurrent use when its Client is.
type Handle[T any] struct {
	Typed     k8sapi.Typed[T]
	Namespace string // "" means all namespaces, or a cluster-scoped resource
}

// In returns t's verbs bound to namespace.
func In[T any](t k8sapi.Typed[T], namespace string) Handle[T] {
	return Handle[T]{Typed: t, Namespace: namespace}
}

// Get reads one object; see [k8sapi.Typed.Get].
func (h Handle[T]) Get(ctx context.Context, name string, opts k8sapi.GetOptions) (*T, error) {
	return h.Typed.Get(ctx, h.Namespace, name, opts)
}

// List reads one page; see [k8sapi.Typed.List].
func (h Handle[T]) List(ctx context.Context, opts k8sapi.ListOptions) (*k8sapi.List[T], error) {
	return h.Typed.List(ctx, h.Namespace, opts)
}

// ListAll reads every page, as All does, and returns all items in one
// List whose Metadata.ResourceVersion is the last page's. If a continue
// token expires part way, it returns the server's 410 error (see
// [k8sapi.IsGone]); start again without opts.Continue.
func (h Handle[T]) ListAll(ctx context.Context, opts k8sapi.ListOptions) (*k8sapi.List[T], error) {
	var all *k8sapi.List[T]
	for page, err := range h.pages(ctx, opts) {
		if err != nil {
			return nil, err
		}
		if all != nil {
			page.Items = append(all.Items, page.Items...)
		}
		all = page
	}
	all.Metadata.Continue = ""
	return all, nil
}

// All returns an iterator over every object, reading one page of
// opts.Limit objects (zero means 500) at a time, as the loop asks for more,
// and following the continue tokens. Each object is yielded with a nil
// error; a failure ends the loop with one (nil, err) pair, such as the
// server's 410 when a continue token expired (see [k8sapi.IsGone]), or a
// [*k8sapi.DecodeError] when the server returns the same continue token
// twice. The objects point into the current page and may be kept.
func (h Handle[T]) All(ctx context.Context, opts k8sapi.ListOptions) iter.Seq2[*T, error] {
	return func(yield func(*T, error) bool) {
		for page, err := range h.pages(ctx, opts) {
			if err != nil {
				yield(nil, err)
				return
			}
			for i := range page.Items {
				if !yield(&page.Items[i], nil) {
					return
				}
			}
		}
	}
}

// pages iterates over the pages of a list, opts.Limit (zero means 500)
// objects each, following the continue tokens. A failure ends it with one
// (nil, err) pair.
func (h Handle[T]) pages(ctx context.Context, opts k8sapi.ListOptions) iter.Seq2[*k8sapi.List[T], error] {
	opts.Limit = cmp.Or(max(opts.Limit, 0), 500)
	return func(yield func(*k8sapi.List[T], error) bool) {
		for {
			page, err := h.List(ctx, opts)
			if err != nil {
				yield(nil, err)
				return
			}
			next := page.Metadata.Continue
			if !yield(page, nil) || next == "" {
				return
			}
			if next == opts.Continue {
				err := errors.New("server returned the same continue token twice")
				yield(nil, &k8sapi.DecodeError{Op: "list", Resource: h.Typed.Resource.Resource, Namespace: h.Namespace, Err: err})
				return
			}
			// The token carries the version; the server rejects both.
			opts.Continue, opts.ResourceVersion, opts.ResourceVersionMatch = next, "", ""
		}
	}
}

// Create creates obj; see [k8sapi.Typed.Create].
func (h Handle[T]) Create(ctx context.Context, obj *T, opts k8sapi.WriteOptions) (*T, error) {
	return h.Typed.Create(ctx, h.Namespace, obj, opts)
}

// Update replaces the object, keeping the fields T lacks; see
// [k8sapi.Typed.Update].
func (h Handle[T]) Update(ctx context.Context, name string, obj *T, opts k8sapi.WriteOptions) (*T, error) {
	return h.Typed.Update(ctx, h.Namespace, name, obj, opts)
}

// Patch changes the object; see [k8sapi.Typed.Patch].
func (h Handle[T]) Patch(ctx context.Context, name string, pt k8sapi.PatchType, data []byte, opts k8sapi.PatchOptions) (*T, error) {
	return h.Typed.Patch(ctx, h.Namespace, name, pt, data, opts)
}

// Apply is server-side apply; see [k8sapi.Typed.Apply].
func (h Handle[T]) Apply(ctx context.Context, name string, obj any, opts k8sapi.PatchOptions) (*T, error) {
	return h.Typed.Apply(ctx, h.Namespace, name, obj, opts)
}

// Delete deletes the object; see [k8sapi.Typed.Delete].
func (h Handle[T]) Delete(ctx context.Context, name string, opts k8sapi.DeleteOptions) error {
	return h.Typed.Delete(ctx, h.Namespace, name, opts)
}

// Watch opens a watch; see [k8sapi.Typed.Watch].
func (h Handle[T]) Watch(ctx context.Context, opts k8sapi.ListOptions) (*k8sapi.Watcher[T], error) {
	return h.Typed.Watch(ctx, h.Namespace, opts)
}

// Events opens a watch, as Watch does, and returns an iterator over its
// events; the watch is closed when the loop ends. See
// [k8sapi.Watcher.Events] for how the iteration ends. A failure to open
// the watch is one (zero event, err) pair.
func (h Handle[T]) Events(ctx context.Context, opts k8sapi.ListOptions) iter.Seq2[k8sapi.WatchEvent[T], error] {
	return func(yield func(k8sapi.WatchEvent[T], error) bool) {
		w, err := h.Watch(ctx, opts)
		if err != nil {
			yield(k8sapi.WatchEvent[T]{}, err)
			return
		}
		defer w.Close()
		w.Events()(yield)
	}
}
