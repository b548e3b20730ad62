package k8sapi

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// credClock is a settable fake clock for credentials' now field.
type credClock struct {
	mu sync.Mutex
	t  time.Time
}

func newCredClock() *credClock { return &credClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *credClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *credClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// authHeader runs creds.authorize on a fresh request and returns the
// Authorization header it set.
func authHeader(t *testing.T, creds credentials) string {
	t.Helper()
	req, _ := http.NewRequest("GET", "https://h/api", nil)
	if err := creds.authorize(context.Background(), req); err != nil {
		t.Fatalf("authorize: %v", err)
	}
	return req.Header.Get("Authorization")
}

func TestStaticAndBasicCredentials(t *testing.T) {
	tests := []struct {
		cfg  Config
		want string
	}{
		{Config{}, ""},
		{Config{BearerToken: "tok"}, "Bearer tok"},
		{Config{Username: "admin", Password: "pw"}, "Basic YWRtaW46cHc="},
		{Config{BearerToken: "tok", Username: "admin"}, "Bearer tok"},
	}
	for _, tt := range tests {
		creds, err := newCredentials(&tt.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got := authHeader(t, creds); got != tt.want {
			t.Errorf("%+v: header %q, want %q", tt.cfg, got, tt.want)
		}
		if creds.refresh() {
			t.Errorf("%+v: refresh reported a change", tt.cfg)
		}
	}
	if _, err := newCredentials(&Config{BearerToken: "a\nb"}); err == nil {
		t.Error("token with a newline accepted")
	}
	if _, err := newCredentials(&Config{Username: "a:b"}); err == nil {
		t.Error("username with ':' accepted")
	}
}

func TestTokenFileRotation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("one\n")
	clock := newCredClock()
	creds := newTokenFile(path, "")
	creds.now = clock.now

	if got := authHeader(t, creds); got != "Bearer one" {
		t.Fatalf("first read: %q", got)
	}
	write("two")
	clock.advance(59 * time.Second)
	if got := authHeader(t, creds); got != "Bearer one" {
		t.Errorf("re-read before a minute: %q", got)
	}
	clock.advance(time.Second)
	if got := authHeader(t, creds); got != "Bearer two" {
		t.Errorf("no re-read after a minute: %q", got)
	}

	// A failed read keeps the last good token, and is retried a minute on.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	clock.advance(time.Minute)
	if got := authHeader(t, creds); got != "Bearer two" {
		t.Errorf("after a failed read: %q", got)
	}
	write("   ")
	clock.advance(time.Minute)
	if got := authHeader(t, creds); got != "Bearer two" {
		t.Errorf("after reading an empty file: %q", got)
	}

	// refresh forces a read at once.
	write("three")
	if got := authHeader(t, creds); got != "Bearer two" {
		t.Errorf("re-read without refresh: %q", got)
	}
	if !creds.refresh() {
		t.Error("refresh reported no change possible")
	}
	if got := authHeader(t, creds); got != "Bearer three" {
		t.Errorf("after refresh: %q", got)
	}

	// A clock that goes backwards forces a read rather than trusting the
	// cache forever.
	write("four")
	clock.advance(-time.Hour)
	if got := authHeader(t, creds); got != "Bearer four" {
		t.Errorf("after the clock went back: %q", got)
	}
}

func TestTokenFileFirstRead(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "token")
	if _, err := newCredentials(&Config{BearerTokenFile: missing}); err == nil {
		t.Error("missing token file accepted")
	}
	// BearerToken is the first token when the file cannot be read yet.
	creds, err := newCredentials(&Config{BearerTokenFile: missing, BearerToken: "initial"})
	if err != nil {
		t.Fatal(err)
	}
	if got := authHeader(t, creds); got != "Bearer initial" {
		t.Errorf("header %q", got)
	}
}

func TestTokenFileConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte("tok"), 0o600); err != nil {
		t.Fatal(err)
	}
	creds, err := newCredentials(&Config{BearerTokenFile: path})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				req, _ := http.NewRequest("GET", "https://h/", nil)
				if err := creds.authorize(context.Background(), req); err != nil || req.Header.Get("Authorization") != "Bearer tok" {
					t.Errorf("authorize: %v %q", err, req.Header.Get("Authorization"))
					return
				}
				creds.refresh()
			}
		})
	}
	wg.Wait()
}

// TestAuthMethodIsSent: AuthMethod names the credentials whose header is
// sent, by the one order both follow; a client certificate goes with
// basic credentials, as kubectl sends both.
func TestAuthMethodIsSent(t *testing.T) {
	certPEM, keyPEM := selfSignedPair(t, "client")
	tests := []struct {
		cfg        Config
		method, hd string
	}{
		{Config{Username: "admin", Password: "pw", CertData: certPEM, KeyData: keyPEM}, "basic", "Basic YWRtaW46cHc="},
		{Config{Password: "pw"}, "basic", "Basic OnB3"},
		{Config{CertData: certPEM, KeyData: keyPEM}, "client-certificate", ""},
		{Config{BearerToken: "tok", Username: "admin"}, "token", "Bearer tok"},
	}
	for _, tt := range tests {
		tt.cfg.Host = "https://h"
		creds, err := newCredentials(&tt.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if m, h := tt.cfg.AuthMethod(), authHeader(t, creds); m != tt.method || h != tt.hd {
			t.Errorf("%s: AuthMethod %q, header %q; want %q, %q", tt.method, m, h, tt.method, tt.hd)
		}
	}
}
