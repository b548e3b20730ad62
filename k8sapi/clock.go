package k8sapi

import "time"

// A Clock tells the time and runs functions later: the seam through which
// the work queue reads time, so that tests can supply a fake one. (The
// leader elector reads the system's time; its tests run in a
// testing/synctest bubble.) [RealClock] is the system's. A Clock must be
// safe for concurrent use.
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

// RealClock is the Clock of the system: [time.Now] and [time.AfterFunc].
type RealClock struct{}

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }

// AfterFunc returns time.AfterFunc(d, f).
func (RealClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
