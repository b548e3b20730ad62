package k8sapi

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalidKey is wrapped by the error [SplitKey] returns for a key that
// is not "namespace/name" or "name". No retry can fix such a key: drop it.
var ErrInvalidKey = errors.New("k8sapi: invalid key")

// Key returns the key of the object namespace/name: "namespace/name", or
// "name" when namespace is empty (a cluster-scoped object). Caches and
// work queues key objects by it.
func Key(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// SplitKey splits a [Key]. It fails, wrapping ErrInvalidKey, for an empty
// name, an empty namespace before a "/", or more than one "/".
func SplitKey(key string) (namespace, name string, err error) {
	namespace, name, found := strings.Cut(key, "/")
	if !found {
		namespace, name = "", key
	}
	if name == "" || strings.Contains(name, "/") || (found && namespace == "") {
		return "", "", fmt.Errorf("%w %q", ErrInvalidKey, key)
	}
	return namespace, name, nil
}
