// Package k8sapi is a small Kubernetes API client built on the standard
// library alone.
//
// A [Config] says where the API server is and how to authenticate; [Load]
// builds one from a kubeconfig or from a pod's service-account folder.
// [New] turns a Config into a [Client], which is safe for concurrent use.
// A [Resource] names a kind of object (group, version, plural resource,
// namespaced or not). The generic [Typed] wraps a Client and a Resource with
// the verbs, decoding into the caller's own struct type; use
// [encoding/json.RawMessage] as the type to pass objects through untouched.
// [Watcher.Events] iterates over an open watch's events.
// [Typed.Update] never erases the fields a reduced struct lacks.
// [Client.Stream] is a raw GET for the rest; the subpackages discovery
// (names to Resources) and podlogs (pod logs) are built on it. The
// subpackage namespaced binds the verbs to a namespace and adds iterators
// over every object of a paged list and over a watch's events.
//
// Every failed call returns an error that wraps an [*APIError] when the
// server answered; test it with [IsNotFound], [IsConflict], [IsGone] and the
// other helpers. Tokens, keys and Authorization headers never appear in an
// error string.
//
// The package also holds the small primitives the packages above it share,
// so that each is written once: the object key ([Key], [SplitKey]), the
// exponential [Backoff], the [TokenBucket] and the [Clock] seam.
package k8sapi
