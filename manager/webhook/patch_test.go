package webhook

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// applyPatch applies ops (add, replace, remove) to doc, as the API server
// would, and returns the result's JSON, keys sorted; it fails the test on
// an op the document refuses, such as a remove of a member it lacks.
func applyPatch(t *testing.T, doc string, ops []PatchOp) string {
	t.Helper()
	var root any
	d := json.NewDecoder(strings.NewReader(doc))
	d.UseNumber()
	if err := d.Decode(&root); err != nil {
		t.Fatal(err)
	}
	for _, op := range ops {
		var v any
		if op.Op != "remove" {
			if err := json.Unmarshal(op.Value, &v); err != nil {
				t.Fatalf("%+v: value: %v", op, err)
			}
		}
		if op.Path == "" {
			root = v
			continue
		}
		parts := strings.Split(op.Path[1:], "/")
		for i, p := range parts {
			parts[i] = strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~")
		}
		parent := root
		for _, p := range parts[:len(parts)-1] {
			switch c := parent.(type) {
			case map[string]any:
				parent = c[p]
			case []any:
				i, _ := strconv.Atoi(p)
				parent = c[i]
			}
		}
		last := parts[len(parts)-1]
		switch c := parent.(type) {
		case map[string]any:
			_, has := c[last]
			switch {
			case op.Op == "remove" && has:
				delete(c, last)
			case op.Op == "add", op.Op == "replace" && has:
				c[last] = v
			default:
				t.Fatalf("%+v: the document has no %s", op, op.Path)
			}
		case []any:
			i, err := strconv.Atoi(last)
			if err != nil || i >= len(c) || op.Op != "replace" {
				t.Fatalf("%+v: want a replace of an element that is there", op)
			}
			c[i] = v
		default:
			t.Fatalf("%+v: no object or array at the parent", op)
		}
	}
	b, _ := json.Marshal(root)
	return string(b)
}

// The patch from before to after, applied to the original, gives after
// with the original's fields that before's type dropped; a member the
// type writes and the original lacks is not removed; arrays are patched
// element by element, or replaced when their length changed.
func TestDiff(t *testing.T) {
	for _, c := range []struct {
		orig, before, after, want string
	}{
		{`{"a":1,"x":{"keep":true}}`, `{"a":1}`, `{"a":2}`, `{"a":2,"x":{"keep":true}}`},
		{`{"a":1}`, `{"a":1,"b":""}`, `{"a":1}`, `{"a":1}`},          // b was the type's, not orig's
		{`{"a":1,"b":"x"}`, `{"a":1,"b":"x"}`, `{"a":1}`, `{"a":1}`}, // removed
		{`{"s":{}}`, `{"s":{"n":0}}`, `{"s":{"n":3}}`, `{"s":{"n":3}}`},
		{`{}`, `{"s":{"n":0}}`, `{"s":{"n":3}}`, `{"s":{"n":3}}`}, // no s in orig: set whole
		{`{"l":[{"n":1,"u":1},{"n":2,"u":2}]}`, `{"l":[{"n":1},{"n":2}]}`, `{"l":[{"n":1},{"n":5}]}`, `{"l":[{"n":1,"u":1},{"n":5,"u":2}]}`},
		{`{"l":[1,2]}`, `{"l":[1,2]}`, `{"l":[1,2,3]}`, `{"l":[1,2,3]}`},
		{`1`, `1`, `2`, `2`}, // the whole document
		{`{"a/b~c":1}`, `{"a/b~c":1}`, `{"a/b~c":2,"n":null}`, `{"a/b~c":2,"n":null}`},
		{`{"big":12345678901234567890}`, `{"big":12345678901234567890}`, `{"big":12345678901234567890,"c":1}`, `{"big":12345678901234567890,"c":1}`},
	} {
		ops, err := diff([]byte(c.orig), []byte(c.before), []byte(c.after))
		if err != nil {
			t.Fatal(err)
		}
		if got := applyPatch(t, c.orig, ops); got != c.want {
			b, _ := json.Marshal(ops)
			t.Errorf("%s with %s -> %s: %s (patch %s), want %s", c.orig, c.before, c.after, got, b, c.want)
		}
	}
	if ops, _ := diff([]byte(`{"a":[1]}`), []byte(`{"a":[1]}`), []byte(`{"a":[1]}`)); ops != nil {
		t.Errorf("no change: %v", ops)
	}
}
