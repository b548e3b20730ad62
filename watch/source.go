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

// Event is one event of a [Stream]: a [k8sapi.WatchEvent] with the object
// behind a pointer. An ERROR event is not an Event: [Stream.Next] returns
// it as an error.
type Event[T any] struct {
	Type k8sapi.EventType
	// Object is the object after the change; for Deleted, its last
	// state. It is never nil. The informer keeps it, so the stream must
	// not reuse it.
	Object *T
}

// Stream is an open watch.
type Stream[T any] interface {
	// Next blocks until the next event. It returns io.EOF when the server
	// ended the watch cleanly, and an error wrapping an [*k8sapi.APIError]
	// for an ERROR event. After an error the stream is done.
	Next() (Event[T], error)
	// Close ends the stream; a blocked Next returns. It may be called
	// from any goroutine, more than once.
	Close() error
}

// ClientSource returns the Source that lists and watches r through c.
func ClientSource[T any](c *k8sapi.Client, r k8sapi.Resource) Source[T] {
	return clientSource[T]{k8sapi.For[T](c, r)}
}

type clientSource[T any] struct{ typed k8sapi.Typed[T] }

func (s clientSource[T]) List(ctx context.Context, namespace string, opts k8sapi.ListOptions) (*k8sapi.List[T], error) {
	return s.typed.List(ctx, namespace, opts)
}

func (s clientSource[T]) Watch(ctx context.Context, namespace string, opts k8sapi.ListOptions) (Stream[T], error) {
	w, err := s.typed.Watch(ctx, namespace, opts)
	if err != nil {
		return nil, err
	}
	return clientStream[T]{w}, nil
}

// clientStream adapts a [k8sapi.Watcher] to a Stream.
type clientStream[T any] struct{ w *k8sapi.Watcher[T] }

func (s clientStream[T]) Next() (Event[T], error) {
	ev, err := s.w.Next()
	if err != nil {
		return Event[T]{}, err
	}
	obj := new(T)
	*obj = ev.Object
	return Event[T]{Type: ev.Type, Object: obj}, nil
}

func (s clientStream[T]) Close() error { return s.w.Close() }
