package widget

import (
	"strings"
	"testing"
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
