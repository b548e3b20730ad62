package queue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// Result is what a Runner's function asks for after processing a key
// without error.
type Result struct {
	// RequeueAfter, if positive, asks for the key to be processed again
	// after this long. Zero means the key is done until it is added again.
	RequeueAfter time.Duration
}

// Func processes one key. ctx is the Runner's context.
type Func func(ctx context.Context, key string) (Result, error)

// A Runner runs workers that take keys from a Queue and process them with
// Func, acting on the outcome:
//
//   - an error wrapping [k8sapi.ErrInvalidKey]: Forget, and a warning
//     is logged (no retry can fix the key, so it is dropped);
//   - any other error: AddRateLimited (the key is retried with backoff);
//   - Result.RequeueAfter > 0: Forget, then AddAfter(RequeueAfter);
//   - otherwise: Forget.
//
// A panic in Func is recovered, logged with the key and counted (see
// Panics); the key is retried with backoff and the worker carries on.
// Time comes from the Queue's Clock.
//
// Set the fields, then call Run once. Panics is safe to call concurrently
// with Run.
type Runner struct {
	// Queue supplies the keys. Required.
	Queue *Queue
	// Func processes a key. Required.
	Func Func
	// Workers is the number of keys processed at once. Zero or negative
	// means 1.
	Workers int
	// Logger receives recovered panics (at error level), dropped keys
	// (at warning level) and failed keys
	// with their retry count (at debug level: Func is expected to log its
	// own failures with their context). Nil means nothing is logged.
	Logger *slog.Logger

	panics atomic.Uint64
}

// Run starts the workers and blocks until ctx is done or the Queue is shut
// down. When ctx is done it shuts the Queue down: no new key is handed out,
// and Run waits for the calls of Func in flight, which see ctx done, to
// return. Run returns nil then, or an error at once if Queue or Func is
// nil.
func (r *Runner) Run(ctx context.Context) error {
	if r.Queue == nil {
		return errors.New("queue: Runner.Queue is nil")
	}
	if r.Func == nil {
		return errors.New("queue: Runner.Func is nil")
	}
	log := cmp.Or(r.Logger, slog.New(slog.DiscardHandler))
	// When ctx ends the queue shuts down, and the workers stop once their
	// keys are done; they stop too if someone else shuts it down.
	stop := context.AfterFunc(ctx, r.Queue.ShutDown)
	defer stop()
	var wg sync.WaitGroup
	for range max(r.Workers, 1) {
		wg.Go(func() {
			for r.processNext(ctx, log) {
			}
		})
	}
	wg.Wait()
	return nil
}

// Panics returns how many calls of Func panicked.
func (r *Runner) Panics() uint64 { return r.panics.Load() }

// processNext processes one key. It returns false once the queue is shut
// down.
func (r *Runner) processNext(ctx context.Context, log *slog.Logger) bool {
	q := r.Queue
	key, shutdown := q.Get()
	if shutdown {
		return false
	}
	defer q.Done(key)
	if ctx.Err() != nil {
		// Run is about to shut the queue down, which drops the key.
		return false
	}
	res, err := r.call(ctx, key, log)
	switch {
	case errors.Is(err, k8sapi.ErrInvalidKey):
		q.Forget(key)
		log.Warn("queue: dropping a key that can never be processed", "queue", q.name, "key", key, "err", err)
	case err != nil:
		q.AddRateLimited(key)
		log.Debug("queue: processing failed", "queue", q.name, "key", key,
			"err", err, "requeues", q.NumRequeues(key))
	case res.RequeueAfter > 0:
		q.Forget(key)
		q.AddAfter(key, res.RequeueAfter)
	default:
		q.Forget(key)
	}
	return true
}

// errPanicked is what call returns for a call of Func that panicked.
var errPanicked = errors.New("queue: recovered panic")

// call calls r.Func. A panic is logged with the key and its stack,
// counted, and returned as errPanicked.
func (r *Runner) call(ctx context.Context, key string, log *slog.Logger) (res Result, err error) {
	defer func() {
		if v := recover(); v != nil {
			r.panics.Add(1)
			log.Error("queue: recovered panic", "queue", r.Queue.name, "key", key,
				"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			err = errPanicked
		}
	}()
	return r.Func(ctx, key)
}
