package k8sapi

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Config says how to reach and authenticate to one API server. The zero
// value is not usable: Host is required. Build one by hand, or with [Load]
// or [LoadKubeconfig].
//
// A Config must not be changed after it is passed to [New].
type Config struct {
	// Host is the API server's base URL, such as "https://10.0.0.1:6443".
	// A path suffix is kept and prefixed to every request path.
	Host string

	// CAData is the PEM bundle used to verify the server. It wins over
	// CAFile; when both are empty, the system roots are used.
	CAData []byte
	// CAFile names a file holding the PEM bundle, used when CAData is
	// empty. New reads it, once, and fails naming it when it cannot be
	// read or holds no certificate; it is read also with a Transport set,
	// for an exec plugin given the cluster's information.
	CAFile string
	// Insecure skips verification of the server's certificate. It is only
	// ever true when a kubeconfig asked for it explicitly.
	Insecure bool
	// ServerName overrides the name checked on the server's certificate.
	// Empty means the host of Host.
	ServerName string
	// ProxyURL is an http, https, socks5 or socks5h proxy to reach the
	// server through. Empty means none: the environment's proxy variables
	// are not used.
	ProxyURL string

	// BearerToken is a static token. BearerTokenFile, when set, wins: the
	// file is re-read at most once a minute and after a 401, and the last
	// good token is kept when a read fails.
	BearerToken     string
	BearerTokenFile string
	// Username and Password are HTTP basic credentials.
	Username, Password string
	// CertData and KeyData are a PEM client certificate and key. Each
	// wins over its file below.
	CertData, KeyData []byte
	// CertFile and KeyFile name files holding a PEM client certificate
	// and key. Each half comes from its data or else its file, in any
	// mix, as a kubeconfig may write them; a certificate needs both
	// halves. New reads them, then re-reads the files at most once a
	// minute and after a 401, and the last good pair is kept when a read
	// fails. A new pair is presented on new connections; requests in
	// flight, such as a watch, end on the connection they began on.
	CertFile, KeyFile string
	// Exec runs a credential plugin. Nil means none.
	Exec *ExecConfig
	// Impersonate makes requests act as another user. The zero value
	// impersonates no one.
	Impersonate Impersonation

	// Namespace is the default namespace: the kubeconfig context's, or the
	// pod's own in-cluster. Empty means "default" to callers that need one.
	Namespace string

	// UserAgent is sent on every request. Empty means
	// "<program>/<version> (<GOOS>/<GOARCH>)": the base name of
	// os.Args[0], and the main module's version as the binary's build
	// information records it, or "devel".
	UserAgent string
	// QPS and Burst limit the client's request rate. QPS <= 0 means no
	// limit; Burst <= 0 with QPS > 0 means a burst of 1.
	QPS   float64
	Burst int
	// MaxRetries bounds the retries of a request that is safe to retry after
	// a 429 or a 5xx. Zero means the default of 5; negative means none.
	MaxRetries int
	// ObjectLimit bounds, in bytes, a response holding one object and one
	// watch event; ListPageLimit bounds a list page. A larger one fails
	// with an error wrapping [ErrBodyTooLarge]. Zero means 4 MiB and 16
	// MiB, which fit a pod limited to 128 MiB (see [Client]).
	ObjectLimit, ListPageLimit int64
	// PingTimeout is how long an HTTP/2 connection may stay silent before a
	// health-check ping is sent; the peer then has as long again to answer.
	// Zero means 15 seconds.
	PingTimeout time.Duration

	// Transport, when non-nil, carries every request instead of a transport
	// built from the TLS and proxy fields above, which it then has to
	// apply itself: the client certificate is not used. Authentication, the
	// user agent, rate limiting and retries still wrap it. It is the test
	// seam.
	Transport http.RoundTripper
	// WrapTransport, when non-nil, wraps the base transport (built or
	// given), for instance to count requests. Each attempt of a retried
	// request passes through it. Nil means no wrapper.
	WrapTransport func(http.RoundTripper) http.RoundTripper
}

// ExecConfig runs an external credential plugin, as a kubeconfig's
// users[].user.exec describes it. The plugin runs in the working
// directory of the process, as kubectl runs it, and on Unix in a session
// of its own: when it ends, what is left of its process group is killed,
// and reaped when the process is PID 1 or a child subreaper.
type ExecConfig struct {
	// APIVersion is client.authentication.k8s.io/v1 or v1beta1.
	APIVersion string
	Command    string
	Args       []string
	// Env is extra "NAME=value" entries added to the plugin's environment.
	Env []string
	// InteractiveMode is Never or IfAvailable (also when empty); the client
	// never gives a plugin a terminal, so Always is refused.
	InteractiveMode string
	// ProvideClusterInfo passes the cluster's server and CA to the plugin
	// in KUBERNETES_EXEC_INFO.
	ProvideClusterInfo bool
}

// AuthMethod names the way the Config authenticates, for a startup log
// line: "exec", "token-file", "token", "client-certificate", "basic" or
// "none". It never includes the secret itself. It is "none" when Host is a
// plain http:// URL: see [Config.WithheldAuth].
func (c *Config) AuthMethod() string {
	if plainHTTP(c.Host) {
		return "none"
	}
	return c.authMethod()
}

// WithheldAuth names the credentials that [New] does not send because Host
// is a plain http:// URL, as AuthMethod would name them, or "impersonation";
// it is empty when nothing is withheld. Credentials are only ever sent over
// TLS, as kubectl does; a caller should say so once, in a warning.
func (c *Config) WithheldAuth() string {
	switch {
	case !plainHTTP(c.Host):
		return ""
	case c.authMethod() != "none":
		return c.authMethod()
	case c.Impersonate.UserName != "":
		return "impersonation"
	}
	return ""
}

// authMethod is the one order of precedence between the credentials a
// Config may hold: newCredentials sends the header of the first, and a
// client certificate, which travels in the TLS handshake, goes with any.
func (c *Config) authMethod() string {
	switch {
	case c.Exec != nil:
		return "exec"
	case c.BearerTokenFile != "":
		return "token-file"
	case c.BearerToken != "":
		return "token"
	case c.Username != "" || c.Password != "":
		return "basic"
	case len(c.CertData) > 0 || c.CertFile != "":
		return "client-certificate"
	}
	return "none"
}

// check reports what makes a Config unusable, apart from its Host, which
// New parses: for hand-built Configs and kubeconfigs alike, which add the
// file and line. Its errors name each field as the Config does and, in
// parentheses, as a kubeconfig does; they lack the package prefix and
// never quote a value.
func (c *Config) check() error {
	switch {
	case c.Insecure && (len(c.CAData) > 0 || c.CAFile != ""):
		return errors.New("Insecure and CAData or CAFile cannot both be set (insecure-skip-tls-verify and certificate-authority)")
	case (c.CertFile == "" && len(c.CertData) == 0) != (c.KeyFile == "" && len(c.KeyData) == 0):
		return errors.New("a client certificate needs both a certificate and a key: CertFile or CertData, and KeyFile or KeyData (client-certificate and client-key, or their -data)")
	case checkHeaderValue(c.BearerToken) != nil:
		return errors.New("BearerToken (token) contains a control character")
	case strings.Contains(c.Username, ":"):
		return errors.New("Username (username) contains ':'")
	case c.Exec != nil:
		if err := c.Exec.check(); err != nil {
			return fmt.Errorf("exec plugin %q: %w", c.Exec.Command, err)
		}
	}
	if c.ProxyURL != "" {
		if _, err := parseProxyURL(c.ProxyURL); err != nil {
			return fmt.Errorf("ProxyURL %w (proxy-url)", err)
		}
	}
	return c.Impersonate.check()
}
