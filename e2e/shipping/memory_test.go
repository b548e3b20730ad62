package shipping

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/e2e/harness"
	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/widget"
)

// BenchmarkOperatorPeakRSS100Widgets measures what manifests/operator.yaml
// asks for: the operator's peak resident set (VmHWM) after it has taken
// 100 Widgets (100 Deployments, 100 Services, their Events) to Ready,
// with leader election and info logs as deployed. It runs the scenario
// once, whatever b.N: go test -run '^$' -bench PeakRSS -benchtime 1x.
func BenchmarkOperatorPeakRSS100Widgets(b *testing.B) {
	const n = 100
	p := env.Plane.Get(b)
	o := env.StartOperator(b, p, "--leader-elect", "--log-level", "info")
	ns := p.TestNamespace(b)
	c := harness.Admin(b, p)
	ctx := ctxFor(b, 10*time.Minute)
	b.Cleanup(func() {
		for i := range n {
			_ = harness.Widgets(c).Delete(ctxFor(b, 30*time.Second), ns, fmt.Sprintf("w%03d", i), k8sapi.DeleteOptions{})
		}
	})
	b.ResetTimer()
	began := time.Now()
	for i := range n {
		if _, err := harness.Widgets(c).Create(ctx, ns, harness.NewWidget(fmt.Sprintf("w%03d", i), pauseImage, 1), k8sapi.WriteOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	eventually(b, 5*time.Minute, func() (bool, string) {
		list, err := harness.Widgets(c).List(ctxFor(b, 30*time.Second), ns, k8sapi.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		ready := 0
		for _, w := range list.Items {
			if w.Status.Phase == widget.PhaseReady && w.Status.ObservedGeneration == w.Generation {
				ready++
			}
		}
		return ready == n, fmt.Sprintf("%d of %d Widgets Ready", ready, n)
	})
	converged := time.Since(began)
	b.StopTimer()
	hwm, err := harness.PeakRSS(o.Cmd.Process.Pid)
	if err != nil {
		b.Fatal(err)
	}
	cpu, err := cpuTime(o.Cmd.Process.Pid)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(hwm)/(1<<20), "VmHWM-MiB")
	b.ReportMetric(converged.Seconds(), "converge-s")
	b.ReportMetric(cpu.Seconds(), "cpu-s")
	b.Logf("%d Widgets Ready in %s; operator VmHWM %d KiB (%.1f MiB), CPU time since start %s",
		n, converged.Round(time.Millisecond), hwm>>10, float64(hwm)/(1<<20), cpu)
}

// cpuTime is the user and system CPU time process pid has used, from
// /proc/<pid>/stat (fields 14 and 15, in clock ticks of 1/100 s on Linux).
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; it ends at the last ')'.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	var ticks int64
	for _, v := range f[11:13] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}
