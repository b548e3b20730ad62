//go:build !unix

package k8sapi

import "os/exec"

// runInGroup runs cmd as it is: only the plugin itself is killed when its
// context ends. Process groups are a Unix notion.
func runInGroup(cmd *exec.Cmd) error { return cmd.Run() }
