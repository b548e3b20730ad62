package k8sapi

import (
	"io"
	"iter"
)

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
