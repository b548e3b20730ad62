package queue

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// callLog records the calls of a Runner's function.
type callLog struct {
	mu    sync.Mutex
	start time.Time
	calls []string // "key@elapsed"
}

func (l *callLog) record(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, key+"@"+time.Since(l.start).String())
}

func (l *callLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

func TestRunnerActsOnResult(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Config{})
		log := &callLog{start: time.Now()}
		failures := map[string]int{"fail": 2}
		r := &Runner{Queue: q, Workers: 2, Func: func(ctx context.Context, key string) (Result, error) {
			log.record(key)
			switch key {
			case "fail":
				if failures[key] > 0 {
					failures[key]--
					return Result{}, errors.New("not yet")
				}
			case "requeue":
				return Result{RequeueAfter: time.Minute}, nil
			}
			return Result{}, nil
		}}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- r.Run(ctx) }()
		q.Add("fail")
		synctest.Wait()
		if n := q.NumRequeues("fail"); n != 1 {
			t.Fatalf("after an error NumRequeues = %d, want 1", n)
		}
		q.AddRateLimited("requeue") // counts a retry that success forgets
		time.Sleep(time.Second)
		synctest.Wait()
		if n := q.NumRequeues("fail"); n != 0 {
			t.Fatalf("after success NumRequeues = %d, want 0 (forgotten)", n)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := q.NumRequeues("requeue"); n != 0 {
			t.Fatalf("requeue: NumRequeues = %d, want 0 (forgotten)", n)
		}
		want := []string{"fail@0s", "fail@5ms", "requeue@5ms", "fail@15ms", "requeue@1m0.005s"}
		if got := log.get(); !slices.Equal(got, want) {
			t.Fatalf("calls %q, want %q", got, want)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run = %v", err)
		}
		if !q.ShuttingDown() {
			t.Fatal("Run left the queue running")
		}
	})
}

// TestRunnerDropsInvalidKey checks that a key the function finds
// invalid is dropped with a warning, not retried.
func TestRunnerDropsInvalidKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Config{})
		calls := &callLog{start: time.Now()}
		var logs bytes.Buffer
		r := &Runner{Queue: q, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
			Func: func(_ context.Context, key string) (Result, error) {
				calls.record(key)
				_, _, err := k8sapi.SplitKey(key)
				return Result{}, err
			}}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- r.Run(ctx) }()
		q.Add("a/b/c")
		time.Sleep(time.Hour) // fake time: a retry would have come by now
		synctest.Wait()
		if got, want := calls.get(), []string{"a/b/c@0s"}; !slices.Equal(got, want) {
			t.Errorf("calls %q, want %q (no retry)", got, want)
		}
		if n := q.NumRequeues("a/b/c"); n != 0 || q.Len() != 0 {
			t.Errorf("NumRequeues = %d, Len = %d, want 0, 0", n, q.Len())
		}
		if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "a/b/c") {
			t.Errorf("no warning naming the key:\n%s", logs.String())
		}
		cancel()
		<-done
	})
}

func TestRunnerRecoversPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Config{Name: "widgets"})
		var buf bytes.Buffer
		var bufMu sync.Mutex
		logger := slog.New(slog.NewTextHandler(lockedWriter{&bufMu, &buf}, nil))
		log := &callLog{start: time.Now()}
		panicked := false
		r := &Runner{Queue: q, Logger: logger, Func: func(ctx context.Context, key string) (Result, error) {
			log.record(key)
			if key == "ns/boom" && !panicked {
				panicked = true
				panic("kaboom")
			}
			return Result{}, nil
		}}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- r.Run(ctx) }()
		q.Add("ns/boom")
		synctest.Wait()
		if r.Panics() != 1 {
			t.Fatalf("Panics = %d, want 1", r.Panics())
		}
		if n := q.NumRequeues("ns/boom"); n != 1 {
			t.Fatalf("NumRequeues = %d, want 1 (retried with backoff)", n)
		}
		q.Add("ns/other") // the worker lives on
		time.Sleep(time.Second)
		synctest.Wait()
		want := []string{"ns/boom@0s", "ns/other@0s", "ns/boom@5ms"}
		if got := log.get(); !slices.Equal(got, want) {
			t.Fatalf("calls %q, want %q", got, want)
		}
		bufMu.Lock()
		out := buf.String()
		bufMu.Unlock()
		for _, s := range []string{"recovered panic", "key=ns/boom", "panic=kaboom", "queue=widgets", "runner_test.go"} {
			if !strings.Contains(out, s) {
				t.Errorf("log lacks %q:\n%s", s, out)
			}
		}
		cancel()
		<-done
	})
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestRunnerUsesInjectedClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := newFakeClock()
		q := New(Config{Clock: clock})
		calls := make(chan string, 10)
		r := &Runner{Queue: q, Func: func(ctx context.Context, key string) (Result, error) {
			calls <- key
			return Result{RequeueAfter: time.Hour}, nil
		}}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- r.Run(ctx) }()
		q.Add("a")
		synctest.Wait()
		if len(calls) != 1 {
			t.Fatalf("%d calls, want 1", len(calls))
		}
		clock.Advance(time.Hour - 1)
		synctest.Wait()
		if len(calls) != 1 {
			t.Fatal("requeued before the fake clock reached the deadline")
		}
		clock.Advance(1)
		synctest.Wait()
		if len(calls) != 2 {
			t.Fatalf("%d calls after the deadline, want 2", len(calls))
		}
		cancel()
		<-done
	})
}

func TestRunnerWorkersAndCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Config{})
		var mu sync.Mutex
		inFlight, peak, finished := 0, 0, 0
		r := &Runner{Queue: q, Workers: 3, Func: func(ctx context.Context, key string) (Result, error) {
			mu.Lock()
			inFlight++
			peak = max(peak, inFlight)
			mu.Unlock()
			<-ctx.Done() // hold the key until the runner is stopped
			mu.Lock()
			inFlight--
			finished++
			mu.Unlock()
			return Result{}, ctx.Err()
		}}
		for _, k := range []string{"a", "b", "c", "d", "e"} {
			q.Add(k)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- r.Run(ctx) }()
		synctest.Wait()
		mu.Lock()
		if inFlight != 3 || q.Len() != 2 {
			t.Fatalf("in flight %d with %d ready, want 3 and 2", inFlight, q.Len())
		}
		mu.Unlock()
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run = %v", err)
		}
		if finished != 3 || peak != 3 {
			t.Fatalf("finished %d, peak %d; want 3 and 3 (Run waits for calls in flight)", finished, peak)
		}
		// Shut down, the queue remembers only the held keys.
		q.mu.Lock()
		held := len(q.entries)
		q.mu.Unlock()
		if held != 0 {
			t.Fatalf("%d keys still held after Run", held)
		}
	})
}

func TestRunnerStopsWhenQueueShutDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Config{})
		r := &Runner{Queue: q, Workers: 4, Func: func(context.Context, string) (Result, error) { return Result{}, nil }}
		done := make(chan error)
		go func() { done <- r.Run(t.Context()) }()
		synctest.Wait()
		q.ShutDown()
		if err := <-done; err != nil {
			t.Fatalf("Run = %v", err)
		}
	})
}

func TestRunnerConfigErrors(t *testing.T) {
	fn := func(context.Context, string) (Result, error) { return Result{}, nil }
	for _, tc := range []struct {
		r    *Runner
		want string
	}{
		{&Runner{Func: fn}, "queue: Runner.Queue is nil"},
		{&Runner{Queue: New(Config{})}, "queue: Runner.Func is nil"},
	} {
		if err := tc.r.Run(t.Context()); err == nil || err.Error() != tc.want {
			t.Errorf("Run = %v, want %q", err, tc.want)
		}
	}
}
