package metricsauth

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
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
// "broken" makes the TokenReview fail with a 500; any other token is not
// authenticated.
type fakeReviewer struct {
	tokenReviews, accessReviews atomic.Int32
	gate                        chan struct{} // when not nil, each review waits for a value
	inFlight, maxInFlight       atomic.Int32
}

func (f *fakeReviewer) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	f.serve(rec, r)
	return rec.Result(), nil
}

func (f *fakeReviewer) serve(w http.ResponseWriter, r *http.Request) {
	n := f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	for {
		m := f.maxInFlight.Load()
		if n <= m || f.maxInFlight.CompareAndSwap(m, n) {
			break
		}
	}
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
		case "reader", "other":
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
		a := sar.Spec.NonResourceAttributes
		sar.Status = &reviewStatus{}
		sar.Status.Allowed = sar.Spec.User == "reader" && sar.Spec.UID == "uid-reader" && a != nil && a.Path == "/metrics" && a.Verb == "get"
		json.NewEncoder(w).Encode(sar)
	default:
		http.NotFound(w, r)
	}
}

func newFilter(t *testing.T, f *fakeReviewer, cfg Config) http.Handler {
	t.Helper()
	c, err := k8sapi.New(&k8sapi.Config{Host: "https://apiserver.test", Transport: f})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Client, cfg.Path = c, "/metrics"
	filter, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return filter.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "metrics\n") }))
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
	h := newFilter(t, f, Config{})
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
		h := newFilter(t, f, Config{})
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

func TestFilterCacheIsBounded(t *testing.T) {
	f := &fakeReviewer{}
	c, _ := k8sapi.New(&k8sapi.Config{Host: "https://apiserver.test", Transport: f})
	filter, err := New(Config{Client: c, Path: "/metrics", MaxEntries: 10})
	if err != nil {
		t.Fatal(err)
	}
	h := filter.Wrap(http.NotFoundHandler())
	for i := range 100 {
		scrape(h, fmt.Sprintf("Bearer random-%d", i))
		if n := filter.size(); n > 10 {
			t.Fatalf("%d cached decisions, want at most 10", n)
		}
	}
}

func TestFilterBoundsReviewsInFlight(t *testing.T) {
	f := &fakeReviewer{gate: make(chan struct{})}
	h := newFilter(t, f, Config{})
	var wg sync.WaitGroup
	codes := make(chan int, 20)
	for i := range 20 {
		wg.Go(func() { codes <- scrape(h, fmt.Sprintf("Bearer random-%d", i)) })
	}
	// Each token needs one TokenReview; let them through one at a time.
	for range 20 {
		f.gate <- struct{}{}
	}
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != http.StatusUnauthorized {
			t.Errorf("code %d, want 401", c)
		}
	}
	if m := f.maxInFlight.Load(); m > maxInFlight {
		t.Errorf("%d reviews in flight at once, want at most %d", m, maxInFlight)
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
		h := newFilter(t, f, Config{ReviewQPS: 1, ReviewBurst: 3})
		if got := scrape(h, "Bearer reader"); got != http.StatusOK {
			t.Fatalf("reader: %d", got)
		}
		codes := map[int]int{}
		for i := range 10 {
			codes[scrape(h, fmt.Sprintf("Bearer random-%d", i))]++
		}
		if codes[http.StatusUnauthorized] != 2 || codes[http.StatusTooManyRequests] != 8 {
			t.Fatalf("10 new tokens after one review, burst 3: %v; want 2 reviewed (401) and 8 refused (429)", codes)
		}
		if tr := f.tokenReviews.Load(); tr != 3 {
			t.Fatalf("%d token reviews, want 3", tr)
		}
		if got := scrape(h, "Bearer reader"); got != http.StatusOK {
			t.Fatalf("a cached token over the rate: %d, want 200", got)
		}
		time.Sleep(time.Second) // one token refilled, on the bubble's clock
		if got := scrape(h, "Bearer random-x"); got != http.StatusUnauthorized {
			t.Fatalf("a second later: %d, want a review and 401", got)
		}
	})
}

// A full cache keeps an allowed decision rather than a refusal: a flood of
// bad tokens cannot push the scraper's token out.
func TestFilterCacheKeepsAllowed(t *testing.T) {
	f := &fakeReviewer{}
	c, _ := k8sapi.New(&k8sapi.Config{Host: "https://apiserver.test", Transport: f})
	filter, err := New(Config{Client: c, Path: "/metrics", MaxEntries: 4, ReviewQPS: 1000, ReviewBurst: 1000})
	if err != nil {
		t.Fatal(err)
	}
	h := filter.Wrap(http.NotFoundHandler())
	scrape(h, "Bearer reader")
	for i := range 50 {
		scrape(h, fmt.Sprintf("Bearer random-%d", i))
	}
	before := f.tokenReviews.Load()
	scrape(h, "Bearer reader")
	if f.tokenReviews.Load() != before {
		t.Error("the allowed decision was dropped from a full cache to keep refusals")
	}
	if n := filter.size(); n > 4 {
		t.Errorf("%d cached decisions, want at most 4", n)
	}
}

// size returns the number of cached decisions.
func (f *Filter) size() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.cache)
}
