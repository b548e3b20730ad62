package k8sapi

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestUserAgent(t *testing.T) {
	const platform = " (" + runtime.GOOS + "/" + runtime.GOARCH + ")"
	tagged := &debug.BuildInfo{
		Main: debug.Module{Path: "example.com/tool", Version: "v1.2.3"},
		Deps: []*debug.Module{{Path: "github.com/zerodep-k8s/widget-operator", Version: "v0.4.0"}},
	}
	for _, tc := range []struct {
		name string
		args []string
		bi   *debug.BuildInfo
		want string
	}{
		{"no build info", []string{"/usr/local/bin/kget"}, nil, "kget/devel"},
		{"main module, no version", []string{"./kget"}, &debug.BuildInfo{Main: debug.Module{Path: "example.com/tool", Version: "(devel)"}}, "kget/devel"},
		{"main module, VCS version", []string{"kget", "get", "pods"}, tagged, "kget/v1.2.3"},
		{"no arguments", nil, tagged, "unknown/v1.2.3"},
	} {
		if got := userAgent(tc.args, tc.bi); got != tc.want+platform {
			t.Errorf("%s: userAgent = %q, want %q", tc.name, got, tc.want+platform)
		}
	}
}
