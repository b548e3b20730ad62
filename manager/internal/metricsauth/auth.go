// Package metricsauth guards an HTTP endpoint the way the API server's
// own clients are checked: a request's bearer token is authenticated by a
// TokenReview (authentication.k8s.io/v1), and the user it names must be
// allowed verb get on the endpoint's non-resource path by a
// SubjectAccessReview (authorization.k8s.io/v1). The endpoint's serving
// certificate is package certs'.
//
// Decisions are cached for a short while by a hash of the token, so that
// a burst of scrapes costs one pair of reviews. Reviews are rate limited
// and the reviews in flight are bounded, so that a stream of new tokens
// cannot become a stream of API requests: a request over the rate gets
// 429. A token allowed lately is reviewed again without waiting for the
// rate, so that a flood of bad tokens, which spends the rate, does not
// keep the scraper out; only tokens the API server allowed get there. The
// rate also bounds the decisions that have not expired well below the
// cache's size, so a full cache makes room by dropping stale ones alone:
// the flood does not push out the scraper's. A refused client's
// connection is closed, so that it cannot hold one of the endpoint's few.
package metricsauth

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// The review resources; both are create-only and cluster-scoped.
var (
	TokenReviews         = k8sapi.Resource{Group: "authentication.k8s.io", Version: "v1", Resource: "tokenreviews"}
	SubjectAccessReviews = k8sapi.Resource{Group: "authorization.k8s.io", Version: "v1", Resource: "subjectaccessreviews"}
)

// The settings of a [Filter].
const (
	// maxEntries bounds the cache.
	maxEntries = 1024
	// reviewQPS and reviewBurst limit the reviews of tokens not in the
	// cache (each costs a TokenReview, and a SubjectAccessReview when the
	// token is valid); a request over the limit gets 429.
	reviewQPS   = 5
	reviewBurst = 20
	// ttl is how long a decision (allowed, unauthenticated or
	// forbidden) is kept. An API error is never kept.
	ttl = 30 * time.Second
	// knownFor is how long past its expiry an allowed decision lets its
	// token be reviewed again over the rate: longer than a scrape interval.
	knownFor = 10 * time.Minute
	// maxInFlight bounds the requests under review at once; more wait
	// their turn, up to timeout.
	maxInFlight = 4
	// timeout bounds one request's wait and reviews.
	timeout = 10 * time.Second
)

// Config configures a [Filter].
type Config struct {
	// Client creates the reviews. Required. Its identity needs create on
	// tokenreviews and subjectaccessreviews.
	Client *k8sapi.Client
	// Path is the non-resource URL the user must be allowed to get, such
	// as "/metrics". Required.
	Path string
	// Log gets one debug line per decision made (not per cache hit) and
	// the API errors. Nil means no log.
	Log *slog.Logger
	// Realm names the operator in the challenge of a 401: Bearer
	// realm="<Realm>". It holds no double quote.
	Realm string
}

// A Filter authenticates and authorizes requests before passing them on.
// It is safe for concurrent use.
type Filter struct {
	cfg     Config
	reviews chan struct{} // a slot per review in flight
	rate    *k8sapi.TokenBucket

	mu    sync.Mutex
	cache map[[sha256.Size]byte]decision
}

type decision struct {
	code    int // http.StatusOK, StatusUnauthorized or StatusForbidden
	expires time.Time
}

// known reports whether d allowed its token lately.
func (d decision) known(now time.Time) bool {
	return d.code == http.StatusOK && now.Before(d.expires.Add(knownFor))
}

// New returns a Filter for cfg.
func New(cfg Config) (*Filter, error) {
	if cfg.Client == nil || cfg.Path == "" {
		return nil, errors.New("metricsauth: Config needs a Client and a Path")
	}
	cfg.Log = cmp.Or(cfg.Log, slog.New(slog.DiscardHandler))
	return &Filter{cfg: cfg, reviews: make(chan struct{}, maxInFlight),
		rate: k8sapi.NewTokenBucket(reviewQPS, reviewBurst), cache: map[[sha256.Size]byte]decision{}}, nil
}

// Wrap returns a handler that answers 401 to a request without a valid
// bearer token, 403 to one whose user may not get the Path, 429 when its
// token would need a review over the review rate, 503 when the reviews
// fail or time out, and passes the others to next. It closes the
// connection after each refusal.
func (f *Filter) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code := f.decide(r)
		switch code {
		case http.StatusOK:
			next.ServeHTTP(w, r)
			return
		case http.StatusUnauthorized:
			w.Header().Set("WWW-Authenticate", `Bearer realm="`+f.cfg.Realm+`"`)
		case http.StatusTooManyRequests:
			w.Header().Set("Retry-After", "1")
		}
		w.Header().Set("Connection", "close")
		http.Error(w, http.StatusText(code), code)
	})
}

// decide returns the status code for r.
func (f *Filter) decide(r *http.Request) int {
	token, ok := bearer(r.Header.Get("Authorization"))
	if !ok {
		return http.StatusUnauthorized
	}
	key := sha256.Sum256([]byte(token))
	d, fresh := f.cached(key, time.Now())
	if fresh {
		return d.code
	}
	if !d.known(time.Now()) && !f.rate.Allow(time.Now()) {
		return http.StatusTooManyRequests
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	select {
	case f.reviews <- struct{}{}:
		defer func() { <-f.reviews }()
	case <-ctx.Done():
		return http.StatusServiceUnavailable
	}
	// Another request may have decided for the same token meanwhile.
	if d, fresh := f.cached(key, time.Now()); fresh {
		return d.code
	}
	code, err := f.review(ctx, token)
	if err != nil {
		f.cfg.Log.Warn("metricsauth: review failed", "err", err)
		return http.StatusServiceUnavailable
	}
	f.remember(key, code, time.Now())
	return code
}

// bearer returns the token of an "Authorization: Bearer" header.
func bearer(h string) (string, bool) {
	scheme, token, ok := strings.Cut(h, " ")
	token = strings.TrimSpace(token)
	return token, ok && strings.EqualFold(scheme, "Bearer") && token != ""
}

// cached returns the decision kept for key, if any, and whether it has
// not expired.
func (f *Filter) cached(key [sha256.Size]byte, now time.Time) (decision, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := f.cache[key]
	return d, now.Before(d.expires)
}

// remember keeps a decision. A full cache first drops its stale entries
// (expired, and not known), which makes room without dropping a decision
// that has not expired, or an allowed scraper's: the review rate bounds
// the decisions made within a TTL, and so the unexpired ones, to
// reviewBurst + reviewQPS × (ttl + timeout) = 220, well below maxEntries,
// and known decisions are as many as the allowed tokens used lately. The
// check below keeps the bound hard all the same.
func (f *Filter) remember(key [sha256.Size]byte, code int, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.cache) >= maxEntries {
		maps.DeleteFunc(f.cache, func(_ [sha256.Size]byte, d decision) bool { return !now.Before(d.expires) && !d.known(now) })
	}
	if len(f.cache) < maxEntries {
		f.cache[key] = decision{code: code, expires: now.Add(ttl)}
	}
}

// userInfo is the user a TokenReview names.
type userInfo struct {
	Username string              `json:"username"`
	UID      string              `json:"uid"`
	Groups   []string            `json:"groups"`
	Extra    map[string][]string `json:"extra"`
}

// review is a TokenReview or a SubjectAccessReview, each using its own
// fields: one type for both, so that the client's generic verbs are
// compiled once (the binary's size is a budget).
type review struct {
	k8sapi.TypeMeta
	Spec   reviewSpec    `json:"spec"`
	Status *reviewStatus `json:"status,omitempty"` // nil in a request
}

type reviewSpec struct {
	// TokenReview
	Token string `json:"token,omitempty"`
	// SubjectAccessReview
	User                  string                 `json:"user,omitempty"`
	UID                   string                 `json:"uid,omitempty"`
	Groups                []string               `json:"groups,omitempty"`
	Extra                 map[string][]string    `json:"extra,omitempty"`
	NonResourceAttributes *nonResourceAttributes `json:"nonResourceAttributes,omitempty"`
}

type nonResourceAttributes struct {
	Path string `json:"path"`
	Verb string `json:"verb"`
}

type reviewStatus struct {
	// TokenReview
	Authenticated bool     `json:"authenticated"`
	User          userInfo `json:"user"`
	// SubjectAccessReview
	Allowed bool `json:"allowed"`
}

// review asks the API server who holds token and whether they may get
// the Path.
func (f *Filter) review(ctx context.Context, token string) (int, error) {
	reviews := k8sapi.For[review](f.cfg.Client, TokenReviews)
	tr := &review{TypeMeta: k8sapi.TypeMeta{APIVersion: "authentication.k8s.io/v1", Kind: "TokenReview"}, Spec: reviewSpec{Token: token}}
	got, err := reviews.Create(ctx, "", tr, k8sapi.WriteOptions{})
	if err != nil {
		return 0, fmt.Errorf("metricsauth: token review: %w", err)
	}
	if got.Status == nil || !got.Status.Authenticated {
		f.cfg.Log.Debug("metricsauth: token not authenticated")
		return http.StatusUnauthorized, nil
	}
	user := got.Status.User
	sar := &review{TypeMeta: k8sapi.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview"}}
	sar.Spec = reviewSpec{User: user.Username, UID: user.UID, Groups: user.Groups, Extra: user.Extra,
		NonResourceAttributes: &nonResourceAttributes{Path: f.cfg.Path, Verb: "get"}}
	reviews.Resource = SubjectAccessReviews
	res, err := reviews.Create(ctx, "", sar, k8sapi.WriteOptions{})
	if err != nil {
		return 0, fmt.Errorf("metricsauth: access review: %w", err)
	}
	if res.Status == nil || !res.Status.Allowed {
		f.cfg.Log.Debug("metricsauth: forbidden", "user", user.Username, "path", f.cfg.Path)
		return http.StatusForbidden, nil
	}
	f.cfg.Log.Debug("metricsauth: allowed", "user", user.Username, "path", f.cfg.Path)
	return http.StatusOK, nil
}
