//go:build !unix

package k8sapi

import "time"

// processCPUTime is not measured on this platform.
func processCPUTime() time.Duration { return 0 }
