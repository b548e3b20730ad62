package reconcile

import (
	"errors"
	"testing"
	"time"
)

// A cache that has not synced fails its check with the reason its watch
// gives, such as a resource not served yet, and with "not synced" only
// while the watch has nothing to report.
func TestChecksBeforeSyncSayWhy(t *testing.T) {
	notServed := errors.New("watch: failing for 3s: gadgets.example.com/v1 is not served (404): waiting for it")
	tests := []struct {
		cache fakeCache
		want  error
	}{
		{fakeCache{}, errNotSynced},
		{fakeCache{err: notServed}, notServed},
		{fakeCache{synced: true, err: notServed}, notServed},
		{fakeCache{synced: true}, nil},
	}
	for _, tt := range tests {
		c := &Controller{Name: "t"}
		c.caches = []named{{&tt.cache, "gadgets", nil, nil}}
		if got := c.Checks(time.Now())[0].Err; got != tt.want {
			t.Errorf("synced %v, Healthy %v: check %v, want %v", tt.cache.synced, tt.cache.err, got, tt.want)
		}
	}
}
