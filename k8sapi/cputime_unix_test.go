//go:build unix

package k8sapi

import (
	"syscall"
	"time"
)

// processCPUTime returns the user and system CPU time the process has
// used, so that benchmarks can report a rate per CPU-second that does not
// depend on how busy the machine is.
func processCPUTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
