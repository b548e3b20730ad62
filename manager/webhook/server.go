package webhook

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/manager/internal/certs"
	"github.com/zerodep-k8s/widget-operator/metrics"
	"github.com/zerodep-k8s/widget-operator/reconcile"
)

// The defaults of Config. The API server sends at most 3 MiB an object,
// and a conversion of a list sends many objects at once; it waits 10
// seconds for a webhook unless its configuration says otherwise (at most
// 30).
const (
	DefaultMaxBodyBytes = 32 << 20
	DefaultTimeout      = 10 * time.Second
	DefaultAddr         = ":9443"
)

// Config configures a [Server].
type Config struct {
	// Addr is the address to listen on. Empty means DefaultAddr.
	Addr string
	// CertDir holds tls.crt and tls.key (as a kubernetes.io/tls Secret
	// mounts them, or cert-manager writes them), read again every minute
	// so that a renewed pair is served without a restart. Empty means a
	// self-signed certificate made at New and again every day, for
	// localhost, the loopback addresses and Hosts.
	CertDir string
	// Hosts are the DNS names and IP addresses of the self-signed
	// certificate, besides localhost and the loopback addresses.
	Hosts []string
	// CABundleFile, with no CertDir, is written with the PEM of the
	// self-signed certificate, the caBundle a webhook configuration needs
	// to trust it, at New and again at each renewal (a configuration
	// given the old one stops trusting the server then). Empty means
	// none; see also [Server.CABundle].
	CABundleFile string
	// Admission maps a path, such as "/validate-things", to its
	// admission hook; Conversion a path to a conversion hook. A path is
	// in one of them at most.
	Admission  map[string]AdmitFunc
	Conversion map[string]ConvertFunc
	// Logger receives a line for each panic of a hook and each failure
	// of the server. Nil means no logging.
	Logger *slog.Logger
	// MaxBodyBytes bounds a review's size; a larger one gets 413. Zero
	// means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Timeout bounds the time a hook may take, and the request's own
	// timeout (the API server's ?timeout=) bounds it more; past it the
	// request gets 504 and the API server applies the webhook's
	// failurePolicy. Zero means DefaultTimeout.
	Timeout time.Duration
}

// Server serves admission and conversion reviews over HTTPS, TLS 1.2 or
// later, as the API server calls them: each review is decoded, answered
// by its hook within the time and size bounds, and measured. A hook's
// error is a refusal (admission) or a failed conversion, with its
// message; a panic in a hook is logged and answered with 500, and the
// server goes on. A review that is not one gets 400 with a Status, as the
// API server's own handlers answer, so that its message is the one the
// API server reports.
//
// A Server is a [manager.Runnable]: put it in the manager's
// Config.Runnables to run it with the controllers and have /readyz fail
// until it serves. It is also an http.Handler, without TLS, for tests.
// Its methods are safe for concurrent use.
type Server struct {
	cfg   Config
	mux   *http.ServeMux
	tls   *tls.Config
	stats *serverMetrics

	mu     sync.Mutex
	served []byte // the DER of the self-signed certificate last served; nil with a CertDir
	bundle []byte // its PEM
	addr   string // the address listened on while Run serves, "" otherwise
	ran    bool
}

// New returns a server for cfg, with its certificate loaded or made, or
// an error for a certificate that cannot be, or a path that does not
// start with '/', is in both maps or has a nil hook.
func New(cfg Config) (*Server, error) {
	cfg.Addr = cmp.Or(cfg.Addr, DefaultAddr)
	cfg.MaxBodyBytes = cmp.Or(cfg.MaxBodyBytes, DefaultMaxBodyBytes)
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultTimeout)
	cfg.Logger = cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	s := &Server{cfg: cfg, mux: http.NewServeMux(), stats: newServerMetrics()}
	for path, f := range cfg.Admission {
		if err := s.handle(path, f == nil, func(ctx context.Context, body []byte) (int, any) { return s.admit(ctx, f, body) }); err != nil {
			return nil, err
		}
	}
	for path, f := range cfg.Conversion {
		if err := s.handle(path, f == nil, func(ctx context.Context, body []byte) (int, any) { return s.convert(ctx, f, body) }); err != nil {
			return nil, err
		}
	}
	cert, err := certs.New(cfg.CertDir, cfg.Logger, "webhook", cfg.Hosts...)
	if err != nil {
		return nil, err
	}
	s.tls = cert.TLSConfig()
	get := s.tls.GetCertificate
	s.tls.GetCertificate = func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
		c, err := get(hello)
		if err == nil && cfg.CertDir == "" {
			s.selfSigned(c)
		}
		return c, err
	}
	if cfg.CertDir == "" {
		c, _ := get(nil)
		if err := s.selfSigned(c); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Register registers the server's metric families with r, such as the
// manager's Registry(), with the names controller-runtime gives them:
// controller_runtime_webhook_requests_total{webhook,code},
// controller_runtime_webhook_latency_seconds{webhook} and
// controller_runtime_webhook_requests_in_flight{webhook}, webhook being
// the path. It returns the registry's error, such as for a name taken.
func (s *Server) Register(r *metrics.Registry) error {
	for _, v := range []*metrics.Vec{s.stats.requests, s.stats.latency, s.stats.inFlight} {
		if err := r.Register(v); err != nil {
			return err
		}
	}
	return nil
}

// selfSigned records c as the certificate served and, when it is a new
// one, writes it to Config.CABundleFile.
func (s *Server) selfSigned(c *tls.Certificate) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if bytes.Equal(c.Certificate[0], s.served) {
		return nil
	}
	s.served, s.bundle = c.Certificate[0], pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]})
	if s.cfg.CABundleFile == "" {
		return nil
	}
	tmp := s.cfg.CABundleFile + ".tmp"
	err := os.WriteFile(tmp, s.bundle, 0o644)
	if err == nil {
		err = os.Rename(tmp, s.cfg.CABundleFile)
	}
	if err != nil {
		s.cfg.Logger.Error("webhook: writing the CA bundle failed", "file", s.cfg.CABundleFile, "err", err)
		return fmt.Errorf("webhook: CA bundle: %w", err)
	}
	return nil
}

// CABundle returns the PEM of the self-signed certificate served, the
// caBundle of a webhook configuration that calls the server; nil with a
// Config.CertDir, whose issuer's bundle is the one to give.
func (s *Server) CABundle() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bundle
}

// handle serves path with answer, which returns a status code and the
// value to answer as JSON; nilHook says the path's hook is nil.
func (s *Server) handle(path string, nilHook bool, answer func(ctx context.Context, body []byte) (int, any)) error {
	_, admission := s.cfg.Admission[path]
	_, conversion := s.cfg.Conversion[path]
	switch {
	case !strings.HasPrefix(path, "/") || strings.ContainsAny(path, " {}"):
		return fmt.Errorf("webhook: path %q: want one that starts with '/', without spaces or wildcards", path)
	case admission && conversion:
		return fmt.Errorf("webhook: path %q has two hooks", path)
	case nilHook:
		return fmt.Errorf("webhook: path %q has a nil hook", path)
	}
	s.mux.Handle(path, s.stats.instrument(path, func(w http.ResponseWriter, r *http.Request) int {
		return s.serve(w, r, answer)
	}))
	return nil
}

// ServeHTTP answers a review, without TLS: [Server.Run] serves it over
// HTTPS.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// serve reads a review, bounded in size, answers it within the time
// bound and writes the answer; it returns the status code written.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, answer func(context.Context, []byte) (int, any)) int {
	if r.Method != http.MethodPost {
		return writeStatus(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "webhook: a review is POSTed")
	}
	if ct, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";"); ct != "application/json" {
		return writeStatus(w, http.StatusUnsupportedMediaType, "UnsupportedMediaType", "webhook: a review is application/json, not "+strconv.Quote(ct))
	}
	var buf bytes.Buffer
	buf.Grow(int(min(max(r.ContentLength+1, 512), s.cfg.MaxBodyBytes+1))) // +1: to read the end without growing
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	body := buf.Bytes()
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return writeStatus(w, http.StatusRequestEntityTooLarge, "RequestEntityTooLarge", fmt.Sprintf("webhook: a review is at most %d bytes", s.cfg.MaxBodyBytes))
		}
		return writeStatus(w, http.StatusBadRequest, "BadRequest", "webhook: reading the review: "+err.Error())
	}
	timeout := s.cfg.Timeout
	if d, err := time.ParseDuration(r.URL.Query().Get("timeout")); err == nil && d > 0 {
		timeout = min(timeout, d)
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	type result struct {
		code int
		v    any
	}
	done := make(chan result, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				s.cfg.Logger.Error("webhook: hook panicked", "path", r.URL.Path, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				done <- result{http.StatusInternalServerError, status(http.StatusInternalServerError, "InternalError", "webhook: the hook failed")}
			}
		}()
		code, v := answer(ctx, body)
		done <- result{code, v}
	}()
	select {
	case res := <-done:
		return writeJSON(w, res.code, res.v)
	case <-ctx.Done():
		return writeStatus(w, http.StatusGatewayTimeout, "Timeout", fmt.Sprintf("webhook: the hook did not answer in %v", timeout))
	}
}

// admit answers an AdmissionReview with f.
func (s *Server) admit(ctx context.Context, f AdmitFunc, body []byte) (int, any) {
	req, err := decodeAdmission(body)
	if err != nil {
		return http.StatusBadRequest, status(http.StatusBadRequest, "BadRequest", err.Error())
	}
	resp := &admissionResponse{UID: req.UID, Allowed: true}
	patch, err := f(ctx, req)
	if err == nil && len(patch) > 0 {
		resp.PatchType = "JSONPatch"
		resp.Patch, err = json.Marshal(patch)
	}
	if err != nil {
		r, ok := errors.AsType[*Refusal](err)
		if !ok {
			r = &Refusal{Code: http.StatusForbidden, Reason: "Forbidden", Message: err.Error()}
		}
		resp = &admissionResponse{UID: req.UID, Status: status(int(cmp.Or(r.Code, http.StatusForbidden)), r.Reason, r.Message)}
	}
	return http.StatusOK, admissionReview{TypeMeta: k8sapi.TypeMeta{APIVersion: admissionVersion, Kind: "AdmissionReview"}, Response: resp}
}

// convert answers a ConversionReview with f, object by object. The
// answer is written around the objects converted, as they are: encoding
// them again would only copy them.
func (s *Server) convert(ctx context.Context, f ConvertFunc, body []byte) (int, any) {
	req, err := decodeConversion(body)
	if err != nil {
		return http.StatusBadRequest, status(http.StatusBadRequest, "BadRequest", err.Error())
	}
	uid, _ := json.Marshal(req.UID)
	b := fmt.Appendf(nil, `{"apiVersion":%q,"kind":"ConversionReview","response":{"uid":%s,"convertedObjects":[`, conversionVersion, uid)
	for i, obj := range req.Objects {
		out, err := f(ctx, obj, req.DesiredAPIVersion)
		if err == nil && (len(out) == 0 || out[0] != '{' || !json.Valid(out)) {
			err = errors.New("webhook: the conversion returned no JSON object")
		}
		if err != nil {
			return http.StatusOK, conversionReview{TypeMeta: k8sapi.TypeMeta{APIVersion: conversionVersion, Kind: "ConversionReview"},
				Response: &conversionResponse{UID: req.UID, ConvertedObjects: []json.RawMessage{}, Result: k8sapi.Status{Status: "Failure", Message: err.Error()}}}
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, out...)
	}
	return http.StatusOK, json.RawMessage(append(b, `],"result":{"status":"Success"}}}`...))
}

// status returns a Status of failure.
func status(code int, reason, message string) *k8sapi.Status {
	return &k8sapi.Status{TypeMeta: k8sapi.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: "Failure",
		Code: int32(code), Reason: reason, Message: message}
}

func writeStatus(w http.ResponseWriter, code int, reason, message string) int {
	return writeJSON(w, code, status(code, reason, message))
}

// writeJSON writes v as JSON, and a json.RawMessage as it is.
func writeJSON(w http.ResponseWriter, code int, v any) int {
	b, ok := v.(json.RawMessage)
	var err error
	if !ok {
		b, err = json.Marshal(v)
	}
	if err != nil { // an object a hook returned that is not JSON
		code, b = http.StatusInternalServerError, []byte(`{"apiVersion":"v1","kind":"Status","status":"Failure","reason":"InternalError","code":500,"message":"webhook: encoding the answer failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(b)
	return code
}

// Run serves the hooks over HTTPS on Config.Addr until ctx ends, then
// stops, waiting up to 5 seconds for the reviews in flight and cutting
// the connections still open after that. It returns an error when it
// cannot listen or serve, or when called twice, and nil once stopped.
func (s *Server) Run(ctx context.Context) error {
	s.mu.Lock()
	ran := s.ran
	s.ran = true
	s.mu.Unlock()
	if ran {
		return errors.New("webhook: Run called twice")
	}
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	srv := s.httpServer()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(tls.NewListener(ln, s.tls)) }()
	s.setAddr(ln.Addr().String())
	defer s.setAddr("")
	select {
	case err := <-served:
		return fmt.Errorf("webhook: %w", err)
	case <-ctx.Done():
	}
	stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(stop); err != nil {
		// A review still in flight, or a connection that has sent no
		// request yet (Shutdown waits 5 s for those): cut.
		s.cfg.Logger.Warn("webhook: connections still open at the stop were cut", "err", err)
		srv.Close()
	}
	return nil
}

func (s *Server) setAddr(addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addr = addr
}

// Addr returns the address the server listens on while it serves, such as
// "127.0.0.1:9443", and "" before and after.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Checks returns the server's readiness check, "webhook server": it fails
// until Run serves, and after.
func (s *Server) Checks(time.Time) []reconcile.Check {
	var err error
	if s.Addr() == "" {
		err = errors.New("webhook: the server is not serving")
	}
	return []reconcile.Check{{Name: "webhook server", Err: err}}
}

// serverMetrics are the server's families. Its methods are safe for
// concurrent use.
type serverMetrics struct {
	requests, latency, inFlight *metrics.Vec
}

func newServerMetrics() *serverMetrics {
	return &serverMetrics{
		requests: metrics.NewCounterVec("controller_runtime_webhook_requests_total",
			"Reviews answered, by webhook path and HTTP status code.", "webhook", "code"),
		latency: metrics.NewHistogramVec("controller_runtime_webhook_latency_seconds",
			"How long a review took to answer, by webhook path.", metrics.WorkqueueBuckets, "webhook"),
		inFlight: metrics.NewGaugeVec("controller_runtime_webhook_requests_in_flight",
			"Reviews being answered, by webhook path.", "webhook"),
	}
}

// instrument measures serve, which returns the status code written, as
// the reviews of path.
func (m *serverMetrics) instrument(path string, serve func(http.ResponseWriter, *http.Request) int) http.Handler {
	latency, inFlight := m.latency.WithLabelValues(path), m.inFlight.WithLabelValues(path)
	var codes sync.Map // status code -> *metrics.Series
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		inFlight.Inc()
		defer inFlight.Dec()
		code := serve(w, r)
		latency.ObserveDuration(time.Since(start))
		c, ok := codes.Load(code)
		if !ok {
			c, _ = codes.LoadOrStore(code, m.requests.WithLabelValues(path, strconv.Itoa(code)))
		}
		c.(*metrics.Series).Inc()
	})
}

// httpServer is the server Run serves with: a review's own bound is
// Config.Timeout, so its connection's reads and writes get that and some.
func (s *Server) httpServer() *http.Server {
	return &http.Server{
		Handler:           s.mux,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       s.cfg.Timeout + 10*time.Second,
		WriteTimeout:      s.cfg.Timeout + 20*time.Second,
		IdleTimeout:       90 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelDebug), // handshake failures: anyone can cause them
	}
}
