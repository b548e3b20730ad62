package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/metrics"
)

// thing is the object the test hooks review.
type thing struct {
	k8sapi.TypeMeta
	k8sapi.ObjectMeta `json:"metadata"`
	Spec              struct {
		Size  int    `json:"size"`
		Owner string `json:"owner,omitempty"`
	} `json:"spec"`
}

func admissionBody(uid, op string, obj, old string) string {
	b, _ := json.Marshal(admissionReview{TypeMeta: k8sapi.TypeMeta{APIVersion: admissionVersion, Kind: "AdmissionReview"},
		Request: &AdmissionRequest{UID: uid, Operation: op, Object: json.RawMessage(obj), OldObject: json.RawMessage(old)}})
	return string(b)
}

// post sends body to path of h and returns the status code and body.
func post(t *testing.T, h http.Handler, path, body string) (int, []byte) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.Bytes()
}

func admissionAnswer(t *testing.T, code int, body []byte) *admissionResponse {
	t.Helper()
	var r admissionReview
	if err := json.Unmarshal(body, &r); err != nil || code != http.StatusOK || r.Response == nil || r.APIVersion != admissionVersion || r.Kind != "AdmissionReview" {
		t.Fatalf("answer %d %s (%v): want 200 and an AdmissionReview", code, body, err)
	}
	return r.Response
}

func newTestServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A validating hook's error is a refusal with its message and code; a
// nil error admits; the uid is answered back.
func TestValidateRefusesWithMessage(t *testing.T) {
	s := newTestServer(t, Config{Admission: map[string]AdmitFunc{
		"/validate": Validate(func(_ context.Context, req *AdmissionRequest, obj, old *thing) error {
			switch {
			case req.Operation == "DELETE" && (obj != nil || old == nil):
				return errors.New("delete without its old object")
			case obj != nil && obj.Spec.Size > 3:
				return fmt.Errorf("size %d is over 3", obj.Spec.Size)
			case obj != nil && obj.Spec.Owner == "nobody":
				return &Refusal{Code: 422, Reason: "Invalid", Message: "no owner"}
			}
			return nil
		})}})
	r := admit(t, s, "/validate", admissionBody("u1", "CREATE", `{"spec":{"size":2}}`, ""))
	if !r.Allowed || r.UID != "u1" || r.Status != nil || r.Patch != nil {
		t.Errorf("size 2: %+v, want allowed, uid u1", r)
	}
	r = admit(t, s, "/validate", admissionBody("u2", "CREATE", `{"spec":{"size":5}}`, ""))
	if r.Allowed || r.UID != "u2" || r.Status == nil || r.Status.Message != "size 5 is over 3" || r.Status.Code != 403 {
		t.Errorf("size 5: %+v %+v, want refused with the message, 403", r, r.Status)
	}
	r = admit(t, s, "/validate", admissionBody("u3", "UPDATE", `{"spec":{"owner":"nobody"}}`, `{}`))
	if r.Allowed || r.Status == nil || r.Status.Code != 422 || r.Status.Reason != "Invalid" || r.Status.Message != "no owner" {
		t.Errorf("refusal: %+v, want 422 Invalid", r.Status)
	}
	r = admit(t, s, "/validate", admissionBody("u4", "DELETE", "", `{"spec":{"size":9}}`))
	if !r.Allowed {
		t.Errorf("delete: %+v, want allowed with obj nil and old given", r.Status)
	}
	r = admit(t, s, "/validate", admissionBody("u5", "CREATE", `{"spec":{"size":"big"}}`, ""))
	if r.Allowed || r.Status.Code != 400 || !strings.Contains(r.Status.Message, "decoding the object") {
		t.Errorf("undecodable object: %+v, want refused with 400", r.Status)
	}
}

// Malformed reviews get 400 and a Status with the reason; a wrong method
// 405, a wrong type 415, a body over the bound 413.
func TestMalformedReviews(t *testing.T) {
	s := newTestServer(t, Config{MaxBodyBytes: 1 << 10,
		Admission:  map[string]AdmitFunc{"/a": func(context.Context, *AdmissionRequest) ([]PatchOp, error) { return nil, nil }},
		Conversion: map[string]ConvertFunc{"/c": func(_ context.Context, o json.RawMessage, _ string) (json.RawMessage, error) { return o, nil }}})
	for _, c := range []struct {
		path, body string
		want       string
	}{
		{"/a", `not json`, "not a AdmissionReview"},
		{"/a", `{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"x"}}`, `apiVersion "admission.k8s.io/v1beta1"`},
		{"/a", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, "needs a request with a uid"},
		{"/a", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":""}}`, "needs a request with a uid"},
		{"/a", admissionBody("x", "CREATE", "{}", "") + `{}`, "after top-level value"},
		{"/c", `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"x"}}`, "desiredAPIVersion"},
		{"/c", `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"x","desiredAPIVersion":"v2","objects":[1]}}`, "object 0 is not a JSON object"},
		{"/c", admissionBody("x", "CREATE", "{}", ""), `kind "AdmissionReview"`},
	} {
		code, body := post(t, s, c.path, c.body)
		var st k8sapi.Status
		json.Unmarshal(body, &st)
		if code != 400 || st.Kind != "Status" || st.Status != "Failure" || st.Code != 400 || st.Reason != "BadRequest" || !strings.Contains(st.Message, c.want) {
			t.Errorf("%s %s: %d %s, want 400 and a Status saying %q", c.path, c.body, code, body, c.want)
		}
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/a", nil))
	if rec.Code != 405 {
		t.Errorf("GET: %d, want 405", rec.Code)
	}
	req := httptest.NewRequest(http.MethodPost, "/a", strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/yaml")
	rec = httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	if rec.Code != 415 {
		t.Errorf("application/yaml: %d, want 415", rec.Code)
	}
	big := admissionBody("x", "CREATE", `{"pad":"`+strings.Repeat("x", 1<<10)+`"}`, "")
	if code, body := post(t, s, "/a", big); code != 413 || !strings.Contains(string(body), "at most 1024 bytes") {
		t.Errorf("big review: %d %s, want 413", code, body)
	}
	if code, _ := post(t, s, "/a", admissionBody("x", "CREATE", "{}", "")); code != 200 {
		t.Errorf("a good review after them: %d", code)
	}
}

// A panic in a hook is a 500 and a log line, and the server answers the
// next review; a hook past its time is cut at the request's timeout
// with 504.
func TestPanicAndTimeout(t *testing.T) {
	var logs bytes.Buffer
	s := newTestServer(t, Config{Logger: slog.New(slog.NewTextHandler(&logs, nil)), Timeout: time.Minute,
		Admission: map[string]AdmitFunc{
			"/panic": func(_ context.Context, req *AdmissionRequest) ([]PatchOp, error) {
				if req.UID == "boom" {
					panic("boom")
				}
				return nil, nil
			},
			"/slow": func(ctx context.Context, _ *AdmissionRequest) ([]PatchOp, error) {
				<-ctx.Done()
				return nil, ctx.Err()
			},
		}})
	code, body := post(t, s, "/panic", admissionBody("boom", "CREATE", "{}", ""))
	if code != 500 || !strings.Contains(string(body), `"code":500`) {
		t.Errorf("panic: %d %s, want 500 and a Status", code, body)
	}
	if !strings.Contains(logs.String(), "hook panicked") || !strings.Contains(logs.String(), "panic=boom") || strings.Count(logs.String(), "\n") != 1 {
		t.Errorf("log %q, want one line of the panic", logs.String())
	}
	if r := admit(t, s, "/panic", admissionBody("ok", "CREATE", "{}", "")); !r.Allowed {
		t.Error("the review after a panic is not admitted")
	}
	start := time.Now()
	code, body = post(t, s, "/slow?timeout=50ms", admissionBody("x", "CREATE", "{}", ""))
	if code != 504 || !strings.Contains(string(body), "did not answer in 50ms") || time.Since(start) > 30*time.Second {
		t.Errorf("slow hook: %d %s after %v, want 504 at the request's timeout", code, body, time.Since(start))
	}
	// A zero timeout is no bound of the request's: the hook gets the
	// server's, and answers.
	if r := admit(t, s, "/panic?timeout=0s", admissionBody("ok", "CREATE", "{}", "")); !r.Allowed {
		t.Error("a review with timeout=0s is not admitted")
	}
}

// A mutating hook's change is answered as a JSON patch of the object it
// was given, that keeps the fields its type does not name.
func TestMutatePatch(t *testing.T) {
	s := newTestServer(t, Config{Admission: map[string]AdmitFunc{
		"/mutate": Mutate(func(_ context.Context, _ *AdmissionRequest, obj *thing) error {
			if obj.Spec.Owner == "" {
				obj.Spec.Owner = "team-a"
			}
			if obj.Labels == nil {
				obj.Labels = map[string]string{}
			}
			obj.Labels["owner/name"] = obj.Spec.Owner
			return nil
		})}})
	orig := `{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"a","managedFields":[{"manager":"kubectl"}]},"spec":{"size":2,"color":"red"}}`
	r := admit(t, s, "/mutate", admissionBody("u", "CREATE", orig, ""))
	if !r.Allowed || r.PatchType != "JSONPatch" {
		t.Fatalf("%+v, want allowed with a JSONPatch", r)
	}
	var ops []PatchOp
	if err := json.Unmarshal(r.Patch, &ops); err != nil {
		t.Fatal(err)
	}
	got := applyPatch(t, orig, ops)
	want := `{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"labels":{"owner/name":"team-a"},"managedFields":[{"manager":"kubectl"}],"name":"a"},"spec":{"color":"red","owner":"team-a","size":2}}`
	if got != want {
		t.Errorf("patched:\n%s\nwant\n%s\n(patch %s)", got, want, r.Patch)
	}
	// Unchanged: no patch.
	r = admit(t, s, "/mutate", admissionBody("u", "CREATE", `{"metadata":{"labels":{"owner/name":"b"}},"spec":{"size":1,"owner":"b"}}`, ""))
	if !r.Allowed || r.Patch != nil || r.PatchType != "" {
		t.Errorf("unchanged: %+v, want no patch", r)
	}
}

// A conversion's objects are converted one by one, in order; an error
// fails the review with its message.
func TestConversionReview(t *testing.T) {
	s := newTestServer(t, Config{Conversion: map[string]ConvertFunc{"/convert": func(_ context.Context, obj json.RawMessage, to string) (json.RawMessage, error) {
		if bytes.Contains(obj, []byte("bad")) {
			return nil, errors.New("cannot convert bad")
		}
		return json.RawMessage(fmt.Sprintf(`{"apiVersion":%q,"was":%s}`, to, obj)), nil
	}}})
	review := func(objs ...string) string {
		return fmt.Sprintf(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"c1","desiredAPIVersion":"x/v2","objects":[%s]}}`, strings.Join(objs, ","))
	}
	code, body := post(t, s, "/convert", review(`{"n":1}`, `{"n":2}`))
	want := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","response":{"uid":"c1","convertedObjects":[{"apiVersion":"x/v2","was":{"n":1}},{"apiVersion":"x/v2","was":{"n":2}}],"result":{"status":"Success"}}}`
	if code != 200 || string(body) != want {
		t.Errorf("conversion: %d %s\nwant %s", code, body, want)
	}
	code, body = post(t, s, "/convert", review(`{"n":1}`, `{"n":"bad"}`))
	want = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","response":{"uid":"c1","convertedObjects":[],"result":{"status":"Failure","message":"cannot convert bad"}}}`
	if code != 200 || string(body) != want {
		t.Errorf("failed conversion: %d %s\nwant %s", code, body, want)
	}
}

// New refuses a path without '/', with two hooks or a nil one.
func TestNewRefusesPaths(t *testing.T) {
	a := map[string]AdmitFunc{"/x": Validate(func(context.Context, *AdmissionRequest, *thing, *thing) error { return nil })}
	c := map[string]ConvertFunc{"/x": Converter(Hub[thing]("x/v1"))}
	if _, err := New(Config{Admission: a, Conversion: c}); err == nil || !strings.Contains(err.Error(), "two hooks") {
		t.Errorf("one path twice: %v", err)
	}
	if _, err := New(Config{Admission: map[string]AdmitFunc{"x": a["/x"]}}); err == nil {
		t.Error("a path without '/': no error")
	}
	if _, err := New(Config{Admission: a, Conversion: map[string]ConvertFunc{"/x": nil}}); err == nil || !strings.Contains(err.Error(), "two hooks") {
		t.Errorf("one path twice, one hook nil: %v", err)
	}
	if _, err := New(Config{Conversion: map[string]ConvertFunc{"/y": nil}}); err == nil || !strings.Contains(err.Error(), "nil hook") {
		t.Errorf("a nil hook: %v", err)
	}
}

// The server serves over TLS 1.2 or later with the self-signed
// certificate its CA bundle file holds; it is not ready before Run nor
// after; its requests are measured with controller-runtime's names.
func TestRunServesTLSAndMetrics(t *testing.T) {
	dir := t.TempDir()
	reg := metrics.NewRegistry()
	s := newTestServer(t, Config{Addr: "127.0.0.1:0", CABundleFile: filepath.Join(dir, "ca.crt"),
		Admission: map[string]AdmitFunc{"/ok": func(context.Context, *AdmissionRequest) ([]PatchOp, error) { return nil, nil }}})
	if err := s.Register(reg); err != nil {
		t.Fatal(err)
	}
	if c := s.Checks(time.Now()); len(c) != 1 || c[0].Name != "webhook server" || c[0].Err == nil {
		t.Errorf("checks before Run: %v, want failing", c)
	}
	bundle, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil || !bytes.Equal(bundle, s.CABundle()) {
		t.Fatalf("CA bundle file: %v, %q; want the server's", err, bundle)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	addr := waitServing(t, s)
	if c := s.Checks(time.Now()); c[0].Err != nil {
		t.Errorf("checks while serving: %v", c)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(bundle)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := client.Post("https://"+addr+"/ok", "application/json", strings.NewReader(admissionBody("u", "CREATE", "{}", "")))
	if err != nil {
		t.Fatalf("POST over TLS with the CA bundle: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.TLS.Version < tls.VersionTLS12 {
		t.Errorf("%d over %x", resp.StatusCode, resp.TLS.Version)
	}
	old := &tls.Config{RootCAs: pool, MaxVersion: tls.VersionTLS11}
	if c, err := tls.Dial("tcp", addr, old); err == nil {
		c.Close()
		t.Error("TLS 1.1 handshake succeeded")
	}
	post(t, s, "/ok", "junk")
	var out bytes.Buffer
	reg.WriteTo(&out)
	for _, want := range []string{`controller_runtime_webhook_requests_total{webhook="/ok",code="200"} 1`,
		`controller_runtime_webhook_requests_total{webhook="/ok",code="400"} 1`,
		`controller_runtime_webhook_requests_in_flight{webhook="/ok"} 0`,
		`controller_runtime_webhook_latency_seconds_count{webhook="/ok"} 2`,
		`# TYPE controller_runtime_webhook_latency_seconds histogram`} {
		if !strings.Contains(out.String(), want+"\n") {
			t.Errorf("metrics have no %s", want)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v after a clean stop", err)
	}
	if c := s.Checks(time.Now()); c[0].Err == nil {
		t.Error("ready after Run returned")
	}
	if err := s.Run(t.Context()); err == nil {
		t.Error("Run twice: no error")
	}
}

// Run fails at once when it cannot listen.
func TestRunPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	s := newTestServer(t, Config{Addr: ln.Addr().String()})
	if err := s.Run(t.Context()); err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("Run = %v, want the listen error", err)
	}
}

// waitServing returns the server's address once it serves, or fails
// after 10s.
func waitServing(t *testing.T, s *Server) string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		if a := s.Addr(); a != "" {
			return a
		}
		runtime.Gosched()
	}
	t.Fatal("not serving after 10s")
	return ""
}

// admit posts an AdmissionReview body to path and returns its response.
func admit(t *testing.T, h http.Handler, path, body string) *admissionResponse {
	t.Helper()
	code, b := post(t, h, path, body)
	return admissionAnswer(t, code, b)
}

// A connection that has sent no request holds Shutdown for 5 s; Run then
// cuts it and returns nil, a clean stop: a manager does not report a
// failure for it.
func TestRunStopsWithASilentConnection(t *testing.T) {
	s := newTestServer(t, Config{Addr: "127.0.0.1:0"})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	conn, err := net.Dial("tcp", waitServing(t, s))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return 30 s after its context ended")
	}
}

// The connection's bounds follow the review's: a slow client cannot hold a
// connection past them.
func TestHTTPServerBounds(t *testing.T) {
	s := newTestServer(t, Config{Timeout: 3 * time.Second, Admission: map[string]AdmitFunc{"/x": func(context.Context, *AdmissionRequest) ([]PatchOp, error) { return nil, nil }}})
	srv := s.httpServer()
	if srv.ReadHeaderTimeout != 5*time.Second || srv.ReadTimeout != 13*time.Second || srv.WriteTimeout != 23*time.Second ||
		srv.IdleTimeout != 90*time.Second || srv.MaxHeaderBytes != 64<<10 || srv.Handler == nil || srv.ErrorLog == nil {
		t.Errorf("server bounds: header %v, read %v, write %v, idle %v, header bytes %d", srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout, srv.MaxHeaderBytes)
	}
}
