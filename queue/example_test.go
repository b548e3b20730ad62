package queue_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/zerodep-k8s/widget-operator/queue"
)

func ExampleQueue() {
	q := queue.New(queue.Config{Name: "widgets"})
	defer q.ShutDown()

	q.Add("default/a")
	q.Add("default/b")
	q.Add("default/a") // already queued: merged
	fmt.Println("ready:", q.Len())

	key, _ := q.Get()
	q.Add(key) // changed while being processed: queued again after Done
	fmt.Println("processing", key, "ready:", q.Len())
	q.Done(key)

	for q.Len() > 0 {
		key, _ := q.Get()
		fmt.Println("processing", key)
		q.Done(key)
	}
	// Output:
	// ready: 2
	// processing default/a ready: 1
	// processing default/b
	// processing default/a
}

func ExampleQueue_AddBacklog() {
	q := queue.New(queue.Config{})
	defer q.ShutDown()

	// The first list found three objects; then one changed.
	q.AddBacklog("default/a")
	q.AddBacklog("default/b")
	q.AddBacklog("default/c")
	q.Add("default/new") // live: ahead of the backlog
	q.Add("default/c")   // live now: moves up

	for q.Len() > 0 {
		key, _ := q.Get()
		fmt.Println("processing", key)
		q.Done(key)
	}
	// Output:
	// processing default/new
	// processing default/c
	// processing default/a
	// processing default/b
}

func ExampleRunner() {
	q := queue.New(queue.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	failed := false
	r := &queue.Runner{
		Queue:   q,
		Workers: 1,
		Func: func(ctx context.Context, key string) (queue.Result, error) {
			if key == "default/b" && !failed {
				failed = true
				fmt.Println("reconcile", key, "failed; retry with backoff")
				return queue.Result{}, errors.New("conflict")
			}
			fmt.Println("reconcile", key)
			if key == "default/b" {
				cancel() // the example is over
			}
			return queue.Result{}, nil
		},
	}
	q.Add("default/a")
	q.Add("default/b")
	if err := r.Run(ctx); err != nil {
		fmt.Println(err)
	}
	fmt.Println("stopped; shut down:", q.ShuttingDown())
	// Output:
	// reconcile default/a
	// reconcile default/b failed; retry with backoff
	// reconcile default/b
	// stopped; shut down: true
}

func ExampleMaxOf() {
	limiter := queue.MaxOf(
		&queue.ExponentialBackoff{Base: time.Second, Max: time.Minute},
		&queue.TokenBucket{QPS: 1, Burst: 1},
	)
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for range 3 {
		fmt.Println(limiter.When("default/a", now))
	}
	fmt.Println("requeues:", limiter.NumRequeues("default/a"))
	limiter.Forget("default/a")
	fmt.Println("after Forget:", limiter.NumRequeues("default/a"))
	// Output:
	// 1s
	// 2s
	// 4s
	// requeues: 3
	// after Forget: 0
}
