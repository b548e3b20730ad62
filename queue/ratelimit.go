package queue

import (
	"cmp"
	"sync"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// A RateLimiter decides how long a key waits before it is retried.
// Implementations must be safe for concurrent use.
type RateLimiter interface {
	// When records one more retry of key at time now and returns how long
	// the key should wait before it is processed again. A Queue calls it
	// with its lock held, so it must not call back into the queue.
	When(key string, now time.Time) time.Duration
	// Forget clears what the limiter remembers about key.
	Forget(key string)
	// NumRequeues reports how many retries of key were recorded since the
	// key was last forgotten.
	NumRequeues(key string) int
}

// Defaults used by the zero values of the limiters.
const (
	DefaultBackoffBase = 5 * time.Millisecond
	DefaultBackoffMax  = 1000 * time.Second
	DefaultQPS         = 10
	DefaultBurst       = 100
)

// DefaultRateLimiter returns a new limiter that waits the longer of a
// per-key exponential backoff (5ms doubling up to 1000s) and an overall
// token bucket (10 per second, burst 100).
func DefaultRateLimiter() RateLimiter {
	return MaxOf(&ExponentialBackoff{}, &TokenBucket{})
}

// ExponentialBackoff is a per-key RateLimiter: the n-th retry of a key
// since it was last forgotten waits Base·2^(n-1), capped at Max. Memory
// grows with the number of keys that failed and were not forgotten.
//
// The zero value is ready to use. Set the fields before first use; an
// ExponentialBackoff must not be copied after first use. It is safe for
// concurrent use.
type ExponentialBackoff struct {
	// Base is the wait before the first retry. Zero or negative means
	// DefaultBackoffBase (5ms).
	Base time.Duration
	// Max caps the wait. Zero or negative means DefaultBackoffMax (1000s).
	Max time.Duration

	mu       sync.Mutex
	failures map[string]int // retries recorded per key; absent means 0
}

// When implements RateLimiter.
func (b *ExponentialBackoff) When(key string, _ time.Time) time.Duration {
	b.mu.Lock()
	if b.failures == nil {
		b.failures = make(map[string]int)
	}
	n := b.failures[key]
	b.failures[key] = n + 1
	b.mu.Unlock()
	// max(v, 0) is zero for a negative v, which cmp.Or replaces with the
	// default.
	return k8sapi.Backoff{Base: cmp.Or(max(b.Base, 0), DefaultBackoffBase), Max: cmp.Or(max(b.Max, 0), DefaultBackoffMax)}.Delay(n)
}

// Forget implements RateLimiter.
func (b *ExponentialBackoff) Forget(key string) {
	b.mu.Lock()
	delete(b.failures, key)
	b.mu.Unlock()
}

// NumRequeues implements RateLimiter.
func (b *ExponentialBackoff) NumRequeues(key string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.failures[key]
}

// TokenBucket is an overall RateLimiter shared by all keys: it holds up to
// Burst tokens, refilled at QPS per second. Each retry takes a token; when
// none is left the retry is given the wait until its token will have been
// refilled. It keeps no per-key state, so Forget does nothing and
// NumRequeues is always 0.
//
// The zero value is ready to use. Set the fields before first use; a
// TokenBucket must not be copied after first use. It is safe for
// concurrent use.
type TokenBucket struct {
	// QPS is the refill rate in tokens per second. Zero or negative means
	// DefaultQPS (10).
	QPS float64
	// Burst is the bucket size, and the number of tokens it starts with.
	// Zero or negative means DefaultBurst (100).
	Burst int

	once   sync.Once
	bucket *k8sapi.TokenBucket
}

// When implements RateLimiter.
func (t *TokenBucket) When(_ string, now time.Time) time.Duration {
	t.once.Do(func() {
		t.bucket = k8sapi.NewTokenBucket(cmp.Or(max(t.QPS, 0), DefaultQPS), cmp.Or(max(t.Burst, 0), DefaultBurst))
	})
	return t.bucket.Reserve(now)
}

// Forget implements RateLimiter; it does nothing.
func (t *TokenBucket) Forget(string) {}

// NumRequeues implements RateLimiter; it returns 0.
func (t *TokenBucket) NumRequeues(string) int { return 0 }

// MaxOf returns a RateLimiter that asks every one of limiters and waits the
// longest of their answers. Forget forgets the key in all of them and
// NumRequeues reports the largest count.
func MaxOf(limiters ...RateLimiter) RateLimiter {
	return maxOf(append([]RateLimiter(nil), limiters...))
}

type maxOf []RateLimiter

func (m maxOf) When(key string, now time.Time) time.Duration {
	var d time.Duration
	for _, l := range m {
		d = max(d, l.When(key, now))
	}
	return d
}

func (m maxOf) Forget(key string) {
	for _, l := range m {
		l.Forget(key)
	}
}

func (m maxOf) NumRequeues(key string) int {
	n := 0
	for _, l := range m {
		n = max(n, l.NumRequeues(key))
	}
	return n
}
