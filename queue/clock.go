package queue

import "time"

// A Clock tells the time and runs functions later. The queue uses it for
// delayed adds, backoff and durations; tests can supply a fake one.
// A Clock must be safe for concurrent use.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has elapsed, like
	// [time.AfterFunc].
	AfterFunc(d time.Duration, f func()) Timer
}

// A Timer is a pending call made by [Clock.AfterFunc]. [*time.Timer]
// satisfies it.
type Timer interface {
	// Stop prevents the call if it has not started yet. It reports whether
	// the call was prevented.
	Stop() bool
	// Reset schedules the call again to happen once d has elapsed.
	Reset(d time.Duration) bool
}

// realClock is the Clock used when Config.Clock is nil.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
