package operations

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/e2e/harness"
	"github.com/zerodep-k8s/widget-operator/testenv/controlplane"
)

// TestMetricsAreSecureByDefault runs the operator with its default metrics
// settings (HTTPS, a self-signed certificate) and scrapes /metrics with a
// ServiceAccount token bound to the metrics-reader ClusterRole (200), with
// one that is not (403), with a token the API server does not know (401)
// and with none (401). Repeated scrapes cost no more reviews while the
// decision is cached.
func TestMetricsAreSecureByDefault(t *testing.T) {
	p := env.Plane.Get(t)
	ns := p.TestNamespace(t)
	reader := env.MetricsReaderToken(t, p)
	if err := p.CreateServiceAccount(ctxFor(t, 30*time.Second), ns, "not-a-reader"); err != nil {
		t.Fatal(err)
	}
	stranger := harness.ServiceAccountToken(t, p, ns, "not-a-reader")

	metricsAddr := freeAddr(t)
	started := time.Now()
	o := env.StartOperator(t, p, "--namespace", ns, "--metrics-bind-address", metricsAddr, "--metrics-secure=true")
	t.Cleanup(o.Stop)
	eventually(t, 60*time.Second, func() (bool, string) {
		code, _, err := harness.ScrapeTLS(metricsAddr, "")
		return err == nil && code == http.StatusUnauthorized, fmt.Sprintf("no token: %d %v", code, err)
	})
	for _, tc := range []struct {
		who, token string
		want       int
	}{
		{"a metrics reader", reader, http.StatusOK},
		{"a ServiceAccount without the role", stranger, http.StatusForbidden},
		{"an unknown token", "not-a-token", http.StatusUnauthorized},
		{"no token", "", http.StatusUnauthorized},
	} {
		code, body, err := harness.ScrapeTLS(metricsAddr, tc.token)
		if err != nil || code != tc.want {
			t.Errorf("%s: %d %v, want %d", tc.who, code, err, tc.want)
		}
		if tc.want == http.StatusOK && !strings.Contains(body, "controller_runtime_reconcile_total") {
			t.Errorf("%s: no metrics in %q", tc.who, harness.Tail(body, 200))
		} else if tc.want != http.StatusOK && strings.Contains(body, "controller_runtime") {
			t.Errorf("%s: metrics given away", tc.who)
		}
		t.Logf("%s: %d", tc.who, code)
	}
	// Plain HTTP gets no metrics.
	if code, body, err := get("http://" + metricsAddr + "/metrics"); err == nil && (code == http.StatusOK || strings.Contains(body, "controller_runtime")) {
		t.Errorf("plain HTTP: %d", code)
	}

	// A scrape storm with one token: one review pair, not one per scrape.
	for range 30 {
		if code, _, err := harness.ScrapeTLS(metricsAddr, reader); err != nil || code != http.StatusOK {
			t.Fatalf("storm: %d %v", code, err)
		}
	}
	reviews := countReviews(t, p, started)
	t.Logf("reviews by the operator for 36 scrapes with 4 tokens: %v", reviews)
	if reviews["tokenreviews"] > 6 || reviews["subjectaccessreviews"] > 4 {
		t.Errorf("reviews %v: the cache does not hold", reviews)
	}
	if reviews["tokenreviews"] == 0 || reviews["subjectaccessreviews"] == 0 {
		t.Errorf("reviews %v: none made by the operator", reviews)
	}
	if o.Exited() {
		t.Fatalf("the operator exited:\n%s", harness.Tail(o.Log(), 2048))
	}
	if strings.Contains(o.Log(), reader) || strings.Contains(o.Log(), stranger) {
		t.Error("a scraper's token is in the operator's log")
	}
}

// countReviews counts the reviews the operator's user created since from,
// by resource.
func countReviews(t *testing.T, p *controlplane.Plane, from time.Time) map[string]int {
	t.Helper()
	events, err := p.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, e := range events {
		if e.User == harness.OperatorUser && e.Verb == "create" && e.Stage == "ResponseComplete" && !e.Received.Before(from) &&
			(e.Resource == "tokenreviews" || e.Resource == "subjectaccessreviews") {
			out[e.Resource]++
		}
	}
	return out
}

// TestMetricsCertDir serves /metrics with a certificate from
// --metrics-cert-dir, which a client that trusts its CA verifies.
func TestMetricsCertDir(t *testing.T) {
	p := env.Plane.Get(t)
	ns := p.TestNamespace(t)
	reader := env.MetricsReaderToken(t, p)
	dir := t.TempDir()
	pool := writeServingCert(t, dir)
	metricsAddr := freeAddr(t)
	o := env.StartOperator(t, p, "--namespace", ns, "--metrics-bind-address", metricsAddr,
		"--metrics-secure=true", "--metrics-cert-dir", dir)
	t.Cleanup(o.Stop)
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "widget-operator.widget-system.svc"},
	}}
	eventually(t, 60*time.Second, func() (bool, string) {
		req, _ := http.NewRequest("GET", "https://"+metricsAddr+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+reader)
		resp, err := c.Do(req)
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, fmt.Sprintf("verified scrape: %d", resp.StatusCode)
	})
}

// writeServingCert writes tls.crt and tls.key for
// widget-operator.widget-system.svc, signed by a new CA, into dir, and
// returns a pool with that CA.
func writeServingCert(t *testing.T, dir string) *x509.CertPool {
	t.Helper()
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey, leafKey := newKey(), newKey()
	now := time.Now()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "e2e metrics CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "widget-operator"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), DNSNames: []string{"widget-operator.widget-system.svc"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &leafKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(leafKey)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, der []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("tls.crt", "CERTIFICATE", leafDER)
	write("tls.key", "EC PRIVATE KEY", keyDER)
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	return pool
}
