package k8sapi

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Size limits on what the client reads from the server, chosen so that an
// operator in a pod limited to 128 MiB survives the largest answer: a list
// page is decoded item by item and costs about its own size in heap (a
// 60 MiB page of 128 KiB objects peaks at 61 MiB in BenchmarkListPageMemory),
// a watch event about three times its size while it is decoded
// (BenchmarkWatchBigEventMemory).
const (
	// objectLimit bounds the body of a response holding one object, and
	// one watch event: above what the server stores (etcd's default
	// request limit is 1.5 MiB; JSON may be larger than the stored form).
	objectLimit = 4 << 20
	// listLimit bounds the body of one list page: 500 Pods of 30 KiB fit.
	listLimit = 16 << 20
	// errorLimit bounds how much of a failure's body is read.
	errorLimit = 1 << 20
)

// Client sends requests to one API server. It adds authentication, the
// User-Agent, optional client-side rate limiting and retries; [Typed]
// provides the verbs on top of it.
//
// A Client is safe for concurrent use by many goroutines; make one per API
// server and share it. Every call takes a context.Context, which bounds
// the whole call including retries and rate-limit waits (for a watch: the
// whole stream).
//
// Requests that are safe to repeat are retried up to Config.MaxRetries
// times: GET after a 5xx answer or a connection error, any request after a
// 429 or after a connection error that happened before it was sent. The
// wait honours the server's Retry-After (at most a minute), or else backs
// off exponentially with jitter from 200ms up to 30s. After a 401 the
// credentials are refreshed and, if that may help, the request is sent
// once more.
//
// Response bodies are bounded: 4 MiB for one object, watch event or item
// of a list, 16 MiB for a list page (Config.ObjectLimit, ListPageLimit); a
// larger one fails with a *DecodeError wrapping [ErrBodyTooLarge]. A list
// page is decoded item by item, never held whole; a caller whose pages are
// too large asks for fewer objects per page (ListOptions.Limit), as
// package watch does.
type Client struct {
	base      string // scheme://host[/prefix], escaped, no trailing slash
	namespace string
	userAgent string
	creds     credentials
	// impersonate holds the Impersonate-* headers; nil for none.
	impersonate http.Header
	transport   http.RoundTripper
	limiter     *TokenBucket // nil: no limit
	maxRetries  int

	// Body limits: Config.ObjectLimit and ListPageLimit, or the defaults.
	objectLimit, listLimit int64

	// Seams for tests; set once, before the client is used.
	now    func() time.Time
	sleep  func(ctx context.Context, d time.Duration) error
	jitter func() float64 // in [0, 1)
}

// New returns a Client for the API server cfg describes. It checks cfg and
// builds the transport, but does not contact the server. cfg must not be
// changed afterwards.
func New(cfg *Config) (*Client, error) {
	if cfg == nil {
		return nil, errors.New("k8sapi: config: nil Config")
	}
	base, err := parseHost(cfg.Host)
	if err != nil {
		return nil, fmt.Errorf("k8sapi: config: Host %w", err)
	}
	if len(cfg.CAData) == 0 && cfg.CAFile != "" {
		ca, err := readFileLimit(cfg.CAFile, maxPEMFileSize)
		if err == nil {
			_, err = certPool(ca)
		}
		if err != nil {
			return nil, fmt.Errorf("k8sapi: TLS: CA file %s: %w", cfg.CAFile, pathCause(err))
		}
		withCA := *cfg
		withCA.CAData = ca
		cfg = &withCA
	}
	creds, err := newCredentials(cfg)
	if err != nil {
		return nil, err
	}
	rt := cfg.Transport
	if rt == nil {
		t, err := newTransport(cfg)
		if err != nil {
			return nil, err
		}
		if rt, creds, err = withClientCerts(cfg, creds, t); err != nil {
			return nil, err
		}
	}
	if cfg.WrapTransport != nil {
		rt = cfg.WrapTransport(rt)
	}
	c := &Client{
		base:        base,
		namespace:   cmp.Or(cfg.Namespace, "default"),
		userAgent:   cmp.Or(cfg.UserAgent, defaultUserAgent()),
		creds:       creds,
		transport:   rt,
		maxRetries:  max(cmp.Or(cfg.MaxRetries, defaultMaxRetries), 0),
		objectLimit: cmp.Or(max(cfg.ObjectLimit, 0), objectLimit),
		listLimit:   cmp.Or(max(cfg.ListPageLimit, 0), listLimit),
		now:         time.Now,
		sleep:       sleepCtx,
		jitter:      rand.Float64,
	}
	if cfg.Impersonate.UserName != "" && !plainHTTP(cfg.Host) {
		c.impersonate = cfg.Impersonate.header()
	}
	if cfg.QPS > 0 {
		c.limiter = NewTokenBucket(cfg.QPS, cfg.Burst)
	}
	return c, nil
}

// parseHost checks a server URL, Config.Host or a kubeconfig cluster's
// server alike, and returns it as the base of every request URL. A missing
// scheme means https. Its errors, to follow "Host" or "server", never
// repeat the URL, which may hold a password.
func parseHost(host string) (string, error) {
	if host == "" {
		return "", errors.New("is empty")
	}
	if !strings.Contains(host, "://") {
		host = "https://" + host
	}
	u, err := url.Parse(host)
	switch {
	case err != nil:
		return "", errors.New("is not a valid URL")
	case u.Scheme != "https" && u.Scheme != "http":
		return "", errors.New("scheme must be https or http")
	case u.Host == "":
		return "", errors.New("has no host name")
	case u.User != nil:
		return "", errors.New("must not hold credentials")
	case u.RawQuery != "" || u.Fragment != "":
		return "", errors.New("must not have a query or fragment")
	}
	return u.Scheme + "://" + u.Host + strings.TrimRight(u.EscapedPath(), "/"), nil
}

// Namespace returns the default namespace: Config.Namespace, or "default".
func (c *Client) Namespace() string { return c.namespace }

// Host returns the API server's base URL, as requests use it.
func (c *Client) Host() string { return c.base }

// operation is one API call: what it is for errors, and what to send.
type operation struct {
	verb      string // "get", "list", "watch", ...
	resource  string // plural, "/subresource" appended if any
	namespace string
	name      string

	method      string
	path        string // escaped
	query       url.Values
	body        []byte
	contentType string
	accept      string // empty means application/json
}

func (o *operation) requestError(err error) error {
	return &RequestError{Op: o.verb, Resource: o.resource, Namespace: o.namespace, Name: o.name, Err: err}
}

func (o *operation) decodeError(err error) error {
	return &DecodeError{Op: o.verb, Resource: o.resource, Namespace: o.namespace, Name: o.name, Err: err}
}

// do sends op, with rate limiting, authentication and retries, and returns
// the response if its status is 2xx; the caller closes its body. Any other
// status, 1xx included, becomes an *APIError. ctx is not nil: the caller
// checked it.
func (c *Client) do(ctx context.Context, op *operation) (*http.Response, error) {
	target := c.base + op.path
	if len(op.query) > 0 {
		target += "?" + op.query.Encode()
	}
	refreshed := false
	for attempt := 0; ; {
		if err := c.wait(ctx); err != nil {
			return nil, op.requestError(err)
		}
		req, err := c.newRequest(ctx, op, target)
		if err != nil {
			return nil, op.requestError(err)
		}
		resp, err := c.transport.RoundTrip(req)
		var fail error
		retry, wait := false, retryBackoff.Jittered(attempt, c.jitter())
		switch {
		case err != nil:
			if ue, ok := errors.AsType[*url.Error](err); ok {
				err = ue.Err
			}
			fail, retry = op.requestError(err), ctx.Err() == nil && retryableError(op.method, err)
		case resp.StatusCode/100 == 2:
			return resp, nil
		case resp.StatusCode < 200:
			// 101 Switching Protocols, the one 1xx the transport hands
			// on: its body is the connection, which may stay silent, so it
			// is closed unread, and the answer is not retried.
			resp.Body.Close()
			fail = newAPIError(op, resp.StatusCode, resp.Header, nil)
		default:
			body, _ := io.ReadAll(io.LimitReader(resp.Body, errorLimit))
			resp.Body.Close()
			apiErr := newAPIError(op, resp.StatusCode, resp.Header, body)
			if resp.StatusCode == http.StatusUnauthorized && !refreshed && c.creds.refresh() {
				refreshed = true
				continue
			}
			// The server's Retry-After, which statusError caps at a
			// minute, or else the backoff.
			fail, retry = apiErr, retryableStatus(op.method, resp.StatusCode)
			wait = cmp.Or(apiErr.RetryAfter, wait)
		}
		// When the context ends while waiting, the server's answer is
		// the more useful error.
		if !retry || attempt >= c.maxRetries || c.sleep(ctx, wait) != nil {
			return nil, fail
		}
		attempt++
	}
}

// newRequest builds one attempt of op.
func (c *Client) newRequest(ctx context.Context, op *operation, target string) (*http.Request, error) {
	// A bytes.Reader gives the request its length and a GetBody for
	// resending; an empty one, no body at all.
	req, err := http.NewRequestWithContext(ctx, op.method, target, bytes.NewReader(op.body))
	if err != nil {
		return nil, errors.New("cannot build request URL")
	}
	if op.contentType != "" {
		req.Header.Set("Content-Type", op.contentType)
	}
	req.Header.Set("Accept", cmp.Or(op.accept, "application/json"))
	req.Header.Set("User-Agent", c.userAgent)
	if err := c.creds.authorize(ctx, req); err != nil {
		return nil, err
	}
	maps.Copy(req.Header, c.impersonate)
	return req, nil
}

// wait takes a token from the rate limiter, waiting for it if need be.
func (c *Client) wait(ctx context.Context) error {
	if c.limiter == nil {
		return ctx.Err()
	}
	now := c.now()
	d := c.limiter.Reserve(now)
	if d <= 0 {
		return ctx.Err()
	}
	if dl, ok := ctx.Deadline(); ok && d > time.Until(dl) {
		c.limiter.Cancel(now)
		return fmt.Errorf("rate limit wait of %v would outlast the context: %w", d, context.DeadlineExceeded)
	}
	if err := c.sleep(ctx, d); err != nil {
		c.limiter.Cancel(c.now())
		return err
	}
	return nil
}

// readBody reads a 2xx response's body, at most limit bytes, and closes
// it. A body over limit fails with ErrBodyTooLarge, having been read to
// limit+1 bytes at most, or not at all when its Content-Length says so.
// The buffer is allocated once when the length is known, and otherwise
// doubles as it grows, so that at most about twice the body's size is
// allocated in all.
func readBody(op *operation, resp *http.Response, limit int64) ([]byte, error) {
	defer resp.Body.Close()
	if resp.ContentLength > limit {
		return nil, op.decodeError(fmt.Errorf("%w (%d bytes, limit %d)", ErrBodyTooLarge, resp.ContentLength, limit))
	}
	n := int64(64 << 10)
	if resp.ContentLength >= 0 {
		n = resp.ContentLength + bytes.MinRead // room to read the end without growing
	}
	buf := bytes.NewBuffer(make([]byte, 0, min(n, limit+bytes.MinRead)))
	if _, err := buf.ReadFrom(io.LimitReader(resp.Body, limit+1)); err != nil {
		return nil, op.requestError(err)
	}
	if int64(buf.Len()) > limit {
		return nil, op.decodeError(fmt.Errorf("%w (limit %d bytes)", ErrBodyTooLarge, limit))
	}
	return buf.Bytes(), nil
}
