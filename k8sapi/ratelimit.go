package k8sapi

import (
	"sync"
	"time"
)

// TokenBucket is a token bucket told the time: it holds up to burst
// tokens, refilled at qps tokens a second, and starts full at the first
// time it is told. It is pure logic; the caller does any waiting. A clock
// going backwards refills nothing. The client limits its requests with
// one (Config.QPS and Burst); other packages use it for theirs. Safe for
// concurrent use.
type TokenBucket struct {
	mu     sync.Mutex
	qps    float64
	burst  float64
	tokens float64   // may go negative: tokens promised to waiters
	last   time.Time // when tokens was last brought up to date; zero: not yet
}

// NewTokenBucket returns a full bucket of burst tokens (at least 1),
// refilled at qps tokens a second. qps must be positive.
func NewTokenBucket(qps float64, burst int) *TokenBucket {
	burst = max(burst, 1)
	return &TokenBucket{qps: qps, burst: float64(burst), tokens: float64(burst)}
}

// Reserve takes a token at now, even one not refilled yet, and returns
// how long the caller must wait before using it: zero when one was left.
// A caller that then gives up calls Cancel.
func (b *TokenBucket) Reserve(now time.Time) time.Duration {
	defer b.lock(now)()
	b.tokens--
	if b.tokens >= 0 {
		return 0
	}
	return time.Duration(-b.tokens / b.qps * float64(time.Second))
}

// Cancel gives back a token Reserve handed out but that was not used.
func (b *TokenBucket) Cancel(now time.Time) {
	defer b.lock(now)()
	b.tokens = min(b.tokens+1, b.burst)
}

// Allow takes a token at now if one is left, and reports whether it did.
func (b *TokenBucket) Allow(now time.Time) bool {
	defer b.lock(now)()
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// Full reports whether the bucket holds all its tokens at now, as a new
// one does.
func (b *TokenBucket) Full(now time.Time) bool {
	defer b.lock(now)()
	return b.tokens >= b.burst
}

// lock locks b, brings its tokens up to date at now and returns the
// unlock.
func (b *TokenBucket) lock(now time.Time) (unlock func()) {
	b.mu.Lock()
	if b.last.IsZero() {
		b.last = now
	} else if d := now.Sub(b.last); d > 0 {
		b.tokens = min(b.tokens+d.Seconds()*b.qps, b.burst)
		b.last = now
	}
	return b.mu.Unlock
}

// Backoff is an exponential backoff: the wait before retry n (0 for the
// first) is Base·2^n, capped at Max. Base and Max must be positive. It
// holds no state; the caller counts its retries.
type Backoff struct {
	Base, Max time.Duration
}

// Delay returns Base·2^n capped at Max.
func (b Backoff) Delay(n int) time.Duration {
	// Base<<n > Max exactly when Base > Max>>n; checking it this way
	// cannot overflow.
	if n < 0 || n >= 63 || b.Base > b.Max>>uint(n) {
		return b.Max
	}
	return b.Base << uint(n)
}

// Jittered returns Delay(n) spread over its upper half by r in [0, 1), so
// that clients that failed together retry apart.
func (b Backoff) Jittered(n int, r float64) time.Duration {
	d := b.Delay(n)
	return d/2 + time.Duration(r*float64(d/2))
}
