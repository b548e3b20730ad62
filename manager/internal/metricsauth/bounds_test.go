package metricsauth

import (
	"crypto/sha256"
	"net/http"
	"testing"
	"time"
)

// remember scans for stale decisions only once the cache is full, and a
// full cache of decisions that have not expired takes no more.
func TestRememberBounds(t *testing.T) {
	now := time.Now()
	key := func(i int) [sha256.Size]byte { return sha256.Sum256([]byte{byte(i), byte(i >> 8)}) }
	f := &Filter{cache: map[[sha256.Size]byte]decision{}}
	for i := range 10 {
		f.cache[key(i)] = decision{code: http.StatusUnauthorized, expires: now.Add(-time.Hour)}
	}
	f.remember(key(10), http.StatusOK, now)
	if n := f.size(); n != 11 {
		t.Errorf("a cache below its bound dropped stale decisions: %d left, want 11", n)
	}
	clear(f.cache)
	for i := range maxEntries {
		f.cache[key(i)] = decision{code: http.StatusUnauthorized, expires: now.Add(time.Hour)}
	}
	f.remember(key(maxEntries), http.StatusOK, now)
	if _, kept := f.cache[key(maxEntries)]; kept || f.size() != maxEntries {
		t.Errorf("a full cache of unexpired decisions: %d entries, new one kept %v", f.size(), kept)
	}
}
