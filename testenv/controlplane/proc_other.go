//go:build unix && !linux

package controlplane

import "syscall"

// sysProcAttr puts a child in a process group of its own. Outside Linux
// there is no parent-death signal: a killed parent leaves children behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
