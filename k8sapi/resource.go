package k8sapi

import "net/url"

// Resource names a kind of object on the API server.
type Resource struct {
	// Group is the API group; empty means the core group ("/api/v1").
	Group string
	// Version is the API version, such as "v1".
	Version string
	// Resource is the lower-case plural, such as "deployments".
	Resource string
	// Namespaced says whether objects live in a namespace.
	Namespaced bool
	// Kind is the kind of its objects, such as "Deployment". Requests
	// do not need it; owner references, and the kit's checks of them,
	// do. Empty means unknown.
	Kind string
}

// Well-known resources the operator uses.
var (
	ConfigMaps                = Resource{Version: "v1", Resource: "configmaps", Namespaced: true, Kind: "ConfigMap"}
	Namespaces                = Resource{Version: "v1", Resource: "namespaces", Kind: "Namespace"}
	Pods                      = Resource{Version: "v1", Resource: "pods", Namespaced: true, Kind: "Pod"}
	Services                  = Resource{Version: "v1", Resource: "services", Namespaced: true, Kind: "Service"}
	Deployments               = Resource{Group: "apps", Version: "v1", Resource: "deployments", Namespaced: true, Kind: "Deployment"}
	Events                    = Resource{Group: "events.k8s.io", Version: "v1", Resource: "events", Namespaced: true, Kind: "Event"}
	Leases                    = Resource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases", Namespaced: true, Kind: "Lease"}
	CustomResourceDefinitions = Resource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions", Kind: "CustomResourceDefinition"}
)

// GroupVersion returns "v1" for the core group and "group/version" otherwise:
// the apiVersion of the resource's objects.
func (r Resource) GroupVersion() string {
	if r.Group == "" {
		return r.Version
	}
	return r.Group + "/" + r.Version
}

// Path returns the escaped URL path of a collection (name empty) or of one
// object, optionally a subresource of it. namespace is ignored for
// cluster-scoped resources; empty namespace on a namespaced resource means
// all namespaces (valid for list and watch only).
func (r Resource) Path(namespace, name, subresource string) string {
	p := "/api/" + url.PathEscape(r.Version)
	if r.Group != "" {
		p = "/apis/" + url.PathEscape(r.Group) + "/" + url.PathEscape(r.Version)
	}
	if r.Namespaced && namespace != "" {
		p += "/namespaces/" + url.PathEscape(namespace)
	}
	p += "/" + url.PathEscape(r.Resource)
	if name != "" {
		p += "/" + url.PathEscape(name)
		if subresource != "" {
			p += "/" + url.PathEscape(subresource)
		}
	}
	return p
}
