package watch

import (
	"maps"
	"slices"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// IndexLabel names the index by label that every [Cache] has: its values
// are "key=value", one per label.
const IndexLabel = "label"

// Labels is an IndexFunc that indexes an object by each of its labels, as
// "key=value".
func Labels[T any, P Object[T]](obj *T) []string {
	labels := P(obj).GetObjectMeta().Labels
	out := make([]string, 0, len(labels))
	for k, v := range labels {
		out = append(out, k+"="+v)
	}
	return out
}

// Cache is an [Informer] whose reads also see its user's own writes.
//
// The watch lags the server: right after a write, the store may still hold
// the object as it was before. A caller that hands the object the server
// returned to [Cache.Wrote] reads that object from [Cache.Get] until the
// watch has caught up with it, and the cache itself then drops it: when
// the watch delivers that object's resourceVersion (a watch delivers every
// change in order, so later ones come after it), a delete of the object,
// or a relist that changed or lacks it. An older event in between (an
// update made before the write) changes the store but not what Get
// returns. ResourceVersions are only compared for equality.
//
// The object written must be one the cache's selectors match, or its
// event never comes: Get would return it until a delete or a relist.
//
// Deletes are the same: after [Cache.Deleted], Get no longer returns the
// object, until the watch delivers its delete (or a relist that changed or
// lacks it) and the store agrees.
//
// Every Cache has the indexes [IndexControllerUID] and [IndexLabel], plus
// those of its [Config.Indexers], each built on its first query; the
// indexes, [Store.List] and the handler see the store alone. Its methods are safe for concurrent use.
// The objects it returns are shared: never mutate one.
type Cache[T any] struct {
	*Informer[T]
}

// NewCache returns a cache for cfg. P is the pointer type of T; it is
// inferred, as in watch.NewCache(cfg).
func NewCache[T any, P Object[T]](cfg Config[T]) *Cache[T] {
	indexers := map[string]IndexFunc[T]{IndexControllerUID: ControllerUID[T, P], IndexLabel: Labels[T, P]}
	maps.Copy(indexers, cfg.Indexers)
	cfg.Indexers = indexers
	return &Cache[T]{New[T, P](cfg)}
}

// Get returns the object namespace/name: the one last given to
// [Cache.Wrote] until the watch has caught up with it, else the one in the
// store. Do not mutate it.
func (c *Cache[T]) Get(namespace, name string) (*T, bool) {
	return c.store.core.cached(namespace, name)
}

// cached is Cache.Get, held once for all object types.
func (s *store[P]) cached(namespace, name string) (P, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	obj := s.shown(k8sapi.Key(namespace, name))
	return obj, !isNil(obj)
}

// shown returns what Cache.Get returns for key: the entry of [Cache.Wrote]
// or [Cache.Deleted] (nil), else the store's object, if any. The caller
// holds the store's mutex.
func (s *store[P]) shown(key string) P {
	if obj, ok := s.wrote[key]; ok {
		return obj
	}
	return s.items[key]
}

// Wrote records obj, the object the API server returned for a write, so
// that [Cache.Get] returns it until the watch catches up with it. prev is
// the object the write was based on, as read from Get; nil when the write
// created the object. Wrote records nothing when the store already holds
// obj's resourceVersion, or when Get no longer shows prev: the watch has
// moved since prev was read, to a state that may be older or newer than
// obj, and the store is kept rather than risk hiding a newer state. Nor
// does it record a created object that the watch has already delivered
// and deleted, which Get would otherwise show until a relist: it knows the
// UIDs of the last 256 objects the watch deleted.
func (c *Cache[T]) Wrote(prev, obj *T) { c.store.core.record(prev, obj) }

// record is Cache.Wrote, held once for all object types.
func (s *store[P]) record(prev, obj P) {
	rv := func(o P) string { return s.meta(o).ResourceVersion }
	key := s.key(obj)
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.items[key]
	shown := s.shown(key)
	switch {
	case !isNil(cur) && rv(cur) == rv(obj): // the watch has delivered it
	case isNil(shown) != isNil(prev), !isNil(shown) && rv(shown) != rv(prev): // the watch moved
	case isNil(prev) && s.meta(obj).UID != "" && slices.Contains(s.removed, s.meta(obj).UID): // created, seen and deleted
	default:
		s.wrote[key] = obj
		return
	}
	delete(s.wrote, key)
}

// Deleted records that obj, as read from [Cache.Get], was deleted, so that
// Get no longer returns it until the watch catches up. It records nothing
// when Get no longer shows obj: the watch has moved since.
func (c *Cache[T]) Deleted(obj *T) { c.store.core.forget(obj) }

// OwnDeletion reports, from a [Handler]'s OnDelete, whether the deletion
// it is told of is one recorded by [Cache.Deleted]: the caller's own, that
// the watch has now delivered. At other times it reports false.
func (c *Cache[T]) OwnDeletion() bool { return c.core.own.Load() }

// forget is Cache.Deleted, held once for all object types.
func (s *store[P]) forget(obj P) {
	key := s.key(obj)
	s.mu.Lock()
	defer s.mu.Unlock()
	if shown := s.shown(key); !isNil(shown) && s.meta(shown).ResourceVersion == s.meta(obj).ResourceVersion {
		s.wrote[key] = *new(P) // nil: shown as gone
	}
}
