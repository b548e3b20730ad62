package k8sapi

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestExecTimeoutKillsProcessGroup runs a plugin script that starts a
// grandchild and then hangs; when the run's time is up, the grandchild
// must be gone too, not only the script.
func TestExecTimeoutKillsProcessGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "grandchild.pid")
	script := filepath.Join(dir, "plugin.sh")
	body := "#!/bin/sh\nsleep 300 &\necho $! > " + pidFile + ".tmp\nmv " + pidFile + ".tmp " + pidFile + "\nsleep 300\n"
	if err := os.WriteFile(script, []byte(body), 0o700); err != nil {
		t.Fatal(err)
	}
	e := &execCredentials{cfg: ExecConfig{Command: script}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Time is up once the grandchild is known to run.
	go func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for range tick.C {
			if _, err := os.Stat(pidFile); err == nil {
				cancel()
				return
			}
		}
	}()
	start := time.Now()
	_, err := e.runPlugin(ctx)
	if err == nil {
		t.Fatal("no error from a plugin that was stopped")
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("runPlugin took %v: it waited for the grandchild's pipes", d)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for alive(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("grandchild %d still runs after the plugin's run was stopped", pid)
		}
		<-tick.C
	}
}

// alive reports whether pid runs: it exists and is not a zombie.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// TestExecPluginLeavingItsGroupDoesNotHang: a plugin that exits but leaves
// a process of its own session holding its stdout open is not waited for
// until that process ends: runPlugin returns once cmd.WaitDelay (5 s) has
// passed. The group kill cannot reach such a process.
func TestExecPluginLeavingItsGroupDoesNotHang(t *testing.T) {
	setsid, err := exec.LookPath("setsid")
	if err != nil {
		t.Skip("no setsid here")
	}
	t.Parallel()
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "escaped.pid")
	script := filepath.Join(dir, "plugin.sh")
	body := "#!/bin/sh\n" + setsid + " sleep 300 &\necho $! > " + pidFile + "\necho '{}'\nexit 0\n"
	if err := os.WriteFile(script, []byte(body), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	e := &execCredentials{cfg: ExecConfig{Command: script}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.runPlugin(context.Background())
	}()
	// Not a measure of speed: without a WaitDelay, runPlugin would wait
	// the 300 s of the escaped process.
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("runPlugin still waits for the stdout of a process that left the plugin's group")
	}
}

// TestExecReapsOrphans runs, in a subprocess that is a child subreaper
// (PR_SET_CHILD_SUBREAPER) as PID 1 is, plugins that each leave a process
// running in the background: once a run has ended, that process must be
// gone, neither running nor a zombie, and the next runs must still work
// (a reaper that waited for any child would take their exit statuses
// from os/exec).
func TestExecReapsOrphans(t *testing.T) {
	if os.Getenv("K8SAPI_TEST_SUBREAPER") != "1" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestExecReapsOrphans$", "-test.v")
		cmd.Env = append(os.Environ(), "K8SAPI_TEST_SUBREAPER=1")
		if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "--- PASS: TestExecReapsOrphans") {
			t.Fatalf("the subreaper's run: %v\n%s", err, out)
		}
		return
	}
	const prSetChildSubreaper = 36
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		t.Fatalf("prctl(PR_SET_CHILD_SUBREAPER): %v", errno)
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "plugin.sh")
	body := "#!/bin/sh\nsleep 300 >/dev/null 2>&1 &\necho $! > \"$1\"\necho '{}'\n"
	if err := os.WriteFile(script, []byte(body), 0o700); err != nil {
		t.Fatal(err)
	}
	e := &execCredentials{cfg: ExecConfig{Command: script}}
	var pids []int
	for i := range 3 {
		pidFile := filepath.Join(dir, strconv.Itoa(i)+".pid")
		e.cfg.Args = []string{pidFile}
		if out, err := e.runPlugin(context.Background()); err != nil || string(out) != "{}\n" {
			t.Fatalf("run %d: %q, %v", i, out, err)
		}
		b, err := os.ReadFile(pidFile)
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
		t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	}
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for _, pid := range pids {
		for {
			_, err := os.Stat("/proc/" + strconv.Itoa(pid))
			if errors.Is(err, os.ErrNotExist) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the plugin's background process %d is still there (running: %v) after its run", pid, alive(pid))
			}
			<-tick.C
		}
	}
}
