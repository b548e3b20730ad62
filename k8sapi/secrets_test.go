package k8sapi

import (
	"context"
	"encoding/base64"
	"path/filepath"
	"strings"
	"testing"
)

// TestSecretsNeverInErrors provokes every error path of configuration
// loading, credentials and TLS set-up with a secret in reach, and checks
// that the secret is not in the error string.
func TestSecretsNeverInErrors(t *testing.T) {
	const secret = "s3cr3t-credential-ZmFrZQ-0042"
	certPEM, _ := selfSignedPair(t, "client")
	secretKeyPEM := []byte("-----BEGIN PRIVATE KEY-----\n" + base64.StdEncoding.EncodeToString([]byte(secret)) + "\n-----END PRIVATE KEY-----\n")
	dir := t.TempDir()

	kubeconfigs := map[string]string{
		"token-bad-indent":   "users:\n- name: u\n  user:\n    token: " + secret + "\n      more: x\n",
		"token-no-colon":     "users:\n- name: u\n  user:\n    token " + secret + "\n",
		"token-in-flow":      "users:\n- name: u\n  user: {token: " + secret + "\n",
		"token-bad-escape":   "users:\n- name: u\n  user:\n    token: \"" + secret + "\\q\"\n",
		"token-as-map":       "users:\n- name: u\n  user:\n    token: {" + secret + ": 1}\n",
		"token-colon":        "users:\n- name: u\n  user:\n    token: " + secret + ": x\n",
		"password-and-token": "clusters:\n- name: c\n  cluster: {server: 'https://h'}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\nusers:\n- name: u\n  user: {token: " + secret + ", password: " + secret + "}\n",
		"key-data-bad":       "users:\n- name: u\n  user:\n    client-key-data: \"" + secret + "!\"\n",
		"duplicate-token":    "users:\n- name: u\n  user:\n    token: " + secret + "\n    token: " + secret + "\n",
		"exec-env-bad":       "users:\n- name: u\n  user:\n    exec:\n      env:\n      - value: " + secret + "\n",
		"exec-args-bad":      "users:\n- name: u\n  user:\n    exec:\n      args: {a: " + secret + "}\n",
	}
	files := map[string]string{}
	for name, doc := range kubeconfigs {
		files[name] = doc
	}
	files["token-with-newline"] = "line1\n" + secret + "\x00\n"
	writeFiles(t, dir, files)

	var errs []error
	for name := range kubeconfigs {
		_, err := LoadKubeconfig([]string{filepath.Join(dir, name)}, "x")
		errs = append(errs, err)
	}
	// Credentials.
	_, err := newCredentials(&Config{BearerToken: secret + "\n"})
	errs = append(errs, err)
	_, err = newCredentials(&Config{BearerTokenFile: filepath.Join(dir, "token-with-newline")})
	errs = append(errs, err)
	_, err = newCredentials(&Config{Username: secret + ":x", Password: secret})
	errs = append(errs, err)
	for _, mode := range []string{"fail", "garbage", "wrong-version", "half-cert", "bad-cert", "flood"} {
		creds := newExecCredentials(&Config{Exec: helperExec(execV1, mode, "HELPER_TOKEN="+secret)})
		_, err := creds.get(context.Background())
		errs = append(errs, err)
	}
	// TLS.
	_, err = readKeyPair(&Config{CertData: certPEM, KeyData: secretKeyPEM})
	errs = append(errs, err)
	_, err = readKeyPair(&Config{CertData: secretKeyPEM, KeyData: secretKeyPEM})
	errs = append(errs, err)
	_, err = readKeyPair(&Config{CertData: certPEM, KeyData: []byte(secret)})
	errs = append(errs, err)
	_, err = newTLSConfig(&Config{CAData: []byte(secret)})
	errs = append(errs, err)

	encoded := base64.StdEncoding.EncodeToString([]byte(secret))
	for _, err := range errs {
		t.Log(err)
	}
	for i, err := range errs {
		if err == nil {
			t.Errorf("case %d: no error", i)
			continue
		}
		if s := err.Error(); strings.Contains(s, secret) || strings.Contains(s, "s3cr3t") || strings.Contains(s, encoded) {
			t.Errorf("case %d: error holds the secret: %q", i, s)
		}
	}
}
