package memlimit

import (
	"os"
	"strings"
	"testing"
)

func TestCgroup(t *testing.T) {
	for _, tc := range []struct {
		dir  string
		want int64
		file string
	}{
		{"v2", 128 << 20, "/sys/fs/cgroup/memory.max"},
		// The process's own cgroup wins over the mount's root.
		{"v2-nested", 256 << 20, "/sys/fs/cgroup/kubepods.slice/kubepods-pod1.slice/cri-containerd-abc.scope/memory.max"},
		{"v2-unlimited", 0, "/sys/fs/cgroup/memory.max"},
		// The v1 path in /proc/self/cgroup is the host's; the container
		// sees its cgroup at the mount's root.
		{"v1", 128 << 20, "/sys/fs/cgroup/memory/memory.limit_in_bytes"},
		{"v1-unlimited", 0, "/sys/fs/cgroup/memory/memory.limit_in_bytes"},
		{"none", 0, ""},
	} {
		got, file, err := Cgroup(os.DirFS("testdata/" + tc.dir))
		if err != nil || got != tc.want || file != tc.file {
			t.Errorf("%s: %d from %q, %v; want %d from %q", tc.dir, got, file, err, tc.want, tc.file)
		}
	}
	if _, _, err := Cgroup(os.DirFS("testdata/bad")); err == nil || !strings.Contains(err.Error(), `"lots"`) ||
		!strings.HasPrefix(err.Error(), "memlimit: ") {
		t.Errorf("bad: err = %v, want one naming the value", err)
	}
}

func TestChoose(t *testing.T) {
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	v2 := os.DirFS("testdata/v2")
	for _, tc := range []struct {
		name   string
		getenv func(string) string
		want   int64
		source string
	}{
		{"GOMEMLIMIT wins", env("GOMEMLIMIT", "50MiB", EnvLimit, "134217728"), 0, ""},
		{"downward API", env(EnvLimit, "268435456"), 241591910, EnvLimit},
		{"cgroup", env(), 120795955, "/sys/fs/cgroup/memory.max"},
	} {
		got, source, err := Choose(tc.getenv, v2)
		if err != nil || got != tc.want || source != tc.source {
			t.Errorf("%s: %d from %q, %v; want %d from %q", tc.name, got, source, err, tc.want, tc.source)
		}
	}
	if got, _, err := Choose(env(), os.DirFS("testdata/v2-unlimited")); got != 0 || err != nil {
		t.Errorf("no limit: %d, %v", got, err)
	}
	for _, bad := range []string{"128Mi", "-1", "0"} {
		if _, _, err := Choose(env(EnvLimit, bad), v2); err == nil || !strings.Contains(err.Error(), EnvLimit) {
			t.Errorf("%s=%q: err = %v", EnvLimit, bad, err)
		}
	}
}
