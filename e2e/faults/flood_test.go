package faults

import (
	"bufio"
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/e2e/harness"
	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// The flood: this many connections held open to each of the two ports.
const floodPerPort = 3000

// podMemoryLimit is the operator's memory limit in manifests/operator.yaml.
const podMemoryLimit = 128 << 20

// TestConnectionFlood holds 6,000 idle keep-alive connections to the
// operator's probe and (secure) metrics ports, reopening each one the
// server closes once a second, as an attacker on the pod network would.
// The operator's peak RSS must stay under its pod's memory limit, the
// connections it holds must stay bounded, and it must go on reconciling:
// a Widget created during the flood goes Ready. Beforehand, one idle
// keep-alive connection and one trickled body show the server's timeouts.
func TestConnectionFlood(t *testing.T) {
	raiseFileLimit(t, 2*floodPerPort+1000)
	p := env.Plane.Get(t)
	ns := p.TestNamespace(t)
	c := admin(t, p)
	// As the pod's downward API would say (manifests/operator.yaml).
	t.Setenv("CONTAINER_MEMORY_LIMIT", strconv.Itoa(podMemoryLimit))
	o := startOp(t, p, "--namespace", ns, "--metrics-secure=true")
	o.waitReadyz(t, http.StatusOK, 90*time.Second)
	if o.count("memory limit set", `"from":"CONTAINER_MEMORY_LIMIT"`) != 1 {
		t.Errorf("no soft memory limit from CONTAINER_MEMORY_LIMIT in the log")
	}
	pid := o.Cmd.Process.Pid
	before := rss(t, pid)

	// The server's timeouts, each on a connection of its own.
	var timeouts sync.WaitGroup
	var idleFor, trickleFor time.Duration
	timeouts.Go(func() { idleFor = idleKeepAlive(t, o.ProbeAddr) })
	timeouts.Go(func() { trickleFor = trickledBody(t, o.ProbeAddr) })
	timeouts.Wait()
	t.Logf("idle keep-alive connection closed after %v; trickled body after %v", idleFor.Round(100*time.Millisecond), trickleFor.Round(100*time.Millisecond))
	// The promises are the documented endpoint limits: 30s idle, 10s to
	// read a request. The margin is for a machine loaded by the flood
	// itself on top of control planes under -race; a limit left out, or
	// the idle one applied to reading, still fails.
	const (
		idlePromise = 30 * time.Second
		readPromise = 10 * time.Second
		floodMargin = 15 * time.Second
	)
	if idleFor > idlePromise+floodMargin {
		t.Errorf("the server held an idle connection %v; want it cut within %v (%v plus %v for a loaded machine)",
			idleFor, idlePromise+floodMargin, idlePromise, floodMargin)
	}
	if trickleFor > readPromise+floodMargin {
		t.Errorf("the server read a trickled body for %v; want it cut within %v (%v plus %v for a loaded machine)",
			trickleFor, readPromise+floodMargin, readPromise, floodMargin)
	}

	ctx, stop := context.WithCancel(context.Background())
	var flood sync.WaitGroup
	var dials, closed atomic.Int64
	// Reopens are paced by one shared tick a second: the flood's rate,
	// not a wait for anything.
	tick := newBroadcastTicker(ctx, time.Second)
	for i := range 2 * floodPerPort {
		secure := i%2 == 1
		addr := o.ProbeAddr
		if secure {
			addr = o.MetricsAddr
		}
		flood.Go(func() { holdConnection(ctx, addr, secure, tick, &dials, &closed) })
	}
	t.Cleanup(func() { stop(); flood.Wait() })
	floodStart := time.Now()
	var maxFDs int
	eventually(t, 2*time.Minute, func() (bool, string) {
		o.alive(t)
		maxFDs = max(maxFDs, openFiles(t, pid))
		return dials.Load() >= 2*floodPerPort, fmt.Sprintf("%d connections dialled", dials.Load())
	})
	t.Logf("%d connections open after %v; the operator holds %d files", dials.Load(), time.Since(floodStart).Round(time.Millisecond), maxFDs)

	// Reconciles go on.
	if _, err := widgets(c).Create(ctxFor(t, time.Minute), ns, harness.NewWidget("in-flood", image, 1), k8sapi.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	created := time.Now()
	eventually(t, 2*time.Minute, func() (bool, string) {
		o.alive(t)
		maxFDs = max(maxFDs, openFiles(t, pid))
		w, err := widgets(c).Get(ctxFor(t, 10*time.Second), ns, "in-flood", k8sapi.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return w.Status.Phase == "Ready", fmt.Sprintf("Widget in-flood: phase %q", w.Status.Phase)
	})
	readyAfter := time.Since(created)
	// Keep the flood up for one more idle timeout, so that every slot
	// has been freed and taken again at least once.
	eventually(t, 2*time.Minute, func() (bool, string) {
		maxFDs = max(maxFDs, openFiles(t, pid))
		return time.Since(floodStart) > 40*time.Second, "flooding"
	})
	o.alive(t)
	peak, err := harness.PeakRSS(pid)
	if err != nil {
		t.Fatal(err)
	}
	stop()
	flood.Wait()
	t.Logf("flood of %d connections (%d dials, %d closed by the operator at once or after a timeout) for %v: "+
		"RSS %.1f MiB before, peak %.1f MiB (limit %d MiB); at most %d open files; a Widget created during it Ready in %v",
		2*floodPerPort, dials.Load(), closed.Load(), time.Since(floodStart).Round(time.Second),
		mib(before), mib(peak), podMemoryLimit>>20, maxFDs, readyAfter.Round(100*time.Millisecond))
	if peak >= podMemoryLimit {
		t.Errorf("peak RSS %.1f MiB, over the pod's limit of %d MiB", mib(peak), podMemoryLimit>>20)
	}
	// Two endpoints of 100 connections each, and the operator's own.
	if maxFDs > 2*100+100 {
		t.Errorf("the operator held %d open files during the flood; want the connections capped", maxFDs)
	}
	// And the probe answers again once the flood is over.
	o.waitReadyz(t, http.StatusOK, time.Minute)
}

// holdConnection keeps one connection to addr open until ctx ends: it
// sends a request (over TLS when secure; without a token, so the answer
// is 401), reads the answer, and then idles until the server closes the
// connection, to open a new one at the next tick.
func holdConnection(ctx context.Context, addr string, secure bool, tick *broadcastTicker, dials, closed *atomic.Int64) {
	for ctx.Err() == nil {
		d := net.Dialer{Timeout: 10 * time.Second}
		raw, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			dials.Add(1)
			// Closes the TCP connection, and with it the TLS one over it.
			stop := context.AfterFunc(ctx, func() { raw.Close() })
			conn := raw
			if secure {
				tc := tls.Client(raw, &tls.Config{InsecureSkipVerify: true})
				tc.SetDeadline(time.Now().Add(10 * time.Second))
				if tc.Handshake() == nil {
					tc.SetDeadline(time.Time{})
					conn = tc
				}
			}
			fmt.Fprintf(conn, "GET /%s HTTP/1.1\r\nHost: operator\r\n\r\n", map[bool]string{true: "metrics", false: "healthz"}[secure])
			io.Copy(io.Discard, conn) // the answer, then nothing until the server closes it
			closed.Add(1)
			stop()
			conn.Close()
		}
		if !tick.wait(ctx) {
			return
		}
	}
}

// idleKeepAlive sends one request on a new connection, then idles, and
// returns how long the server kept the connection open after answering.
func idleKeepAlive(t *testing.T, addr string) time.Duration {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Error(err)
		return 0
	}
	defer conn.Close()
	fmt.Fprint(conn, "GET /healthz HTTP/1.1\r\nHost: operator\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Error(err)
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	answered := time.Now()
	conn.SetReadDeadline(answered.Add(2 * time.Minute))
	io.Copy(io.Discard, br)
	return time.Since(answered)
}

// trickledBody sends a request whose body comes one byte a second, and
// returns how long the server went on reading it.
func trickledBody(t *testing.T, addr string) time.Duration {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Error(err)
		return 0
	}
	defer conn.Close()
	start := time.Now()
	fmt.Fprint(conn, "POST /readyz HTTP/1.1\r\nHost: operator\r\nContent-Length: 100000\r\n\r\n")
	closed := make(chan struct{})
	go func() {
		conn.SetReadDeadline(start.Add(2 * time.Minute))
		io.Copy(io.Discard, conn)
		close(closed)
	}()
	tick := time.NewTicker(time.Second) // the trickle's pace
	defer tick.Stop()
	for {
		select {
		case <-closed:
			return time.Since(start)
		case <-tick.C:
			conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
			if _, err := conn.Write([]byte{'x'}); err != nil {
				<-closed
				return time.Since(start)
			}
		}
	}
}

// broadcastTicker wakes every waiter once per period.
type broadcastTicker struct {
	mu sync.Mutex
	ch chan struct{} // closed at the next tick
}

func newBroadcastTicker(ctx context.Context, period time.Duration) *broadcastTicker {
	b := &broadcastTicker{ch: make(chan struct{})}
	go func() {
		tk := time.NewTicker(period)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
				b.mu.Lock()
				close(b.ch)
				b.ch = make(chan struct{})
				b.mu.Unlock()
			}
		}
	}()
	return b
}

// wait waits for the next tick; false when ctx ended first.
func (b *broadcastTicker) wait(ctx context.Context) bool {
	b.mu.Lock()
	ch := b.ch
	b.mu.Unlock()
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
}

// raiseFileLimit raises this process's soft limit on open files to at
// least n, or skips the test when the hard limit is lower.
func raiseFileLimit(t *testing.T, n uint64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur >= n {
		return
	}
	if lim.Max < n {
		t.Skipf("the open-file limit is %d; the flood needs %d", lim.Max, n)
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
}

// openFiles counts the files process pid holds open.
func openFiles(t *testing.T, pid int) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// rss returns the resident set size (VmRSS) of process pid, in bytes.
func rss(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if n, err := strconv.ParseInt(f[0], 10, 64); err == nil && len(f) == 2 {
				return n << 10
			}
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// The kinds of connections TestEndpointsThroughHeldConnections holds.
const (
	idleAfterRequest = iota // one request, its answer, then idle
	silent                  // sends nothing
	slowHeaders             // request headers, a byte a second
	slowBody                // a request whose body comes a byte a second
	connKinds
)

// TestEndpointsThroughHeldConnections holds 100 connections to each of the
// probe and (secure) metrics ports, the operator's cap, as the audit did:
// idle ones after a request (a 401 on the metrics port), silent ones,
// and ones that send their headers or a body a byte a second, each opened
// again shortly after the operator closes it. Meanwhile a kubelet-style probe (a new connection,
// Connection: close, a 1 s timeout) every second and a scrape with a
// metrics reader's token every 5 s must all pass.
func TestEndpointsThroughHeldConnections(t *testing.T) {
	p := env.Plane.Get(t)
	ns := p.TestNamespace(t)
	token := env.MetricsReaderToken(t, p)
	o := startOp(t, p, "--namespace", ns, "--metrics-secure=true")
	o.addSecret(token)
	o.waitReadyz(t, http.StatusOK, 90*time.Second)

	ctx, stop := context.WithCancel(context.Background())
	var attackers sync.WaitGroup
	t.Cleanup(func() { stop(); attackers.Wait() })
	var probeHeld, metricsHeld, attacking atomic.Int64
	insecure := &tls.Config{InsecureSkipVerify: true}
	for i := range 100 {
		// Plain connections are cheap to open again; TLS ones a second
		// later, so that their handshakes do not take the machine.
		attackers.Go(func() { attack(ctx, o.ProbeAddr, nil, i%connKinds, 100*time.Millisecond, &probeHeld, &attacking) })
		attackers.Go(func() { attack(ctx, o.MetricsAddr, insecure, i%connKinds, time.Second, &metricsHeld, &attacking) })
	}
	// Every attacker has had a connection; how many are held at a time
	// depends on the machine's load (a slow-body one is answered and
	// closed at once, and waits its pace to open the next).
	eventually(t, time.Minute, func() (bool, string) {
		return attacking.Load() == 200, fmt.Sprintf("%d of 200 attackers connected", attacking.Load())
	})

	kubelet := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	const probes = 35
	var probeFailed, scrapes, scrapeFailed int
	var firstErr error
	tick := time.NewTicker(time.Second) // the probe's period
	defer tick.Stop()
	for i := range probes {
		<-tick.C
		o.alive(t)
		if err := probe(kubelet, o.ProbeAddr); err != nil {
			probeFailed++
			firstErr = cmp.Or(firstErr, err)
		}
		if i%5 == 0 {
			scrapes++
			code, _, err := harness.ScrapeTLS(o.MetricsAddr, token)
			if err == nil && code != http.StatusOK {
				err = fmt.Errorf("scrape: %d", code)
			}
			if err != nil {
				scrapeFailed++
				firstErr = cmp.Or(firstErr, err)
			}
		}
	}
	t.Logf("with about %d connections held to the probe port and %d to the metrics port: %d of %d probes and %d of %d scrapes failed",
		probeHeld.Load(), metricsHeld.Load(), probeFailed, probes, scrapeFailed, scrapes)
	if probeFailed+scrapeFailed > 0 {
		t.Errorf("%d probes and %d scrapes failed; the first: %v", probeFailed, scrapeFailed, firstErr)
	}
}

// probe sends GET /healthz to addr with client, and returns an error
// unless the answer is 200.
func probe(client *http.Client, addr string) error {
	resp, err := client.Get("http://" + addr + "/healthz")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("probe: %s", resp.Status)
	}
	return nil
}

// attack holds one connection of the given kind to addr, over TLS when
// tlsConfig is not nil, until ctx ends, opening another pace after the
// operator closes it; held counts the connections open, and began is
// added one at the first.
func attack(ctx context.Context, addr string, tlsConfig *tls.Config, kind int, pace time.Duration, held, began *atomic.Int64) {
	first := true
	for ctx.Err() == nil {
		d := net.Dialer{Timeout: 10 * time.Second}
		if raw, err := d.DialContext(ctx, "tcp", addr); err == nil {
			held.Add(1)
			if first {
				began.Add(1)
				first = false
			}
			stop := context.AfterFunc(ctx, func() { raw.Close() })
			holdKind(raw, tlsConfig, kind)
			stop()
			held.Add(-1)
		}
		select {
		case <-ctx.Done():
		case <-time.After(pace): // the attacker's pace
		}
	}
}

// holdKind uses raw as a connection of the given kind until it is closed.
func holdKind(raw net.Conn, tlsConfig *tls.Config, kind int) {
	defer raw.Close()
	c, path := raw, "/healthz"
	if tlsConfig != nil {
		path = "/metrics"
		if kind != silent {
			c = tls.Client(raw, tlsConfig)
		}
	}
	switch kind {
	case idleAfterRequest:
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: operator\r\n\r\n", path)
		io.Copy(io.Discard, c) // the answer, then nothing until closed
	case silent:
		io.Copy(io.Discard, c)
	case slowHeaders, slowBody:
		closed := make(chan struct{})
		go func() {
			io.Copy(io.Discard, c)
			close(closed)
		}()
		head := "GET " + path + " HTTP/1.1\r\nHost: operator\r\nX-Slow: " + strings.Repeat("a", 100)
		if kind == slowBody {
			fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: operator\r\nContent-Length: 100000\r\n\r\n", path)
			head = strings.Repeat("a", 100)
		}
		tick := time.NewTicker(time.Second) // the trickle's pace
		defer tick.Stop()
		for i := 0; i < len(head); i++ {
			c.Write([]byte{head[i]})
			select {
			case <-closed:
				return
			case <-tick.C:
			}
		}
	}
}
