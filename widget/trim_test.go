package widget

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// manyLabels returns n labels with long keys and values, none of the
// Widget's.
func manyLabels(n int) map[string]string {
	m := make(map[string]string, n)
	for i := range n {
		m[fmt.Sprintf("pad.example.com/k%04d", i)] = strings.Repeat("v", 63)
	}
	return m
}

// bloat adds to meta what anyone who may write the object can add: many
// labels, a large annotation, finalizers and owners.
func bloat(meta *k8sapi.ObjectMeta) {
	if meta.Labels == nil {
		meta.Labels = map[string]string{}
	}
	for k, v := range manyLabels(2000) {
		meta.Labels[k] = v
	}
	meta.Annotations = map[string]string{"pad": strings.Repeat("a", 256<<10)}
	meta.Finalizers = []string{"example.com/a", "example.com/b"}
	meta.OwnerReferences = append(meta.OwnerReferences, k8sapi.OwnerReference{Kind: strings.Repeat("K", 1<<20), Name: "n", UID: "u"})
}

// TestTrimBounds: whatever a Widget or a child holds, what the cache keeps
// of it is a few KiB, and the Reconciler's decisions stand.
func TestTrimBounds(t *testing.T) {
	w := widget()
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	d := ownedDeployment(t, w, 3)
	bloat(&d.ObjectMeta)
	bloat(&d.Spec.Template.ObjectMeta)
	c := &d.Spec.Template.Spec.Containers[0]
	for i := range 1000 {
		c.Ports = append(c.Ports, k8sapi.ContainerPort{Name: fmt.Sprintf("p%d", i), ContainerPort: int32(i + 1)})
		d.Spec.Template.Spec.Containers = append(d.Spec.Template.Spec.Containers, k8sapi.Container{Name: fmt.Sprintf("c%d", i), Image: strings.Repeat("i", 1<<10)})
	}
	d.Status.Conditions = append(d.Status.Conditions, k8sapi.Condition{Type: "Pad", Message: strings.Repeat("m", 1<<20)})
	d.Status.Conditions[1].Message = strings.Repeat("m", 1<<20)
	s := ownedService(t, w)
	bloat(&s.ObjectMeta)
	ws := *w
	bloat(&ws.ObjectMeta)

	before := StatusFor(w, d, nil, now)
	TrimDeployment(d)
	TrimService(s)
	TrimWidget(&ws)
	// Changed where the Reconciler compares: selectors and the image.
	hostileD, hostileS := ownedDeployment(t, w, 3), ownedService(t, w)
	hostileD.Spec.Selector.MatchLabels = manyLabels(1000)
	hostileD.Spec.Template.Spec.Containers[0].Image = strings.Repeat("i", 1<<20)
	hostileS.Spec.Selector = manyLabels(1000)
	TrimDeployment(hostileD)
	TrimService(hostileS)
	for _, o := range []any{d, s, &ws, hostileD, hostileS} {
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > 4<<10+4*MaxImageLength {
			t.Errorf("%T trimmed to %d bytes, want at most 4 KiB and an image: %.300s", o, len(b), b)
		}
	}
	if !DeploymentUpToDate(d, DesiredDeployment(w)) || !ServiceUpToDate(s, DesiredService(w)) {
		t.Error("a trimmed child that holds the desired fields is not up to date")
	}
	if after := StatusFor(w, d, nil, now); !StatusEqual(before, after) {
		t.Errorf("status of the trimmed Deployment = %+v, want %+v", after, before)
	}
	if ws.Spec != w.Spec || ws.UID != w.UID || ws.Generation != w.Generation || ws.Labels != nil {
		t.Errorf("trimmed Widget = %+v", ws.ObjectMeta)
	}
}

// TestTrimKeepsProgressDeadline: the Progressing condition's reason and
// message, which a Widget's status quotes, survive the trim, its message
// cut as the status cuts it.
func TestTrimKeepsProgressDeadline(t *testing.T) {
	w := widget()
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	d := ownedDeployment(t, w, 0)
	d.Status.Conditions = []k8sapi.Condition{
		{Type: "ReplicaFailure", Status: "True", Reason: "FailedCreate"},
		{Type: "Progressing", Status: "False", Reason: "ProgressDeadlineExceeded", Message: "ReplicaSet \"web-1\" has timed out progressing."},
	}
	want := StatusFor(w, d, nil, now)
	TrimDeployment(d)
	if got := StatusFor(w, d, nil, now); !StatusEqual(got, want) || got.Phase != PhaseFailed {
		t.Errorf("status = %+v, want %+v", got, want)
	}
}

// TestTrimKeepsWhatIsRead: of the status conditions, the cache keeps what
// StatusFor reads: the Available and Progressing conditions' type and
// status, and the reason and message of a Progressing one that is False
// (TestTrimKeepsProgressDeadline); of the metadata, no creationTimestamp,
// and of a Widget, no apiVersion or kind either.
func TestTrimKeepsWhatIsRead(t *testing.T) {
	w := widget()
	created := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	d, s := ownedDeployment(t, w, 3), ownedService(t, w)
	for _, m := range []*k8sapi.ObjectMeta{&d.ObjectMeta, &s.ObjectMeta, &w.ObjectMeta} {
		m.CreationTimestamp = &created
	}
	for i := range d.Status.Conditions {
		d.Status.Conditions[i].Message, d.Status.Conditions[i].LastTransitionTime = "a message", created
	}
	TrimDeployment(d)
	TrimService(s)
	TrimWidget(w)
	want := []k8sapi.Condition{{Type: "Available", Status: "True"}, {Type: "Progressing", Status: "True"}}
	if !slices.Equal(d.Status.Conditions, want) {
		t.Errorf("conditions trimmed to %+v, want %+v", d.Status.Conditions, want)
	}
	if d.CreationTimestamp != nil || s.CreationTimestamp != nil || w.CreationTimestamp != nil || w.TypeMeta != (k8sapi.TypeMeta{}) {
		t.Errorf("trimmed objects keep a creationTimestamp (%v, %v, %v) or the Widget's %+v", d.CreationTimestamp, s.CreationTimestamp, w.CreationTimestamp, w.TypeMeta)
	}
}

// sameMap reports whether a and b are one map.
func sameMap(a, b map[string]string) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// sameString reports whether a and b are one string in memory.
func sameString(a, b string) bool {
	return len(a) == len(b) && unsafe.StringData(a) == unsafe.StringData(b)
}

// TestTrimShares: the cache holds once what a Widget's child repeats: the
// template's labels are the Deployment's own map when they are equal, and
// only then; the labels, selectors and owner references, the container's
// name and the conditions' types share the strings of the operator's
// constants and of the child's name.
func TestTrimShares(t *testing.T) {
	w := widget()
	d, s := ownedDeployment(t, w, 3), ownedService(t, w) // decoded: strings of their own
	roundTripT(t, d.Status, &d.Status)
	TrimDeployment(d)
	TrimService(s)
	if !sameMap(d.Labels, d.Spec.Template.Labels) || !maps.Equal(d.Labels, Labels(w.Name)) {
		t.Errorf("labels %v and template labels %v: want one map, Labels(%q)", d.Labels, d.Spec.Template.Labels, w.Name)
	}
	constant := func(v, name string) bool {
		return sameString(v, name) || slices.ContainsFunc([]string{LabelName, LabelInstance, LabelManagedBy, Labels("")[LabelName], FieldManager,
			WidgetAPIVersion, WidgetKind, ContainerName, "Available", "Progressing"}, func(c string) bool { return sameString(v, c) })
	}
	for _, m := range []*k8sapi.ObjectMeta{&d.ObjectMeta, &s.ObjectMeta} {
		for k, v := range m.Labels {
			if !constant(k, "") || !constant(v, m.Name) {
				t.Errorf("label %s=%s of %s holds a copy", k, v, m.Name)
			}
		}
		if r := m.OwnerReferences[0]; !constant(r.APIVersion, "") || !constant(r.Kind, "") || !constant(r.Name, m.Name) {
			t.Errorf("owner reference %+v holds a copy", r)
		}
	}
	for _, sel := range []map[string]string{d.Spec.Selector.MatchLabels, s.Spec.Selector} {
		for k, v := range sel {
			if !constant(k, "") || !constant(v, d.Name) && !constant(v, s.Name) {
				t.Errorf("selector %s=%s holds a copy", k, v)
			}
		}
	}
	if c := d.Spec.Template.Spec.Containers[0]; !constant(c.Name, "") {
		t.Errorf("container name %s holds a copy", c.Name)
	}
	for _, c := range d.Status.Conditions {
		if !constant(c.Type, "") {
			t.Errorf("condition type %s holds a copy", c.Type)
		}
	}
	d = ownedDeployment(t, w, 3)
	delete(d.Spec.Template.Labels, LabelManagedBy)
	TrimDeployment(d)
	if sameMap(d.Labels, d.Spec.Template.Labels) || DeploymentUpToDate(d, DesiredDeployment(w)) {
		t.Errorf("template labels %v trimmed to %v, up to date", Labels(w.Name), d.Spec.Template.Labels)
	}
}

// TestTrimForeignChild: of a child whose controller is not a Widget, or
// that has none, the cache keeps its metadata alone, and the Reconciler
// still finds it in the way.
func TestTrimForeignChild(t *testing.T) {
	w := widget()
	yes := true
	for _, refs := range [][]k8sapi.OwnerReference{nil,
		{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "x", UID: "x", Controller: &yes}},
		{{APIVersion: WidgetAPIVersion, Kind: "Gadget", Name: w.Name, UID: w.UID, Controller: &yes}},
		{{APIVersion: "other.example.com/v1", Kind: WidgetKind, Name: w.Name, UID: w.UID, Controller: &yes}},
	} {
		d, s := ownedDeployment(t, w, 3), ownedService(t, w)
		d.OwnerReferences, s.OwnerReferences = refs, refs
		bloat(&d.ObjectMeta)
		bloat(&s.ObjectMeta)
		TrimDeployment(d)
		TrimService(s)
		for _, o := range []any{d, s} {
			if b, _ := json.Marshal(o); len(b) > 1<<10 {
				t.Errorf("foreign %T trimmed to %d bytes, want at most 1 KiB: %.300s", o, len(b), b)
			}
		}
		if d.Name != w.Name || s.Name != w.Name || DeploymentUpToDate(d, DesiredDeployment(w)) || ServiceUpToDate(s, DesiredService(w)) {
			t.Errorf("foreign children trimmed to %+v and %+v", d, s)
		}
	}
}

// The longest valid image, 512 characters of 4 bytes each, is cached whole:
// clipped, it would differ from the wanted one and be applied again at
// every reconcile.
func TestTrimKeepsLongestValidImage(t *testing.T) {
	image := strings.Repeat("\U0001D11E", MaxImageLength) // a symbol of 4 bytes in UTF-8
	if msg := validateImage(image); msg != "" {
		t.Fatalf("image not valid: %s", msg)
	}
	d := ownedDeployment(t, widget(), 3)
	d.Spec.Template.Spec.Containers[0].Image = image
	TrimDeployment(d)
	if got := d.Spec.Template.Spec.Containers[0].Image; got != image {
		t.Errorf("image of %d bytes cached as %d bytes", len(image), len(got))
	}
}
