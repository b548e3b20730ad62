package watch

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"testing"
	"unsafe"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

func thingMeta(o *thing) *k8sapi.ObjectMeta { return &o.ObjectMeta }

func owned(name, rv, owner string, controller bool) *thing {
	o := obj(name, rv)
	c := controller
	o.OwnerReferences = []k8sapi.OwnerReference{{Kind: "Widget", Name: owner, UID: "uid-" + owner, Controller: &c}}
	return o
}

func names(objs []*thing) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.Name)
	}
	sort.Strings(out)
	return out
}

func TestStoreReplaceDiff(t *testing.T) {
	s := newStore(thingMeta, nil)
	a, b, c := obj("a", "1"), obj("b", "2"), obj("c", "3")
	changes := s.core.replace([]*thing{a, b, c})
	if len(changes) != 3 {
		t.Fatalf("first replace: %d changes, want 3 adds", len(changes))
	}
	for _, ch := range changes {
		if ch.old != nil || ch.new == nil {
			t.Fatalf("first replace: want only adds, got %+v", ch)
		}
	}

	// b unchanged, a changed, c gone, d new, d listed twice (the later wins).
	a2, b2, d1, d2 := obj("a", "10"), obj("b", "2"), obj("d", "11"), obj("d", "12")
	changes = s.core.replace([]*thing{a2, b2, d1, d2})
	var got []string
	for _, ch := range changes {
		switch {
		case ch.old == nil:
			got = append(got, "add "+ch.new.Name+"@"+ch.new.ResourceVersion)
		case ch.new == nil:
			got = append(got, "delete "+ch.old.Name+"@"+ch.old.ResourceVersion)
		default:
			got = append(got, "update "+ch.old.Name+"@"+ch.old.ResourceVersion+"->"+ch.new.ResourceVersion)
		}
	}
	want := []string{"update a@1->10", "add d@12", "delete c@3"}
	if !slices.Equal(got, want) {
		t.Fatalf("changes = %q, want %q", got, want)
	}
	if o, _ := s.Get("ns", "b"); o != b {
		t.Error("unchanged object lost its pointer: readers would see a new copy for no reason")
	}
	if keys := s.Keys(); !slices.Equal(keys, []string{"ns/a", "ns/b", "ns/d"}) {
		t.Errorf("keys = %q", keys)
	}
	// The very same objects again: no change at all.
	if changes := s.core.replace(s.List()); len(changes) != 0 {
		t.Errorf("relisting the same objects gave %d changes", len(changes))
	}
}

// indexOwnerUID names an index a caller adds: by the UID of every owner
// reference, which ownerUIDs computes.
const indexOwnerUID = "ownerUID"

func ownerUIDs(obj *thing) []string {
	var uids []string
	for _, ref := range obj.OwnerReferences {
		uids = append(uids, ref.UID)
	}
	return uids
}

func TestStoreIndexes(t *testing.T) {
	s := newStore(thingMeta, map[string]IndexFunc[thing]{
		IndexControllerUID: ControllerUID[thing],
		indexOwnerUID:      ownerUIDs,
		"broken":           nil, // ignored
	})
	if !s.HasIndex(IndexControllerUID) || s.HasIndex("broken") || s.HasIndex("nope") {
		t.Fatal("HasIndex wrong")
	}
	s.core.replace([]*thing{owned("a1", "1", "w1", true), owned("a2", "1", "w1", true), owned("b1", "1", "w2", false)})
	if got := names(s.ByIndex(IndexControllerUID, "uid-w1")); !slices.Equal(got, []string{"a1", "a2"}) {
		t.Errorf("controller w1 = %q", got)
	}
	if got := s.ByIndex(IndexControllerUID, "uid-w2"); got != nil {
		t.Errorf("b1 has no controller, yet found %q", names(got))
	}
	if got := names(s.ByIndex(indexOwnerUID, "uid-w2")); !slices.Equal(got, []string{"b1"}) {
		t.Errorf("owner w2 = %q", got)
	}

	// Moving a1 to w2 moves its index entry.
	s.core.put("ns/a1", owned("a1", "2", "w2", true))
	if got := names(s.ByIndex(IndexControllerUID, "uid-w1")); !slices.Equal(got, []string{"a2"}) {
		t.Errorf("after move, w1 = %q", got)
	}
	if got := names(s.ByIndex(IndexControllerUID, "uid-w2")); !slices.Equal(got, []string{"a1"}) {
		t.Errorf("after move, w2 = %q", got)
	}
	s.core.remove("ns/a2")
	if got := s.ByIndex(IndexControllerUID, "uid-w1"); got != nil {
		t.Errorf("after delete, w1 = %q", names(got))
	}
	if old, _ := s.core.remove("ns/a2"); old != nil {
		t.Error("second remove returned an object")
	}
	if got := s.ByIndex("nope", "x"); got != nil {
		t.Error("unknown index returned objects")
	}
}

// TestStoreIndexBuiltOnFirstQuery: an index costs nothing until it is
// queried; its first query sees every object already stored, and from then
// on puts and removes keep it up to date; a relist drops it, and the next
// query builds it again.
func TestStoreIndexBuiltOnFirstQuery(t *testing.T) {
	s := newStore(thingMeta, map[string]IndexFunc[thing]{
		IndexControllerUID: ControllerUID[thing],
		indexOwnerUID:      ownerUIDs,
	})
	s.core.put("ns/a1", owned("a1", "1", "w1", true))
	s.core.replace([]*thing{owned("a1", "1", "w1", true), owned("a2", "1", "w1", true)})
	if len(s.core.indexes) != 0 {
		t.Fatalf("indexes built before any query: %v", slices.Collect(maps.Keys(s.core.indexes)))
	}
	if got := names(s.ByIndex(IndexControllerUID, "uid-w1")); !slices.Equal(got, []string{"a1", "a2"}) {
		t.Fatalf("first query: w1 = %q, want [a1 a2]", got)
	}
	s.core.put("ns/a3", owned("a3", "1", "w1", true))
	if got := names(s.ByIndex(IndexControllerUID, "uid-w1")); !slices.Equal(got, []string{"a1", "a2", "a3"}) {
		t.Errorf("after a put: w1 = %q, want [a1 a2 a3]", got)
	}
	s.core.replace([]*thing{owned("a1", "1", "w1", true), owned("a2", "2", "w2", true), owned("b1", "1", "w2", true)})
	if len(s.core.indexes) != 0 {
		t.Errorf("a relist rebuilt indexes before any query: %v", slices.Collect(maps.Keys(s.core.indexes)))
	}
	if got := names(s.ByIndex(IndexControllerUID, "uid-w1")); !slices.Equal(got, []string{"a1"}) {
		t.Errorf("after a relist: w1 = %q, want [a1]", got)
	}
	if got := names(s.ByIndex(IndexControllerUID, "uid-w2")); !slices.Equal(got, []string{"a2", "b1"}) {
		t.Errorf("after a relist: w2 = %q, want [a2 b1]", got)
	}
	if _, built := s.core.indexes[indexOwnerUID]; built {
		t.Error("an index never queried was built")
	}
	s.core.remove("ns/b1")
	if got := names(s.ByIndex(IndexControllerUID, "uid-w2")); !slices.Equal(got, []string{"a2"}) {
		t.Errorf("after a remove: w2 = %q, want [a2]", got)
	}
}

func TestStoreIndexLargeFanIn(t *testing.T) {
	s := newStore(thingMeta, map[string]IndexFunc[thing]{IndexControllerUID: ControllerUID[thing]})
	const n = 48
	for i := range n {
		name := fmt.Sprintf("c%02d", i)
		s.core.put("ns/"+name, owned(name, "1", "w", true))
	}
	s.core.put("ns/c00", owned("c00", "2", "w", true)) // same value again: no duplicate
	if got := len(s.ByIndex(IndexControllerUID, "uid-w")); got != n {
		t.Fatalf("ByIndex = %d objects, want %d", got, n)
	}
	for i := range n - 1 {
		s.core.remove(fmt.Sprintf("ns/c%02d", i))
	}
	if got := names(s.ByIndex(IndexControllerUID, "uid-w")); !slices.Equal(got, []string{fmt.Sprintf("c%02d", n-1)}) {
		t.Fatalf("after removals: %q", got)
	}
	s.core.remove(fmt.Sprintf("ns/c%02d", n-1))
	if got := s.ByIndex(IndexControllerUID, "uid-w"); got != nil || len(s.core.indexes[IndexControllerUID]) != 0 {
		t.Fatalf("index not empty after removing everything")
	}
}

// An object without a resourceVersion (a server or proxy that drops it)
// cannot be proven unchanged: a relist must hand the new copy on.
func TestStoreReplaceEmptyResourceVersion(t *testing.T) {
	s := newStore(thingMeta, nil)
	a := obj("a", "")
	s.core.replace([]*thing{a})
	a2 := obj("a", "")
	a2.Labels = map[string]string{"changed": "yes"}
	changes := s.core.replace([]*thing{a2})
	if len(changes) != 1 || changes[0].old != a || changes[0].new != a2 {
		t.Fatalf("changes = %+v, want one update from the old copy to the new", changes)
	}
	if o, _ := s.Get("ns", "a"); o != a2 {
		t.Error("the store kept the old copy of an object listed without a resourceVersion")
	}
}

func TestHeldBytes(t *testing.T) {
	type loop struct{ Next *loop }
	type sized struct {
		Name   string            // 4
		Tags   []string          // 3 × 16 for the array, 1 + 2
		Labels map[string]string // 32 per entry, 1 + 2
		Data   map[string][]byte // 40 per entry, not descended into
		Any    map[string]any    // 32 per entry, 1 + 8 for the float64
		Nums   []int32           // 4 × 4, nothing more
		Ptr    *loop             // 8
		Iface  any               // 16 for the string header, 3
		hidden string            // unexported: not counted
	}
	v := &sized{"name", make([]string, 2, 3), map[string]string{"k": "vv"}, map[string][]byte{"d": make([]byte, 1, 8)},
		map[string]any{"n": 1.0}, make([]int32, 4), &loop{}, "abc", "hidden"}
	v.Tags[0], v.Tags[1] = "a", "bc"
	want := int64(unsafe.Sizeof(sized{})) + 4 + 48 + 3 + 32 + 3 + 40 + 32 + 9 + 16 + 8 + 16 + 3
	if got := heldBytes(reflect.ValueOf(v), 0); got != want {
		t.Errorf("heldBytes = %d, want %d", got, want)
	}
	if got := heldBytes(reflect.ValueOf((*sized)(nil)), 0); got != 0 {
		t.Errorf("heldBytes(nil) = %d, want 0", got)
	}
	l := &loop{}
	l.Next = l
	if got := heldBytes(reflect.ValueOf(l), 0); got != 8*65 {
		t.Errorf("heldBytes of a cycle = %d, want %d: 65 pointers followed", got, 8*65)
	}
	list := new(k8sapi.List[k8sapi.Deployment])
	if err := json.Unmarshal(deploymentListJSON(1), list); err != nil {
		t.Fatal(err)
	}
	d := &list.Items[0]
	if n := testing.AllocsPerRun(10, func() { heldBytes(reflect.ValueOf(d), 0) }); n != 0 {
		t.Errorf("heldBytes of a Deployment allocates %v times", n)
	}
	t.Logf("a Deployment of %d JSON bytes holds %d", len(deploymentListJSON(1)), heldBytes(reflect.ValueOf(d), 0))
	if n := testing.AllocsPerRun(10, func() { heldBytes(reflect.ValueOf(v), 0) }); n != 0 {
		t.Errorf("heldBytes allocates %v times", n)
	}
}
