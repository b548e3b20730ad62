//go:build !unix

package k8sapi

import "os/exec"

// killGroupOnCancel leaves the default: only the plugin itself is killed
// when its context ends. Process groups are a Unix notion.
func killGroupOnCancel(cmd *exec.Cmd) {}
