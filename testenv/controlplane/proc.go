package controlplane

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// process is one running component. Its fields are set before it is
// shared; done is closed when it has exited, and err is valid after that.
type process struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{}
	err     error
}

// startProcess starts bin with args, its output appended to logPath.
func startProcess(name, bin string, args, env []string, dir, logPath string) (*process, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("controlplane: %s: %w", name, err)
	}
	fmt.Fprintf(logf, "=== %s %s %s\n", time.Now().Format(time.RFC3339Nano), bin, strings.Join(args, " "))
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("controlplane: start %s: %w", name, err)
	}
	p := &process{name: name, logPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	return p, nil
}

// exitErr reports whether the process has exited, and how.
func (p *process) exitErr() (exited bool, err error) {
	select {
	case <-p.done:
		if p.err == nil {
			return true, fmt.Errorf("controlplane: %s exited", p.name)
		}
		return true, fmt.Errorf("controlplane: %s exited: %w", p.name, p.err)
	default:
		return false, nil
	}
}

// signal sends sig to the process group of p.
func (p *process) signal(sig syscall.Signal) {
	pid := p.cmd.Process.Pid
	if err := syscall.Kill(-pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		p.cmd.Process.Signal(sig)
	}
}

// stop asks the process group to end with SIGTERM and kills it with
// SIGKILL when it has not ended within grace. It returns once the process
// has exited.
func (p *process) stop(grace time.Duration) {
	select {
	case <-p.done:
		// The leader is gone; end anything left in its group.
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		return
	default:
	}
	if grace > 0 {
		p.signal(syscall.SIGTERM)
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-p.done:
			syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			return
		case <-t.C:
		}
	}
	p.signal(syscall.SIGKILL)
	<-p.done
}

// tailFile returns the last n lines of the file at path.
func tailFile(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	defer f.Close()
	const maxRead = 256 << 10
	st, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	off := max(st.Size()-maxRead, 0)
	data, err := io.ReadAll(io.NewSectionReader(f, off, st.Size()-off))
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	data = bytes.TrimRight(data, "\n")
	lines := bytes.Split(data, []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// ownerFile names the file in a temporary plane folder that holds the
// process id of the program that made it.
const ownerFile = "owner.pid"

// sweepStale removes temporary plane folders whose owner has died without
// a Stop (killed with SIGKILL, say), so such deaths leave no litter.
// Folders whose owner is alive, or unknown, are left alone.
func sweepStale(tempRoot string) {
	dirs, _ := filepath.Glob(filepath.Join(tempRoot, "controlplane-*"))
	for _, dir := range dirs {
		data, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			os.RemoveAll(dir)
		}
	}
}
