package k8sapi

import (
	"reflect"
	"runtime"
	"runtime/debug"
	"strings"
)

// defaultUserAgent returns "k8sapi/<version> (<GOOS>/<GOARCH>)" for the
// running binary.
func defaultUserAgent() string {
	bi, _ := debug.ReadBuildInfo()
	return "k8sapi/" + moduleVersion(bi) + " (" + runtime.GOOS + "/" + runtime.GOARCH + ")"
}

// moduleVersion returns the version of the module this package was built
// from, as bi records it (the main module or a dependency), or "devel"
// when bi is nil or records none, as in a build inside the module itself.
func moduleVersion(bi *debug.BuildInfo) string {
	if bi == nil {
		return "devel"
	}
	pkg := reflect.TypeFor[Client]().PkgPath()
	for _, m := range append([]*debug.Module{&bi.Main}, bi.Deps...) {
		if m.Path != "" && strings.HasPrefix(pkg, m.Path+"/") && m.Version != "" && m.Version != "(devel)" {
			return m.Version
		}
	}
	return "devel"
}
