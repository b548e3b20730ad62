package k8sapi

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
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

// newCredentials returns the credentials c describes, by the precedence
// [Config.AuthMethod] reports: an exec plugin, a token file, a static token,
// then basic credentials. A client certificate is not a credential here: it
// is part of the TLS configuration. A token file is read once now, so that a
// missing file fails early unless BearerToken gives a first token.
func newCredentials(c *Config) (credentials, error) {
	switch {
	case c.Exec != nil:
		return newExecCredentials(c)
	case c.BearerTokenFile != "":
		t := &tokenFileCredentials{path: c.BearerTokenFile, now: time.Now, token: c.BearerToken}
		if _, err := t.get(); err != nil {
			return nil, err
		}
		return t, nil
	case c.BearerToken != "":
		if err := checkHeaderValue(c.BearerToken); err != nil {
			return nil, fmt.Errorf("k8sapi: bearer token: %w", err)
		}
		return staticCredentials{header: "Bearer " + c.BearerToken}, nil
	case c.Username != "" || c.Password != "":
		if strings.Contains(c.Username, ":") {
			return nil, errors.New("k8sapi: basic auth: the username contains ':'")
		}
		return staticCredentials{header: "Basic " + base64.StdEncoding.EncodeToString([]byte(c.Username+":"+c.Password))}, nil
	}
	return noCredentials{}, nil
}

// checkHeaderValue rejects a token that cannot go into a header, without
// saying what is in it.
func checkHeaderValue(token string) error {
	for i := 0; i < len(token); i++ {
		if c := token[i]; c < 0x20 || c == 0x7f {
			return errors.New("contains a control character")
		}
	}
	return nil
}

type noCredentials struct{}

func (noCredentials) authorize(context.Context, *http.Request) error { return nil }
func (noCredentials) refresh() bool                                  { return false }

// staticCredentials sends a fixed Authorization header value.
type staticCredentials struct{ header string }

func (s staticCredentials) authorize(_ context.Context, req *http.Request) error {
	req.Header.Set("Authorization", s.header)
	return nil
}

func (staticCredentials) refresh() bool { return false }

const (
	// tokenFileMaxAge is how long a token read from a file is used before
	// the file is read again.
	tokenFileMaxAge = time.Minute
	// maxTokenFileSize bounds the bytes read from a token file.
	maxTokenFileSize = 64 << 10
)

// tokenFileCredentials sends the token in a file, such as a projected
// service-account token that the kubelet rotates. The file is re-read when
// the token is a minute old and after refresh; a failed read keeps the last
// good token. Safe for concurrent use.
type tokenFileCredentials struct {
	path string
	now  func() time.Time

	mu     sync.Mutex
	token  string    // last good token; empty before the first good read
	readAt time.Time // when the file was last read, zero to force a read
}

func (t *tokenFileCredentials) authorize(_ context.Context, req *http.Request) error {
	tok, err := t.get()
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	return nil
}

func (t *tokenFileCredentials) refresh() bool {
	t.mu.Lock()
	t.readAt = time.Time{}
	t.mu.Unlock()
	return true
}

func (t *tokenFileCredentials) get() (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if t.token != "" && !t.readAt.IsZero() && now.Sub(t.readAt) < tokenFileMaxAge && !now.Before(t.readAt) {
		return t.token, nil
	}
	tok, err := readTokenFile(t.path)
	t.readAt = now
	if err == nil {
		t.token = tok
	} else if t.token == "" {
		return "", fmt.Errorf("k8sapi: %w", err)
	}
	return t.token, nil
}

// readTokenFile reads a token; its errors lack the package prefix, for the
// caller to add.
func readTokenFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFileSize+1))
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	if len(b) > maxTokenFileSize {
		return "", fmt.Errorf("token file %s: larger than %d KiB", path, maxTokenFileSize>>10)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("token file %s: empty", path)
	}
	if err := checkHeaderValue(tok); err != nil {
		return "", fmt.Errorf("token file %s: %w", path, err)
	}
	return tok, nil
}
