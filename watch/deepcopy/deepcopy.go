// Package deepcopy copies any object deeply, by reflection: for a program
// that must change an object it read from a watch.Store or watch.Cache,
// whose objects are shared and must never be mutated.
//
// Reflection is slower than copying only the fields a change touches:
// the Widget operator does that, and does not link this package.
package deepcopy

import "reflect"

// Clone returns a deep copy of obj: every map, slice and pointer reachable
// through exported fields is copied, so the copy can be changed without
// touching obj. Strings are immutable and shared. Unexported fields are
// copied as values (shallowly), which is right for types such as time.Time.
// Clone(nil) is nil.
//
// Objects from a watch.Store must not be mutated; Clone one before
// changing it.
// For a change to one field it is cheaper to copy the struct and replace
// only the maps or slices you change.
func Clone[T any](obj *T) *T {
	if obj == nil {
		return nil
	}
	out := new(T)
	*out = *obj
	deepen(reflect.ValueOf(out).Elem())
	return out
}

// deepen replaces, in place, every map, slice and pointer reachable from v
// through settable values by a copy of it.
func deepen(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		t := v.Type()
		for i := range v.NumField() {
			if t.Field(i).IsExported() {
				deepen(v.Field(i))
			}
		}
	case reflect.Array:
		for i := range v.Len() {
			deepen(v.Index(i))
		}
	case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface:
		if !v.IsNil() && v.CanSet() {
			v.Set(copyRef(v))
		}
	}
}

// copyRef returns a deep copy of v, a pointer, slice, map or interface
// that is not nil.
func copyRef(v reflect.Value) reflect.Value {
	switch v.Kind() {
	case reflect.Pointer:
		return deepCopy(v.Elem()).Addr()
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		reflect.Copy(s, v)
		if needsDeepen(v.Type().Elem()) {
			for i := range s.Len() {
				deepen(s.Index(i))
			}
		}
		return s
	case reflect.Map:
		m := reflect.MakeMapWithSize(v.Type(), v.Len())
		deepVal := needsDeepen(v.Type().Elem())
		for iter := v.MapRange(); iter.Next(); {
			val := iter.Value()
			if deepVal {
				val = deepCopy(val)
			}
			m.SetMapIndex(iter.Key(), val)
		}
		return m
	}
	return deepCopy(v.Elem()) // an interface: a copy of its value
}

// deepCopy returns a deep copy of v, addressable.
func deepCopy(v reflect.Value) reflect.Value {
	c := reflect.New(v.Type()).Elem()
	c.Set(v)
	deepen(c)
	return c
}

// needsDeepen reports whether values of type t can hold references that
// Clone must copy.
func needsDeepen(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface:
		return true
	case reflect.Array:
		return needsDeepen(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if f.IsExported() && needsDeepen(f.Type) {
				return true
			}
		}
	}
	return false
}
