package reconcile

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

func TestTrimMessage(t *testing.T) {
	if s := TrimMessage("short"); s != "short" {
		t.Errorf("TrimMessage(short) = %q", s)
	}
	long := strings.Repeat("é", 1000) // 2000 bytes
	s := TrimMessage(long)
	if len(s) > MaxMessageBytes || !utf8.ValidString(s) || !strings.HasSuffix(s, "...") || len(s) < MaxMessageBytes-4 {
		t.Errorf("TrimMessage: %d bytes, valid %v, %q...", len(s), utf8.ValidString(s), s[len(s)-8:])
	}
}

func TestTrimMessageEdges(t *testing.T) {
	exact := strings.Repeat("a", MaxMessageBytes)
	if got := TrimMessage(exact); got != exact {
		t.Errorf("a message of exactly %d bytes was cut to %d", MaxMessageBytes, len(got))
	}
	over := exact + "b"
	if got := TrimMessage(over); len(got) != MaxMessageBytes || !strings.HasSuffix(got, "...") {
		t.Errorf("a message one byte over: %d bytes, suffix %q", len(got), got[len(got)-3:])
	}
	// A cut inside a rune steps back to its start.
	multi := strings.Repeat("é", MaxMessageBytes)
	if got := TrimMessage(multi); len(got) > MaxMessageBytes || !strings.HasSuffix(got, "é...") {
		t.Errorf("a cut inside a rune: %d bytes, ends %q", len(got), got[len(got)-5:])
	}
	// A byte that is not UTF-8 shows as U+FFFD, so that a reader sees it.
	if got := TrimMessage("a\xffb" + exact); !strings.HasPrefix(got, "a\ufffdba") || !utf8.ValidString(got) || len(got) != MaxMessageBytes {
		t.Errorf("a cut message with a stray byte: %d bytes, starts %q", len(got), got[:4])
	}
}

// A message that is not UTF-8 at all (continuation bytes only) shows as
// U+FFFD, cut at a rune's start.
func TestTrimMessageNoRuneStart(t *testing.T) {
	got := TrimMessage(strings.Repeat("\x80", MaxMessageBytes+1))
	if want := strings.Repeat("\ufffd", (MaxMessageBytes-3)/3) + "..."; got != want {
		t.Errorf("continuation bytes only: %q, want %q", got, want)
	}
}

// A Status with details but no causes, as a NotFound has, is reported by
// its message.
func TestServerMessageDetailsWithoutCauses(t *testing.T) {
	ae := &k8sapi.APIError{Code: 404, Status: k8sapi.Status{Message: `deployments.apps "web" not found`,
		Details: &k8sapi.StatusDetails{Name: "web", Kind: "deployments"}}}
	if got := ServerMessage(ae); got != `deployments.apps "web" not found` {
		t.Errorf("ServerMessage = %q, want the Status's message", got)
	}
}

func TestWithoutUser(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{`services is forbidden: User "system:serviceaccount:ns:op" cannot create resource "services" in API group "" in the namespace "x"`,
			`services is forbidden: the operator cannot create resource "services" in API group "" in the namespace "x"`},
		{`exceeded quota: q, requested: count/deployments.apps=1`, `exceeded quota: q, requested: count/deployments.apps=1`},
		{`User "unterminated`, `User "unterminated`},
		{``, ``},
	} {
		if got := withoutUser(tt.in); got != tt.want {
			t.Errorf("withoutUser(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestIsQuotaExceeded(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{errQuota, true},
		{&Error{Op: "apply deployment", Err: errQuota}, true},
		{apiErr(403, "Forbidden", "status unknown for quota: q, resource: pods"), true},
		{errRBAC, false},
		{apiErr(500, "InternalError", "exceeded quota: q"), false},
		{errTransient, false},
	} {
		if got := IsQuotaExceeded(tt.err); got != tt.want {
			t.Errorf("IsQuotaExceeded(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// The causes of a Status are reported field by field; a Status without
// details, by its message.
func TestServerMessageCausesAndNoDetails(t *testing.T) {
	ae := &k8sapi.APIError{Code: 422, Status: k8sapi.Status{Message: "Widget is invalid",
		Details: &k8sapi.StatusDetails{Causes: []k8sapi.StatusCause{{Field: "spec.port", Message: "too big"}, {Message: "bad"}}}}}
	if got := ServerMessage(ae); got != "spec.port: too big; bad" {
		t.Errorf("ServerMessage with causes = %q", got)
	}
	if got := ServerMessage(&k8sapi.APIError{Code: 500, Status: k8sapi.Status{Message: "etcd timeout"}}); got != "etcd timeout" {
		t.Errorf("ServerMessage without details = %q", got)
	}
}
