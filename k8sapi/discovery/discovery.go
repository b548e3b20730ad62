// Package discovery resolves the names people type for a kind of object
// (a kind, plural, singular or short name, optionally qualified by group,
// or by version and group: "Deployment", "deploy", "po",
// "widgets.example.com", "deployments.v1.apps") to a [k8sapi.Resource],
// through the API server's aggregated discovery, as kubectl does.
//
// The operator does not import this package; it is for tools such as
// examples/kget.
package discovery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// accept asks for aggregated discovery, and lets an older server answer
// with its legacy documents, which are then reported as unsupported.
const accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"

// docLimit bounds one discovery document; a large cluster's /apis is a few
// hundred KiB.
const docLimit = 16 << 20

// ErrNotFound is wrapped by the error of a name that no resource has.
var ErrNotFound = errors.New("discovery: no resource type has this name")

// Error is the error of [Resolver.Resolve] and [Resolver.Resources]: Name
// is the name asked for (empty for Resources) and Err the cause,
// [ErrNotFound] or an error of the k8sapi client.
type Error struct {
	Name string
	Err  error
}

func (e *Error) Error() string {
	cause := strings.TrimPrefix(e.Err.Error(), "discovery: ")
	if e.Name == "" {
		return "discovery: " + cause
	}
	return fmt.Sprintf("discovery: resolve %.100q: %s", e.Name, cause)
}

func (e *Error) Unwrap() error { return e.Err }

// Mapping is what discovery says of one resource in one version.
type Mapping struct {
	// Resource has the Kind of its objects, such as "Deployment": it can
	// name an owner (reconcile.WatchOwned) as it is.
	k8sapi.Resource
	// Singular is the lower-case singular name, such as "deployment".
	Singular string
	// ShortNames, Verbs and Categories are as the server lists them; any
	// may be empty.
	ShortNames, Verbs, Categories []string
}

// Config configures a [Resolver].
type Config struct {
	// Client reaches the API server. Required.
	Client *k8sapi.Client
	// TTL is how long discovery documents are used before they are read
	// again. Zero means 10 minutes. A name not found in them makes them
	// be read again at once, whatever their age.
	TTL time.Duration
	// Now returns the current time. Nil means time.Now; tests set it.
	Now func() time.Time
}

// Resolver resolves names to resources, caching the discovery documents.
// It is safe for concurrent use; a refresh holds up other calls until it
// is done, so that concurrent misses read the documents once.
type Resolver struct {
	cfg Config

	mu        sync.Mutex
	mappings  []Mapping // nil until the first read
	fetchedAt time.Time
}

// New returns a Resolver. It does not contact the server.
func New(cfg Config) (*Resolver, error) {
	if cfg.Client == nil {
		return nil, errors.New("discovery: Config.Client is nil")
	}
	if cfg.TTL <= 0 {
		cfg.TTL = 10 * time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Resolver{cfg: cfg}, nil
}

// Resolve returns the resource name stands for. Names are matched without
// regard to case: first as plural names, then as singular names or kinds,
// then as short names. Without a version the group's preferred version is
// taken; without a group, the first group that has the name, the core
// group first and the others in the server's order (as kubectl does for
// "events", which is core/v1 before events.k8s.io).
func (r *Resolver) Resolve(ctx context.Context, name string) (Mapping, error) {
	if name == "" {
		return Mapping{}, &Error{Name: name, Err: ErrNotFound}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	refreshed := false
	if r.mappings == nil || r.cfg.Now().Sub(r.fetchedAt) >= r.cfg.TTL {
		if err := r.refresh(ctx); err != nil {
			return Mapping{}, &Error{Name: name, Err: err}
		}
		refreshed = true
	}
	if m, ok := find(r.mappings, name); ok {
		return m.clone(), nil
	}
	if !refreshed {
		// A type added since the last read, such as a new CRD.
		if err := r.refresh(ctx); err != nil {
			return Mapping{}, &Error{Name: name, Err: err}
		}
		if m, ok := find(r.mappings, name); ok {
			return m.clone(), nil
		}
	}
	return Mapping{}, &Error{Name: name, Err: ErrNotFound}
}

// Resources returns every resource in every version the server serves, in
// resolution order, reading the documents again if they are older than
// the TTL. Subresources are left out.
func (r *Resolver) Resources(ctx context.Context) ([]Mapping, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mappings == nil || r.cfg.Now().Sub(r.fetchedAt) >= r.cfg.TTL {
		if err := r.refresh(ctx); err != nil {
			return nil, &Error{Err: err}
		}
	}
	out := make([]Mapping, len(r.mappings))
	for i, m := range r.mappings {
		out[i] = m.clone()
	}
	return out, nil
}

// clone copies m's slices, so that the cache is never changed through it.
func (m Mapping) clone() Mapping {
	m.ShortNames, m.Verbs, m.Categories = slices.Clone(m.ShortNames), slices.Clone(m.Verbs), slices.Clone(m.Categories)
	return m
}

// refresh reads /api and /apis.
func (r *Resolver) refresh(ctx context.Context) error {
	var all []Mapping
	for _, path := range []string{"/api", "/apis"} {
		ms, err := r.read(ctx, path)
		if err != nil {
			return err
		}
		all = append(all, ms...)
	}
	r.mappings, r.fetchedAt = all, r.cfg.Now()
	return nil
}

func (r *Resolver) read(ctx context.Context, path string) ([]Mapping, error) {
	body, err := r.cfg.Client.Stream(ctx, path, nil, accept)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	b, err := io.ReadAll(io.LimitReader(body, docLimit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(b) > docLimit {
		return nil, fmt.Errorf("%s: %w", path, k8sapi.ErrBodyTooLarge)
	}
	return parse(path, b)
}

// groupList is apidiscovery.k8s.io/v2 APIGroupDiscoveryList, reduced.
type groupList struct {
	Kind  string `json:"kind"`
	Items []struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Versions []struct {
			Version   string `json:"version"`
			Resources []struct {
				Resource     string `json:"resource"`
				ResponseKind *struct {
					Kind string `json:"kind"`
				} `json:"responseKind"`
				Scope            string   `json:"scope"`
				SingularResource string   `json:"singularResource"`
				Verbs            []string `json:"verbs"`
				ShortNames       []string `json:"shortNames"`
				Categories       []string `json:"categories"`
			} `json:"resources"`
		} `json:"versions"`
	} `json:"items"`
}

// parse turns one aggregated discovery document into mappings, groups and
// versions in the document's order (the preferred version first).
func parse(path string, doc []byte) ([]Mapping, error) {
	var l groupList
	if err := json.Unmarshal(doc, &l); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if l.Kind != "APIGroupDiscoveryList" {
		return nil, fmt.Errorf("%s: the server answered %.40q, not aggregated discovery (apidiscovery.k8s.io/v2, Kubernetes 1.30 or later)", path, l.Kind)
	}
	var out []Mapping
	for _, g := range l.Items {
		for _, v := range g.Versions {
			for _, res := range v.Resources {
				if res.Resource == "" || v.Version == "" {
					continue
				}
				m := Mapping{
					Resource: k8sapi.Resource{Group: g.Metadata.Name, Version: v.Version, Resource: res.Resource,
						Namespaced: res.Scope == "Namespaced"},
					Singular:   res.SingularResource,
					ShortNames: res.ShortNames, Verbs: res.Verbs, Categories: res.Categories,
				}
				if res.ResponseKind != nil {
					m.Kind = res.ResponseKind.Kind
				}
				if m.Singular == "" {
					m.Singular = strings.ToLower(m.Kind)
				}
				out = append(out, m)
			}
		}
	}
	return out, nil
}

// query is one reading of a name: the resource name and, if qualified,
// its group and version.
type query struct {
	name, version, group string
	qualified            bool
}

// readings returns the ways to read name, most qualified first:
// "name.version.group", "name.group", "name".
func readings(name string) []query {
	name = strings.ToLower(name)
	res, rest, dotted := strings.Cut(name, ".")
	if !dotted {
		return []query{{name: name}}
	}
	var qs []query
	if v, g, ok := strings.Cut(rest, "."); ok {
		qs = append(qs, query{name: res, version: v, group: g, qualified: true})
	}
	return append(qs, query{name: res, group: rest, qualified: true})
}

// find returns the first mapping name stands for; see Resolve.
func find(ms []Mapping, name string) (Mapping, bool) {
	matchers := []func(m *Mapping, n string) bool{
		func(m *Mapping, n string) bool { return m.Resource.Resource == n },
		func(m *Mapping, n string) bool { return m.Singular == n || strings.ToLower(m.Kind) == n },
		func(m *Mapping, n string) bool {
			for _, s := range m.ShortNames {
				if strings.ToLower(s) == n {
					return true
				}
			}
			return false
		},
	}
	for _, q := range readings(name) {
		for _, match := range matchers {
			for i := range ms {
				m := &ms[i]
				if q.qualified && (m.Group != q.group || q.version != "" && m.Version != q.version) {
					continue
				}
				if match(m, q.name) {
					return *m, true
				}
			}
		}
	}
	return Mapping{}, false
}
