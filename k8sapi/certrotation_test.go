package k8sapi

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

// certServer is an httptest HTTP/2 TLS server that accepts only the
// client certificate whose common name is allowed, answers a Deployment
// GET with the presented certificate's common name as the object's name,
// and holds a watch open until the test ends.
type certServer struct {
	*httptest.Server
	mu      sync.Mutex
	allowed string
	conns   atomic.Int64 // TLS connections accepted
	refused atomic.Int64 // 401 answers
	watches atomic.Int64 // watches open
	done    chan struct{}
}

func newCertServer(t *testing.T, allowed string) *certServer {
	s := &certServer{allowed: allowed, done: make(chan struct{})}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.EnableHTTP2 = true
	s.TLS = &tls.Config{ClientAuth: tls.RequireAnyClientCert}
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.StartTLS()
	t.Cleanup(func() {
		close(s.done)
		s.Close()
	})
	return s
}

func (s *certServer) allow(cn string) {
	s.mu.Lock()
	s.allowed = cn
	s.mu.Unlock()
}

func (s *certServer) serve(w http.ResponseWriter, r *http.Request) {
	cn := r.TLS.PeerCertificates[0].Subject.CommonName
	s.mu.Lock()
	ok := cn == s.allowed
	s.mu.Unlock()
	if !ok {
		s.refused.Add(1)
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Unauthorized","code":401}`)
		return
	}
	if r.URL.Query().Get("watch") == "1" {
		s.watches.Add(1)
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-s.done:
		}
		return
	}
	fmt.Fprintf(w, `{"metadata":{"name":%q}}`, cn)
}

// presented returns the common name of the certificate the client
// presented, as the server saw it.
func presented(t *testing.T, c *Client) string {
	t.Helper()
	d, err := For[Deployment](c, Deployments).Get(context.Background(), "ns", "x", GetOptions{})
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	return d.Name
}

// TestExecCertificateRotationReachesOpenConnections: an exec plugin's
// new certificate is presented even while a watch keeps the HTTP/2
// connection that presented the old one busy. The first request the
// server refuses makes the plugin run once; its retry goes over a new
// connection with the new certificate.
func TestExecCertificateRotationReachesOpenConnections(t *testing.T) {
	dir := t.TempDir()
	pairs := map[string][2][]byte{}
	for _, cn := range []string{"old", "new"} {
		c, k := selfSignedPair(t, cn)
		pairs[cn] = [2][]byte{c, k}
	}
	install := func(cn string) {
		writeFiles(t, dir, map[string]string{"c.pem": string(pairs[cn][0]), "k.pem": string(pairs[cn][1])})
	}
	install("old")
	srv := newCertServer(t, "old")
	count := filepath.Join(dir, "count")
	c, err := New(&Config{Host: srv.URL, CAData: certPEMOf(srv.Server), Exec: helperExec(execV1, "cert",
		"HELPER_CERT="+filepath.Join(dir, "c.pem"), "HELPER_KEY="+filepath.Join(dir, "k.pem"), "HELPER_COUNT="+count)})
	if err != nil {
		t.Fatal(err)
	}
	if cn := presented(t, c); cn != "old" {
		t.Fatalf("presented %q, want old", cn)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := For[Deployment](c, Deployments).Watch(ctx, "ns", ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	// The plugin's certificate rotates; the server accepts only the new one.
	install("new")
	srv.allow("new")
	for i := range 3 {
		if cn := presented(t, c); cn != "new" {
			t.Fatalf("request %d presented %q, want new", i, cn)
		}
	}
	if n := srv.refused.Load(); n != 1 {
		t.Errorf("server refused %d requests, want 1", n)
	}
	if n := runCount(t, count); n != 2 {
		t.Errorf("plugin ran %d times, want 2", n)
	}
	if n := srv.conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2: one per certificate", n)
	}
	// The watch goes on, on the connection it began on; a new watch
	// presents the new certificate.
	w2, err := For[Deployment](c, Deployments).Watch(ctx, "ns", ListOptions{})
	if err != nil {
		t.Fatalf("watch after rotation: %v", err)
	}
	w2.Close()
	if n := srv.watches.Load(); n != 2 {
		t.Errorf("%d watches reached the handler, want 2", n)
	}
}

// TestCertFilesReloaded: client certificate files are re-read at most
// once a minute and after a 401, a failed read keeps the last good pair,
// and a new pair is presented on a new connection.
func TestCertFilesReloaded(t *testing.T) {
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	install := func(cn string) {
		c, k := selfSignedPair(t, cn)
		writeFiles(t, dir, map[string]string{"c.pem": string(c), "k.pem": string(k)})
	}
	install("a")
	srv := newCertServer(t, "a")
	c, err := New(&Config{Host: srv.URL, CAData: certPEMOf(srv.Server), CertFile: certPath, KeyFile: keyPath})
	if err != nil {
		t.Fatal(err)
	}
	clock := newCredClock()
	files := &c.transport.(*certTransport).certs.(*certFiles).cert
	files.mu.Lock()
	files.now, files.readAt = clock.now, clock.now()
	files.mu.Unlock()

	if cn := presented(t, c); cn != "a" {
		t.Fatalf("presented %q, want a", cn)
	}
	// New files are not read within the minute.
	install("b")
	srv.allow("")
	clock.advance(59e9)
	if _, err := For[Deployment](c, Deployments).Get(context.Background(), "ns", "x", GetOptions{}); !IsUnauthorized(err) {
		t.Fatalf("within the minute: %v, want 401", err)
	}
	// After the minute they are.
	srv.allow("b")
	clock.advance(1e9)
	if cn := presented(t, c); cn != "b" {
		t.Fatalf("after a minute presented %q, want b", cn)
	}
	// A bad read keeps the last good pair.
	if err := os.WriteFile(keyPath, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	clock.advance(2 * fileMaxAge)
	if cn := presented(t, c); cn != "b" {
		t.Fatalf("after a bad read presented %q, want b", cn)
	}
	// A 401 makes the files be read again at once.
	install("c")
	srv.allow("c")
	refused := srv.refused.Load()
	if cn := presented(t, c); cn != "c" {
		t.Fatalf("after a 401 presented %q, want c", cn)
	}
	if n := srv.refused.Load() - refused; n != 1 {
		t.Errorf("%d requests refused on the way to c, want 1", n)
	}
	if n := srv.conns.Load(); n != 3 {
		t.Errorf("%d connections, want 3: one per pair", n)
	}
}

func TestCertFilesErrors(t *testing.T) {
	dir := t.TempDir()
	certPEM, keyPEM := selfSignedPair(t, "x")
	writeFiles(t, dir, map[string]string{"c.pem": string(certPEM), "k.pem": string(keyPEM)})
	big := filepath.Join(dir, "big.pem")
	if err := os.WriteFile(big, make([]byte, maxPEMFileSize+1), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []*Config{
		{Host: "https://h", CertFile: filepath.Join(dir, "c.pem")},
		{Host: "https://h", KeyFile: filepath.Join(dir, "k.pem")},
		{Host: "https://h", CertFile: filepath.Join(dir, "missing.pem"), KeyFile: filepath.Join(dir, "k.pem")},
		{Host: "https://h", CertFile: big, KeyFile: filepath.Join(dir, "k.pem")},
		{Host: "https://h", CertFile: filepath.Join(dir, "k.pem"), KeyFile: filepath.Join(dir, "c.pem")},
	} {
		_, err := New(cfg)
		if err == nil {
			t.Errorf("%+v: no error", cfg)
			continue
		}
		t.Log(err)
	}
	// Over plain http:// the files are not read: no certificate is sent.
	if _, err := New(&Config{Host: "http://h", CertFile: filepath.Join(dir, "missing.pem"), KeyFile: filepath.Join(dir, "k.pem")}); err != nil {
		t.Errorf("http:// with missing files: %v", err)
	}
	cfg := &Config{Host: "https://h", CertFile: filepath.Join(dir, "c.pem"), KeyFile: filepath.Join(dir, "k.pem")}
	if _, err := New(cfg); err != nil {
		t.Fatal(err)
	}
	if m := cfg.AuthMethod(); m != "client-certificate" {
		t.Errorf("AuthMethod %q", m)
	}
}

func TestLoadKubeconfigCertFiles(t *testing.T) {
	certPEM, keyPEM := selfSignedPair(t, "client")
	dir := writeFiles(t, t.TempDir(), map[string]string{
		"kube/config": "clusters:\n- name: c\n  cluster: {server: https://h}\nusers:\n- name: u\n  user: {client-certificate: certs/c.crt, client-key: certs/c.key}\n" +
			"contexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n",
		"kube/certs/c.crt": string(certPEM),
		"kube/certs/c.key": string(keyPEM),
	})
	cfg, err := LoadKubeconfig([]string{filepath.Join(dir, "kube/config")}, "")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.CertFile != filepath.Join(dir, "kube/certs/c.crt") || cfg.KeyFile != filepath.Join(dir, "kube/certs/c.key") {
		t.Errorf("CertFile %q, KeyFile %q", cfg.CertFile, cfg.KeyFile)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.transport.(*certTransport); !ok {
		t.Errorf("transport %T, want *certTransport", c.transport)
	}
	// The files are read by New alone: without them the kubeconfig still
	// loads, and New names the missing file.
	if err := os.Remove(filepath.Join(dir, "kube/certs/c.crt")); err != nil {
		t.Fatal(err)
	}
	if cfg, err = LoadKubeconfig([]string{filepath.Join(dir, "kube/config")}, ""); err != nil {
		t.Fatalf("the kubeconfig read its certificate files: %v", err)
	}
	want := "k8sapi: TLS: client certificate: certificate file " + filepath.Join(dir, "kube/certs/c.crt") + ": no such file or directory"
	if _, err := New(cfg); err == nil || err.Error() != want {
		t.Errorf("New: %v, want %s", err, want)
	}
}
