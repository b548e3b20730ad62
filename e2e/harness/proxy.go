package harness

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/testenv/controlplane"
)

// ProxyMode is what a [TCPProxy] does with the bytes it receives.
type ProxyMode int

const (
	// Forward copies bytes both ways.
	Forward ProxyMode = iota
	// Silent accepts connections and reads from them, but forwards
	// nothing either way, like a network that drops every packet while
	// the peers' sockets stay open.
	Silent
)

// TCPProxy is a loopback TCP proxy in front of one address, for cutting
// and silencing the operator's connections to the API server. Its methods
// are safe for concurrent use. Start one with [StartTCPProxy].
type TCPProxy struct {
	ln     net.Listener
	target string

	mu       sync.Mutex
	mode     ProxyMode
	conns    map[net.Conn]bool // both ends of every open pair
	accepted int
	resets   int
}

// StartTCPProxy listens on a free loopback port and forwards to target
// (host:port). It is closed when the test ends.
func StartTCPProxy(t testing.TB, target string) *TCPProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &TCPProxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Addr is the proxy's host:port.
func (p *TCPProxy) Addr() string { return p.ln.Addr().String() }

// Close stops accepting and closes every connection.
func (p *TCPProxy) Close() {
	p.ln.Close()
	p.ResetAll()
}

// Stats returns the connections accepted and reset so far.
func (p *TCPProxy) Stats() (accepted, resets int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted, p.resets
}

// SetMode switches the mode. Leaving Silent resets every connection, since
// the bytes dropped meanwhile leave their streams unusable.
func (p *TCPProxy) SetMode(m ProxyMode) {
	p.mu.Lock()
	old := p.mode
	p.mode = m
	p.mu.Unlock()
	if old == Silent && m != Silent {
		p.ResetAll()
	}
}

func (p *TCPProxy) silent() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode == Silent
}

// ResetAll closes every open connection with a TCP reset (SO_LINGER 0).
func (p *TCPProxy) ResetAll() {
	p.mu.Lock()
	conns := p.conns
	p.conns = map[net.Conn]bool{}
	p.resets += len(conns) / 2
	p.mu.Unlock()
	for c := range conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		c.Close()
	}
}

func (p *TCPProxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		if c != nil {
			p.conns[c] = true
		}
	}
	return true
}

func (p *TCPProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.accepted++
		p.mu.Unlock()
		go p.handle(c)
	}
}

func (p *TCPProxy) handle(c net.Conn) {
	if p.silent() {
		p.track(c)
		_, _ = io.Copy(io.Discard, c)
		c.Close()
		return
	}
	up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		c.Close()
		return
	}
	p.track(c, up)
	go p.pipe(up, c)
	p.pipe(c, up)
}

// pipe copies src to dst until either fails, dropping the bytes while the
// proxy is silent.
func (p *TCPProxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.silent() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// ProxyRequest is one request an [HTTPSProxy] received.
type ProxyRequest struct {
	Time   time.Time
	Method string
	URI    string // path and query
	Watch  bool   // a watch request (watch=true or watch=1)
	Status int    // the status answered; 0 if none was written
	// Injected is true when the proxy answered itself instead of the
	// API server.
	Injected bool
}

// Injector decides, for each request, whether an [HTTPSProxy] answers it
// itself: it returns a handler to do so, or nil to forward the request to
// the API server. It is called concurrently.
type Injector func(r *http.Request) http.Handler

// HTTPSProxy is a TLS-terminating reverse proxy between the operator and
// the API server, with a serving certificate from a CA of its own. It
// forwards the client's own Authorization header, so the API server's
// RBAC still applies, and it can answer requests itself (throttling,
// server errors, broken bodies). Its methods are safe for concurrent use.
type HTTPSProxy struct {
	// URL is the proxy's address, such as "https://127.0.0.1:40123".
	URL string
	// CAFile is the PEM file of the CA that signed the proxy's
	// certificate, for the client's kubeconfig.
	CAFile string

	srv *http.Server

	mu      sync.Mutex
	inject  Injector
	log     []ProxyRequest
	cancels map[int]context.CancelFunc // of the requests in flight, by index in log
}

// StartHTTPSProxy starts a proxy in front of p's API server. It is closed
// when the test ends.
func StartHTTPSProxy(t testing.TB, p *controlplane.Plane) *HTTPSProxy {
	t.Helper()
	dir := t.TempDir()
	caPEM, cert, err := proxyCertificates()
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "proxy-ca.crt")
	if err := os.WriteFile(caFile, caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	upstream, err := url.Parse(p.Host())
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(p.CAData())
	transport := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: roots},
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 50,
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(upstream)
			r.Out.Host = upstream.Host
		},
		Transport:     transport,
		FlushInterval: -1, // watches stream
		ErrorLog:      nil,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hp := &HTTPSProxy{URL: "https://" + ln.Addr().String(), CAFile: caFile}
	hp.srv = &http.Server{
		Handler:   http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hp.serve(w, r, rp) }),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}},
		ErrorLog:  nil,
	}
	go func() { _ = hp.srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() {
		hp.srv.Close()
		transport.CloseIdleConnections()
	})
	return hp
}

// SetInjector replaces the injector; nil forwards every request.
func (hp *HTTPSProxy) SetInjector(f Injector) {
	hp.mu.Lock()
	defer hp.mu.Unlock()
	hp.inject = f
}

// Requests returns the requests received so far, in arrival order.
func (hp *HTTPSProxy) Requests() []ProxyRequest {
	hp.mu.Lock()
	defer hp.mu.Unlock()
	return append([]ProxyRequest(nil), hp.log...)
}

// DropStreams ends every request in flight, such as open watches: the
// response ends early, as when the API server closes a watch.
func (hp *HTTPSProxy) DropStreams() {
	hp.mu.Lock()
	defer hp.mu.Unlock()
	for _, cancel := range hp.cancels {
		cancel()
	}
}

func (hp *HTTPSProxy) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	q := r.URL.Query()
	rec := ProxyRequest{Time: time.Now(), Method: r.Method, URI: r.URL.RequestURI(),
		Watch: q.Get("watch") == "true" || q.Get("watch") == "1"}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	r = r.WithContext(ctx)
	hp.mu.Lock()
	inject := hp.inject
	i := len(hp.log)
	hp.log = append(hp.log, rec)
	if hp.cancels == nil {
		hp.cancels = map[int]context.CancelFunc{}
	}
	hp.cancels[i] = cancel
	hp.mu.Unlock()
	sw := &statusWriter{ResponseWriter: w}
	var h http.Handler
	if inject != nil {
		h = inject(r)
	}
	if h != nil {
		h.ServeHTTP(sw, r)
	} else {
		next.ServeHTTP(sw, r)
	}
	hp.mu.Lock()
	delete(hp.cancels, i)
	hp.log[i].Status = sw.code
	hp.log[i].Injected = h != nil
	hp.mu.Unlock()
}

// statusWriter records the status code written.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// proxyCertificates makes a CA and a serving certificate for 127.0.0.1
// signed by it.
func proxyCertificates() (caPEM []byte, cert tls.Certificate, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, cert, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "widget-e2e-proxy-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, cert, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, cert, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, cert, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "widget-e2e-proxy"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, cert, err
	}
	cert = tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), cert, nil
}

// WriteOperatorKubeconfigVia is [WriteOperatorKubeconfig] with another
// server address and CA file: for an operator that talks to the API server
// through a proxy. An empty caFile keeps the plane's CA.
func WriteOperatorKubeconfigVia(t testing.TB, p *controlplane.Plane, dir, server, caFile string) string {
	t.Helper()
	path := WriteOperatorKubeconfig(t, p, dir)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	kc := strings.Replace(string(b), "server: "+p.Host(), "server: "+server, 1)
	if caFile != "" {
		kc = strings.Replace(kc, "certificate-authority: "+filepath.Join(dir, "serviceaccount", "ca.crt"),
			"certificate-authority: "+caFile, 1)
	}
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Metrics scrapes a Prometheus text endpoint at addr (host:port) and
// returns each sample by its full name with labels, as written.
func Metrics(addr string) (map[string]float64, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	return parseMetrics(resp.Body)
}

// parseMetrics reads a Prometheus text exposition into samples by their
// full name with labels, as written.
func parseMetrics(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out, sc.Err()
}

// Readyz returns the status code and body of GET /readyz at addr.
func Readyz(addr string) (int, string, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + "/readyz")
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(b), nil
}

// PeakRSS returns the peak resident set size (VmHWM) of process pid, in
// bytes.
func PeakRSS(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(rest)
			if len(f) != 2 || f[1] != "kB" {
				break
			}
			n, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return 0, err
			}
			return n << 10, nil
		}
	}
	return 0, errors.New("no VmHWM in /proc/" + strconv.Itoa(pid) + "/status")
}
