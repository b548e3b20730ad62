package k8sapi

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/zerodep-k8s/widget-operator/internal/yaml"
)

// ConfigError is a problem with a kubeconfig file: it cannot be read, is not
// valid YAML in the subset this package reads, or does not describe a usable
// context. It never holds a token, key or password.
type ConfigError struct {
	// Path is the kubeconfig file, or the files joined by the list
	// separator when the problem concerns their merged content.
	Path string
	// Line is the 1-based line the problem is at; 0 when it is not at one.
	Line int
	// Err is the cause.
	Err error
}

// Error returns "k8sapi: kubeconfig PATH: line N: cause".
func (e *ConfigError) Error() string {
	s := "k8sapi: kubeconfig " + e.Path + ": "
	if e.Line > 0 {
		s += "line " + strconv.Itoa(e.Line) + ": "
	}
	return s + e.Err.Error()
}

// Unwrap returns the cause.
func (e *ConfigError) Unwrap() error { return e.Err }

// Bounds on the files a configuration names, so that a path such as
// /dev/zero is an error, not an exhausted memory.
const (
	// maxKubeconfigSize bounds the bytes read from one kubeconfig file.
	maxKubeconfigSize = 8 << 20
	// maxPEMFileSize bounds a CA bundle, client certificate or key file:
	// several times the largest public CA bundles.
	maxPEMFileSize = 1 << 20
)

// kcFile is one kubeconfig file that took part in a merge.
type kcFile struct {
	path string // as given
	dir  string // absolute folder, for relative paths inside it
}

type kcCluster struct {
	file                 *kcFile
	line                 int
	server               string
	caFile               string
	caData               []byte
	insecure             bool
	serverName, proxyURL string
}

// kcExec is an exec plugin as the file gives it: its Command not yet
// resolved, its Dir not set.
type kcExec struct {
	ExecConfig
	installHint string
}

type kcUser struct {
	file               *kcFile
	line               int
	token, tokenFile   string
	certFile, keyFile  string
	certData, keyData  []byte
	username, password string
	exec               *kcExec
	impersonate        Impersonation
}

type kcContext struct {
	file                     *kcFile
	line                     int
	cluster, user, namespace string
}

// kubeconfig is the merged content of one or more kubeconfig files. The
// first file to name an entry or set current-context wins.
type kubeconfig struct {
	currentContext string
	clusters       map[string]*kcCluster
	users          map[string]*kcUser
	contexts       map[string]*kcContext
}

func newKubeconfig() *kubeconfig {
	return &kubeconfig{
		clusters: make(map[string]*kcCluster),
		users:    make(map[string]*kcUser),
		contexts: make(map[string]*kcContext),
	}
}

// LoadKubeconfig reads and merges the kubeconfig files at paths, the way
// kubectl merges $KUBECONFIG: for current-context and for each named
// cluster, user and context, the first file that sets it wins. It returns
// the Config of the named context, or of current-context when context is
// empty. Relative file paths in a file are resolved against that file's
// folder. Every problem is a [*ConfigError].
func LoadKubeconfig(paths []string, context string) (*Config, error) {
	if len(paths) == 0 {
		return nil, errors.New("k8sapi: LoadKubeconfig: no kubeconfig path given")
	}
	kc := newKubeconfig()
	for _, p := range paths {
		data, err := readFileLimit(p, maxKubeconfigSize)
		if err != nil {
			return nil, &ConfigError{Path: p, Err: pathCause(err)}
		}
		if err := kc.merge(p, data); err != nil {
			return nil, err
		}
	}
	return kc.config(strings.Join(paths, string(os.PathListSeparator)), context)
}

// readFileLimit reads a file of at most limit bytes. A larger one is an
// error, after reading limit+1 bytes at most. Its errors lack the package
// prefix, for the caller to add.
func readFileLimit(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("larger than %s", sizeString(limit))
	}
	return data, nil
}

// sizeString writes a limit in KiB or MiB.
func sizeString(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return strconv.FormatInt(n>>20, 10) + " MiB"
	}
	return strconv.FormatInt(n>>10, 10) + " KiB"
}

// pathCause drops the path from an *fs.PathError, which the ConfigError
// already names.
func pathCause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// merge decodes one file's content and adds what is not there yet.
func (kc *kubeconfig) merge(path string, data []byte) error {
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return &ConfigError{Path: path, Err: err}
	}
	d := decoder{file: &kcFile{path: path, dir: dir}}
	root, err := yaml.Parse(data)
	if err != nil {
		var se *yaml.SyntaxError
		if errors.As(err, &se) {
			return &ConfigError{Path: path, Line: se.Line, Err: errors.New(se.Msg)}
		}
		return &ConfigError{Path: path, Err: err}
	}
	if root.IsNull() {
		return nil // an empty file is an empty config
	}
	if root.Kind != yaml.Map {
		return d.errorf(root, "the document is a %s, want a map", root.Kind)
	}
	for _, e := range root.Entries {
		v := e.Value
		switch e.Key {
		case "current-context":
			s, err := d.str(v, "current-context")
			if err != nil {
				return err
			}
			if kc.currentContext == "" {
				kc.currentContext = s
			}
		case "clusters":
			err = named(&d, v, "clusters", "cluster", kc.clusters, d.cluster)
		case "users":
			err = named(&d, v, "users", "user", kc.users, d.user)
		case "contexts":
			err = named(&d, v, "contexts", "context", kc.contexts, d.context)
		}
		// Other keys (apiVersion, kind, preferences, extensions) carry
		// nothing this package uses.
		if err != nil {
			return err
		}
	}
	return nil
}

// decoder turns the nodes of one file into kubeconfig entries. Its errors
// name fields and entries, never a field's value.
type decoder struct {
	file *kcFile
}

func (d *decoder) errorf(n *yaml.Node, format string, args ...any) error {
	return &ConfigError{Path: d.file.path, Line: n.Line, Err: fmt.Errorf(format, args...)}
}

func (d *decoder) str(n *yaml.Node, field string) (string, error) {
	if n.IsNull() {
		return "", nil
	}
	if n.Kind != yaml.Scalar {
		return "", d.errorf(n, "%s: want a string, got a %s", field, n.Kind)
	}
	return n.Value, nil
}

func (d *decoder) boolean(n *yaml.Node, field string) (bool, error) {
	if n.IsNull() {
		return false, nil
	}
	if n.Kind == yaml.Scalar && !n.Quoted {
		switch n.Value {
		case "true", "True", "TRUE":
			return true, nil
		case "false", "False", "FALSE":
			return false, nil
		}
	}
	return false, d.errorf(n, "%s: want true or false", field)
}

func (d *decoder) base64(n *yaml.Node, field string) ([]byte, error) {
	s, err := d.str(n, field)
	if err != nil || s == "" {
		return nil, err
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		var ce base64.CorruptInputError
		if errors.As(err, &ce) {
			return nil, d.errorf(n, "%s: invalid base64 at byte %d", field, int64(ce))
		}
		return nil, d.errorf(n, "%s: invalid base64", field)
	}
	return b, nil
}

// want checks that n is null or of kind k.
func (d *decoder) want(n *yaml.Node, k yaml.Kind, field string) error {
	if n.IsNull() || n.Kind == k {
		return nil
	}
	return d.errorf(n, "%s: want a %s, got a %s", field, k, n.Kind)
}

func (d *decoder) mapping(n *yaml.Node, field string) ([]yaml.Entry, error) {
	return n.Entries, d.want(n, yaml.Map, field)
}

func (d *decoder) list(n *yaml.Node, field string) ([]*yaml.Node, error) {
	return n.Items, d.want(n, yaml.List, field)
}

// named decodes a list of {name: ..., <inner>: {...}} entries with
// decode, and adds to m those whose name it does not hold yet.
func named[T any](d *decoder, n *yaml.Node, field, inner string, m map[string]*T, decode func(n *yaml.Node, name string, line int) (*T, error)) error {
	items, err := d.list(n, field)
	if err != nil {
		return err
	}
	seen := make(map[string]int)
	for i, it := range items {
		if err := d.want(it, yaml.Map, fmt.Sprintf("%s[%d]", field, i)); err != nil {
			return err
		}
		name, err := d.str(it.Get("name"), fmt.Sprintf("%s[%d].name", field, i))
		if err != nil {
			return err
		}
		if name == "" {
			return d.errorf(it, "%s[%d]: no name", field, i)
		}
		if first, dup := seen[name]; dup {
			return d.errorf(it, "%s: %q is defined twice (first at line %d)", field, name, first)
		}
		seen[name] = it.Line
		body := it.Get(inner)
		if body == nil {
			body = &yaml.Node{Kind: yaml.Scalar, Line: it.Line}
		}
		v, err := decode(body, name, it.Line)
		if err != nil {
			return err
		}
		if _, ok := m[name]; !ok {
			m[name] = v
		}
	}
	return nil
}

// fields decodes the entries of map n, called what in errors, into the
// destinations of their keys: a *string, a *bool, a *[]byte (base64), a
// *[]string, or a function. Other keys are ignored. An entry's field name
// in errors is prefix and its key.
func (d *decoder) fields(n *yaml.Node, what, prefix string, dst map[string]any) error {
	entries, err := d.mapping(n, what)
	if err != nil {
		return err
	}
	for _, e := range entries {
		field := prefix + e.Key
		switch p := dst[e.Key].(type) {
		case *string:
			*p, err = d.str(e.Value, field)
		case *bool:
			*p, err = d.boolean(e.Value, field)
		case *[]byte:
			*p, err = d.base64(e.Value, field)
		case *[]string:
			*p, err = d.strings(e.Value, field)
		case func(v *yaml.Node, field string) error:
			err = p(e.Value, field)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (d *decoder) cluster(n *yaml.Node, name string, line int) (*kcCluster, error) {
	c := &kcCluster{file: d.file, line: line}
	return c, d.fields(n, "cluster "+strconv.Quote(name), fmt.Sprintf("cluster %q: ", name), map[string]any{
		"server":                     &c.server,
		"certificate-authority":      &c.caFile,
		"certificate-authority-data": &c.caData,
		"insecure-skip-tls-verify":   &c.insecure,
		"tls-server-name":            &c.serverName,
		"proxy-url":                  &c.proxyURL,
	})
}

func (d *decoder) user(n *yaml.Node, name string, line int) (*kcUser, error) {
	u := &kcUser{file: d.file, line: line}
	return u, d.fields(n, "user "+strconv.Quote(name), fmt.Sprintf("user %q: ", name), map[string]any{
		"token":                   &u.token,
		"tokenFile":               &u.tokenFile,
		"client-certificate":      &u.certFile,
		"client-key":              &u.keyFile,
		"client-certificate-data": &u.certData,
		"client-key-data":         &u.keyData,
		"username":                &u.username,
		"password":                &u.password,
		"exec": func(v *yaml.Node, field string) (err error) {
			if !v.IsNull() {
				u.exec, err = d.exec(v, field)
			}
			return err
		},
		"auth-provider": func(v *yaml.Node, field string) error {
			if v.IsNull() {
				return nil
			}
			return d.errorf(v, "%s: auth providers are not supported; use an exec plugin", field)
		},
		"as":        &u.impersonate.UserName,
		"as-uid":    &u.impersonate.UID,
		"as-groups": &u.impersonate.Groups,
		"as-user-extra": func(v *yaml.Node, field string) (err error) {
			u.impersonate.Extra, err = d.extra(v, field)
			return err
		},
	})
}

// strings decodes a list of strings; null is an empty list.
func (d *decoder) strings(n *yaml.Node, field string) ([]string, error) {
	items, err := d.list(n, field)
	if err != nil {
		return nil, err
	}
	var out []string
	for i, it := range items {
		s, err := d.str(it, fmt.Sprintf("%s[%d]", field, i))
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// extra decodes as-user-extra: a map of lists of strings.
func (d *decoder) extra(n *yaml.Node, field string) (map[string][]string, error) {
	entries, err := d.mapping(n, field)
	if err != nil || len(entries) == 0 {
		return nil, err
	}
	out := make(map[string][]string, len(entries))
	for _, e := range entries {
		v, err := d.strings(e.Value, field+"."+e.Key)
		if err != nil {
			return nil, err
		}
		out[e.Key] = v
	}
	return out, nil
}

func (d *decoder) exec(n *yaml.Node, field string) (*kcExec, error) {
	x := &kcExec{}
	err := d.fields(n, field, field+".", map[string]any{
		"apiVersion": &x.APIVersion,
		"command":    &x.Command,
		"args":       &x.Args,
		"env": func(v *yaml.Node, f string) (err error) {
			x.Env, err = d.env(v, f)
			return err
		},
		"interactiveMode":    &x.InteractiveMode,
		"provideClusterInfo": &x.ProvideClusterInfo,
		"installHint":        &x.installHint,
	})
	if err != nil {
		return nil, err
	}
	switch x.APIVersion {
	case execV1, execV1beta1:
	case "":
		return nil, d.errorf(n, "%s: apiVersion is missing", field)
	default:
		return nil, d.errorf(n, "%s: apiVersion %q is not supported; use %s or %s", field, x.APIVersion, execV1, execV1beta1)
	}
	if x.Command == "" {
		return nil, d.errorf(n, "%s: command is missing", field)
	}
	switch x.InteractiveMode {
	case "":
		if x.APIVersion == execV1 {
			return nil, d.errorf(n, "%s: interactiveMode is required with %s", field, execV1)
		}
		x.InteractiveMode = "IfAvailable"
	case "Never", "IfAvailable":
	case "Always":
		return nil, d.errorf(n, "%s: interactiveMode Always needs a terminal, which the client never gives a plugin", field)
	default:
		return nil, d.errorf(n, "%s: interactiveMode %q is not Never, IfAvailable or Always", field, x.InteractiveMode)
	}
	return x, nil
}

// env decodes an exec plugin's env: a list of {name, value} maps, as
// "name=value" strings.
func (d *decoder) env(n *yaml.Node, f string) ([]string, error) {
	items, err := d.list(n, f)
	if err != nil {
		return nil, err
	}
	var env []string
	for i, it := range items {
		fi := fmt.Sprintf("%s[%d]", f, i)
		if it.Kind != yaml.Map {
			return nil, d.errorf(it, "%s: want a map with name and value", fi)
		}
		name, err := d.str(it.Get("name"), fi+".name")
		if err != nil {
			return nil, err
		}
		if name == "" || strings.ContainsAny(name, "=\x00") {
			return nil, d.errorf(it, "%s: invalid or missing name", fi)
		}
		val, err := d.str(it.Get("value"), fi+".value")
		if err != nil {
			return nil, err
		}
		if v := it.Get("value"); v != nil && v.Kind == yaml.Scalar && strings.ContainsRune(val, 0) {
			return nil, d.errorf(v, "%s.value: contains a NUL byte", fi)
		}
		env = append(env, name+"="+val)
	}
	return env, nil
}

func (d *decoder) context(n *yaml.Node, name string, line int) (*kcContext, error) {
	c := &kcContext{file: d.file, line: line}
	return c, d.fields(n, "context "+strconv.Quote(name), fmt.Sprintf("context %q: ", name), map[string]any{
		"cluster":   &c.cluster,
		"user":      &c.user,
		"namespace": &c.namespace,
	})
}

// resolve makes a path from a kubeconfig absolute, relative to the folder
// of the file that held it.
func (f *kcFile) resolve(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(f.dir, p)
}

// dataOrFile returns data when it is not empty, or else the content of
// the PEM file p (none when p is empty) that the entry at line names as
// what.
func (f *kcFile) dataOrFile(data []byte, p string, line int, what string) ([]byte, error) {
	if len(data) > 0 || p == "" {
		return data, nil
	}
	b, err := readFileLimit(f.resolve(p), maxPEMFileSize)
	if err != nil {
		return nil, &ConfigError{Path: f.path, Line: line, Err: fmt.Errorf("%s: %w", what, err)}
	}
	return b, nil
}

// config builds the Config of a context. paths names the merged files for
// errors that concern no one file.
func (kc *kubeconfig) config(paths, context string) (*Config, error) {
	name := context
	if name == "" {
		name = kc.currentContext
	}
	if name == "" {
		return nil, &ConfigError{Path: paths, Err: errors.New("no current-context is set and no context was given")}
	}
	ctx, ok := kc.contexts[name]
	if !ok {
		return nil, &ConfigError{Path: paths, Err: fmt.Errorf("context %q not found", name)}
	}
	ctxErr := func(format string, args ...any) error {
		return &ConfigError{Path: ctx.file.path, Line: ctx.line, Err: fmt.Errorf("context %q: "+format, append([]any{name}, args...)...)}
	}
	if ctx.cluster == "" {
		return nil, ctxErr("no cluster")
	}
	cl, ok := kc.clusters[ctx.cluster]
	if !ok {
		return nil, ctxErr("cluster %q not found", ctx.cluster)
	}
	cfg := &Config{Namespace: ctx.namespace}
	if err := cl.apply(cfg, ctx.cluster); err != nil {
		return nil, err
	}
	if ctx.user != "" {
		u, ok := kc.users[ctx.user]
		if !ok {
			return nil, ctxErr("user %q not found", ctx.user)
		}
		if err := u.apply(cfg, ctx.user); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}

func (c *kcCluster) apply(cfg *Config, name string) error {
	fail := func(format string, args ...any) error {
		return &ConfigError{Path: c.file.path, Line: c.line, Err: fmt.Errorf("cluster %q: "+format, append([]any{name}, args...)...)}
	}
	if c.server == "" {
		return fail("server is missing")
	}
	if !strings.Contains(c.server, "://") {
		return fail("server is not an https:// or http:// URL")
	}
	if _, err := parseHost(c.server); err != nil {
		return fail("server %v", err)
	}
	cfg.Host = c.server
	cfg.ServerName = c.serverName
	cfg.Insecure = c.insecure
	var err error
	if cfg.CAData, err = c.file.dataOrFile(c.caData, c.caFile, c.line, fmt.Sprintf("cluster %q: certificate-authority", name)); err != nil {
		return err
	}
	if c.insecure && (len(c.caData) > 0 || c.caFile != "") {
		return fail("insecure-skip-tls-verify and a certificate authority cannot both be set")
	}
	if c.proxyURL != "" {
		if _, err := parseProxyURL(c.proxyURL); err != nil {
			return fail("proxy-url %v", err)
		}
		cfg.ProxyURL = c.proxyURL
	}
	return nil
}

// parseProxyURL checks a proxy URL, for the loader and the transport
// alike: http, https, socks5 or socks5h, with a host. Its errors never
// repeat the URL, which may hold a password.
func parseProxyURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return nil, errors.New("is not a valid URL")
	}
	switch u.Scheme {
	case "http", "https", "socks5", "socks5h":
		return u, nil
	}
	return nil, errors.New("scheme must be http, https, socks5 or socks5h")
}

func (u *kcUser) apply(cfg *Config, name string) error {
	fail := func(format string, args ...any) error {
		return &ConfigError{Path: u.file.path, Line: u.line, Err: fmt.Errorf("user %q: "+format, append([]any{name}, args...)...)}
	}
	var methods []string
	if u.token != "" || u.tokenFile != "" {
		methods = append(methods, "token")
	}
	if u.username != "" || u.password != "" {
		methods = append(methods, "username/password")
	}
	if u.exec != nil {
		methods = append(methods, "exec")
	}
	if len(methods) > 1 {
		return fail("more than one authentication method: %s", strings.Join(methods, ", "))
	}
	cfg.BearerToken = u.token
	cfg.BearerTokenFile = u.file.resolve(u.tokenFile)
	cfg.Username, cfg.Password = u.username, u.password
	if err := u.impersonate.check(); err != nil {
		return fail("%v", err)
	}
	cfg.Impersonate = u.impersonate
	var err error
	if cfg.CertData, err = u.file.dataOrFile(u.certData, u.certFile, u.line, fmt.Sprintf("user %q: client-certificate", name)); err != nil {
		return err
	}
	if cfg.KeyData, err = u.file.dataOrFile(u.keyData, u.keyFile, u.line, fmt.Sprintf("user %q: client-key", name)); err != nil {
		return err
	}
	if (len(cfg.CertData) > 0) != (len(cfg.KeyData) > 0) {
		return fail("a client certificate needs both a certificate and a key")
	}
	if len(u.certData) == 0 && len(u.keyData) == 0 && u.certFile != "" && u.keyFile != "" {
		// Files are read again when they change: see Config.CertFile.
		cfg.CertFile, cfg.KeyFile = u.file.resolve(u.certFile), u.file.resolve(u.keyFile)
	}
	if u.exec != nil {
		x := u.exec.ExecConfig
		// A command with a path separator is a file relative to the
		// kubeconfig; a bare name is looked up in $PATH.
		if strings.ContainsRune(x.Command, '/') || strings.ContainsRune(x.Command, filepath.Separator) {
			x.Command = u.file.resolve(x.Command)
		}
		x.Dir = u.file.dir
		cfg.Exec = &x
	}
	return nil
}
