package controlplane

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// StatusError is a non-2xx answer from the apiserver or etcd.
type StatusError struct {
	Method, Path string
	Code         int
	Body         string // up to 2 KiB of the response body
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("controlplane: %s %s: %d %s", e.Method, e.Path, e.Code, e.Body)
}

// Do sends one request to the apiserver as the admin user. body, when not
// nil, is sent as JSON (a []byte or json.RawMessage as is); out, when not
// nil, receives the decoded JSON answer. A non-2xx answer is a
// *StatusError.
func (p *Plane) Do(ctx context.Context, method, path string, body, out any) error {
	return doJSON(ctx, p.client, method, p.host, path, body, out)
}

func doJSON(ctx context.Context, c *http.Client, method, base, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		var data []byte
		switch b := body.(type) {
		case []byte:
			data = b
		case json.RawMessage:
			data = b
		default:
			var err error
			if data, err = json.Marshal(body); err != nil {
				return fmt.Errorf("controlplane: %s %s: %w", method, path, err)
			}
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return fmt.Errorf("controlplane: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("controlplane: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("controlplane: %s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		snippet := data
		if len(snippet) > 2<<10 {
			snippet = snippet[:2<<10]
		}
		return &StatusError{Method: method, Path: path, Code: resp.StatusCode, Body: string(bytes.TrimSpace(snippet))}
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("controlplane: %s %s: decode: %w", method, path, err)
		}
	}
	return nil
}

func isCode(err error, code int) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Code == code
}

func (p *Plane) exists(ctx context.Context, path string) (bool, error) {
	err := p.Do(ctx, http.MethodGet, path, nil, nil)
	switch {
	case err == nil:
		return true, nil
	case isCode(err, http.StatusNotFound):
		return false, nil
	}
	return false, err
}

// createOK creates an object and treats 409 AlreadyExists as success.
func (p *Plane) createOK(ctx context.Context, path string, obj any) error {
	err := p.Do(ctx, http.MethodPost, path, obj, nil)
	if isCode(err, http.StatusConflict) {
		return nil
	}
	return err
}

type objectMeta struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

func (p *Plane) createNode(ctx context.Context) error {
	type resources struct {
		CPU    string `json:"cpu"`
		Memory string `json:"memory"`
		Pods   string `json:"pods"`
	}
	res := resources{CPU: "64", Memory: "512Gi", Pods: "1000"} // room for the large tests
	node := struct {
		APIVersion string     `json:"apiVersion"`
		Kind       string     `json:"kind"`
		Metadata   objectMeta `json:"metadata"`
		Status     struct {
			Allocatable resources `json:"allocatable"`
			Capacity    resources `json:"capacity"`
		} `json:"status"`
	}{APIVersion: "v1", Kind: "Node", Metadata: objectMeta{
		Name: NodeName,
		Annotations: map[string]string{
			"kwok.x-k8s.io/node":           "fake",
			"node.alpha.kubernetes.io/ttl": "0",
		},
		Labels: map[string]string{
			"kubernetes.io/hostname": NodeName,
			"kubernetes.io/os":       "linux",
			"kubernetes.io/arch":     "amd64",
			"type":                   "kwok",
		},
	}}
	node.Status.Allocatable = res
	node.Status.Capacity = res
	return p.createOK(ctx, "/api/v1/nodes", node)
}

func (p *Plane) nodeReady(ctx context.Context) (bool, error) {
	var node struct {
		Status struct {
			Conditions []struct{ Type, Status string } `json:"conditions"`
		} `json:"status"`
	}
	if err := p.Do(ctx, http.MethodGet, "/api/v1/nodes/"+NodeName, nil, &node); err != nil {
		return false, err
	}
	for _, c := range node.Status.Conditions {
		if c.Type == "Ready" && c.Status == "True" {
			return true, nil
		}
	}
	return false, nil
}

// CreateNamespace creates a namespace; one that exists already is fine.
func (p *Plane) CreateNamespace(ctx context.Context, name string) error {
	return p.createOK(ctx, "/api/v1/namespaces", map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": objectMeta{Name: name},
	})
}

// DeleteNamespace deletes a namespace and returns without waiting for its
// contents to go.
func (p *Plane) DeleteNamespace(ctx context.Context, name string) error {
	err := p.Do(ctx, http.MethodDelete, "/api/v1/namespaces/"+url.PathEscape(name), nil, nil)
	if isCode(err, http.StatusNotFound) {
		return nil
	}
	return err
}

// CreateServiceAccount creates a ServiceAccount (and its namespace); one
// that exists already is fine.
func (p *Plane) CreateServiceAccount(ctx context.Context, namespace, name string) error {
	if err := p.CreateNamespace(ctx, namespace); err != nil {
		return err
	}
	return p.createOK(ctx, "/api/v1/namespaces/"+url.PathEscape(namespace)+"/serviceaccounts", map[string]any{
		"apiVersion": "v1", "kind": "ServiceAccount", "metadata": objectMeta{Name: name},
	})
}

// ServiceAccountToken creates the ServiceAccount if needed and mints a
// token for it with the TokenRequest API, valid for ttl (zero means one
// hour; the apiserver raises anything under ten minutes to ten minutes).
// Every call returns a new token.
func (p *Plane) ServiceAccountToken(ctx context.Context, namespace, name string, ttl time.Duration) (string, error) {
	if ttl <= 0 {
		ttl = time.Hour
	}
	if err := p.CreateServiceAccount(ctx, namespace, name); err != nil {
		return "", err
	}
	req := map[string]any{
		"apiVersion": "authentication.k8s.io/v1",
		"kind":       "TokenRequest",
		"spec":       map[string]any{"expirationSeconds": int64(ttl / time.Second)},
	}
	var resp struct {
		Status struct {
			Token string `json:"token"`
		} `json:"status"`
	}
	path := "/api/v1/namespaces/" + url.PathEscape(namespace) + "/serviceaccounts/" + url.PathEscape(name) + "/token"
	if err := p.Do(ctx, http.MethodPost, path, req, &resp); err != nil {
		return "", err
	}
	if resp.Status.Token == "" {
		return "", fmt.Errorf("controlplane: POST %s: no token in the answer", path)
	}
	return resp.Status.Token, nil
}

// WriteServiceAccountDir lays out dir as the apiserver's pods see
// /var/run/secrets/kubernetes.io/serviceaccount: a fresh token of the
// ServiceAccount, the CA certificate and the namespace. Calling it again
// rotates the token in place (written to a temporary file and renamed).
func (p *Plane) WriteServiceAccountDir(ctx context.Context, dir, namespace, name string) error {
	token, err := p.ServiceAccountToken(ctx, namespace, name, time.Hour)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("controlplane: %w", err)
	}
	for _, f := range []struct {
		name string
		data []byte
	}{
		{"ca.crt", p.pki.caPEM},
		{"namespace", []byte(namespace)},
		{"token", []byte(token)},
	} {
		if err := writeFileAtomic(filepath.Join(dir, f.name), f.data); err != nil {
			return err
		}
	}
	return nil
}

func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("controlplane: %w", err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("controlplane: %w", err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("controlplane: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("controlplane: %w", err)
	}
	return nil
}

// EtcdRevision returns etcd's current revision, which is the newest
// resourceVersion the apiserver can have handed out.
func (p *Plane) EtcdRevision(ctx context.Context) (int64, error) {
	var resp struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	// Any key will do: the header carries the store's revision.
	body := map[string]any{"key": "AA==", "limit": 1, "count_only": true}
	if err := doJSON(ctx, http.DefaultClient, http.MethodPost, p.etcdURL, "/v3/kv/range", body, &resp); err != nil {
		return 0, err
	}
	rev, err := strconv.ParseInt(resp.Header.Revision, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("controlplane: etcd revision %q: %w", resp.Header.Revision, err)
	}
	return rev, nil
}

// CompactEtcd compacts etcd, physically, up to its current revision and
// returns that revision. Afterwards any resourceVersion older than it is
// gone from etcd: a list or watch that must be served from etcd at such a
// version gets 410 Gone.
func (p *Plane) CompactEtcd(ctx context.Context) (int64, error) {
	rev, err := p.EtcdRevision(ctx)
	if err != nil {
		return 0, err
	}
	body := map[string]any{"revision": strconv.FormatInt(rev, 10), "physical": true}
	if err := doJSON(ctx, http.DefaultClient, http.MethodPost, p.etcdURL, "/v3/kv/compaction", body, nil); err != nil {
		return 0, err
	}
	return rev, nil
}
