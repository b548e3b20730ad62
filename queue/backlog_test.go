package queue

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestLiveFirst checks the order of the two bands, key by key. Each case
// starts with the key "h" held; its ops are "live k" (Add), "backlog k"
// (AddBacklog), "after k" (AddAfter with a second), "hour k" (AddAfter
// with an hour), "limited k" (AddRateLimited) and "done k".
func TestLiveFirst(t *testing.T) {
	tests := []struct {
		name string
		ops  []string
		want []string
	}{{
		name: "a live key overtakes the backlog",
		ops:  []string{"backlog b1", "backlog b2", "live new"},
		want: []string{"new", "b1", "b2"},
	}, {
		name: "a backlog key added live moves up, behind the live keys before it",
		ops:  []string{"backlog b1", "backlog b2", "live new", "live b2"},
		want: []string{"new", "b2", "b1"},
	}, {
		name: "a live key added to the backlog stays live",
		ops:  []string{"backlog b1", "live new", "backlog new"},
		want: []string{"new", "b1"},
	}, {
		name: "a deadline does not move a backlog key up",
		ops:  []string{"backlog b1", "after b1", "limited b1", "live new"},
		want: []string{"new", "b1"},
	}, {
		name: "a held key re-added to the backlog comes back in the backlog",
		ops:  []string{"backlog b1", "backlog h", "live new", "done h"},
		want: []string{"new", "b1", "h"},
	}, {
		name: "a held key re-added to both bands comes back live",
		ops:  []string{"backlog b1", "backlog h", "live h", "backlog h", "done h"},
		want: []string{"h", "b1"},
	}, {
		name: "a backlog key is ready at once, before its deadline",
		ops:  []string{"hour b1", "backlog b1", "live new"},
		want: []string{"new", "b1"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := New(Config{Clock: newFakeClock()})
			q.Add("h")
			mustGet(t, q)
			for _, op := range tt.ops {
				verb, k, _ := strings.Cut(op, " ")
				switch verb {
				case "live":
					q.Add(k)
				case "backlog":
					q.AddBacklog(k)
				case "after":
					q.AddAfter(k, time.Second)
				case "hour":
					q.AddAfter(k, time.Hour)
				case "limited":
					q.AddRateLimited(k)
				case "done":
					q.Done(k)
				default:
					t.Fatalf("bad op %q", op)
				}
				check(t, q)
			}
			if got := drain(q); !slices.Equal(got, tt.want) {
				t.Errorf("order %q, want %q", got, tt.want)
			}
			check(t, q)
		})
	}
}

// A Widget created while the workers work a backlog of 3,000 keys of the
// first list is the next key handed out, and a retry is live too.
func TestLiveOvertakesInitialList(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Config{})
		for i := range 3000 {
			q.AddBacklog(fmt.Sprintf("default/w%d", i))
		}
		for i := range 100 {
			if k, _ := q.Get(); k != fmt.Sprintf("default/w%d", i) {
				t.Fatalf("Get %d = %q", i, k)
			}
			q.Done(fmt.Sprintf("default/w%d", i))
		}
		q.Add("default/new")
		q.AddBacklog("default/w0") // a relist: behind the first list
		if k, _ := q.Get(); k != "default/new" {
			t.Fatalf("Get = %q, want the live key default/new", k)
		}
		q.AddRateLimited("default/new") // it failed
		q.Done("default/new")
		time.Sleep(time.Second)
		if k, _ := q.Get(); k != "default/new" {
			t.Fatalf("Get = %q, want the retry of default/new", k)
		}
		q.Done("default/new")
		if q.Len() != 2901 {
			t.Fatalf("Len = %d, want 2,901 backlog keys", q.Len())
		}
		got := drain(q)
		if got[0] != "default/w100" || got[len(got)-1] != "default/w0" {
			t.Fatalf("backlog from %q to %q, want from default/w100 to default/w0", got[0], got[len(got)-1])
		}
		check(t, q)
		q.ShutDown()
	})
}

// Under a stream of live keys that never runs dry, at least one Get in
// backlogShare takes a backlog key, oldest first.
func TestBacklogNotStarved(t *testing.T) {
	q := New(Config{})
	for i := range 20 {
		q.AddBacklog(fmt.Sprintf("b%02d", i))
	}
	live, since, backlog := 0, 0, 0
	for range 20 * backlogShare {
		q.Add(fmt.Sprint("live", live))
		q.Add(fmt.Sprint("live", live+1))
		live += 2
		k := mustGet(t, q)
		q.Done(k)
		if k[0] != 'b' {
			if since++; since >= backlogShare {
				t.Fatalf("%d live keys in a row with a backlog of %d", since, q.backlog.n)
			}
			continue
		}
		if want := fmt.Sprintf("b%02d", backlog); k != want {
			t.Fatalf("backlog key %q, want %q", k, want)
		}
		since = 0
		backlog++
	}
	if backlog != 20 {
		t.Fatalf("%d backlog keys handed out, want 20", backlog)
	}
	check(t, q)
}

// Promotions, from the middle of the backlog or its ends, keep both
// bands in order.
func TestPromotions(t *testing.T) {
	q := New(Config{})
	keys := make([]string, 100)
	for i := range keys {
		keys[i] = fmt.Sprint("k", i)
		q.AddBacklog(keys[i])
	}
	order := []int{50, 0, 98, 1, 49, 51}
	for i := range 99 {
		if !slices.Contains(order, i) {
			order = append(order, i)
		}
	}
	var want []string
	for _, i := range order {
		q.Add(keys[i])
		want = append(want, keys[i])
		check(t, q)
	}
	if q.backlog.n != 1 || q.Len() != 100 {
		t.Errorf("backlog holds %d keys, and Len = %d; want 1 and 100", q.backlog.n, q.Len())
	}
	// The backlog's key has the eighth Get.
	want = slices.Insert(want, backlogShare-1, "k99")
	if got := drain(q); !slices.Equal(got, want) {
		t.Errorf("order %q, want %q", got, want)
	}
	check(t, q)
}

// Depth counts the keys of both bands; a promotion does not change it.
func TestMetricsBothBands(t *testing.T) {
	m := &recordingMetrics{}
	q := New(Config{Clock: newFakeClock(), Metrics: m})
	q.AddBacklog("a")
	q.Add("b")
	q.Add("a") // promoted: no add, same depth
	drain(q)
	if want := []int{1, 2, 1, 0}; !slices.Equal(m.depths, want) || m.adds != 2 {
		t.Errorf("depths %v and %d adds, want %v and 2", m.depths, m.adds, want)
	}
}

// An entry promoted, then released, is reused for another key in the
// backlog band, with no trace of its first key.
func TestPromotedEntryReused(t *testing.T) {
	q := New(Config{})
	q.AddBacklog("x1")
	q.AddBacklog("x2")
	q.AddBacklog("a")
	q.Add("a")
	q.Done(mustGet(t, q))
	q.AddBacklog("b") // a's entry, reused
	check(t, q)
	if got := drain(q); !slices.Equal(got, []string{"x1", "x2", "b"}) {
		t.Fatalf("order %q, want [x1 x2 b]", got)
	}
}

// The live keys' run ends when the backlog runs dry: a later backlog
// waits for a run of its own.
func TestStreakEndsWithBacklog(t *testing.T) {
	q := New(Config{})
	q.AddBacklog("b")
	for i := range backlogShare - 2 {
		q.Add(fmt.Sprint("l", i))
		q.Done(mustGet(t, q))
	}
	q.Add("b") // the backlog is empty
	q.Add("l")
	drain(q)
	q.AddBacklog("c")
	for i := range backlogShare - 1 {
		q.Add(fmt.Sprint("m", i))
	}
	if got := drain(q); got[backlogShare-1] != "c" {
		t.Fatalf("order %q, want c eighth", got)
	}
}

// Shutdown drops the keys of both bands, and a held key re-added to the
// backlog with them.
func TestShutDownBothBands(t *testing.T) {
	q := New(Config{})
	q.Add("h")
	mustGet(t, q)
	q.AddBacklog("h")
	q.AddBacklog("b")
	q.Add("l")
	q.ShutDown()
	check(t, q)
	q.Done("h")
	q.AddBacklog("b")
	if _, ok, shut := q.tryGet(); ok || !shut || q.Len() != 0 {
		t.Fatalf("after shutdown: ok=%v shutdown=%v Len=%d", ok, shut, q.Len())
	}
	check(t, q)
}
