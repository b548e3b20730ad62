//go:build unix

package k8sapi

import (
	"os/exec"
	"syscall"
)

// killGroupOnCancel starts the plugin in a session, and so a process
// group, of its own and, when its context ends, kills the whole group:
// the plugin and any process it started that still runs. A session of its
// own also has no controlling terminal: a plugin that tries to prompt on
// /dev/tty fails at once instead of stopping in the background until the
// timeout (the client never gives a plugin a terminal).
func killGroupOnCancel(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Cancel = func() error {
		// The group's id is the plugin's pid. A plugin that left the
		// group is killed after cmd.WaitDelay.
		if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
			return cmd.Process.Kill()
		}
		return nil
	}
}
