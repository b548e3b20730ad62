package k8sapi

import (
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
)

// defaultUserAgent returns "<program>/<version> (<GOOS>/<GOARCH>)" for
// the running binary: see userAgent.
func defaultUserAgent() string {
	bi, _ := debug.ReadBuildInfo()
	return userAgent(os.Args, bi)
}

// userAgent returns "<program>/<version> (<GOOS>/<GOARCH>)": the program
// is the base name of args[0] ("unknown" when there is none), the version
// that of the main module as bi records it, or "devel" when bi is nil or
// records none, as in a build inside the module itself.
func userAgent(args []string, bi *debug.BuildInfo) string {
	program, version := "unknown", "devel"
	if len(args) > 0 {
		program = filepath.Base(args[0])
	}
	if bi != nil && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		version = bi.Main.Version
	}
	return program + "/" + version + " (" + runtime.GOOS + "/" + runtime.GOARCH + ")"
}
