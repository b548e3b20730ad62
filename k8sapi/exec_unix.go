//go:build unix

package k8sapi

import (
	"os/exec"
	"syscall"
)

// runInGroup runs cmd, the plugin, in a session, and so a process group,
// of its own. When its context ends, the whole group is killed: the
// plugin and any process it started that still runs. A session of its
// own also has no controlling terminal: a plugin that tries to prompt on
// /dev/tty fails at once instead of stopping in the background until the
// timeout (the client never gives a plugin a terminal).
//
// Once the plugin has ended, what is left of its group is killed too, and
// reaped: a process whose parent ends is handed to PID 1 (the operator,
// in the scratch image) or to the nearest child subreaper, and would stay
// a zombie. The reaping waits for members of that group alone (wait4 on
// -pgid, until none is left), so it takes no exit status that os/exec
// waits for, and finds nothing in a process that is neither. A process
// that left the group (a daemon that called setsid) is neither killed nor
// reaped.
func runInGroup(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	// The group's id is the plugin's pid. cmd.WaitDelay bounds the wait
	// for pipes that a process which left the group holds open.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	err := cmd.Run()
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		go reapGroup(cmd.Process.Pid)
	}
	return err
}

// reapGroup waits for the children of this process in process group
// pgid until there is none (ECHILD).
func reapGroup(pgid int) {
	for err := error(nil); err == nil || err == syscall.EINTR; {
		_, err = syscall.Wait4(-pgid, nil, 0, nil)
	}
}
