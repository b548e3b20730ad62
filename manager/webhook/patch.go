package webhook

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// diff returns the JSON patch that takes before to after, two JSON values
// of the same Go value before and after a hook changed it, to be applied
// to orig, the JSON that before was decoded from. Members of an object
// are set with add, which adds or replaces; a member is removed only if
// orig has it, so that a field the Go type writes and orig lacks (one
// without omitempty) is not removed from where it is not; arrays of the
// same length are patched element by element, others replaced whole.
func diff(orig, before, after []byte) ([]PatchOp, error) {
	var o, b, a any
	for _, p := range []struct {
		data []byte
		v    *any
	}{{orig, &o}, {before, &b}, {after, &a}} {
		d := json.NewDecoder(bytes.NewReader(p.data))
		d.UseNumber()
		if err := d.Decode(p.v); err != nil {
			return nil, err
		}
	}
	var ops []PatchOp
	err := diffValue(&ops, "", o, b, a, false)
	return ops, err
}

// diffValue appends the ops that take b to a at path; o is orig's value
// there, nil if it has none; inArray says path is an array element's.
// An object or array that orig does not have alike is set whole.
func diffValue(ops *[]PatchOp, path string, o, b, a any, inArray bool) error {
	om, oIsMap := o.(map[string]any)
	bm, bIsMap := b.(map[string]any)
	am, aIsMap := a.(map[string]any)
	if oIsMap && bIsMap && aIsMap {
		return diffObject(ops, path, om, bm, am)
	}
	os, oIsArray := o.([]any)
	bs, bIsArray := b.([]any)
	as, aIsArray := a.([]any)
	if oIsArray && bIsArray && aIsArray && len(os) == len(bs) && len(bs) == len(as) {
		for i := range as {
			if err := diffValue(ops, path+"/"+strconv.Itoa(i), os[i], bs[i], as[i], true); err != nil {
				return err
			}
		}
		return nil
	}
	bj, _ := json.Marshal(b)
	aj, err := json.Marshal(a)
	if err != nil || bytes.Equal(aj, bj) {
		return err
	}
	op := "add" // on an object's member: adds or replaces
	if inArray || path == "" {
		op = "replace"
	}
	*ops = append(*ops, PatchOp{Op: op, Path: path, Value: aj})
	return nil
}

// addOp appends an add of v at path.
func addOp(ops *[]PatchOp, path string, v any) error {
	j, err := json.Marshal(v)
	*ops = append(*ops, PatchOp{Op: "add", Path: path, Value: j})
	return err
}

// diffObject appends the ops that take the object b to a at path; o is
// orig's object there.
func diffObject(ops *[]PatchOp, path string, o, b, a map[string]any) error {
	keys := slices.Collect(maps.Keys(a))
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		p := path + "/" + escape(k)
		bv, inB := b[k]
		av, inA := a[k]
		var err error
		switch _, inO := o[k]; {
		case !inA && inO:
			*ops = append(*ops, PatchOp{Op: "remove", Path: p})
		case inA && !inB:
			err = addOp(ops, p, av)
		case inA:
			err = diffValue(ops, p, o[k], bv, av, false)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// escape escapes a member name for a JSON pointer (RFC 6901).
func escape(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}
