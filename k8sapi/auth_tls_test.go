package k8sapi

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// headerServer records the headers of the requests it answers with {}.
type headerServer struct {
	*httptest.Server
	mu      sync.Mutex
	headers []http.Header
}

func newHeaderServer(t *testing.T, useTLS bool) *headerServer {
	s := &headerServer{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.headers = append(s.headers, r.Header.Clone())
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte("{}"))
	}))
	if useTLS {
		s.StartTLS()
	} else {
		s.Start()
	}
	t.Cleanup(s.Close)
	return s
}

func (s *headerServer) last(t *testing.T) http.Header {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.headers) == 0 {
		t.Fatal("no request reached the server")
	}
	return s.headers[len(s.headers)-1]
}

// getOnce sends one GET of /api through a client of cfg.
func getOnce(t *testing.T, cfg *Config) {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.do(t.Context(), &operation{verb: "get", method: http.MethodGet, path: "/api"})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

// impersonationHeaders returns the Impersonate-* headers of h, keys in
// lower case.
func impersonationHeaders(h http.Header) map[string][]string {
	out := map[string][]string{}
	for k, v := range h {
		if strings.HasPrefix(strings.ToLower(k), "impersonate-") {
			out[strings.ToLower(k)] = v
		}
	}
	return out
}

// TestCredentialsOnlyOverTLS: to an http:// server the request goes out
// without a token, basic auth, exec credential or impersonation, and the
// Config says what it withholds.
func TestCredentialsOnlyOverTLS(t *testing.T) {
	srv := newHeaderServer(t, false)
	tokenFile := filepath.Join(writeFiles(t, t.TempDir(), map[string]string{"token": "file-token\n"}), "token")
	count := filepath.Join(t.TempDir(), "count")
	certPEM, keyPEM := selfSignedPair(t, "client")
	tests := []struct {
		name     string
		cfg      Config
		withheld string
	}{
		{"token", Config{BearerToken: "secret"}, "token"},
		{"token file", Config{BearerTokenFile: tokenFile}, "token-file"},
		{"basic", Config{Username: "admin", Password: "pw"}, "basic"},
		{"exec", Config{Exec: helperExec(execV1, "token", "HELPER_TOKEN=exec-token", "HELPER_COUNT="+count)}, "exec"},
		{"client certificate", Config{CertData: certPEM, KeyData: keyPEM}, "client-certificate"},
		{"impersonation", Config{Impersonate: Impersonation{UserName: "jane"}}, "impersonation"},
		{"none", Config{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.Host = srv.URL
			if got := cfg.WithheldAuth(); got != tt.withheld {
				t.Errorf("WithheldAuth = %q, want %q", got, tt.withheld)
			}
			if got := cfg.AuthMethod(); got != "none" {
				t.Errorf("AuthMethod = %q, want none", got)
			}
			getOnce(t, &cfg)
			h := srv.last(t)
			if a := h.Get("Authorization"); a != "" {
				t.Errorf("Authorization %q sent over http://", a)
			}
			if im := impersonationHeaders(h); len(im) > 0 {
				t.Errorf("impersonation sent over http://: %v", im)
			}
		})
	}
	if n := runCount(t, count); n != 0 {
		t.Errorf("the exec plugin ran %d times for an http:// server", n)
	}

	// The same credentials over https are sent.
	tlsSrv := newHeaderServer(t, true)
	cfg := &Config{Host: tlsSrv.URL, CAData: certPEMOf(tlsSrv.Server), BearerToken: "secret"}
	if cfg.WithheldAuth() != "" || cfg.AuthMethod() != "token" {
		t.Errorf("https: WithheldAuth %q, AuthMethod %q", cfg.WithheldAuth(), cfg.AuthMethod())
	}
	getOnce(t, cfg)
	if a := tlsSrv.last(t).Get("Authorization"); a != "Bearer secret" {
		t.Errorf("https: Authorization %q", a)
	}
}

func TestImpersonationHeaders(t *testing.T) {
	srv := newHeaderServer(t, true)
	cfg := &Config{
		Host: srv.URL, CAData: certPEMOf(srv.Server), BearerToken: "secret",
		Impersonate: Impersonation{
			UserName: "jane@example.com",
			UID:      "1234",
			Groups:   []string{"dev", "ops"},
			Extra:    map[string][]string{"example.com/scopes": {"view", "edit"}, "reason": {"on call"}},
		},
	}
	getOnce(t, cfg)
	h := srv.last(t)
	if a := h.Get("Authorization"); a != "Bearer secret" {
		t.Errorf("Authorization %q", a)
	}
	got := impersonationHeaders(h)
	want := map[string][]string{
		"impersonate-user":                       {"jane@example.com"},
		"impersonate-uid":                        {"1234"},
		"impersonate-group":                      {"dev", "ops"},
		"impersonate-extra-example.com%2fscopes": {"view", "edit"},
		"impersonate-extra-reason":               {"on call"},
	}
	if len(got) != len(want) {
		t.Errorf("headers %v, want %v", got, want)
	}
	for k, v := range want {
		if !slices.Equal(got[k], v) {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}

func TestImpersonationErrors(t *testing.T) {
	for _, im := range []Impersonation{
		{Groups: []string{"g"}},
		{UID: "1"},
		{Extra: map[string][]string{"k": {"v"}}},
		{UserName: "a\nb"},
		{UserName: "a", Extra: map[string][]string{"": {"v"}}},
	} {
		if _, err := New(&Config{Host: "https://h", Impersonate: im}); err == nil || !strings.HasPrefix(err.Error(), "k8sapi: config: impersonation: ") {
			t.Errorf("%+v: error %v", im, err)
		}
	}
}

// An exec plugin that supplies a client certificate still does when
// requests impersonate.
func TestImpersonationKeepsExecCertificate(t *testing.T) {
	creds, err := newCredentials(&Config{Host: "https://h", Exec: helperExec(execV1, "cert"), Impersonate: Impersonation{UserName: "u"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := creds.(certSource); !ok {
		t.Errorf("%T is not a certSource", creds)
	}
}
