package k8sapi

import (
	"runtime/debug"
	"testing"
)

func TestModuleVersion(t *testing.T) {
	const mod = "github.com/zerodep-k8s/widget-operator"
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"no build info", nil, "devel"},
		{"main module, no version", &debug.BuildInfo{Main: debug.Module{Path: mod, Version: "(devel)"}}, "devel"},
		{"main module, VCS version", &debug.BuildInfo{Main: debug.Module{Path: mod, Version: "v1.2.3"}}, "v1.2.3"},
		{"a dependency", &debug.BuildInfo{
			Main: debug.Module{Path: "example.com/tool", Version: "v9.9.9"},
			Deps: []*debug.Module{{Path: "example.com/other", Version: "v0.1.0"}, {Path: mod, Version: "v0.4.0"}},
		}, "v0.4.0"},
		{"a module whose path is only a prefix", &debug.BuildInfo{
			Main: debug.Module{Path: "example.com/tool", Version: "v9.9.9"},
			Deps: []*debug.Module{{Path: mod + "-fork", Version: "v0.1.0"}},
		}, "devel"},
	} {
		if got := moduleVersion(tc.bi); got != tc.want {
			t.Errorf("%s: moduleVersion = %q, want %q", tc.name, got, tc.want)
		}
	}
}
