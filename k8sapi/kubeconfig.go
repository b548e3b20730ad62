package k8sapi

import (
	"cmp"
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

	"github.com/zerodep-k8s/widget-operator/k8sapi/internal/yaml"
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

// kcFile is one kubeconfig file that took part in a merge. Its methods
// decode the file's nodes into kubeconfig entries; their errors name fields
// and entries, never a field's value.
type kcFile struct {
	path string      // as given
	dir  string      // absolute folder, for relative paths inside it
	kc   *kubeconfig // the merge it adds to
}

// kcEntry is one named cluster, user or context of a kubeconfig file: its
// fields decoded into the Config fields they set, and the few a Config has
// no place for.
type kcEntry struct {
	file *kcFile
	line int
	kind string // "cluster", "user" or "context"
	name string
	cfg  Config
	// cluster and user are a context's.
	cluster, user string
}

// errorf returns a ConfigError at the entry.
func (e *kcEntry) errorf(format string, args ...any) error {
	return &ConfigError{Path: e.file.path, Line: e.line, Err: fmt.Errorf("%s %q: "+format, append([]any{e.kind, e.name}, args...)...)}
}

// kubeconfig is the merged content of one or more kubeconfig files. The
// first file to name an entry or set current-context wins.
type kubeconfig struct {
	currentContext string
	entries        map[string]*kcEntry // by kind and name: "user/admin"
}

func newKubeconfig() *kubeconfig {
	return &kubeconfig{entries: make(map[string]*kcEntry)}
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
		return nil, fmt.Errorf("larger than %d KiB", limit>>10)
	}
	return data, nil
}

// pathCause drops the path from an *fs.PathError, which the ConfigError
// already names.
func pathCause(err error) error {
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
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
	d := &kcFile{path: path, dir: dir, kc: kc}
	root, err := yaml.Parse(data)
	if se, ok := errors.AsType[*yaml.SyntaxError](err); ok { // Parse's only error
		return &ConfigError{Path: path, Line: se.Line, Err: errors.New(se.Msg)}
	}
	// An empty file is an empty config. Other keys (apiVersion, kind,
	// preferences, extensions) carry nothing this package uses.
	var current string
	err = d.fields(root, "the document", "", map[string]any{
		"current-context": &current,
		"clusters":        d.section,
		"users":           d.section,
		"contexts":        d.section,
	})
	kc.currentContext = cmp.Or(kc.currentContext, current)
	return err
}

func (d *kcFile) errorf(n *yaml.Node, format string, args ...any) error {
	return &ConfigError{Path: d.path, Line: n.Line, Err: fmt.Errorf(format, args...)}
}

// want checks that n is null or of kind k.
func (d *kcFile) want(n *yaml.Node, k yaml.Kind, field string) error {
	if n.IsNull() || n.Kind == k {
		return nil
	}
	return d.errorf(n, "%s: want a %s, got a %s", field, k, n.Kind)
}

// str decodes a string; null is empty. No string may hold a NUL byte.
func (d *kcFile) str(n *yaml.Node, field string) (string, error) {
	if n.IsNull() {
		return "", nil
	}
	if n.Kind != yaml.Scalar {
		return "", d.errorf(n, "%s: want a string, got a %s", field, n.Kind)
	}
	if strings.ContainsRune(n.Value, 0) {
		return "", d.errorf(n, "%s: contains a NUL byte", field)
	}
	return n.Value, nil
}

// boolean decodes a boolean that is not null (fields passes no null on).
func (d *kcFile) boolean(n *yaml.Node, field string) (bool, error) {
	if v, ok := booleans[n.Value]; ok && n.Kind == yaml.Scalar && !n.Quoted {
		return v, nil
	}
	return false, d.errorf(n, "%s: want true or false", field)
}

// booleans are the plain scalars of YAML 1.2's core schema that are
// booleans, and their values.
var booleans = map[string]bool{"true": true, "True": true, "TRUE": true, "false": false, "False": false, "FALSE": false}

func (d *kcFile) base64(n *yaml.Node, field string) ([]byte, error) {
	s, err := d.str(n, field)
	if err != nil || s == "" {
		return nil, err
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, d.errorf(n, "%s: invalid base64: %v", field, err) // an offset, never the data
	}
	return b, nil
}

// list calls fn with each item of list n and its name in errors,
// field[i]; null is an empty list.
func (d *kcFile) list(n *yaml.Node, field string, fn func(it *yaml.Node, at string) error) error {
	if err := d.want(n, yaml.List, field); err != nil {
		return err
	}
	for i, it := range n.Items {
		if err := fn(it, fmt.Sprintf("%s[%d]", field, i)); err != nil {
			return err
		}
	}
	return nil
}

// strings decodes a list of strings.
func (d *kcFile) strings(n *yaml.Node, field string) (out []string, err error) {
	err = d.list(n, field, func(it *yaml.Node, at string) error {
		s, err := d.str(it, at)
		out = append(out, s)
		return err
	})
	return out, err
}

// extra decodes as-user-extra: a map of lists of strings.
func (d *kcFile) extra(n *yaml.Node, field string) (map[string][]string, error) {
	if err := d.want(n, yaml.Map, field); err != nil || len(n.Entries) == 0 {
		return nil, err
	}
	out := make(map[string][]string, len(n.Entries))
	for _, e := range n.Entries {
		v, err := d.strings(e.Value, field+"."+e.Key)
		if err != nil {
			return nil, err
		}
		out[e.Key] = v
	}
	return out, nil
}

// fields decodes the entries of map n, called what in errors, into the
// destinations of their keys: a *string, a *bool, a *[]byte (base64), a
// *[]string, a *map[string][]string, a function, or a **yaml.Node that
// keeps the value as it is. A null value leaves its destination as it is,
// zero in every table, and calls no function. Other keys are ignored. An
// entry's field name in errors is prefix and its key.
func (d *kcFile) fields(n *yaml.Node, what, prefix string, dst map[string]any) error {
	if err := d.want(n, yaml.Map, what); err != nil || n.IsNull() {
		return err
	}
	for _, e := range n.Entries {
		if e.Value.IsNull() {
			continue
		}
		var err error
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
		case *map[string][]string:
			*p, err = d.extra(e.Value, field)
		case func(v *yaml.Node, field string) error:
			err = p(e.Value, field)
		case **yaml.Node:
			*p = e.Value
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// section decodes a list of {name: ..., <kind>: {...}} entries, such as
// clusters, and adds to the merge those whose name it does not hold yet.
func (d *kcFile) section(n *yaml.Node, field string) error {
	kind := strings.TrimSuffix(field, "s")
	seen := make(map[string]int)
	return d.list(n, field, func(it *yaml.Node, at string) error {
		var name string
		var body *yaml.Node // the entry's own map, decoded once the name is checked
		if err := d.fields(it, at, at+".", map[string]any{"name": &name, kind: &body}); err != nil {
			return err
		}
		if name == "" {
			return d.errorf(it, "%s: no name", at)
		}
		if first, dup := seen[name]; dup {
			return d.errorf(it, "%s: %q is defined twice (first at line %d)", field, name, first)
		}
		seen[name] = it.Line
		e := &kcEntry{file: d, line: it.Line, kind: kind, name: name}
		what := kind + " " + strconv.Quote(name)
		if err := d.fields(body, what, what+": ", d.table(e)); err != nil {
			return err
		}
		if d.kc.entries[kind+"/"+name] == nil {
			d.kc.entries[kind+"/"+name] = e
		}
		return nil
	})
}

// table returns the destinations of the fields of entry e's kind.
func (d *kcFile) table(e *kcEntry) map[string]any {
	c := &e.cfg
	switch e.kind {
	case "cluster":
		return map[string]any{
			"server":                     &c.Host,
			"certificate-authority":      &c.CAFile,
			"certificate-authority-data": &c.CAData,
			"insecure-skip-tls-verify":   &c.Insecure,
			"tls-server-name":            &c.ServerName,
			"proxy-url":                  &c.ProxyURL,
		}
	case "context":
		return map[string]any{
			"cluster":   &e.cluster,
			"user":      &e.user,
			"namespace": &c.Namespace,
		}
	}
	return map[string]any{
		"token":                   &c.BearerToken,
		"tokenFile":               &c.BearerTokenFile,
		"client-certificate":      &c.CertFile,
		"client-key":              &c.KeyFile,
		"client-certificate-data": &c.CertData,
		"client-key-data":         &c.KeyData,
		"username":                &c.Username,
		"password":                &c.Password,
		"exec": func(v *yaml.Node, field string) (err error) {
			c.Exec, err = d.exec(v, field)
			return err
		},
		"auth-provider": func(v *yaml.Node, field string) error {
			return d.errorf(v, "%s: auth providers are not supported; use an exec plugin", field)
		},
		"as":            &c.Impersonate.UserName,
		"as-uid":        &c.Impersonate.UID,
		"as-groups":     &c.Impersonate.Groups,
		"as-user-extra": &c.Impersonate.Extra,
	}
}

// exec decodes an exec plugin. Its installHint is for people who run
// kubectl by hand.
func (d *kcFile) exec(n *yaml.Node, field string) (*ExecConfig, error) {
	x := &ExecConfig{}
	err := d.fields(n, field, field+".", map[string]any{
		"apiVersion": &x.APIVersion,
		"command":    &x.Command,
		"args":       &x.Args,
		// env is a list of {name, value} maps, kept as "name=value".
		"env": func(v *yaml.Node, f string) error {
			return d.list(v, f, func(it *yaml.Node, at string) error {
				var name, value string
				if err := d.fields(it, at, at+".", map[string]any{"name": &name, "value": &value}); err != nil {
					return err
				}
				if name == "" || strings.ContainsRune(name, '=') {
					return d.errorf(it, "%s: invalid or missing name", at)
				}
				x.Env = append(x.Env, name+"="+value)
				return nil
			})
		},
		"interactiveMode":    &x.InteractiveMode,
		"provideClusterInfo": &x.ProvideClusterInfo,
	})
	if err != nil {
		return nil, err
	}
	if err := x.check(); err != nil {
		return nil, d.errorf(n, "%s: %v", field, err)
	}
	if x.InteractiveMode == "" && x.APIVersion == execV1 {
		return nil, d.errorf(n, "%s: interactiveMode is required with %s", field, execV1)
	}
	x.InteractiveMode = cmp.Or(x.InteractiveMode, "IfAvailable")
	// A command with a path separator is a file relative to the
	// kubeconfig; a bare name is looked up in $PATH.
	if strings.ContainsRune(x.Command, '/') || strings.ContainsRune(x.Command, filepath.Separator) {
		x.Command = d.resolve(x.Command)
	}
	return x, nil
}

// resolve makes a path from a kubeconfig absolute, relative to the folder
// of the file that held it.
func (f *kcFile) resolve(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(f.dir, p)
}

// config builds the Config of a context. paths names the merged files for
// errors that concern no one file.
func (kc *kubeconfig) config(paths, context string) (*Config, error) {
	name := cmp.Or(context, kc.currentContext)
	if name == "" {
		return nil, &ConfigError{Path: paths, Err: errors.New("no current-context is set and no context was given")}
	}
	ctx := kc.entries["context/"+name]
	if ctx == nil {
		return nil, &ConfigError{Path: paths, Err: fmt.Errorf("context %q not found", name)}
	}
	if ctx.cluster == "" {
		return nil, ctx.errorf("no cluster")
	}
	cl := kc.entries["cluster/"+ctx.cluster]
	if cl == nil {
		return nil, ctx.errorf("cluster %q not found", ctx.cluster)
	}
	// The cluster's Config, checked before a user is added.
	cfg := cl.cfg
	if _, err := parseHost(cfg.Host); err != nil {
		return nil, cl.errorf("server %v", err)
	}
	if !strings.Contains(cfg.Host, "://") {
		return nil, cl.errorf("server is not an https:// or http:// URL")
	}
	// The CA file is named, for New to read: see Config.CAFile.
	cfg.CAFile = cl.file.resolve(cfg.CAFile)
	if err := cfg.check(); err != nil {
		return nil, cl.errorf("%v", err)
	}
	cfg.Namespace = ctx.cfg.Namespace
	if ctx.user == "" {
		return &cfg, nil
	}
	u := kc.entries["user/"+ctx.user]
	if u == nil {
		return nil, ctx.errorf("user %q not found", ctx.user)
	}
	if err := u.applyUser(&cfg); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// parseProxyURL checks a proxy URL, for Config.check and the transport
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

// applyUser adds the credentials of user entry u to cfg.
func (u *kcEntry) applyUser(cfg *Config) error {
	c := u.cfg
	var methods []string
	if c.BearerToken != "" || c.BearerTokenFile != "" {
		methods = append(methods, "token")
	}
	if c.Username != "" || c.Password != "" {
		methods = append(methods, "username/password")
	}
	if c.Exec != nil {
		methods = append(methods, "exec")
	}
	if len(methods) > 1 {
		return u.errorf("more than one authentication method: %s", strings.Join(methods, ", "))
	}
	cfg.BearerToken = c.BearerToken
	cfg.BearerTokenFile = u.file.resolve(c.BearerTokenFile)
	cfg.Username, cfg.Password = c.Username, c.Password
	cfg.Impersonate = c.Impersonate
	// Certificate files are named, for New to read: see Config.CertFile.
	cfg.CertData, cfg.KeyData = c.CertData, c.KeyData
	cfg.CertFile, cfg.KeyFile = u.file.resolve(c.CertFile), u.file.resolve(c.KeyFile)
	cfg.Exec = c.Exec
	if err := cfg.check(); err != nil {
		return u.errorf("%v", err)
	}
	return nil
}
