package watch

import (
	"context"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// Source is where an [Informer] reads a resource: one page of a list, and
// a watch. [ClientSource] is the Source backed by the API server.
type Source[T any] interface {
	// List returns one page of the list described by opts.
	List(ctx context.Context, namespace string, opts k8sapi.ListOptions) (*k8sapi.List[T], error)
	// Watch opens a watch. The stream ends when ctx ends, when the server
	// ends it or when it is closed.
	Watch(ctx context.Context, namespace string, opts k8sapi.ListOptions) (Stream[T], error)
}

// Stream is an open watch.
type Stream[T any] interface {
	// Next blocks until the next event: a [k8sapi.WatchEvent] of type
	// Added, Modified, Deleted or Bookmark, with the object by value (for
	// Deleted, its last state), as a [k8sapi.Watcher] checks them. The
	// informer keeps the object, so the stream must not share memory
	// between events' objects. Next returns io.EOF when the server ended
	// the watch cleanly, and an error wrapping an [*k8sapi.APIError] for an
	// ERROR event, which is never an event. After an error the stream is
	// done.
	Next() (k8sapi.WatchEvent[T], error)
	// Close ends the stream; a blocked Next returns. It may be called
	// from any goroutine, more than once.
	Close() error
}

// ClientSource returns the Source that lists and watches r through c. Its
// streams are [*k8sapi.Watcher] values.
func ClientSource[T any](c *k8sapi.Client, r k8sapi.Resource) Source[T] {
	return clientSource[T]{k8sapi.For[T](c, r)}
}

// clientSource is a [k8sapi.Typed], whose List is the Source's, with a
// Watch that yields a Stream: a [*k8sapi.Watcher] is one.
type clientSource[T any] struct{ k8sapi.Typed[T] }

func (s clientSource[T]) Watch(ctx context.Context, namespace string, opts k8sapi.ListOptions) (Stream[T], error) {
	w, err := s.Typed.Watch(ctx, namespace, opts)
	if err != nil {
		return nil, err
	}
	return w, nil
}
