package k8sapi

import (
	"sync"
	"time"
)

// tokenBucket is the client-side rate limiter: qps tokens a second, at most
// burst saved up. It is told the time, so it is pure logic; the client does
// the waiting. Safe for concurrent use.
type tokenBucket struct {
	mu     sync.Mutex
	qps    float64
	burst  float64
	tokens float64   // may go negative: tokens promised to waiters
	last   time.Time // when tokens was last brought up to date
}

// newTokenBucket returns a full bucket, or nil (no limit) when qps <= 0.
func newTokenBucket(qps float64, burst int) *tokenBucket {
	if qps <= 0 {
		return nil
	}
	if burst <= 0 {
		burst = 1
	}
	return &tokenBucket{qps: qps, burst: float64(burst), tokens: float64(burst)}
}

// reserve takes a token at now and returns how long the caller must wait
// before using it. A caller that then gives up calls cancel.
func (b *tokenBucket) reserve(now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advance(now)
	b.tokens--
	if b.tokens >= 0 {
		return 0
	}
	return time.Duration(-b.tokens / b.qps * float64(time.Second))
}

// cancel gives back a token reserve handed out but that was not used.
func (b *tokenBucket) cancel(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advance(now)
	b.tokens = min(b.tokens+1, b.burst)
}

func (b *tokenBucket) advance(now time.Time) {
	if b.last.IsZero() {
		b.last = now
		return
	}
	if d := now.Sub(b.last); d > 0 {
		b.tokens = min(b.tokens+d.Seconds()*b.qps, b.burst)
		b.last = now
	}
}
