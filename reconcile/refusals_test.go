package reconcile

import (
	"slices"
	"testing"
	"time"
)

// A refusal stands while the state it was made in does, a Waiting one
// until its retry time; Waiting ones in a row wait twice as long each, up
// to MaxWait.
func TestRefusals(t *testing.T) {
	var r Refusals[string, string]
	t0 := time.Unix(1000, 0)
	if w := r.Refused("ns/a", "gen1", Permanent, errRejected, "rejected", t0); w != 0 {
		t.Errorf("a Permanent refusal waits %v", w)
	}
	if rep, w, ok := r.Standing("ns/a", "gen1", t0.Add(time.Hour)); !ok || rep != "rejected" || w != 0 {
		t.Errorf("Permanent, same state: %q, %v, %v; want it standing with no wait", rep, w, ok)
	}
	if _, _, ok := r.Standing("ns/a", "gen2", t0); ok {
		t.Error("Permanent, changed state: still standing")
	}
	for i, want := range []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, time.Minute, time.Minute} {
		if w := r.Refused("ns/b", "gen1", Waiting, errQuota, "quota", t0); w != want {
			t.Errorf("Waiting refusal %d waits %v, want %v", i+1, w, want)
		}
	}
	if rep, w, ok := r.Standing("ns/b", "gen1", t0.Add(59*time.Second)); !ok || rep != "quota" || w != time.Second {
		t.Errorf("Waiting, before its retry: %q, %v, %v; want standing, 1s left", rep, w, ok)
	}
	if _, _, ok := r.Standing("ns/b", "gen1", t0.Add(time.Minute)); ok {
		t.Error("Waiting, at its retry: still standing")
	}
	r.Refused("ns/c", "gen1", Waiting, errRBAC, "forbidden", t0)
	r.Refused("other/d", "gen1", Waiting, errQuota, "quota", t0)
	if keys := r.RetryQuota("ns"); !slices.Equal(keys, []string{"ns/b"}) {
		t.Errorf("RetryQuota(ns) = %q, want ns/b alone", keys)
	}
	if _, _, ok := r.Standing("other/d", "gen1", t0); !ok {
		t.Error("RetryQuota(ns) forgot other/d")
	}
	if w := r.Refused("ns/b", "gen1", Waiting, errQuota, "quota", t0); w != 10*time.Second {
		t.Errorf("after RetryQuota, the wait is %v, want the first again", w)
	}
	// Transient failures: since the first of a run, which does not stand.
	if s := r.FailingSince("ns/e", t0); !s.Equal(t0) {
		t.Errorf("first Transient failure: since %v", s)
	}
	if s := r.FailingSince("ns/e", t0.Add(time.Minute)); !s.Equal(t0) {
		t.Errorf("second Transient failure: since %v, want %v", s, t0)
	}
	if _, _, ok := r.Standing("ns/e", "", t0); ok {
		t.Error("a Transient failure stands")
	}
	// A Transient run after Waiting refusals keeps their count.
	r.FailingSince("ns/b", t0)
	if w := r.Refused("ns/b", "gen1", Waiting, errQuota, "quota", t0); w != 20*time.Second {
		t.Errorf("Waiting after a Transient failure waits %v, want the second wait", w)
	}
	r.Forget("ns/e")
	if s := r.FailingSince("ns/e", t0.Add(time.Hour)); !s.Equal(t0.Add(time.Hour)) {
		t.Errorf("after Forget: since %v, want a new run", s)
	}
}
