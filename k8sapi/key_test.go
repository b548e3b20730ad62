package k8sapi

import (
	"errors"
	"testing"
)

func TestKey(t *testing.T) {
	tests := []struct{ ns, name, want string }{
		{"ns", "a", "ns/a"},
		{"", "node1", "node1"},
	}
	for _, tt := range tests {
		if got := Key(tt.ns, tt.name); got != tt.want {
			t.Errorf("Key(%q, %q) = %q, want %q", tt.ns, tt.name, got, tt.want)
		}
	}
}

func TestSplitKey(t *testing.T) {
	tests := []struct{ key, ns, name string }{
		{"default/web", "default", "web"},
		{"node-1", "", "node-1"},
		{"", "", ""},
		{"/web", "", ""},
		{"ns/", "", ""},
		{"a/b/c", "", ""},
	}
	for _, tt := range tests {
		ns, name, err := SplitKey(tt.key)
		if ns != tt.ns || name != tt.name || (err != nil) != (tt.name == "") {
			t.Errorf("SplitKey(%q) = %q, %q, %v", tt.key, ns, name, err)
		}
		if err != nil && !errors.Is(err, ErrInvalidKey) {
			t.Errorf("SplitKey(%q) error %v does not wrap ErrInvalidKey", tt.key, err)
		}
		if err == nil && Key(ns, name) != tt.key {
			t.Errorf("Key(%q, %q) = %q", ns, name, Key(ns, name))
		}
	}
}
