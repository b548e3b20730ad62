package leader

import (
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// record is the part of a Lease's spec that leader election reads and
// writes, with pointers resolved.
type record struct {
	holder      string
	durationSec int32
	acquire     time.Time // as written by the holder; never compared to our clock
	renew       time.Time // as written by the holder; never compared to our clock
	transitions int32
}

// recordOf returns l's record; the zero record when l is nil (missing).
func recordOf(l *k8sapi.Lease) record {
	if l == nil {
		return record{}
	}
	s := l.Spec
	return record{
		holder:      deref(s.HolderIdentity),
		durationSec: deref(s.LeaseDurationSeconds),
		acquire:     deref(s.AcquireTime).Time,
		renew:       deref(s.RenewTime).Time,
		transitions: deref(s.LeaseTransitions),
	}
}

// deref returns *p, or the zero value when p is nil.
func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

// canAcquire decides whether self may write the lease now. The lease is
// free if it has no holder, ours if self holds it, and expired if it has
// not changed for the holder's lease duration, as measured on our own
// clock since observedAt, the moment we first saw the current version.
// The holder's own timestamps are never compared with our clock, so clock
// skew between replicas cannot make two leaders. fallback is the
// duration to assume when the record has none.
func canAcquire(rec record, observedAt, now time.Time, self string, fallback time.Duration) bool {
	if rec.holder == "" || rec.holder == self {
		return true
	}
	d := time.Duration(rec.durationSec) * time.Second
	if d <= 0 {
		d = fallback
	}
	return !now.Before(observedAt.Add(d))
}

// mustStepDown reports whether a leader whose last successful renewal
// started at lastRenew has to stop leading: it has not renewed for
// renewDeadline. Since renewDeadline is shorter than the lease duration,
// and others measure the lease from when they saw our renewal, which is
// after it started, we stop before anyone else may start.
func mustStepDown(lastRenew, now time.Time, renewDeadline time.Duration) bool {
	return !now.Before(lastRenew.Add(renewDeadline))
}

// next returns the record self writes to acquire or renew the lease held
// as in old: a new holder gets a fresh acquire time and one more
// transition; a renewal keeps both. A lease self creates starts from
// first instead.
func next(old record, self string, now time.Time, leaseDuration time.Duration) record {
	r := record{holder: self, durationSec: int32(leaseDuration / time.Second), acquire: old.acquire, renew: now, transitions: old.transitions}
	if old.holder != self {
		r.acquire = now
		r.transitions++
	}
	return r
}

// first returns the record of a lease self creates.
func first(self string, now time.Time, leaseDuration time.Duration) record {
	return record{holder: self, durationSec: int32(leaseDuration / time.Second), acquire: now, renew: now}
}

// released returns the record a leader writes when it lets go: no holder
// and a one-second duration, so the next candidate takes over at its
// next try.
func released(old record, now time.Time) record {
	return record{durationSec: 1, acquire: now, renew: now, transitions: old.transitions}
}

// apply writes r into a copy of l's spec, keeping l's metadata.
func (r record) apply(l k8sapi.Lease) k8sapi.Lease {
	l.Spec = k8sapi.LeaseSpec{HolderIdentity: new(r.holder), LeaseDurationSeconds: new(r.durationSec),
		AcquireTime: new(k8sapi.MicroTime{Time: r.acquire}), RenewTime: new(k8sapi.MicroTime{Time: r.renew}), LeaseTransitions: new(r.transitions)}
	return l
}
