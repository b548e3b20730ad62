package k8sapi

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// credentials authenticates requests. Implementations are safe for
// concurrent use and never put a secret in an error string.
type credentials interface {
	// authorize sets the request's Authorization header, if any. req is a
	// clone the caller owns.
	authorize(ctx context.Context, req *http.Request) error
	// refresh is called after a 401. It makes the next authorize re-read
	// the token file or rerun the exec plugin, and reports whether that
	// could change anything, so that one retry is worthwhile.
	refresh() bool
}

// newCredentials checks c ([Config.check]) and returns the credentials
// it describes, the first by [Config.AuthMethod]'s precedence: an exec
// plugin, a token file, a static token, then basic credentials. A client
// certificate is not a credential here: it is part of the TLS
// configuration, and impersonation is added by the Client. A token file is
// read once now, so that a missing file fails early unless BearerToken
// gives a first token.
//
// To a plain http:// server nothing is sent, as kubectl does: see
// [Config.WithheldAuth].
func newCredentials(c *Config) (credentials, error) {
	if err := c.check(); err != nil {
		return nil, fmt.Errorf("k8sapi: config: %w", err)
	}
	switch c.AuthMethod() {
	case "exec":
		return newExecCredentials(c), nil
	case "token-file":
		t := newTokenFile(c.BearerTokenFile, c.BearerToken)
		if _, err := t.get(); err != nil {
			return nil, err
		}
		return t, nil
	case "token":
		return fixedHeader("Bearer " + c.BearerToken), nil
	case "basic":
		return fixedHeader("Basic " + base64.StdEncoding.EncodeToString([]byte(c.Username+":"+c.Password))), nil
	}
	return fixedHeader(""), nil
}

// plainHTTP reports whether host, a Config.Host, is a plain http:// URL.
func plainHTTP(host string) bool {
	scheme, _, ok := strings.Cut(host, "://")
	return ok && strings.EqualFold(scheme, "http")
}

// checkHeaderValue rejects a token that cannot go into a header, without
// saying what is in it.
func checkHeaderValue(token string) error {
	if strings.ContainsFunc(token, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return errors.New("contains a control character")
	}
	return nil
}

const (
	// fileMaxAge is how long a token or client certificate read from
	// files is used before the files are read again.
	fileMaxAge = time.Minute
	// maxTokenFileSize bounds the bytes read from a token file.
	maxTokenFileSize = 64 << 10
)

// fileValue is a value read from files, such as a projected
// service-account token that the kubelet rotates: read again once it is
// fileMaxAge old and after refresh. A failed read keeps the last good
// value; its error is returned only while there is none. Safe for
// concurrent use.
type fileValue[T any] struct {
	read func() (T, error) // nil for a fixed value
	now  func() time.Time

	mu     sync.Mutex
	val    T
	good   bool      // val is a good value
	readAt time.Time // when the files were last read, zero to force a read
}

func (f *fileValue[T]) get() (T, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.read == nil {
		return f.val, nil
	}
	now := f.now()
	if f.good && !f.readAt.IsZero() && now.Sub(f.readAt) < fileMaxAge && !now.Before(f.readAt) {
		return f.val, nil
	}
	f.readAt = now
	v, err := f.read()
	if err == nil {
		f.val, f.good = v, true
	} else if !f.good {
		return v, err
	}
	return f.val, nil
}

// refresh makes the next get read the files, and reports whether there
// are any.
func (f *fileValue[T]) refresh() bool {
	f.mu.Lock()
	f.readAt = time.Time{}
	f.mu.Unlock()
	return f.read != nil
}

// headerCredentials sends an Authorization header value, when it is not
// empty: a fixed one, or one made from a token file.
type headerCredentials struct{ fileValue[string] }

// fixedHeader returns the credentials that send the header value v.
func fixedHeader(v string) *headerCredentials {
	return &headerCredentials{fileValue[string]{val: v}}
}

// newTokenFile returns the credentials of the token file at path, with
// initial, when not empty, as the token to send while the file cannot be
// read.
func newTokenFile(path, initial string) *headerCredentials {
	t := &headerCredentials{fileValue[string]{now: time.Now, val: "Bearer " + initial, good: initial != ""}}
	t.read = func() (string, error) {
		b, err := readFileLimit(path, maxTokenFileSize)
		tok := strings.TrimSpace(string(b))
		switch {
		case err == nil && tok == "":
			err = errors.New("empty")
		case err == nil:
			err = checkHeaderValue(tok)
		}
		if err != nil {
			return "", fmt.Errorf("k8sapi: token file %s: %w", path, pathCause(err))
		}
		return "Bearer " + tok, nil
	}
	return t
}

func (h *headerCredentials) authorize(_ context.Context, req *http.Request) error {
	v, err := h.get()
	if err != nil {
		return err
	}
	if v != "" {
		req.Header.Set("Authorization", v)
	}
	return nil
}

// Impersonation makes requests act as another user, with the
// Impersonate-* headers. The user the Config authenticates as needs RBAC
// permission to impersonate each of them (verb "impersonate" on users,
// uids, groups and userextras/KEY). The zero value impersonates no one.
type Impersonation struct {
	// UserName is the user to act as. Empty means no impersonation; the
	// other fields need it.
	UserName string
	// UID is the user's UID. Empty means none.
	UID string
	// Groups are the user's groups. Nil means none.
	Groups []string
	// Extra are the user's extra attributes, by key. Nil means none.
	Extra map[string][]string
}

// check reports an Impersonation that cannot be sent, without quoting it.
func (im *Impersonation) check() error {
	if im.UserName == "" && (im.UID != "" || len(im.Groups) > 0 || len(im.Extra) > 0) {
		return errors.New("impersonation: a UID, groups or extras need a user name")
	}
	vals := append([]string{im.UserName, im.UID}, im.Groups...)
	for k, vs := range im.Extra {
		if k == "" {
			return errors.New("impersonation: an extra key is empty")
		}
		vals = append(vals, vs...)
	}
	for _, v := range vals {
		if err := checkHeaderValue(v); err != nil {
			return fmt.Errorf("impersonation: a value %w", err)
		}
	}
	return nil
}

// header returns the Impersonate-* headers. An extra's key is
// percent-encoded where it holds a character a header name cannot; the
// API server decodes it and folds it to lower case.
func (im *Impersonation) header() http.Header {
	h := http.Header{}
	h.Set("Impersonate-User", im.UserName)
	if im.UID != "" {
		h.Set("Impersonate-Uid", im.UID)
	}
	for _, g := range im.Groups {
		h.Add("Impersonate-Group", g)
	}
	for k, vs := range im.Extra {
		for _, v := range vs {
			h.Add("Impersonate-Extra-"+escapeHeaderKey(k), v)
		}
	}
	return h
}

// escapeHeaderKey percent-encodes the bytes of k that are not token
// characters of RFC 9110, and '%' itself.
func escapeHeaderKey(k string) string {
	var b strings.Builder
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c < 0x80 && c != '%' && (c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || strings.IndexByte("!#$&'*+-.^_`|~", c) >= 0) {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}
