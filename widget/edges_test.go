package widget

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// The validation's edges, one case at each side of each limit: a limit
// that moves by one breaks a case here.

func TestIsDNS1035LabelEdges(t *testing.T) {
	for _, tt := range []struct {
		s    string
		want bool
	}{
		{"a", true}, {"z", true}, {"a0", true}, {"a9", true}, {"a-b", true}, {"az09", true},
		{"", false}, {"`a", false}, {"{a", false}, {"0a", false}, {"a-", false},
		{"a`", false}, {"a{", false}, {"a/", false}, {"a:", false}, {"aB", false}, {"a.b", false},
	} {
		if got := isDNS1035Label(tt.s); got != tt.want {
			t.Errorf("isDNS1035Label(%q) = %t, want %t", tt.s, got, tt.want)
		}
	}
}

func TestShortenEdges(t *testing.T) {
	for _, tt := range []struct {
		s    string
		n    int
		want string
	}{
		{"abc", 3, "abc"}, {"abcd", 3, "abc..."}, {"ééé", 3, "ééé"}, {"éééé", 3, "ééé..."}, {"", 0, ""},
	} {
		if got := shorten(tt.s, tt.n); got != tt.want {
			t.Errorf("shorten(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}

func TestValidateImageWhitespaceEdges(t *testing.T) {
	for _, tt := range []struct{ image, want string }{
		{" nginx", `spec.image: must not contain whitespace or non-printable characters, found ' ' at character 1`},
		{"nginx ", `spec.image: must not contain whitespace or non-printable characters, found ' ' at character 6`},
		{"nginx", ""},
		{strings.Repeat("a", MaxImageLength), ""},
	} {
		if got := Validate(WidgetSpec{Image: tt.image}); got != tt.want {
			t.Errorf("Validate(image %q) = %q, want %q", tt.image, got, tt.want)
		}
	}
}

func TestTrimMessageEdges(t *testing.T) {
	exact := strings.Repeat("a", MaxMessageBytes)
	if got := trimMessage(exact); got != exact {
		t.Errorf("a message of exactly %d bytes was cut to %d", MaxMessageBytes, len(got))
	}
	over := exact + "b"
	if got := trimMessage(over); len(got) != MaxMessageBytes || !strings.HasSuffix(got, "...") {
		t.Errorf("a message one byte over: %d bytes, suffix %q", len(got), got[len(got)-3:])
	}
	// A cut inside a rune steps back to its start.
	multi := strings.Repeat("é", MaxMessageBytes)
	if got := trimMessage(multi); len(got) > MaxMessageBytes || !strings.HasSuffix(got, "é...") {
		t.Errorf("a cut inside a rune: %d bytes, ends %q", len(got), got[len(got)-5:])
	}
	// A byte that is not UTF-8 shows as U+FFFD, so that a reader sees it.
	if got := trimMessage("a\xffb" + exact); !strings.HasPrefix(got, "a\ufffdba") || !utf8.ValidString(got) || len(got) != MaxMessageBytes {
		t.Errorf("a cut message with a stray byte: %d bytes, starts %q", len(got), got[:4])
	}
}

// A message that is not UTF-8 at all (continuation bytes only) shows as
// U+FFFD, cut at a rune's start.
func TestTrimMessageNoRuneStart(t *testing.T) {
	got := trimMessage(strings.Repeat("\x80", MaxMessageBytes+1))
	if want := strings.Repeat("\ufffd", (MaxMessageBytes-3)/3) + "..."; got != want {
		t.Errorf("continuation bytes only: %q, want %q", got, want)
	}
}

// A Status with details but no causes, as a NotFound has, is reported by
// its message.
func TestServerMessageDetailsWithoutCauses(t *testing.T) {
	ae := &k8sapi.APIError{Code: 404, Status: k8sapi.Status{Message: `deployments.apps "web" not found`,
		Details: &k8sapi.StatusDetails{Name: "web", Kind: "deployments"}}}
	if got := serverMessage(ae); got != `deployments.apps "web" not found` {
		t.Errorf("serverMessage = %q, want the Status's message", got)
	}
}
