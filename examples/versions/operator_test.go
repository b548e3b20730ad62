package main

// End-to-end tests of the versions operator against a real kube-apiserver,
// started by testenv/controlplane, which calls the operator's webhooks on
// loopback. Build its binaries first: go run ./hack/localcluster build

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/e2e/harness"
	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/testenv/controlplane"
)

var plane = controlplane.Shared{Options: controlplane.Options{Bare: true}}

func TestMain(m *testing.M) { os.Exit(plane.Run(m)) }

var routesV2 = k8sapi.Resource{Group: group, Version: "v2", Resource: "routes", Namespaced: true, Kind: "Route"}

// operator is the versions operator run in the test's process.
type operator struct {
	addr string // of the webhooks
	logs bytes.Buffer
	stop func()
}

// start runs the operator, which installs the CRD and the webhook
// configuration for itself, with args besides, and waits until /readyz
// passes and a Route reads in v2, through the conversion webhook.
func start(t *testing.T, p *controlplane.Plane, args ...string) *operator {
	t.Helper()
	o := &operator{addr: harness.FreeAddr(t)}
	probe := harness.FreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	args = append([]string{"-kubeconfig", p.Kubeconfig(), "-webhook-addr", o.addr, "-probe-addr", probe,
		"-install", "https://" + o.addr}, args...)
	go func() { done <- run(ctx, args, &syncWriter{w: &o.logs}) }()
	var once atomic.Bool
	o.stop = func() {
		if once.CompareAndSwap(false, true) {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("run: %v\n%s", err, o.logs.String())
			}
		}
	}
	t.Cleanup(o.stop)
	harness.Eventually(t, time.Minute, func() (bool, string) {
		resp, err := http.Get("http://" + probe + "/readyz")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	c, ns := harness.Admin(t, p), p.TestNamespace(t)
	probeRoute := newV1("probe", ns+":1")
	if _, err := k8sapi.For[RouteV1](c, routes).Create(harness.Ctx(t, time.Minute), ns, probeRoute, k8sapi.WriteOptions{}); err != nil {
		t.Fatalf("create a first Route: %v", err)
	}
	harness.Eventually(t, time.Minute, func() (bool, string) {
		_, err := k8sapi.For[RouteV2](c, routesV2).Get(context.Background(), ns, "probe", k8sapi.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
	return o
}

// syncWriter is an io.Writer safe for the operator's logger and the test.
type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

func newV1(name, target string) *RouteV1 {
	r := &RouteV1{TypeMeta: k8sapi.TypeMeta{APIVersion: group + "/v1", Kind: "Route"}, ObjectMeta: k8sapi.ObjectMeta{Name: name}}
	r.Spec.Target = target
	return r
}

// raw reads the Route ns/name in version r as JSON, without its
// managedFields (which name the version each writer wrote in) and
// resourceVersion.
func raw(t *testing.T, c *k8sapi.Client, r k8sapi.Resource, ns, name string) map[string]any {
	t.Helper()
	b, err := k8sapi.For[json.RawMessage](c, r).Get(context.Background(), ns, name, k8sapi.GetOptions{})
	if err != nil {
		t.Fatalf("get %s in %s: %v", name, r.Version, err)
	}
	var obj map[string]any
	json.Unmarshal(*b, &obj)
	meta := obj["metadata"].(map[string]any)
	delete(meta, "managedFields")
	delete(meta, "resourceVersion")
	return obj
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// A Route created in v1 reads in v2 with its target split, and written
// back in v2 unchanged reads in v1 as it was; one created in v2 with a
// weight and a target v1 cannot hold reads in v1 with them kept in the
// annotation, and in v2 as it was created, also after an update in v1.
func TestConversionRoundTrip(t *testing.T) {
	p := plane.Get(t)
	start(t, p)
	c, ns := harness.Admin(t, p), p.TestNamespace(t)
	ctx := harness.Ctx(t, 2*time.Minute)
	v1api, v2api := k8sapi.For[RouteV1](c, routes), k8sapi.For[RouteV2](c, routesV2)

	if _, err := v1api.Create(ctx, ns, newV1("db", "db.internal:5432"), k8sapi.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, time.Minute, func() (bool, string) { // the status, written by the controller
		r, err := v1api.Get(ctx, ns, "db", k8sapi.GetOptions{})
		return err == nil && r.Status.URL != "", fmt.Sprint(r, err)
	})
	before := raw(t, c, routes, ns, "db")
	v2, err := v2api.Get(ctx, ns, "db", k8sapi.GetOptions{})
	if err != nil || v2.APIVersion != group+"/v2" || v2.Spec.Target != (Target{"db.internal", 5432}) || v2.Annotations != nil || v2.Status.URL != "http://db.internal:5432" {
		t.Fatalf("in v2: %+v, %v; want host db.internal, port 5432, the status and no annotation", v2, err)
	}
	if _, err := v2api.Update(ctx, ns, "db", v2, k8sapi.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if after := raw(t, c, routes, ns, "db"); jsonOf(after) != jsonOf(before) {
		t.Errorf("v1 after the v2 round trip:\n%s\nwant\n%s", jsonOf(after), jsonOf(before))
	}

	odd := &RouteV2{TypeMeta: k8sapi.TypeMeta{APIVersion: group + "/v2", Kind: "Route"},
		ObjectMeta: k8sapi.ObjectMeta{Name: "odd", Annotations: map[string]string{"team": "a"}},
		Spec:       RouteV2Spec{Target: Target{Host: "odd:1"}, Weight: 7}}
	if _, err := v2api.Create(ctx, ns, odd, k8sapi.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, time.Minute, func() (bool, string) { // the controller's write done
		r, err := v1api.Get(ctx, ns, "odd", k8sapi.GetOptions{})
		return err == nil && r.Status.URL != "", fmt.Sprint(r, err)
	})
	created := raw(t, c, routesV2, ns, "odd")
	v1, err := v1api.Get(ctx, ns, "odd", k8sapi.GetOptions{})
	if err != nil || v1.Spec.Target != "odd:1" || v1.Annotations[v2Annotation] != `{"target":{"host":"odd:1"},"weight":7}` || v1.Annotations["team"] != "a" {
		t.Fatalf("in v1: %+v, %v; want odd:1 and the v2 spec in %s", v1, err, v2Annotation)
	}
	v1.Labels = map[string]string{"edited": "in-v1"}
	if _, err := v1api.Update(ctx, ns, "odd", v1, k8sapi.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	after := raw(t, c, routesV2, ns, "odd")
	delete(after["metadata"].(map[string]any), "labels")
	if jsonOf(after) != jsonOf(created) {
		t.Errorf("v2 after the v1 round trip:\n%s\nwant\n%s", jsonOf(after), jsonOf(created))
	}
}

// A Route created without a port gets port 80 from the mutating webhook,
// through the JSON patch the API server applies, in v1 and in v2.
func TestDefaultPort(t *testing.T) {
	p := plane.Get(t)
	start(t, p)
	c, ns := harness.Admin(t, p), p.TestNamespace(t)
	ctx := harness.Ctx(t, time.Minute)
	got, err := k8sapi.For[RouteV1](c, routes).Create(ctx, ns, newV1("web", "web.internal"), k8sapi.WriteOptions{})
	if err != nil || got.Spec.Target != "web.internal:80" {
		t.Fatalf("created %+v, %v; want web.internal:80", got, err)
	}
	v2 := &RouteV2{TypeMeta: k8sapi.TypeMeta{APIVersion: group + "/v2", Kind: "Route"}, ObjectMeta: k8sapi.ObjectMeta{Name: "api"},
		Spec: RouteV2Spec{Target: Target{Host: "api.internal"}, Weight: 3}}
	if got, err := k8sapi.For[RouteV2](c, routesV2).Create(ctx, ns, v2, k8sapi.WriteOptions{}); err != nil || got.Spec != (RouteV2Spec{Target{"api.internal", 80}, 3}) {
		t.Errorf("created in v2 %+v, %v; want port 80 and the weight", got, err)
	}
}

// A Route whose target another Route has, in another namespace, is
// refused with the webhook's message, as kubectl shows it.
func TestRefusalAsKubectlShowsIt(t *testing.T) {
	p := plane.Get(t)
	start(t, p)
	c, first, second := harness.Admin(t, p), p.TestNamespace(t), p.TestNamespace(t)
	ctx := harness.Ctx(t, time.Minute)
	v1api := k8sapi.For[RouteV1](c, routes)
	if _, err := v1api.Create(ctx, first, newV1("a", "shared:80"), k8sapi.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, time.Minute, func() (bool, string) { // in the operator's cache
		r, err := v1api.Get(ctx, first, "a", k8sapi.GetOptions{})
		return err == nil && r.Status.URL != "", fmt.Sprint(r, err)
	})
	file := filepath.Join(t.TempDir(), "route.yaml")
	os.WriteFile(file, []byte("apiVersion: "+group+"/v2\nkind: Route\nmetadata:\n  name: b\n  namespace: "+second+
		"\nspec:\n  target:\n    host: shared\n    port: 80\n"), 0o644)
	out, err := harness.KubectlErr(p, "create", "-f", file)
	want := `Error from server (Forbidden): error when creating "` + file + `": admission webhook "` + webhookName +
		`" denied the request: target "shared:80" is taken by Route ` + first + "/a\n"
	if err == nil || out != want {
		t.Errorf("kubectl create: %v\n%s\nwant\n%s", err, out, want)
	}
	// The Route itself may be updated.
	harness.Kubectl(t, p, "label", "-n", first, "routes.v1."+group, "a", "x=y")
}

// The webhook's certificate, from a folder, is rotated to one of another
// key while the API server calls both webhooks: every call succeeds, and
// the new certificate is served within the folder's recheck.
func TestCertificateRotation(t *testing.T) {
	p := plane.Get(t)
	dir := t.TempDir()
	ca, caKey, caPEM := newCA(t)
	os.WriteFile(filepath.Join(dir, "ca.crt"), caPEM, 0o644)
	writeLeaf(t, dir, ca, caKey, 1)
	o := start(t, p, "-cert-dir", dir, "-ca-bundle-file", filepath.Join(dir, "ca.crt"))
	c, ns := harness.Admin(t, p), p.TestNamespace(t)
	v1api, v2api := k8sapi.For[RouteV1](c, routes), k8sapi.For[RouteV2](c, routesV2)
	if _, err := v1api.Create(context.Background(), ns, newV1("listed", "listed:1"), k8sapi.WriteOptions{}); err != nil {
		t.Fatal(err)
	}

	var calls, failed, afterRotation atomic.Int64
	var rotated atomic.Bool
	var lastErr atomic.Value
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // a conversion (a list in v2) and a validation (a create) each round, 20 a second
		defer close(done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := v2api.List(ctx, ns, k8sapi.ListOptions{})
			name := fmt.Sprintf("r%d", i)
			if err == nil {
				_, err = v1api.Create(ctx, ns, newV1(name, name+":1"), k8sapi.WriteOptions{})
			}
			if err == nil { // so that the list stays short
				err = v1api.Delete(ctx, ns, name, k8sapi.DeleteOptions{})
			}
			cancel()
			calls.Add(1)
			if rotated.Load() {
				afterRotation.Add(1)
			}
			if err != nil {
				failed.Add(1)
				lastErr.Store(err.Error())
			}
		}
	}()
	harness.Eventually(t, 10*time.Second, func() (bool, string) { return calls.Load() >= 5, "no calls" })
	writeLeaf(t, dir, ca, caKey, 2)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	harness.Eventually(t, 2*time.Minute, func() (bool, string) { // the folder is read again every minute
		conn, err := tls.Dial("tcp", o.addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
		if err != nil {
			return false, err.Error()
		}
		defer conn.Close()
		serial := conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
		rotated.Store(serial == 2)
		return serial == 2, fmt.Sprintf("serving serial %d", serial)
	})
	harness.Eventually(t, time.Minute, func() (bool, string) {
		return afterRotation.Load() >= 10, fmt.Sprintf("%d calls after the rotation", afterRotation.Load())
	})
	close(stop)
	<-done
	if failed.Load() != 0 {
		t.Errorf("%d of %d rounds failed, the last: %v", failed.Load(), calls.Load(), lastErr.Load())
	}
	t.Logf("%d rounds of a conversion and a validation, %d after the rotation, none failed", calls.Load(), afterRotation.Load())
}

// newCA returns a CA certificate, its key and its PEM.
func newCA(t *testing.T) (*x509.Certificate, *ecdsa.PrivateKey, []byte) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(100), Subject: pkix.Name{CommonName: "test webhook CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	return ca, key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// writeLeaf writes a serving certificate for 127.0.0.1 of a new key,
// signed by ca, with the serial given, to dir's tls.crt and tls.key, each
// renamed into place.
func writeLeaf(t *testing.T, dir string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, serial int64) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "versions webhook"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalPKCS8PrivateKey(key)
	for name, b := range map[string][]byte{
		"tls.key": pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		"tls.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
	} {
		tmp := filepath.Join(dir, name+".tmp")
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

// With the operator down, failurePolicy Fail refuses every create of a
// Route (the mutating webhook, called first, fails it), and Ignore lets
// one in unchanged and unchecked: without a default port, even of a
// target taken. The
// conversion webhook has no failure policy: a Route cannot be read or
// written in v2, while v1, the storage version, needs no conversion.
func TestWebhookDown(t *testing.T) {
	p := plane.Get(t)
	o := start(t, p)
	c, first, second := harness.Admin(t, p), p.TestNamespace(t), p.TestNamespace(t)
	ctx := harness.Ctx(t, 2*time.Minute)
	v1api, v2api := k8sapi.For[RouteV1](c, routes), k8sapi.For[RouteV2](c, routesV2)
	if _, err := v1api.Create(ctx, first, newV1("a", "down:1"), k8sapi.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	o.stop()

	_, err := v1api.Create(ctx, second, newV1("b", "down:2"), k8sapi.WriteOptions{})
	if err == nil || !strings.Contains(err.Error(), `failed calling webhook "`+defaultName+`"`) {
		t.Errorf("create with failurePolicy Fail: %v, want the mutating webhook's call failed (it is called first)", err)
	}
	t.Logf("create with the webhook down, failurePolicy Fail: %v", err)
	if _, err := v1api.Get(ctx, first, "a", k8sapi.GetOptions{}); err != nil {
		t.Errorf("get in v1, the storage version: %v", err)
	}
	_, err = v2api.Get(ctx, first, "a", k8sapi.GetOptions{})
	if err == nil || !strings.Contains(err.Error(), "conversion webhook") {
		t.Errorf("get in v2: %v, want the conversion webhook's failure", err)
	}
	t.Logf("get in v2 with the webhook down: %v", err)

	if err := applyConfigs(ctx, c, WebhookConfigs("https://"+o.addr, nil, "Ignore")); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, time.Minute, func() (bool, string) { // the API server reads the configurations again
		_, err := v1api.Create(ctx, second, newV1("dup", "down:1"), k8sapi.WriteOptions{})
		return err == nil, fmt.Sprint(err)
	})
	if r, err := v1api.Create(ctx, second, newV1("bare", "bare"), k8sapi.WriteOptions{}); err != nil || r.Spec.Target != "bare" {
		t.Errorf("create with failurePolicy Ignore: %+v, %v; want it in without a default port", r, err)
	}
	if _, err := v2api.Create(ctx, second, &RouteV2{TypeMeta: k8sapi.TypeMeta{APIVersion: group + "/v2", Kind: "Route"},
		ObjectMeta: k8sapi.ObjectMeta{Name: "v2"}, Spec: RouteV2Spec{Target: Target{"down", 3}}}, k8sapi.WriteOptions{}); err == nil || !strings.Contains(err.Error(), "conversion webhook") {
		t.Errorf("create in v2 with failurePolicy Ignore: %v, want the conversion webhook's failure", err)
	}
}
