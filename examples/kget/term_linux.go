package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"unsafe"

	"github.com/zerodep-k8s/widget-operator/k8sapi/podexec"
)

// terminalSizes sends the size of the terminal on standard input now and
// at each SIGWINCH, until stop. Without a terminal it sends nothing.
func terminalSizes(ctx context.Context) (<-chan podexec.TerminalSize, func()) {
	sizes := make(chan podexec.TerminalSize, 1)
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		defer signal.Stop(winch)
		for {
			if size, ok := terminalSize(); ok {
				select {
				case sizes <- size:
				case <-ctx.Done():
					return
				}
			}
			select {
			case <-winch:
			case <-ctx.Done():
				return
			}
		}
	}()
	return sizes, cancel
}

func terminalSize() (podexec.TerminalSize, bool) {
	var ws struct{ Row, Col, X, Y uint16 }
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, os.Stdin.Fd(), syscall.TIOCGWINSZ, uintptr(unsafe.Pointer(&ws)))
	if errno != 0 || ws.Col == 0 {
		return podexec.TerminalSize{}, false
	}
	return podexec.TerminalSize{Width: ws.Col, Height: ws.Row}, true
}
