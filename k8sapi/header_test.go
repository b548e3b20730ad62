package k8sapi

import "testing"

// An Impersonate-Extra key keeps the token characters of RFC 9110 as they
// are and percent-encodes every other byte, '%' included.
func TestEscapeHeaderKey(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"0189azAZ", "0189azAZ"},
		{"!#$&'*+-.^_`|~", "!#$&'*+-.^_`|~"},
		// The bytes just outside the ranges 0-9, a-z and A-Z.
		{"/:`{@[", "%2F%3A`%7B%40%5B"},
		{"a%b", "a%25b"},
		{"a b\x00\x7f", "a%20b%00%7F"},
		{"é", "%C3%A9"},
		{"example.com/scopes", "example.com%2Fscopes"},
	}
	for _, tt := range tests {
		if got := escapeHeaderKey(tt.in); got != tt.want {
			t.Errorf("escapeHeaderKey(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// A token or impersonation value is refused for a control character
// (below 0x20, and DEL), and only for that.
func TestCheckHeaderValue(t *testing.T) {
	tests := []struct {
		in string
		ok bool
	}{
		{"", true},
		{"abc.DEF-123_~", true},
		{"a b", true},
		{"\x80\xff", true},
		{"tok\x1f", false},
		{"\x00tok", false},
		{"tok\n", false},
		{"tok\x7f", false},
	}
	for _, tt := range tests {
		if err := checkHeaderValue(tt.in); (err == nil) != tt.ok {
			t.Errorf("checkHeaderValue(%q) = %v, want ok=%v", tt.in, err, tt.ok)
		}
	}
}
