package metricsauth

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// fakeReviewer is a hand-written fake of the API server's two review
// endpoints, served in-process through the client's Transport seam. Token
// "reader" is user reader, allowed; "other" is user other, forbidden;
// "member" is user member, allowed through its group metrics-readers
// alone; "broken" makes the TokenReview fail with a 500; "nostatus" is
// answered a TokenReview without status, and "silent" is user silent,
// whose SubjectAccessReview is answered without status; any other token is
// not authenticated, and so is "reader" once revoked is set.
type fakeReviewer struct {
	revoked                     atomic.Bool
	tokenReviews, accessReviews atomic.Int32
	gate                        chan struct{} // when not nil, each review waits for a value
	inFlight                    atomic.Int32  // reviews being served

	mu         sync.Mutex
	lastAccess reviewSpec // the spec of the last SubjectAccessReview
}

// member is the user token "member" names.
var member = userInfo{Username: "member", UID: "uid-member", Groups: []string{"system:authenticated", "metrics-readers"},
	Extra: map[string][]string{"scopes": {"view", "metrics"}}}

func (f *fakeReviewer) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	f.serve(rec, r)
	return rec.Result(), nil
}

func (f *fakeReviewer) serve(w http.ResponseWriter, r *http.Request) {
	f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	if f.gate != nil {
		<-f.gate
	}
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/apis/authentication.k8s.io/v1/tokenreviews":
		f.tokenReviews.Add(1)
		var tr review
		json.Unmarshal(body, &tr)
		switch tr.Spec.Token {
		case "nostatus":
			fmt.Fprint(w, `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":"nostatus"}}`)
			return
		case "member":
			tr.Status = &reviewStatus{Authenticated: true, User: member}
		case "silent":
			tr.Status = &reviewStatus{Authenticated: true, User: userInfo{Username: "silent", UID: "uid-silent"}}
		case "reader", "other":
			if tr.Spec.Token == "reader" && f.revoked.Load() {
				break
			}
			tr.Status = &reviewStatus{Authenticated: true}
			tr.Status.User = userInfo{Username: tr.Spec.Token, UID: "uid-" + tr.Spec.Token, Groups: []string{"system:authenticated"}}
		case "broken":
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","code":500}`)
			return
		}
		json.NewEncoder(w).Encode(tr)
	case "/apis/authorization.k8s.io/v1/subjectaccessreviews":
		f.accessReviews.Add(1)
		var sar review
		json.Unmarshal(body, &sar)
		f.mu.Lock()
		f.lastAccess = sar.Spec
		f.mu.Unlock()
		if sar.Spec.User == "silent" {
			fmt.Fprint(w, `{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"user":"silent"}}`)
			return
		}
		a := sar.Spec.NonResourceAttributes
		sar.Status = &reviewStatus{}
		sar.Status.Allowed = (sar.Spec.User == "reader" && sar.Spec.UID == "uid-reader" || slices.Contains(sar.Spec.Groups, "metrics-readers")) &&
			a != nil && a.Path == "/metrics" && a.Verb == "get"
		json.NewEncoder(w).Encode(sar)
	default:
		http.NotFound(w, r)
	}
}

// newFilter returns a Filter for /metrics that reviews with f, and the
// handler it wraps around a metrics handler.
func newFilter(t *testing.T, f *fakeReviewer) (*Filter, http.Handler) {
	t.Helper()
	c, err := k8sapi.New(&k8sapi.Config{Host: "https://apiserver.test", Transport: f})
	if err != nil {
		t.Fatal(err)
	}
	filter, err := New(Config{Client: c, Path: "/metrics", Realm: "widget-operator"})
	if err != nil {
		t.Fatal(err)
	}
	return filter, filter.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "metrics\n") }))
}

func scrape(h http.Handler, authorization string) int {
	req := httptest.NewRequest("GET", "/metrics", nil)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}

func TestFilterDecides(t *testing.T) {
	f := &fakeReviewer{}
	_, h := newFilter(t, f)
	for _, tc := range []struct {
		authorization string
		want          int
	}{
		{"", http.StatusUnauthorized},
		{"Basic cmVhZGVyOng=", http.StatusUnauthorized},
		{"Bearer ", http.StatusUnauthorized},
		{"Bearer nobody", http.StatusUnauthorized},
		{"Bearer other", http.StatusForbidden},
		{"Bearer reader", http.StatusOK},
		{"bearer reader", http.StatusOK},
		{"Bearer broken", http.StatusServiceUnavailable},
	} {
		if got := scrape(h, tc.authorization); got != tc.want {
			t.Errorf("Authorization %q: %d, want %d", tc.authorization, got, tc.want)
		}
	}
}

func TestFilterCachesDecisions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeReviewer{}
		_, h := newFilter(t, f)
		for range 50 {
			scrape(h, "Bearer reader")
			scrape(h, "Bearer other")
			scrape(h, "Bearer nobody")
		}
		// One TokenReview per token; a SubjectAccessReview per
		// authenticated one.
		if tr, ar := f.tokenReviews.Load(), f.accessReviews.Load(); tr != 3 || ar != 2 {
			t.Fatalf("150 scrapes with 3 tokens: %d token reviews, %d access reviews; want 3 and 2", tr, ar)
		}
		time.Sleep(ttl) // on the bubble's clock
		if got := scrape(h, "Bearer reader"); got != http.StatusOK {
			t.Fatalf("after the TTL: %d", got)
		}
		if tr := f.tokenReviews.Load(); tr != 4 {
			t.Fatalf("after the TTL: %d token reviews, want 4 (reviewed again)", tr)
		}
		// An API error is not kept.
		scrape(h, "Bearer broken")
		scrape(h, "Bearer broken")
		if tr := f.tokenReviews.Load(); tr != 6 {
			t.Fatalf("two failing reviews: %d token reviews, want 6", tr)
		}
	})
}

// New tokens at the review rate, for long enough to fill the cache with
// expired decisions: it never holds more than maxEntries, and goes on
// keeping new decisions.
func TestFilterCacheIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeReviewer{}
		filter, h := newFilter(t, f)
		for i := range maxEntries + 100 {
			time.Sleep(time.Second / reviewQPS) // on the bubble's clock
			if got := scrape(h, fmt.Sprintf("Bearer random-%d", i)); got != http.StatusUnauthorized {
				t.Fatalf("token %d: %d, want 401", i, got)
			}
			if n := filter.size(); n > maxEntries {
				t.Fatalf("%d cached decisions, want at most %d", n, maxEntries)
			}
		}
		// The cache, full of expired decisions, still keeps new ones.
		time.Sleep(time.Second / reviewQPS)
		before := f.tokenReviews.Load()
		scrape(h, "Bearer reader")
		scrape(h, "Bearer reader")
		if n := f.tokenReviews.Load() - before; n != 1 {
			t.Errorf("two scrapes of a new token after the cache filled: %d token reviews, want 1", n)
		}
	})
}

// The review rate bounds the decisions that have not expired below the
// cache's size, so that a full cache can make room by dropping expired
// ones alone (see remember).
func TestUnexpiredDecisionsFitInCache(t *testing.T) {
	if most := reviewBurst + reviewQPS*(ttl+timeout)/time.Second; most >= maxEntries {
		t.Fatalf("up to %d decisions may be unexpired at once; the cache holds %d", most, maxEntries)
	}
}

// Twenty new tokens at once: exactly maxInFlight of them are under
// review while the others wait their turn, until fewer are left. In a
// synctest bubble, so that every request has either reached the fake or
// is waiting for a slot before the count is read.
func TestFilterBoundsReviewsInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeReviewer{gate: make(chan struct{})}
		_, h := newFilter(t, f)
		const n = 20
		codes := make(chan int, n)
		for i := range n {
			go func() { codes <- scrape(h, fmt.Sprintf("Bearer random-%d", i)) }()
		}
		// Each token needs one TokenReview; let them through one at a
		// time, all of them even after a wrong count, so that none is
		// left blocked.
		wrong := false
		for left := n; left > 0; left-- {
			synctest.Wait()
			if got, want := f.inFlight.Load(), int32(min(left, maxInFlight)); got != want && !wrong {
				t.Errorf("%d requests left: %d reviews in flight, want %d", left, got, want)
				wrong = true
			}
			f.gate <- struct{}{}
		}
		for range n {
			if c := <-codes; c != http.StatusUnauthorized {
				t.Errorf("code %d, want 401", c)
			}
		}
	})
}

// A review answered without status allows nothing: a TokenReview without
// one is not authenticated (401), a SubjectAccessReview without one is not
// allowed (403).
func TestFilterReviewWithoutStatusRefuses(t *testing.T) {
	f := &fakeReviewer{}
	_, h := newFilter(t, f)
	if got := scrape(h, "Bearer nostatus"); got != http.StatusUnauthorized {
		t.Errorf("a TokenReview answered without status: %d, want 401", got)
	}
	if got := scrape(h, "Bearer silent"); got != http.StatusForbidden {
		t.Errorf("a SubjectAccessReview answered without status: %d, want 403", got)
	}
	if ar := f.accessReviews.Load(); ar != 1 {
		t.Errorf("%d access reviews, want 1 (none for the unauthenticated token)", ar)
	}
}

// The SubjectAccessReview asks for the user the TokenReview named, whole:
// name, uid, groups and extra. Access granted through a group alone is
// honoured.
func TestFilterAccessReviewCarriesUser(t *testing.T) {
	f := &fakeReviewer{}
	_, h := newFilter(t, f)
	if got := scrape(h, "Bearer member"); got != http.StatusOK {
		t.Errorf("a user allowed through its group: %d, want 200", got)
	}
	f.mu.Lock()
	got := f.lastAccess
	f.mu.Unlock()
	want := reviewSpec{User: member.Username, UID: member.UID, Groups: member.Groups, Extra: member.Extra,
		NonResourceAttributes: &nonResourceAttributes{Path: "/metrics", Verb: "get"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("SubjectAccessReview spec %+v, want %+v", got, want)
	}
}

func TestNewNeedsClientAndPath(t *testing.T) {
	if _, err := New(Config{Path: "/metrics"}); err == nil {
		t.Error("no Client: no error")
	}
}

// A stream of new tokens costs at most the review rate: past the burst,
// requests get 429 without a review; cached decisions are still served.
func TestFilterRateLimitsReviews(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeReviewer{}
		_, h := newFilter(t, f)
		if got := scrape(h, "Bearer reader"); got != http.StatusOK {
			t.Fatalf("reader: %d", got)
		}
		codes := map[int]int{}
		for i := range reviewBurst + 5 {
			codes[scrape(h, fmt.Sprintf("Bearer random-%d", i))]++
		}
		if codes[http.StatusUnauthorized] != reviewBurst-1 || codes[http.StatusTooManyRequests] != 6 {
			t.Fatalf("%d new tokens after one review, burst %d: %v; want %d reviewed (401) and 6 refused (429)",
				reviewBurst+5, reviewBurst, codes, reviewBurst-1)
		}
		if tr := f.tokenReviews.Load(); tr != reviewBurst {
			t.Fatalf("%d token reviews, want %d", tr, reviewBurst)
		}
		if got := scrape(h, "Bearer reader"); got != http.StatusOK {
			t.Fatalf("a cached token over the rate: %d, want 200", got)
		}
		time.Sleep(time.Second / reviewQPS) // one token refilled, on the bubble's clock
		if got := scrape(h, "Bearer random-x"); got != http.StatusUnauthorized {
			t.Fatalf("a refill later: %d, want a review and 401", got)
		}
	})
}

// A flood of bad tokens at full rate for a whole TTL does not push the
// scraper's allowed decision out of the cache.
func TestFilterCacheKeepsAllowed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeReviewer{}
		_, h := newFilter(t, f)
		scrape(h, "Bearer reader")
		for i := range 50 * int((ttl-time.Second)/time.Second) {
			time.Sleep(time.Second / 50) // on the bubble's clock
			scrape(h, fmt.Sprintf("Bearer random-%d", i))
		}
		before := f.tokenReviews.Load()
		if got := scrape(h, "Bearer reader"); got != http.StatusOK || f.tokenReviews.Load() != before {
			t.Errorf("reader after the flood: %d, %d more reviews; want 200 from the cache", got, f.tokenReviews.Load()-before)
		}
	})
}

// size returns the number of cached decisions.
func (f *Filter) size() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.cache)
}

// A flood of random tokens past the review rate: the scraper, allowed
// once before the flood, is served every time (scraping every 15 s, or
// more seldom than the cache keeps a decision, while the flood fills the
// cache), and the reviews stay within the rate plus one per scrape.
func TestFilterServesScraperThroughTokenFlood(t *testing.T) {
	for _, tc := range []struct {
		perSecond       int
		interval, flood time.Duration
	}{
		{6, 15 * time.Second, 30 * time.Minute},
		{50, 15 * time.Second, 5 * time.Minute},
		{50, 2 * time.Minute, 10 * time.Minute},
	} {
		t.Run(fmt.Sprintf("%d a second, scrapes every %v", tc.perSecond, tc.interval), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fakeReviewer{}
				_, h := newFilter(t, f)
				if got := scrape(h, "Bearer reader"); got != http.StatusOK {
					t.Fatalf("reader before the flood: %d", got)
				}
				every := tc.perSecond * int(tc.interval/time.Second)
				var scrapes, failed int
				for i := range tc.perSecond * int(tc.flood/time.Second) {
					time.Sleep(time.Second / time.Duration(tc.perSecond)) // on the bubble's clock
					scrape(h, fmt.Sprintf("Bearer random-%d", i))
					if (i+1)%every == 0 {
						scrapes++
						if got := scrape(h, "Bearer reader"); got != http.StatusOK {
							failed++
						}
					}
				}
				if failed > 0 {
					t.Errorf("%d of %d scrapes failed", failed, scrapes)
				}
				if most := reviewBurst + reviewQPS*int32(tc.flood/time.Second) + int32(scrapes) + 1; f.tokenReviews.Load() > most {
					t.Errorf("%d token reviews, want at most %d", f.tokenReviews.Load(), most)
				}
			})
		})
	}
}

// A token allowed before is reviewed again over the rate; once it is
// refused, or after knownFor, it waits for the rate as any new token.
func TestFilterKnownTokenSkipsRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeReviewer{}
		_, h := newFilter(t, f)
		spend := func() { // the review rate, spent by new tokens
			for i := 0; scrape(h, fmt.Sprintf("Bearer spend-%d", i)) != http.StatusTooManyRequests; i++ {
			}
		}
		scrape(h, "Bearer reader")
		time.Sleep(ttl) // on the bubble's clock
		spend()
		if got := scrape(h, "Bearer reader"); got != http.StatusOK {
			t.Fatalf("an allowed token after its TTL, the rate spent: %d, want 200", got)
		}
		f.revoked.Store(true)
		time.Sleep(ttl)
		spend()
		if got := scrape(h, "Bearer reader"); got != http.StatusUnauthorized {
			t.Fatalf("a revoked token after its TTL, the rate spent: %d, want a review and 401", got)
		}
		time.Sleep(ttl)
		spend()
		if got := scrape(h, "Bearer reader"); got != http.StatusTooManyRequests {
			t.Fatalf("a token refused before, the rate spent: %d, want 429", got)
		}
		f.revoked.Store(false)
		for time.Sleep(time.Second); scrape(h, "Bearer reader") != http.StatusOK; time.Sleep(time.Second) {
		}
		time.Sleep(ttl + knownFor)
		spend()
		if got := scrape(h, "Bearer reader"); got != http.StatusTooManyRequests {
			t.Fatalf("an allowed token unused for its TTL and knownFor, the rate spent: %d, want 429", got)
		}
	})
}

// A refused client's connection is closed after the answer: a second
// request on it gets none. An allowed one's is kept.
func TestFilterClosesRefusedConnections(t *testing.T) {
	_, h := newFilter(t, &fakeReviewer{})
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, tc := range []struct {
		authorization string
		code          int
		closed        bool
	}{{"", http.StatusUnauthorized, true}, {"Bearer other", http.StatusForbidden, true}, {"Bearer reader", http.StatusOK, false}} {
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(time.Minute)) // against a hang
		br := bufio.NewReader(c)
		var codes []int
		for range 2 {
			fmt.Fprintf(c, "GET /metrics HTTP/1.1\r\nHost: op\r\nAuthorization: %s\r\n\r\n", tc.authorization)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				break
			}
			io.Copy(io.Discard, resp.Body)
			codes = append(codes, resp.StatusCode)
		}
		if want := map[bool]int{true: 1, false: 2}[tc.closed]; len(codes) != want || codes[0] != tc.code {
			t.Errorf("Authorization %q: answers %v to two requests on one connection; want %d of %d", tc.authorization, codes, want, tc.code)
		}
	}
}
