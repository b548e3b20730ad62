// Package watch keeps a local, consistent copy of a Kubernetes resource:
// it lists, then watches, tracking resourceVersion through bookmarks,
// reconnects with backoff, relists atomically on 410 Gone and tears down
// connections that have gone silent.
package watch
