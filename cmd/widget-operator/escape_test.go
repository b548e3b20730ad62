package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// title is the audit's escape sequence: set the terminal's title, ring
// the bell, clear the screen.
const title = "\x1b]0;owned\a\x1b[2J"

// rawControl reports whether s holds a byte or rune a terminal acts on.
func rawControl(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 && r != '\n' || r >= 0x7f && r < 0xa0 })
}

// startError runs the operator with the kubeconfig text and returns what
// it printed on stderr, failing unless it exits with 1.
func startError(t *testing.T, kubeconfig string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	args := []string{"--kubeconfig", path, "--metrics-bind-address", "0", "--health-probe-bind-address", "0"}
	if code := run(args, noEnv, &stdout, &stderr); code != 1 {
		t.Fatalf("exit code %d, want 1; stderr:\n%s", code, stderr.String())
	}
	return stderr.String()
}

// kubeconfigFor is a kubeconfig for server, with the cluster's and the
// user's extra lines, each indented as a field of its map.
func kubeconfigFor(server, cluster, user string) string {
	return "apiVersion: v1\nkind: Config\ncurrent-context: c\n" +
		"clusters:\n- name: c\n  cluster:\n    server: " + server + "\n" + cluster +
		"contexts:\n- name: c\n  context: {cluster: c, user: u}\n" +
		"users:\n- name: u\n  user:\n    token: t\n" + user
}

// A server certificate whose DNS name holds the escape sequence fails
// the start, and the start-up error quotes the name escaped.
func TestStartErrorEscapesCertificateName(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), DNSNames: []string{title},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	srv.StartTLS()
	defer srv.Close()
	ca := base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	// A server name, not the IP, so that the error lists the DNS names.
	stderr := startError(t, kubeconfigFor(srv.URL, "    certificate-authority-data: "+ca+"\n    tls-server-name: api.example\n", ""))
	if rawControl(stderr) || !strings.Contains(stderr, `certificate is valid for \u001b]0;owned\u0007\u001b[2J, not api.example`) {
		t.Fatalf("stderr %q, want the certificate's name escaped", stderr)
	}
}

// A kubeconfig's as-user-extra key holding the escape sequence is quoted
// escaped in the start-up error.
func TestStartErrorEscapesKubeconfigKey(t *testing.T) {
	stderr := startError(t, kubeconfigFor("https://127.0.0.1:1", "", "    as: admin\n    as-user-extra:\n      \"\\e]0;owned\\a\\e[2J\": {a: b}\n"))
	if rawControl(stderr) || !strings.Contains(stderr, `as-user-extra.\u001b]0;owned\u0007\u001b[2J: want a list`) {
		t.Fatalf("stderr %q, want the key escaped", stderr)
	}
}

// A log line holds nothing a terminal acts on, in either format, and the
// JSON form still decodes to what was logged: the JSON handler itself
// leaves DEL, the C1 controls and format characters raw.
func TestLogLinesEscaped(t *testing.T) {
	const msg = "refused: " + title + " del\x7f csi\u009b2J bidi\u202e nel\u0085"
	for _, format := range []string{"json", "text"} {
		var out bytes.Buffer
		log, err := newLogger(&out, "info", format)
		if err != nil {
			t.Fatal(err)
		}
		log.Info(msg, "err", msg)
		line := out.String()
		if rawControl(line) || strings.Contains(line, "\u202e") || strings.Count(line, "\n") != 1 {
			t.Errorf("%s: line %q holds raw controls", format, line)
		}
		var rec struct{ Msg, Err string }
		if format == "json" && (json.Unmarshal(out.Bytes(), &rec) != nil || rec.Msg != msg || rec.Err != msg) {
			t.Errorf("json: line %q decodes to %+v, want the message as logged", line, rec)
		}
	}
}
