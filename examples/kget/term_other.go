//go:build !linux

package main

import (
	"context"

	"github.com/zerodep-k8s/widget-operator/k8sapi/podexec"
)

// terminalSizes sends nothing: kget reads a terminal's size on Linux
// alone.
func terminalSizes(ctx context.Context) (<-chan podexec.TerminalSize, func()) {
	return nil, func() {}
}
