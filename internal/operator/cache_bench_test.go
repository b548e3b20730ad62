package operator

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/watch"
	"github.com/zerodep-k8s/widget-operator/widget"
)

// BenchmarkCacheHeap loads N Widgets, each with its Deployment and Service,
// into the operator's three caches (their Transforms, selector and
// indexes as newOperator sets them) from a fake API server, and reports
// per Widget:
//
//   - liveB/widget: the heap the caches keep, after a GC;
//   - peakB/widget: the most heap in use while they load, sampled, less
//     the heap before;
//   - goalB/widget: the highest heap goal while they load (the heap the
//     GC lets grow before it runs, which peak RSS follows), less the heap
//     before. Both vary from run to run with the GC's timing: take the
//     median of a few (-count=5);
//   - allocB/widget: the bytes allocated to load them, the client's
//     decoding and the fake server's writing together.
//
// The objects are those that kube-apiserver v1.37.2 sent for a Widget of
// the scale bench and the children this operator made for it
// (testdata/*-list.json), with names, UIDs and resourceVersions of their
// own. Run it with -benchtime=1x; with -memprofile=FILE, it writes the heap
// profile of the loaded caches to FILE.N=<N>.
func BenchmarkCacheHeap(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		for _, mode := range []string{"stream", "list"} {
			b.Run(fmt.Sprintf("N=%d/%s", n, mode), func(b *testing.B) { benchmarkLoad(b, n, mode == "stream") })
		}
	}
}

// benchmarkLoad is BenchmarkCacheHeap for n Widgets, by streaming lists
// if stream, else by paginated lists (the server refuses streams).
func benchmarkLoad(b *testing.B, n int, stream bool) {
	ls := newListServer(b, n)
	ls.stream = stream
	srv := httptest.NewServer(ls)
	defer srv.Close()
	client, err := k8sapi.New(&k8sapi.Config{Host: srv.URL})
	if err != nil {
		b.Fatal(err)
	}
	for range b.N {
		m := measureLoad(b, client, n)
		b.ReportMetric(m.live/float64(n), "liveB/widget")
		b.ReportMetric(m.peak/float64(n), "peakB/widget")
		b.ReportMetric(m.goal/float64(n), "goalB/widget")
		b.ReportMetric(m.alloc/float64(n), "allocB/widget")
	}
}

// load is what measureLoad measured, in bytes.
type load struct{ live, peak, goal, alloc float64 }

// measureLoad runs the operator's caches over client until each holds n
// objects, and measures the heap.
func measureLoad(b *testing.B, client *k8sapi.Client, n int) load {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	stopPeak := samplePeak()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var loaded sync.WaitGroup
	loaded.Add(3)
	run := func(run func(context.Context) error) { wg.Go(func() { run(ctx) }) }
	op := &operator{}
	widgets := watch.NewCache(counted(watchConfig(client, widget.Widgets, "", "", nil, widget.TrimWidget), n, loaded.Done))
	deployments := watch.NewCache(counted(watchConfig(client, k8sapi.Deployments, childSelector, "", nil, op.trimDeployment), n, loaded.Done))
	services := watch.NewCache(counted(watchConfig(client, k8sapi.Services, childSelector, "", nil, op.trimService), n, loaded.Done))
	op.widgets, op.deployments, op.services = widgets, deployments, services
	run(widgets.Run)
	run(deployments.Run)
	run(services.Run)
	loaded.Wait()
	peak, goal := stopPeak()
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	for _, c := range []int{widgets.Store().Len(), deployments.Store().Len(), services.Store().Len()} {
		if c != n {
			b.Fatalf("a cache holds %d objects, want %d", c, n)
		}
	}
	if w, _ := widgets.Get("bench", "w-00007"); w == nil || w.Spec.Image == "" {
		b.Fatalf("widget w-00007 = %+v", w)
	}
	writeHeapProfile(b, n)
	cancel()
	wg.Wait()
	runtime.KeepAlive(widgets)
	runtime.KeepAlive(deployments)
	runtime.KeepAlive(services)
	return load{
		live:  float64(int64(after.HeapAlloc) - int64(before.HeapAlloc)),
		peak:  float64(int64(peak) - int64(before.HeapAlloc)),
		goal:  float64(int64(goal) - int64(before.HeapAlloc)),
		alloc: float64(after.TotalAlloc - before.TotalAlloc),
	}
}

// writeHeapProfile writes the heap profile of now, with the caches
// loaded, to the file of -memprofile with ".N=<n>" added, if it is set:
// the profile of -memprofile itself is taken once they are gone.
func writeHeapProfile(b *testing.B, n int) {
	f := flag.Lookup("test.memprofile")
	if f == nil || f.Value.String() == "" {
		return
	}
	out, err := os.Create(fmt.Sprintf("%s.N=%d", f.Value, n))
	if err == nil {
		err = pprof.Lookup("heap").WriteTo(out, 0)
		err = errors.Join(err, out.Close())
	}
	if err != nil {
		b.Fatal(err)
	}
}

// counted sets cfg's Handler to call done once n objects were added.
func counted[T any](cfg watch.Config[T], n int, done func()) watch.Config[T] {
	added := 0 // the handler runs on one goroutine
	cfg.Handler = watch.Handler[T]{OnAdd: func(*T) {
		if added++; added == n {
			done()
		}
	}}
	return cfg
}

// samplePeak samples every millisecond, until the function it returns is
// called, the heap in use (live and unswept objects) and the heap goal,
// the size the GC lets the heap grow to, and that function returns the
// highest sample of each.
func samplePeak() func() (inUse, goal uint64) {
	samples := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/goal:bytes"}}
	var peaks [2]uint64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(samples)
			for i, s := range samples {
				peaks[i] = max(peaks[i], s.Value.Uint64())
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	return func() (uint64, uint64) { close(stop); <-done; return peaks[0], peaks[1] }
}

// listServer is a fake API server: it serves lists of n Widgets,
// Deployments and Services made from the objects recorded in testdata,
// paged as kube-apiserver pages them (a list at resourceVersion 0 comes
// whole, from the watch cache; others by limit and continue), streaming
// lists if stream (the objects as ADDED events, then the end bookmark;
// else it refuses them, as a server without them does), and watches that
// send nothing more until the client goes. It writes each object into one
// reused buffer, so that it allocates little of what the benchmark counts.
type listServer struct {
	n      int
	stream bool
	lists  map[string]*listTemplate // by URL path
}

// listTemplate is a recorded list response cut into the parts before,
// between and after the values each object has of its own.
type listTemplate struct {
	kind, apiVersion string
	parts            []string // literal, value, literal, ..., literal
}

// Values of the recorded objects that each generated object replaces.
const (
	recordedName       = "w-00042"
	recordedWidgetUID  = "d82c7169-9628-4b03-83c6-b26e039b2738"
	recordedDeployUID  = "a5b8bb8f-77ea-4b11-aac7-87b03f936608"
	recordedServiceUID = "b76416eb-cb85-4244-b4f4-1fdbea5f8faf"
)

func newListServer(b *testing.B, n int) *listServer {
	s := &listServer{n: n, lists: map[string]*listTemplate{}}
	for path, file := range map[string]string{
		"/apis/example.com/v1/widgets": "widgets-list.json",
		"/apis/apps/v1/deployments":    "deployments-list.json",
		"/api/v1/services":             "services-list.json",
	} {
		data, err := os.ReadFile("testdata/" + file)
		if err != nil {
			b.Fatal(err)
		}
		var list struct {
			k8sapi.TypeMeta
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(data, &list); err != nil || len(list.Items) != 1 {
			b.Fatalf("%s: want a list of one object: %v", file, err)
		}
		item := string(list.Items[0])
		// Each value becomes a mark, \x00 and a letter, between two cuts.
		item = strings.NewReplacer(recordedName, "\x00n\x00", recordedWidgetUID, "\x00w\x00",
			recordedDeployUID, "\x00u\x00", recordedServiceUID, "\x00u\x00").Replace(item)
		item = markRVs.Replace(item)
		if !strings.Contains(item, "\x00n\x00") || !strings.Contains(item, "\x00r\x00") {
			b.Fatalf("%s: the recorded name or resourceVersion is not where the benchmark looks", file)
		}
		s.lists[path] = &listTemplate{kind: list.Kind, apiVersion: list.APIVersion, parts: strings.Split(item, "\x00")}
	}
	return s
}

// markRVs marks the resourceVersions of the recorded objects.
var markRVs = strings.NewReplacer(`"resourceVersion":"316"`, `"resourceVersion":"`+"\x00r\x00"+`"`,
	`"resourceVersion":"315"`, `"resourceVersion":"`+"\x00r\x00"+`"`,
	`"resourceVersion":"293"`, `"resourceVersion":"`+"\x00r\x00"+`"`)

func (s *listServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	t := s.lists[r.URL.Path]
	if t == nil {
		http.NotFound(w, r)
		return
	}
	q := r.URL.Query()
	w.Header().Set("Content-Type", "application/json")
	if q.Get("watch") != "" {
		s.watch(w, r, t)
		return
	}
	from, _ := strconv.Atoi(q.Get("continue"))
	to := s.n
	if limit, _ := strconv.Atoi(q.Get("limit")); limit > 0 && q.Get("resourceVersion") != "0" {
		to = min(s.n, from+limit)
	}
	cont := ""
	if to < s.n {
		cont = strconv.Itoa(to)
	}
	fmt.Fprintf(w, `{"kind":%q,"apiVersion":%q,"metadata":{"resourceVersion":"1000000","continue":%q},"items":[`, t.kind, t.apiVersion, cont)
	var buf []byte
	for i := from; i < to; i++ {
		if i > from {
			buf = append(buf, ',')
		}
		buf = t.appendItem(buf, i)
		if len(buf) > 32<<10 {
			w.Write(buf)
			buf = buf[:0]
		}
	}
	w.Write(append(buf, "]}"...))
}

// watch serves a watch of t's objects: a streaming list, or a refusal
// of one when s does not stream, or nothing.
func (s *listServer) watch(w http.ResponseWriter, r *http.Request, t *listTemplate) {
	initial := r.URL.Query().Get("sendInitialEvents") == "true"
	if initial && !s.stream {
		w.WriteHeader(http.StatusUnprocessableEntity)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Invalid","code":422}`)
		return
	}
	w.WriteHeader(http.StatusOK)
	if initial {
		var buf []byte
		for i := range s.n {
			buf = append(t.appendItem(append(buf, `{"type":"ADDED","object":`...), i), "}\n"...)
			if len(buf) > 32<<10 {
				w.Write(buf)
				buf = buf[:0]
			}
		}
		fmt.Fprintf(w, `%s{"type":"BOOKMARK","object":{"kind":%q,"apiVersion":%q,"metadata":{"resourceVersion":"1000000","annotations":{%q:"true"}}}}`+"\n",
			buf, t.kind, t.apiVersion, watch.InitialEventsEndAnnotation)
	}
	w.(http.Flusher).Flush()
	<-r.Context().Done()
}

// appendItem appends the i-th object to buf.
func (t *listTemplate) appendItem(buf []byte, i int) []byte {
	for k, part := range t.parts {
		if k%2 == 0 {
			buf = append(buf, part...)
			continue
		}
		switch part {
		case "n":
			buf = fmt.Appendf(buf, "w-%05d", i)
		case "w":
			buf = fmt.Appendf(buf, "d82c7169-9628-4b03-83c6-%012d", i)
		case "u":
			buf = fmt.Appendf(buf, "a5b8bb8f-77ea-4b11-aac7-%012d", i)
		case "r":
			buf = strconv.AppendInt(buf, int64(100_000+i), 10)
		}
	}
	return buf
}
