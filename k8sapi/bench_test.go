package k8sapi

import (
	"bytes"
	"io"
	"runtime"
	"strconv"
	"testing"
)

// deploymentStream builds a watch stream of n events from the recorded
// Deployment in testdata (managedFields included), varying name and
// resourceVersion as a busy cluster would.
func deploymentStream(tb testing.TB, n int) []byte {
	obj := bytes.TrimSpace(testdata(tb, "deployment.json"))
	name := []byte(`"name":"web"`)
	rv := []byte(`"resourceVersion":"48213"`)
	types := []string{"ADDED", "MODIFIED", "MODIFIED", "MODIFIED", "DELETED"}
	var b bytes.Buffer
	for i := 0; i < n; i++ {
		o := bytes.Replace(obj, name, []byte(`"name":"web-`+strconv.Itoa(i%997)+`"`), 1)
		o = bytes.Replace(o, rv, []byte(`"resourceVersion":"`+strconv.Itoa(50000+i)+`"`), 1)
		b.WriteString(`{"type":"` + types[i%len(types)] + `","object":`)
		b.Write(o)
		b.WriteString("}\n")
	}
	return b.Bytes()
}

// BenchmarkWatchDecodeDeployments decodes 10,000 Deployment watch events
// per iteration through Watcher[Deployment].Next and reports events/s,
// events per CPU-second and allocs/event. Run it with -cpu=1.
func BenchmarkWatchDecodeDeployments(b *testing.B) {
	const events = 10000
	stream := deploymentStream(b, events)
	op := &operation{verb: "watch", resource: "deployments"}
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cpu0 := processCPUTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		w := newWatcher[Deployment](op, io.NopCloser(bytes.NewReader(stream)), func() {}, objectLimit)
		n := 0
		for {
			ev, err := w.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			if ev.Object.Name == "" {
				b.Fatal("empty event")
			}
			n++
		}
		if n != events {
			b.Fatalf("%d events, want %d", n, events)
		}
	}
	b.StopTimer()
	cpu := processCPUTime() - cpu0
	runtime.ReadMemStats(&after)
	total := float64(b.N) * events
	b.ReportMetric(total/b.Elapsed().Seconds(), "events/s")
	if cpu > 0 {
		// The same rate per second of CPU used: on a shared machine the
		// wall-clock rate understates what one core does.
		b.ReportMetric(total/cpu.Seconds(), "events/cpu-s")
	}
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/total, "allocs/event")
}
