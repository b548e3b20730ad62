// Package memlimit chooses the Go runtime's soft memory limit from the
// container's memory limit, so that the garbage collector works harder
// before the kernel's OOM killer steps in.
package memlimit

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Fraction is the share of the container's limit given to the Go
// runtime; the rest is headroom for memory the runtime does not count
// (thread stacks, the binary's own pages) and for its lag.
const Fraction = 0.9

// EnvLimit names the variable that, when set, holds the container's memory
// limit in bytes (from the downward API's resourceFieldRef limits.memory).
const EnvLimit = "CONTAINER_MEMORY_LIMIT"

// noLimit is the least value cgroup v1 writes for "no limit" (the largest
// int64 rounded down to a page); anything this large is no limit.
const noLimit = 1 << 62

// Choose returns the soft memory limit to set and where the container's
// limit came from. It returns 0 and no error when the limit should be left
// alone: GOMEMLIMIT is set (the runtime has read it), or no container
// limit is found. The limit comes from EnvLimit if set, else from the
// cgroup (v2 memory.max, else v1 memory.limit_in_bytes) of the process,
// read from root (the root file system, such as os.DirFS("/")).
func Choose(getenv func(string) string, root fs.FS) (limit int64, from string, err error) {
	if getenv("GOMEMLIMIT") != "" {
		return 0, "", nil
	}
	from = EnvLimit
	if v := getenv(EnvLimit); v != "" {
		limit, err = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || limit <= 0 {
			return 0, "", fmt.Errorf("memlimit: %s=%q: want a positive number of bytes", EnvLimit, v)
		}
	} else if limit, from, err = Cgroup(root); err != nil || limit == 0 {
		return 0, "", err
	}
	return int64(math.Floor(float64(limit) * Fraction)), from, nil
}

// Cgroup returns the memory limit of the process's cgroup and the file it
// was read from, or 0 when there is none or cgroups are not mounted. The
// cgroup's folder is looked for under its path in /proc/self/cgroup, and
// then at the mount's root, where a container sees its own cgroup.
func Cgroup(root fs.FS) (int64, string, error) {
	v2, v1, err := cgroupPaths(root)
	if err != nil {
		return 0, "", err
	}
	for _, name := range []string{
		path.Join("sys/fs/cgroup", v2, "memory.max"),
		"sys/fs/cgroup/memory.max",
		path.Join("sys/fs/cgroup/memory", v1, "memory.limit_in_bytes"),
		"sys/fs/cgroup/memory/memory.limit_in_bytes",
	} {
		b, err := fs.ReadFile(root, name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, "", fmt.Errorf("memlimit: %w", err)
		}
		// "max", or a huge number, means no limit (0).
		v := strings.TrimSpace(string(b))
		n, err := strconv.ParseUint(v, 10, 64)
		switch {
		case v == "max" || err == nil && n >= noLimit:
			return 0, "/" + name, nil
		case err != nil:
			return 0, "", fmt.Errorf("memlimit: /%s: not a limit: %q", name, v)
		}
		return int64(n), "/" + name, nil
	}
	return 0, "", nil
}

// cgroupPaths reads /proc/self/cgroup: the v2 path (line "0::PATH") and
// the v1 memory controller's path ("N:...memory...:PATH"). A missing file
// is no paths.
func cgroupPaths(root fs.FS) (v2, v1 string, err error) {
	b, err := fs.ReadFile(root, "proc/self/cgroup")
	if errors.Is(err, fs.ErrNotExist) {
		return "", "", nil
	}
	if err != nil {
		return "", "", fmt.Errorf("memlimit: %w", err)
	}
	for line := range strings.Lines(string(b)) {
		id, rest, ok := strings.Cut(strings.TrimSuffix(line, "\n"), ":")
		if !ok {
			continue
		}
		controllers, p, ok := strings.Cut(rest, ":")
		if !ok || !strings.HasPrefix(p, "/") || strings.Contains(p, "..") {
			continue
		}
		switch {
		case id == "0" && controllers == "":
			v2 = p
		case v1 == "" && slices.Contains(strings.Split(controllers, ","), "memory"):
			v1 = p
		}
	}
	return v2, v1, nil
}
