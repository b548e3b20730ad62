package controlplane

import "syscall"

// sysProcAttr puts a child in a process group of its own, so it can be
// signalled as a whole and does not get the terminal's Ctrl-C, and kills it
// when the thread that started it dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
