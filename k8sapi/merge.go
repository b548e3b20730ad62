package k8sapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
)

// updateBody returns what Update sends for obj. A json.RawMessage is sent
// as it is. Any other T may name only some of the object's fields: its
// changes since it was read are applied to the whole object it was read
// from (kept by send) or, if there is none, to the object (or the
// subresource being updated) as the server has it now, read first. Fields
// T does not name are so never lost.
func (c *Client) updateBody(ctx context.Context, r *Resource, op *operation, subresource string, obj any) ([]byte, error) {
	now, err := json.Marshal(obj)
	if err != nil {
		return nil, op.requestError(fmt.Errorf("encode body: %w", err))
	}
	if _, whole := obj.(*json.RawMessage); whole {
		return now, nil
	}
	var base []byte
	if o, ok := obj.(Object); ok {
		base = o.GetObjectMeta().raw
	}
	if base == nil {
		var cur json.RawMessage // by Client.send: a Typed[json.RawMessage] would bring its own copy of each verb
		if err := c.send(ctx, r, "get", op.namespace, op.name, subresource, nil, nil, "", &cur); err != nil {
			return nil, err
		}
		base = cur
	}
	// was is what T made of base: the caller's changes are from it to now.
	seen := reflect.New(reflect.TypeOf(obj).Elem()).Interface()
	if err := json.Unmarshal(base, seen); err != nil {
		return nil, op.decodeError(fmt.Errorf("object as read: %w", err))
	}
	was, err := json.Marshal(seen)
	if err != nil {
		return nil, op.requestError(fmt.Errorf("encode body: %w", err))
	}
	out, err := mergeJSON(base, was, now)
	if err != nil {
		return nil, op.decodeError(fmt.Errorf("object as read: %w", err))
	}
	return out, nil
}

// mergeJSON applies the change from was to now to base, three JSON
// documents, and returns the result. The values are decoded generically
// (numbers kept as written) because the merge works on any object.
func mergeJSON(base, was, now []byte) ([]byte, error) {
	docs := [][]byte{base, was, now}
	vals := make([]any, len(docs))
	for i, d := range docs {
		dec := json.NewDecoder(bytes.NewReader(d))
		dec.UseNumber()
		if err := dec.Decode(&vals[i]); err != nil {
			return nil, err
		}
	}
	return json.Marshal(merge3(vals[0], vals[1], vals[2]))
}

// merge3 returns base changed as now differs from was, where was and now
// hold only the fields a struct names and base the whole value:
//
//   - a value equal in was and now is base's, whole;
//   - in objects, each key of now is merged into base's value of it (a key
//     was lacks too, with nothing to compare), and a key of was that now
//     lacks is deleted; keys of base alone stay;
//   - in arrays, each element of now is merged into its partner in base
//     (see partners); an element without one is taken as it is;
//   - anything else is now's.
func merge3(base, was, now any) any {
	if reflect.DeepEqual(was, now) {
		return base
	}
	switch n := now.(type) {
	case map[string]any:
		b, ok := base.(map[string]any)
		if !ok {
			return now
		}
		w, _ := was.(map[string]any)
		out := maps.Clone(b)
		for k, nv := range n {
			if bv, ok := b[k]; ok {
				out[k] = merge3(bv, w[k], nv)
			} else {
				out[k] = nv
			}
		}
		for k := range w {
			if _, ok := n[k]; !ok {
				delete(out, k)
			}
		}
		return out
	case []any:
		b, ok := base.([]any)
		w, _ := was.([]any)
		if !ok || len(b) != len(w) {
			return now
		}
		out := slices.Clone(n)
		for j, i := range partners(n, w) {
			if i >= 0 {
				out[j] = merge3(b[i], w[i], n[j])
			}
		}
		return out
	}
	return now
}

// partners returns, for each element of now, the index of the element of
// was it continues, or -1 for a new one. An element with a "name" pairs
// with the one of that name; one without, with an equal one, or else, if
// the array kept its length, with the one at its position. Each element
// of was pairs at most once.
func partners(now, was []any) []int {
	out := make([]int, len(now))
	used := make([]bool, len(was))
	for j, nv := range now {
		out[j] = -1
		name, named := nameOf(nv)
		for i, wv := range was {
			wn, wnamed := nameOf(wv)
			if !used[i] && (named && wnamed && wn == name || !named && reflect.DeepEqual(wv, nv)) {
				out[j], used[i] = i, true
				break
			}
		}
	}
	if len(now) != len(was) {
		return out
	}
	for j, nv := range now {
		if _, named := nameOf(nv); !named && out[j] < 0 && !used[j] {
			if _, named := nameOf(was[j]); !named {
				out[j], used[j] = j, true
			}
		}
	}
	return out
}

// nameOf returns the "name" of an array element that is an object with one.
func nameOf(v any) (string, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return "", false
	}
	s, ok := m["name"].(string)
	return s, ok
}
