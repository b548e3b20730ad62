package watch

import (
	"maps"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// IndexFunc returns the index values of an object: the keys under which
// [Store.ByIndex] finds it. It must not mutate obj and must return the same
// values for the same object.
type IndexFunc[T any] func(obj *T) []string

// IndexControllerUID names the index by the UID of the controlling owner,
// which every [Cache] has.
const IndexControllerUID = "controllerUID"

// ControllerUID is an IndexFunc that indexes an object by the UID of its
// controlling owner (the owner reference with controller: true), so that an
// event on a child maps to the object that manages it.
func ControllerUID[T any, P Object[T]](obj *T) []string {
	ref := P(obj).GetObjectMeta().ControllerOf()
	if ref == nil || ref.UID == "" {
		return nil
	}
	return []string{ref.UID}
}

// Store is the local copy of a resource, keyed by [k8sapi.Key].
//
// A Store is safe for concurrent use by any number of readers; only the
// [Informer] that owns it writes to it. The objects it hands out are shared
// with the store and with every other reader: never mutate one. To change
// an object, copy it first (package watch/deepcopy copies any object; for
// a small change, copy the struct and replace only the fields you change).
type Store[T any] struct {
	core store[*T]
}

// store is the content and code of a Store. P is the objects' pointer
// type, as in machine: the binary holds one store for all object types.
// Its constraint is any, which gives every pointer type the same shape;
// same compares two P.
type store[P any] struct {
	meta     func(P) *k8sapi.ObjectMeta
	indexers map[string]func(P) []string
	bytes    atomic.Int64 // the sum of heldBytes of the items

	mu      sync.RWMutex
	items   map[string]P
	indexes map[string]index // by indexer name, those queried so far (see ByIndex)
	// wrote holds the objects of [Cache.Wrote], by key, until the watch
	// catches up, and nil for those of [Cache.Deleted]: put drops an
	// object's entry when it stores the entry's resourceVersion, remove
	// drops any entry, and replace drops every entry whose key it changed
	// or lacks.
	wrote map[string]P
	// removed holds the UIDs of the last 256 objects remove took out,
	// oldest first, for Cache.Wrote: an object may be created, seen and
	// deleted before its creator calls it.
	removed []string
}

// index maps an index value to the set of keys of the objects with that
// value.
type index map[string]map[string]struct{}

func newStore[T any](meta func(*T) *k8sapi.ObjectMeta, indexers map[string]IndexFunc[T]) *Store[T] {
	fs := make(map[string]func(*T) []string, len(indexers))
	for name, f := range indexers {
		if f != nil { // a nil IndexFunc is no index
			fs[name] = f
		}
	}
	return &Store[T]{store[*T]{
		meta:     meta,
		indexers: fs,
		items:    make(map[string]*T),
		indexes:  make(map[string]index, len(indexers)),
		wrote:    make(map[string]*T),
	}}
}

// Get returns the object with the given namespace and name. Do not mutate
// it.
func (s *Store[T]) Get(namespace, name string) (*T, bool) { return s.core.get(namespace, name) }

func (s *store[P]) get(namespace, name string) (P, bool) {
	s.mu.RLock()
	obj, ok := s.items[k8sapi.Key(namespace, name)]
	s.mu.RUnlock()
	return obj, ok
}

// Len returns the number of objects in the store.
func (s *Store[T]) Len() int { return s.core.len() }

func (s *store[P]) len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.items)
}

// List returns every object, in no particular order, in a new slice. Do not
// mutate the objects.
func (s *Store[T]) List() []*T { return s.core.list() }

func (s *store[P]) list() []P {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.AppendSeq(make([]P, 0, len(s.items)), maps.Values(s.items))
}

// Keys returns every key, sorted.
func (s *Store[T]) Keys() []string { return s.core.keys() }

func (s *store[P]) keys() []string {
	s.mu.RLock()
	out := slices.AppendSeq(make([]string, 0, len(s.items)), maps.Keys(s.items))
	s.mu.RUnlock()
	slices.Sort(out)
	return out
}

// ByIndex returns the objects whose indexer named name returned value, in
// no particular order. It returns nil if there are none or no such index
// exists (see [Store.HasIndex]). Do not mutate the objects.
//
// An index is built on its first query, and again on the first after a
// relist, and kept up to date by every other change in between, so one
// that is never queried costs neither memory nor time. A query holds the
// store's lock for writing, as it may build the index.
func (s *Store[T]) ByIndex(name, value string) []*T { return s.core.byIndex(name, value) }

func (s *store[P]) byIndex(name, value string) []P {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.indexers[name]
	if f == nil {
		return nil
	}
	idx, ok := s.indexes[name]
	if !ok {
		idx = make(index)
		for key, obj := range s.items {
			for _, v := range f(obj) {
				idx.add(v, key)
			}
		}
		s.indexes[name] = idx
	}
	keys := idx[value]
	if len(keys) == 0 {
		return nil
	}
	out := make([]P, 0, len(keys))
	for k := range keys {
		out = append(out, s.items[k])
	}
	return out
}

// HasIndex reports whether the store has an indexer named name.
func (s *Store[T]) HasIndex(name string) bool {
	return s.core.indexers[name] != nil
}

// key returns obj's key.
func (s *store[P]) key(obj P) string {
	m := s.meta(obj)
	return k8sapi.Key(m.Namespace, m.Name)
}

// put stores obj under key and returns the object it replaced, if any.
func (s *store[P]) put(key string, obj P) (old P) {
	held := heldBytes(reflect.ValueOf(obj), 0) // outside the lock: obj does not change
	s.mu.Lock()
	defer s.mu.Unlock()
	old = s.items[key]
	s.bytes.Add(held - heldBytes(reflect.ValueOf(old), 0))
	s.items[key] = obj
	s.reindex(key, old, obj)
	if w := s.wrote[key]; !isNil(w) && s.meta(w).ResourceVersion == s.meta(obj).ResourceVersion {
		delete(s.wrote, key)
	}
	return old
}

// remove deletes key and returns the object it held, if any, and whether
// its deletion was the one recorded by Cache.Deleted (see forget).
func (s *store[P]) remove(key string) (old P, own bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, recorded := s.wrote[key]
	own = recorded && isNil(w)
	delete(s.wrote, key)
	old, ok := s.items[key]
	if ok {
		delete(s.items, key)
		s.bytes.Add(-heldBytes(reflect.ValueOf(old), 0))
		s.reindex(key, old, *new(P))
		s.removed = append(s.removed[max(0, len(s.removed)-255):], s.meta(old).UID)
	}
	return old, own
}

// same reports whether a and b are the same object, or both nil.
func same[P any](a, b P) bool { return any(a) == any(b) }

// isNil reports whether p is nil.
func isNil[P any](p P) bool { return same(p, *new(P)) }

// change is one difference found by replace.
type change[P any] struct {
	old, new P // old nil: added; new nil: deleted
}

// replace makes items the whole content of the store in one step: a reader
// sees either the old content or the new, never a mix. It returns the
// differences: objects added, changed (resourceVersion differs) and gone.
// An object whose resourceVersion did not change keeps its old pointer and
// yields no change. Later items win over earlier ones with the same key.
func (s *store[P]) replace(items []P) []change[P] {
	s.mu.RLock()
	prev := s.items
	s.mu.RUnlock()
	next := make(map[string]P, len(items))
	for _, obj := range items {
		key := s.key(obj)
		rv := s.meta(obj).ResourceVersion
		if old, ok := prev[key]; ok && rv != "" && s.meta(old).ResourceVersion == rv {
			obj = old // unchanged: the old pointer is kept, and no change
		}
		next[key] = obj
	}
	// Changes are computed against next, so a key listed twice counts once.
	var changes []change[P]
	for _, obj := range items {
		// Not s.key, whose result would be allocated: this key stays off
		// the heap.
		m := s.meta(obj)
		key := k8sapi.Key(m.Namespace, m.Name)
		// Neither unchanged nor superseded by a later duplicate.
		if same(next[key], obj) && !same(prev[key], obj) {
			changes = append(changes, change[P]{old: prev[key], new: obj})
		}
	}
	var gone []string
	for key := range prev {
		if _, ok := next[key]; !ok {
			gone = append(gone, key)
		}
	}
	slices.Sort(gone)
	for _, key := range gone {
		changes = append(changes, change[P]{old: prev[key]})
	}
	for _, c := range changes {
		s.bytes.Add(heldBytes(reflect.ValueOf(c.new), 0) - heldBytes(reflect.ValueOf(c.old), 0))
	}

	s.mu.Lock()
	s.items = next
	clear(s.indexes) // each is built again on its next query
	for key := range s.wrote {
		if old, ok := prev[key]; !ok || !same(next[key], old) {
			delete(s.wrote, key)
		}
	}
	s.mu.Unlock()
	return changes
}

// reindex moves key from old's index values to obj's, in each index built
// so far. Either may be nil. The caller holds s.mu for writing.
func (s *store[P]) reindex(key string, old, obj P) {
	for name, idx := range s.indexes {
		f := s.indexers[name]
		var before, after []string
		if !isNil(old) {
			before = f(old)
		}
		if !isNil(obj) {
			after = f(obj)
		}
		if slices.Equal(before, after) {
			continue
		}
		for _, v := range before {
			idx.del(v, key)
		}
		for _, v := range after {
			idx.add(v, key)
		}
	}
}

func (idx index) add(value, key string) {
	if idx[value] == nil {
		idx[value] = make(map[string]struct{})
	}
	idx[value][key] = struct{}{}
}

func (idx index) del(value, key string) {
	delete(idx[value], key)
	if len(idx[value]) == 0 {
		delete(idx, value)
	}
}

// heldBytes estimates the bytes of memory that v refers to beyond its own
// value, as the Go values of a decoded object hold them: the exported
// fields' strings, the arrays of slices, pointed-to values, and the keys
// and values of maps (descended into for map[string]string and
// map[string]any alone). It leaves out the maps' buckets, the allocator's
// rounding and the sharing of a string or value, which counts at each
// reference. Below depth 64 it counts nothing, so that a cycle ends. It
// allocates nothing.
func heldBytes(v reflect.Value, depth int) int64 {
	if depth > 64 {
		return 0
	}
	var n int64
	switch v.Kind() {
	case reflect.String:
		return int64(v.Len())
	case reflect.Pointer:
		if v.IsNil() {
			return 0
		}
		return int64(v.Type().Elem().Size()) + heldBytes(v.Elem(), depth+1)
	case reflect.Interface:
		return anyBytes(v.Interface(), depth+1)
	case reflect.Struct:
		for i := range v.NumField() {
			// Only the exported fields of the kinds that can refer to
			// memory: the others hold nothing, or nothing decoded.
			if f := v.Field(i); f.Kind() >= reflect.Interface && f.CanInterface() {
				n += heldBytes(f, depth)
			}
		}
	case reflect.Slice:
		n = int64(v.Cap()) * int64(v.Type().Elem().Size())
		if v.Type().Elem().Kind() <= reflect.Complex128 {
			return n // of bools or numbers, which hold nothing more
		}
		for i := range v.Len() {
			n += heldBytes(v.Index(i), depth+1)
		}
	case reflect.Map:
		n = int64(v.Len()) * int64(v.Type().Key().Size()+v.Type().Elem().Size())
		switch m := v.Interface().(type) {
		case map[string]string:
			for k, e := range m {
				n += int64(len(k) + len(e))
			}
		case map[string]any:
			for k, e := range m {
				n += int64(len(k)) + anyBytes(e, depth+1)
			}
		}
	}
	return n
}

// anyBytes is heldBytes of the value x holds, plus that value's own size.
func anyBytes(x any, depth int) int64 {
	if x == nil {
		return 0
	}
	return int64(reflect.TypeOf(x).Size()) + heldBytes(reflect.ValueOf(x), depth)
}
