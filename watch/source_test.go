package watch

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// recordingServer is an httptest API server for Deployments that plays a
// fixed story and records the query of every request:
//
//	list rv=0         -> a@5, b@6 at rv 10
//	watch rv=10       -> ADDED c@11, BOOKMARK 12, ERROR 410
//	list rv=""        -> a@20, c@11 at rv 30 (b vanished, a changed)
//	watch rv=30       -> held open until the client leaves
type recordingServer struct {
	mu      sync.Mutex
	queries []url.Values
}

func deploymentJSON(name, rv string) string {
	return fmt.Sprintf(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":%q,"namespace":"ns","resourceVersion":%q,`+
		`"managedFields":[{"manager":"kubectl","operation":"Update"}]},"spec":{"template":{"spec":{"containers":[{"name":"c"}]}}}}`, name, rv)
}

func (s *recordingServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/apis/apps/v1/namespaces/ns/deployments" {
		http.Error(w, "unexpected path "+r.URL.Path, http.StatusNotFound)
		return
	}
	q := r.URL.Query()
	s.mu.Lock()
	s.queries = append(s.queries, q)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	rv := q.Get("resourceVersion")
	if q.Get("watch") == "" {
		switch rv {
		case "0":
			fmt.Fprintf(w, `{"kind":"DeploymentList","metadata":{"resourceVersion":"10"},"items":[%s,%s]}`,
				deploymentJSON("a", "5"), deploymentJSON("b", "6"))
		case "":
			fmt.Fprintf(w, `{"kind":"DeploymentList","metadata":{"resourceVersion":"30"},"items":[%s,%s]}`,
				deploymentJSON("a", "20"), deploymentJSON("c", "11"))
		default:
			http.Error(w, "unexpected list", http.StatusBadRequest)
		}
		return
	}
	f := w.(http.Flusher)
	switch rv {
	case "10":
		fmt.Fprintf(w, `{"type":"ADDED","object":%s}`+"\n", deploymentJSON("c", "11"))
		fmt.Fprint(w, `{"type":"BOOKMARK","object":{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"resourceVersion":"12"}}}`+"\n")
		fmt.Fprint(w, `{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old resource version: 12 (25)","reason":"Expired","code":410}}`+"\n")
		f.Flush()
	case "30":
		f.Flush()
		<-r.Context().Done()
	default:
		http.Error(w, "unexpected watch", http.StatusBadRequest)
	}
}

func (s *recordingServer) recorded() []url.Values {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]url.Values(nil), s.queries...)
}

// waitFor checks cond every 10ms until it holds, or fails the test after d.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			t.Fatalf("timed out after %v waiting for %s", d, what)
		case <-tick.C:
		}
	}
}

func TestClientSourceAgainstRecordingServer(t *testing.T) {
	srv := httptest.NewServer(&recordingServer{})
	defer srv.Close()
	rs := srv.Config.Handler.(*recordingServer)
	client, err := k8sapi.New(&k8sapi.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordingHandler{}
	inf := New(Config[k8sapi.Deployment]{DisableStreamingList: true,
		Source:        ClientSource[k8sapi.Deployment](client, k8sapi.Deployments),
		Namespace:     "ns",
		LabelSelector: "app=widget",
		FieldSelector: "metadata.name!=z",
		ShardSelector: "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')",
		Handler: Handler[k8sapi.Deployment]{
			OnAdd: func(d *k8sapi.Deployment) { rec.add("add " + d.Name + "@" + d.ResourceVersion) },
			OnUpdate: func(o, d *k8sapi.Deployment) {
				rec.add("update " + d.Name + "@" + o.ResourceVersion + "->" + d.ResourceVersion)
			},
			OnDelete: func(d *k8sapi.Deployment) { rec.add("delete " + d.Name + "@" + d.ResourceVersion) },
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- inf.Run(ctx) }()
	defer func() { cancel(); <-done }()

	waitFor(t, "the second watch", 10*time.Second, func() bool { return len(rs.recorded()) >= 4 })
	waitFor(t, "the relist's changes", 10*time.Second, func() bool { return inf.Stats().Relists == 1 })
	if got, want := rec.take(), "add a@5; add b@6; add c@11; update a@5->20; delete b@6"; got != want {
		t.Errorf("handler calls:\n got %s\nwant %s", got, want)
	}

	q := rs.recorded()
	check := func(i int, key, want string) {
		t.Helper()
		if got := q[i].Get(key); got != want {
			t.Errorf("request %d: %s = %q, want %q (query %v)", i, key, got, want, q[i])
		}
	}
	for i := range q {
		check(i, "labelSelector", "app=widget")
		check(i, "fieldSelector", "metadata.name!=z")
		check(i, "shardSelector", "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')")
	}
	check(0, "resourceVersion", "0")
	check(0, "limit", "500")
	check(0, "watch", "")
	check(1, "resourceVersion", "10")
	check(1, "allowWatchBookmarks", "true")
	check(2, "resourceVersion", "")
	check(2, "watch", "")
	check(3, "resourceVersion", "30")
	for _, i := range []int{1, 3} {
		n, _ := strconv.Atoi(q[i].Get("timeoutSeconds"))
		if n < 300 || n >= 600 {
			t.Errorf("request %d: timeoutSeconds = %d, want in [300, 600)", i, n)
		}
	}
	if d, ok := inf.Store().Get("ns", "a"); !ok || d.ResourceVersion != "20" || len(d.Spec.Template.Spec.Containers) != 1 {
		t.Errorf("store has a = %+v", d)
	}
}
