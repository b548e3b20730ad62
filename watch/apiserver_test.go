package watch

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/k8sapi/namespaced"
	"github.com/zerodep-k8s/widget-operator/testenv/controlplane"
)

// These tests run the informer against a real kube-apiserver and etcd
// from testenv/controlplane. They watch ConfigMaps, which no controller
// touches, so every event is one the test caused.

var plane = controlplane.Shared{Options: controlplane.Options{Bare: true}}

func TestMain(m *testing.M) { os.Exit(plane.Run(m)) }

// configMap is core/v1 ConfigMap, reduced.
type configMap struct {
	k8sapi.TypeMeta
	k8sapi.ObjectMeta `json:"metadata"`
	Data              map[string]string `json:"data,omitempty"`
}

// planeClient returns a client for p, through host if it is not empty,
// with transport rt if it is not nil, and HTTP/2 pings after ping (zero:
// the client's default).
func planeClient(t *testing.T, p *controlplane.Plane, host string, rt http.RoundTripper, ping time.Duration) *k8sapi.Client {
	t.Helper()
	if host == "" {
		host = p.Host()
	}
	cert, key := p.AdminCertificate()
	c, err := k8sapi.New(&k8sapi.Config{Host: host, CAData: p.CAData(), CertData: cert, KeyData: key,
		Transport: rt, PingTimeout: ping})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// http1Transport is a transport for p that uses HTTP/1.1 and a connection
// per request, so that a frozen connection is never reused.
func http1Transport(t *testing.T, p *controlplane.Plane) *http.Transport {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(p.CAData()) {
		t.Fatal("bad CA")
	}
	certPEM, keyPEM := p.AdminCertificate()
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, ServerName: "127.0.0.1"},
		DisableKeepAlives: true,
	}
}

// informerRun runs inf until the test ends.
func informerRun[T any](t *testing.T, inf *Informer[T]) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- inf.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// countingSource is a Source that counts the lists and watches it passes
// on.
type countingSource[T any] struct {
	Source[T]
	lists, watches atomic.Int64
}

func (s *countingSource[T]) List(ctx context.Context, namespace string, opts k8sapi.ListOptions) (*k8sapi.List[T], error) {
	s.lists.Add(1)
	return s.Source.List(ctx, namespace, opts)
}

func (s *countingSource[T]) Watch(ctx context.Context, namespace string, opts k8sapi.ListOptions) (Stream[T], error) {
	s.watches.Add(1)
	return s.Source.Watch(ctx, namespace, opts)
}

// eventLog records handler calls, by object name, and counts deletes.
type eventLog struct {
	mu      sync.Mutex
	calls   []string
	deletes map[string]int
}

func (l *eventLog) handler() Handler[configMap] {
	return Handler[configMap]{
		OnAdd:    func(o *configMap) { l.add("add " + o.Name) },
		OnUpdate: func(_, o *configMap) { l.add("update " + o.Name) },
		OnDelete: func(o *configMap) {
			l.mu.Lock()
			if l.deletes == nil {
				l.deletes = map[string]int{}
			}
			l.deletes[o.Name]++
			l.mu.Unlock()
			l.add("delete " + o.Name)
		},
	}
}

func (l *eventLog) add(s string) {
	l.mu.Lock()
	l.calls = append(l.calls, s)
	l.mu.Unlock()
}

func (l *eventLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.calls
	l.calls = nil
	return out
}

func (l *eventLog) deleteCounts() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for k, v := range l.deletes {
		out[k] = v
	}
	return out
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func createCM(t *testing.T, cms k8sapi.Typed[configMap], ns, name, value string) *configMap {
	t.Helper()
	out, err := cms.Create(ctxFor(t, 30*time.Second), ns, &configMap{
		ObjectMeta: k8sapi.ObjectMeta{Name: name}, Data: map[string]string{"v": value}}, k8sapi.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func updateCM(t *testing.T, cms k8sapi.Typed[configMap], ns string, cm *configMap, value string) *configMap {
	t.Helper()
	next := *cm
	next.Data = map[string]string{"v": value}
	out, err := cms.Update(ctxFor(t, 30*time.Second), ns, cm.Name, &next, k8sapi.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func deleteCM(t *testing.T, cms k8sapi.Typed[configMap], ns, name string) {
	t.Helper()
	if err := cms.Delete(ctxFor(t, 30*time.Second), ns, name, k8sapi.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// sameAsFreshList reports whether the store holds exactly what a fresh,
// consistent list returns, by key and resourceVersion.
func sameAsFreshList(t *testing.T, cms k8sapi.Typed[configMap], ns string, s *Store[configMap]) (bool, string) {
	t.Helper()
	list, err := namespaced.In(cms, ns).ListAll(ctxFor(t, 30*time.Second), k8sapi.ListOptions{})
	if err != nil {
		return false, err.Error()
	}
	want := map[string]string{}
	for _, cm := range list.Items {
		want[k8sapi.Key(cm.Namespace, cm.Name)] = cm.ResourceVersion
	}
	got := map[string]string{}
	for _, cm := range s.List() {
		got[k8sapi.Key(cm.Namespace, cm.Name)] = cm.ResourceVersion
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		return false, fmt.Sprintf("store %v\nlist  %v", got, want)
	}
	return true, ""
}

func TestAPIServerEventsInOrder(t *testing.T) {
	for _, streaming := range []bool{false, true} {
		t.Run(fmt.Sprintf("streaming=%v", streaming), func(t *testing.T) {
			p := plane.Get(t)
			ns := p.TestNamespace(t)
			client := planeClient(t, p, "", nil, 0)
			cms := k8sapi.For[configMap](client, k8sapi.ConfigMaps)
			pre := createCM(t, cms, ns, "pre", "0")

			var log eventLog
			src := &countingSource[configMap]{Source: ClientSource[configMap](client, k8sapi.ConfigMaps)}
			inf := New(Config[configMap]{
				Source:               src,
				Namespace:            ns,
				Handler:              log.handler(),
				DisableStreamingList: !streaming,
			})
			informerRun(t, inf)
			waitFor(t, "sync", 30*time.Second, inf.HasSynced)
			if n := src.lists.Load(); streaming && n != 0 {
				t.Errorf("streaming list fell back to a list: %d list requests", n)
			}

			a := createCM(t, cms, ns, "a", "1")
			a = updateCM(t, cms, ns, a, "2")
			updateCM(t, cms, ns, a, "3")
			deleteCM(t, cms, ns, "a")
			createCM(t, cms, ns, "b", "1")
			deleteCM(t, cms, ns, pre.Name)

			want := []string{"add pre", "add a", "update a", "update a", "delete a", "add b", "delete pre"}
			var got []string
			waitFor(t, "all events", 30*time.Second, func() bool {
				got = append(got, log.take()...)
				return len(got) >= len(want)
			})
			if strings.Join(got, "; ") != strings.Join(want, "; ") {
				t.Fatalf("handler calls:\n got %q\nwant %q", got, want)
			}
			if ok, diff := sameAsFreshList(t, cms, ns, inf.Store()); !ok {
				t.Fatal(diff)
			}
			if cm, ok := inf.Store().Get(ns, "b"); !ok || cm.Data["v"] != "1" {
				t.Errorf("store b = %+v", cm)
			}
		})
	}
}

// tcpProxy is a loopback TCP proxy in front of the apiserver that a test
// can cut (close every connection and refuse new ones) or freeze (stop
// forwarding bytes on every open connection, silently, while new
// connections work).
type tcpProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	conns map[*proxyConn]struct{}
	down  bool
	quit  chan struct{}
}

type proxyConn struct {
	a, b   net.Conn
	frozen atomic.Bool
}

func newTCPProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	px := &tcpProxy{ln: ln, target: target, conns: map[*proxyConn]struct{}{}, quit: make(chan struct{})}
	go px.serve()
	t.Cleanup(px.close)
	return px
}

// URL returns the proxy's https URL.
func (px *tcpProxy) URL() string { return "https://" + px.ln.Addr().String() }

func (px *tcpProxy) serve() {
	for {
		c, err := px.ln.Accept()
		if err != nil {
			return
		}
		px.mu.Lock()
		down := px.down
		px.mu.Unlock()
		if down {
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", px.target)
		if err != nil {
			c.Close()
			continue
		}
		pc := &proxyConn{a: c, b: up}
		px.mu.Lock()
		px.conns[pc] = struct{}{}
		px.mu.Unlock()
		go px.pipe(pc, c, up)
		go px.pipe(pc, up, c)
	}
}

// pipe copies from src to dst until either fails or pc is frozen; a frozen
// pipe holds both ends open and forwards nothing until the proxy closes.
func (px *tcpProxy) pipe(pc *proxyConn, src, dst net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if pc.frozen.Load() {
			<-px.quit
			return
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				err = werr
			}
		}
		if err != nil {
			px.drop(pc)
			return
		}
	}
}

func (px *tcpProxy) drop(pc *proxyConn) {
	pc.a.Close()
	pc.b.Close()
	px.mu.Lock()
	delete(px.conns, pc)
	px.mu.Unlock()
}

// freeze stops forwarding on every open connection.
func (px *tcpProxy) freeze() int {
	px.mu.Lock()
	defer px.mu.Unlock()
	for pc := range px.conns {
		pc.frozen.Store(true)
	}
	return len(px.conns)
}

// cut closes every open connection and refuses new ones until restore.
func (px *tcpProxy) cut() {
	px.mu.Lock()
	px.down = true
	conns := make([]*proxyConn, 0, len(px.conns))
	for pc := range px.conns {
		conns = append(conns, pc)
	}
	px.mu.Unlock()
	for _, pc := range conns {
		px.drop(pc)
	}
}

func (px *tcpProxy) restore() {
	px.mu.Lock()
	px.down = false
	px.mu.Unlock()
}

func (px *tcpProxy) close() {
	px.ln.Close()
	close(px.quit)
	px.cut()
}

func TestAPIServerSilentConnectionRestarts(t *testing.T) {
	p := plane.Get(t)
	u, err := url.Parse(p.Host())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name         string
		http1        bool          // HTTP/1.1, a connection per request, no pings
		ping         time.Duration // HTTP/2 ping timeout
		watchTimeout time.Duration
	}{
		// Only the informer's silence timer can notice: each watch asks
		// for 2s to 4s and may stay silent 200ms longer.
		{name: "informer silence timer over HTTP/1.1", http1: true, watchTimeout: 2 * time.Second},
		// Watches ask for 5 to 10 minutes: only the client's HTTP/2
		// pings can notice within the test's deadline.
		{name: "client pings over HTTP/2", ping: 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := p.TestNamespace(t)
			px := newTCPProxy(t, u.Host)
			direct := k8sapi.For[configMap](planeClient(t, p, "", nil, 0), k8sapi.ConfigMaps)
			var rt http.RoundTripper
			if tt.http1 {
				rt = http1Transport(t, p)
			}
			proxied := planeClient(t, p, px.URL(), rt, tt.ping)

			var log eventLog
			inf := New(Config[configMap]{DisableStreamingList: true,
				Source:       ClientSource[configMap](proxied, k8sapi.ConfigMaps),
				Namespace:    ns,
				Handler:      log.handler(),
				WatchTimeout: tt.watchTimeout,
			})
			informerRun(t, inf)
			waitFor(t, "sync", 30*time.Second, inf.HasSynced)
			// An event through the watch: it is open and streaming.
			createCM(t, direct, ns, "before-freeze", "1")
			waitFor(t, "the event before the freeze", 30*time.Second, func() bool {
				_, ok := inf.Store().Get(ns, "before-freeze")
				return ok
			})

			if n := px.freeze(); n == 0 {
				t.Fatal("no connection to freeze")
			}
			frozenAt := time.Now()
			createCM(t, direct, ns, "after-freeze", "1")
			// The frozen watch neither delivers the event nor ends.
			waitFor(t, "the event after the freeze", 30*time.Second, func() bool {
				_, ok := inf.Store().Get(ns, "after-freeze")
				return ok
			})
			if inf.Stats().Reconnects == 0 {
				t.Error("no reconnect counted")
			}
			t.Logf("silent watch replaced after %v; stats %+v", time.Since(frozenAt).Round(100*time.Millisecond), inf.Stats())
			if ok, diff := sameAsFreshList(t, direct, ns, inf.Store()); !ok {
				t.Fatal(diff)
			}
		})
	}
}

func TestAPIServerCompactionRelists(t *testing.T) {
	// A plane of its own, with the watch cache off, so that a watch from
	// an old resourceVersion goes to etcd and meets the compaction.
	p := controlplane.StartForTest(t, controlplane.Options{Bare: true, APIServerArgs: []string{"--watch-cache=false"}})
	ctx := ctxFor(t, time.Minute)
	const ns = "compaction"
	if err := p.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(p.Host())
	if err != nil {
		t.Fatal(err)
	}
	px := newTCPProxy(t, u.Host)
	direct := k8sapi.For[configMap](planeClient(t, p, "", nil, 0), k8sapi.ConfigMaps)
	cms := map[string]*configMap{}
	for _, name := range []string{"keep", "change", "drop"} {
		cms[name] = createCM(t, direct, ns, name, "1")
	}

	var log eventLog
	src := &countingSource[configMap]{Source: ClientSource[configMap](planeClient(t, p, px.URL(), nil, 0), k8sapi.ConfigMaps)}
	inf := New(Config[configMap]{DisableStreamingList: true,
		Source:    src,
		Namespace: ns,
		Handler:   log.handler(),
	})
	informerRun(t, inf)
	waitFor(t, "sync", 30*time.Second, inf.HasSynced)
	waitFor(t, "a watch", 30*time.Second, func() bool { return src.watches.Load() > 0 })
	if got := strings.Join(log.take(), "; "); !sameSet(got, "add change; add drop; add keep") {
		t.Fatalf("initial adds: %s", got)
	}

	// The informer is cut off while things change and etcd compacts.
	px.cut()
	updateCM(t, direct, ns, cms["change"], "2")
	deleteCM(t, direct, ns, "drop")
	createCM(t, direct, ns, "new", "1")
	if _, err := p.CompactEtcd(ctx); err != nil {
		t.Fatal(err)
	}
	px.restore()

	waitFor(t, "the relist", time.Minute, func() bool { return inf.Stats().Relists >= 1 })
	if got, want := log.take(), "update change; add new; delete drop"; !sameSet(strings.Join(got, "; "), want) {
		t.Fatalf("after compaction:\n got %q\nwant %s", got, want)
	}
	if d := log.deleteCounts(); d["drop"] != 1 || len(d) != 1 {
		t.Errorf("deletes = %v, want drop once", d)
	}
	if ok, diff := sameAsFreshList(t, direct, ns, inf.Store()); !ok {
		t.Fatal(diff)
	}
}

// sameSet reports whether two "; "-joined lists hold the same entries.
func sameSet(a, b string) bool {
	count := map[string]int{}
	for _, s := range strings.Split(a, "; ") {
		count[s]++
	}
	for _, s := range strings.Split(b, "; ") {
		count[s]--
	}
	for _, n := range count {
		if n != 0 {
			return false
		}
	}
	return true
}

func TestAPIServerRestartMidWatch(t *testing.T) {
	p := controlplane.StartForTest(t, controlplane.Options{Bare: true})
	ctx := ctxFor(t, 2*time.Minute)
	const ns = "restart"
	if err := p.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	client := planeClient(t, p, "", nil, 0)
	cms := k8sapi.For[configMap](client, k8sapi.ConfigMaps)
	live := map[string]*configMap{}
	for i := range 5 {
		name := fmt.Sprintf("cm-%d", i)
		live[name] = createCM(t, cms, ns, name, "1")
	}

	var log eventLog
	inf := New(Config[configMap]{DisableStreamingList: true,
		Source:    ClientSource[configMap](client, k8sapi.ConfigMaps),
		Namespace: ns,
		Handler:   log.handler(),
	})
	informerRun(t, inf)
	waitFor(t, "sync", 30*time.Second, inf.HasSynced)
	updateCM(t, cms, ns, live["cm-0"], "2")
	deleteCM(t, cms, ns, "cm-1")
	waitFor(t, "events before the crash", 30*time.Second, func() bool { return log.deleteCounts()["cm-1"] == 1 })

	p.KillAPIServer()
	if err := p.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	// Changes right after the restart, while the informer reconnects.
	live["cm-2"] = updateCM(t, cms, ns, live["cm-2"], "3")
	deleteCM(t, cms, ns, "cm-3")
	createCM(t, cms, ns, "cm-new", "1")

	var diff string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last difference:\n%s", diff)
		}
	})
	waitFor(t, "the cache to match a fresh list", time.Minute, func() bool {
		var ok bool
		ok, diff = sameAsFreshList(t, cms, ns, inf.Store())
		return ok
	})
	if d := log.deleteCounts(); d["cm-1"] != 1 || d["cm-3"] != 1 || len(d) != 2 {
		t.Errorf("deletes = %v, want cm-1 and cm-3 once each", d)
	}
	if got, ok := inf.Store().Get(ns, "cm-2"); !ok || got.Data["v"] != "3" {
		t.Errorf("cm-2 = %+v, want the update made after the restart", got)
	}
	st := inf.Stats()
	if st.Reconnects == 0 && st.Relists == 0 {
		t.Errorf("neither a reconnect nor a relist after a crash: %+v", st)
	}
	t.Logf("stats after the restart: %+v", st)
}
