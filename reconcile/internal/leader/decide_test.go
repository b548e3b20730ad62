package leader

import (
	"testing"
	"time"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func TestCanAcquire(t *testing.T) {
	for _, tc := range []struct {
		name       string
		rec        record
		sinceSeen  time.Duration
		want       bool
		fallbackIs time.Duration
	}{
		{name: "free", rec: record{}, want: true},
		{name: "released", rec: record{durationSec: 1}, want: true},
		{name: "ours", rec: record{holder: "me", durationSec: 15}, want: true},
		{name: "held, just seen", rec: record{holder: "a", durationSec: 15}, want: false},
		{name: "held, seen 14.9s ago", rec: record{holder: "a", durationSec: 15}, sinceSeen: 14900 * time.Millisecond, want: false},
		{name: "held, unchanged for 15s", rec: record{holder: "a", durationSec: 15}, sinceSeen: 15 * time.Second, want: true},
		{name: "holder's longer duration wins", rec: record{holder: "a", durationSec: 60}, sinceSeen: 30 * time.Second, want: false},
		{name: "no duration: fallback", rec: record{holder: "a"}, sinceSeen: 14 * time.Second, want: false},
		{name: "no duration: fallback passed", rec: record{holder: "a"}, sinceSeen: 15 * time.Second, want: true},
		// Remote timestamps are ignored: a renewTime long past or in the
		// future does not matter, only how long we have seen it unchanged.
		{name: "ancient renewTime, just seen", rec: record{holder: "a", durationSec: 15, renew: t0.Add(-24 * time.Hour)}, want: false},
		{name: "future renewTime, unchanged 15s", rec: record{holder: "a", durationSec: 15, renew: t0.Add(24 * time.Hour)}, sinceSeen: 15 * time.Second, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := canAcquire(tc.rec, t0, t0.Add(tc.sinceSeen), "me", 15*time.Second); got != tc.want {
				t.Errorf("canAcquire = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestMustStepDown(t *testing.T) {
	for _, tc := range []struct {
		since time.Duration
		want  bool
	}{{0, false}, {2 * time.Second, false}, {9999 * time.Millisecond, false}, {10 * time.Second, true}, {time.Minute, true}} {
		if got := mustStepDown(t0, t0.Add(tc.since), 10*time.Second); got != tc.want {
			t.Errorf("mustStepDown after %v = %v", tc.since, got)
		}
	}
}

func TestNextRecord(t *testing.T) {
	acquired := t0.Add(-time.Minute)
	now := t0
	for _, tc := range []struct {
		name string
		old  record
		want record
	}{
		{"renew keeps acquire time and transitions",
			record{holder: "me", durationSec: 15, acquire: acquired, renew: acquired, transitions: 3},
			record{holder: "me", durationSec: 15, acquire: acquired, renew: now, transitions: 3}},
		{"take over from another holder",
			record{holder: "a", durationSec: 30, acquire: acquired, renew: acquired, transitions: 3},
			record{holder: "me", durationSec: 15, acquire: now, renew: now, transitions: 4}},
		{"take a released lease",
			record{durationSec: 1, acquire: acquired, renew: acquired, transitions: 4},
			record{holder: "me", durationSec: 15, acquire: now, renew: now, transitions: 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := next(tc.old, "me", now, 15*time.Second); got != tc.want {
				t.Errorf("next = %+v\nwant   %+v", got, tc.want)
			}
		})
	}
	if got, want := first("me", now, 15*time.Second), (record{holder: "me", durationSec: 15, acquire: now, renew: now}); got != want {
		t.Errorf("first = %+v", got)
	}
	if got, want := released(record{holder: "me", durationSec: 15, transitions: 2}, now), (record{durationSec: 1, acquire: now, renew: now, transitions: 2}); got != want {
		t.Errorf("released = %+v", got)
	}
}
