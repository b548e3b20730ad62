package k8sapi

import (
	"cmp"
	"context"
	"errors"
	"io"
	"iter"
)

// pages iterates over the pages of a list, opts.Limit (zero means 500)
// objects each, following the continue tokens, for [Typed.ListAll]. A
// failure ends it with one (nil, err) pair.
func (t Typed[T]) pages(ctx context.Context, namespace string, opts ListOptions) iter.Seq2[*List[T], error] {
	opts.Limit = cmp.Or(max(opts.Limit, 0), 500)
	return func(yield func(*List[T], error) bool) {
		for {
			page, err := t.List(ctx, namespace, opts)
			if err != nil {
				yield(nil, err)
				return
			}
			next := page.Metadata.Continue
			if !yield(page, nil) || next == "" {
				return
			}
			if next == opts.Continue {
				op := operation{verb: "list", resource: t.Resource.Resource, namespace: namespace}
				yield(nil, op.decodeError(errors.New("server returned the same continue token twice")))
				return
			}
			// The token carries the version; the server rejects both.
			opts.Continue, opts.ResourceVersion, opts.ResourceVersionMatch = next, "", ""
		}
	}
}

// Events returns an iterator over the watcher's events, as [Watcher.Next]
// returns them. The loop ends without an error when the server ends the
// stream cleanly (for example after opts.TimeoutSeconds), and with one
// (zero event, err) pair for any other error, such as a 410 Gone (see
// [IsGone]). Breaking out of the loop does not close the watcher.
func (w *Watcher[T]) Events() iter.Seq2[WatchEvent[T], error] {
	return func(yield func(WatchEvent[T], error) bool) {
		for {
			ev, err := w.Next()
			if err == io.EOF {
				return
			}
			if !yield(ev, err) || err != nil {
				return
			}
		}
	}
}
