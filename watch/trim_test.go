package watch

import (
	"maps"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// padded returns obj("name", rv) with an annotation, a finalizer, two
// labels and an owner reference that is not its controller.
func padded(name, rv string) *thing {
	o := obj(name, rv)
	o.Annotations = map[string]string{"pad": strings.Repeat("p", 1<<10)}
	o.Labels = map[string]string{"keep": "yes", "drop": "no"}
	o.Finalizers = []string{"example.com/f"}
	o.OwnerReferences = []k8sapi.OwnerReference{{Kind: "Other", Name: "o", UID: "uid-o"}}
	return o
}

// trimmed reports whether o holds no more than TrimMeta(o, "keep") leaves.
func trimmed(o *thing) bool {
	return o.Annotations == nil && o.Finalizers == nil && o.OwnerReferences == nil && maps.Equal(o.Labels, map[string]string{"keep": "yes"})
}

// TestInformerTransform: every object of a streaming list, a list page and
// a watch event passes through Config.Transform before the store, the
// indexes and the handler see it; the bookmark that ends a streaming list
// does not, or its annotation would be lost and the informer never synced.
func TestInformerTransform(t *testing.T) {
	for _, streaming := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			src := newScriptedSource()
			var seen []*thing
			inf, cancel, done := startInformer(t, Config[thing]{
				Source: src, DisableStreamingList: !streaming,
				Transform: func(o *thing) { TrimMeta(&o.ObjectMeta, "keep") },
				Handler:   OnChange(func(o *thing) { seen = append(seen, o) }),
			})
			defer func() { cancel(); <-done }()

			var st *scriptedStream
			if streaming {
				c := <-src.watches
				st = newScriptedStream()
				c.reply <- watchReply{stream: st}
				st.send(t, k8sapi.Added, padded("a", "3"))
				st.send(t, k8sapi.Bookmark, bookmark("9", true))
			} else {
				src.expectList(t, "0", page("9", "", padded("a", "3")), nil)
				st = src.expectWatch(t, "9", nil)
			}
			synctest.Wait()
			if !inf.HasSynced() {
				t.Fatal("not synced: was the bookmark that ends a streaming list transformed?")
			}
			st.send(t, k8sapi.Modified, padded("a", "10"))
			st.send(t, k8sapi.Added, padded("b", "11"))
			synctest.Wait()
			if len(seen) != 3 {
				t.Fatalf("handler saw %d objects, want 3", len(seen))
			}
			for i, o := range seen {
				if !trimmed(o) {
					t.Errorf("handler's object %d (%s@%s) not transformed: %+v", i, o.Name, o.ResourceVersion, o.ObjectMeta)
				}
			}
			for _, o := range inf.Store().List() {
				if !trimmed(o) {
					t.Errorf("stored %s not transformed: %+v", o.Name, o.ObjectMeta)
				}
			}
		})
	}
}

func TestTrimMeta(t *testing.T) {
	yes := true
	long := strings.Repeat("x", 1<<20)
	now := time.Now()
	m := k8sapi.ObjectMeta{
		Name: "n", Namespace: "ns", UID: "u", ResourceVersion: "7", Generation: 3,
		CreationTimestamp: &now, DeletionTimestamp: &now,
		Labels:      map[string]string{"a": "1", "b": "2", "c": "3"},
		Annotations: map[string]string{"big": long},
		Finalizers:  []string{"f"},
		OwnerReferences: []k8sapi.OwnerReference{
			{APIVersion: "v1", Kind: "Other", Name: "other", UID: "uid-other"},
			{APIVersion: "example.com/v1", Kind: long, Name: "w", UID: "uid-w", Controller: &yes, BlockOwnerDeletion: &yes},
		},
	}
	TrimMeta(&m, "a", "c", "missing")
	if m.Name != "n" || m.Namespace != "ns" || m.UID != "u" || m.ResourceVersion != "7" || m.Generation != 3 ||
		m.CreationTimestamp != &now || m.DeletionTimestamp != &now {
		t.Errorf("identity not kept: %+v", m)
	}
	if !maps.Equal(m.Labels, map[string]string{"a": "1", "c": "3"}) {
		t.Errorf("labels = %v, want a and c", m.Labels)
	}
	if m.Annotations != nil || m.Finalizers != nil {
		t.Errorf("annotations or finalizers kept: %v %v", m.Annotations, m.Finalizers)
	}
	if len(m.OwnerReferences) != 1 {
		t.Fatalf("owner references = %+v, want the controller alone", m.OwnerReferences)
	}
	c := m.ControllerOf()
	if c == nil || c.UID != "uid-w" || c.Name != "w" || c.APIVersion != "example.com/v1" || len(c.Kind) != MaxKeptString ||
		c.BlockOwnerDeletion == nil || !*c.BlockOwnerDeletion {
		t.Errorf("controller = %+v, want uid-w with its kind cut to %d bytes", c, MaxKeptString)
	}

	none := k8sapi.ObjectMeta{Name: "n", Labels: map[string]string{"b": "2"}}
	TrimMeta(&none, "a")
	if none.Labels != nil || none.OwnerReferences != nil {
		t.Errorf("an object without the kept labels or a controller: %+v", none)
	}
}

func TestClip(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{{"", 3, ""}, {"abc", 3, "abc"}, {"abcd", 3, "abc"}, {"héllo", 2, "h\xc3"}} {
		if got := Clip(tc.in, tc.n); got != tc.want {
			t.Errorf("Clip(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
