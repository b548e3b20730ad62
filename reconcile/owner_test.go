package reconcile

import (
	"errors"
	"testing"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

func TestSetControllerReference(t *testing.T) {
	owner := &k8sapi.ObjectMeta{Name: "web", UID: "uid-web"}
	widgets := k8sapi.Resource{Group: "example.com", Version: "v1", Resource: "widgets", Kind: "Widget"}
	ref := NewControllerRef(widgets, owner)
	plain := k8sapi.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "cm", UID: "uid-cm"}
	otherCtl := NewControllerRef(widgets, &k8sapi.ObjectMeta{Name: "old", UID: "uid-old"})
	tests := []struct {
		name    string
		refs    []k8sapi.OwnerReference
		want    []k8sapi.OwnerReference
		wantErr bool
	}{
		{"none", nil, []k8sapi.OwnerReference{ref}, false},
		{"keeps a plain owner", []k8sapi.OwnerReference{plain}, []k8sapi.OwnerReference{plain, ref}, false},
		{"replaces itself", []k8sapi.OwnerReference{{UID: "uid-web", Name: "stale"}, plain}, []k8sapi.OwnerReference{plain, ref}, false},
		{"another controller", []k8sapi.OwnerReference{otherCtl}, []k8sapi.OwnerReference{otherCtl}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := append([]k8sapi.OwnerReference(nil), tt.refs...)
			obj := &k8sapi.ObjectMeta{Namespace: "ns", Name: "child", OwnerReferences: in}
			err := SetControllerReference(obj, ref)
			var owned *AlreadyOwnedError
			if tt.wantErr != errors.As(err, &owned) {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil && err.Error() != "reconcile: ns/child is already controlled by Widget old (uid uid-old)" {
				t.Errorf("error text %q", err)
			}
			if len(obj.OwnerReferences) != len(tt.want) {
				t.Fatalf("refs = %+v, want %+v", obj.OwnerReferences, tt.want)
			}
			for i := range tt.want {
				g, w := obj.OwnerReferences[i], tt.want[i]
				if g.UID != w.UID || g.Name != w.Name || !samePtr(g.Controller, w.Controller) || !samePtr(g.BlockOwnerDeletion, w.BlockOwnerDeletion) {
					t.Errorf("ref %d = %+v, want %+v", i, g, w)
				}
			}
			for i := range tt.refs {
				if in[i].UID != tt.refs[i].UID || in[i].Name != tt.refs[i].Name {
					t.Errorf("the input slice was modified: %+v", in)
				}
			}
		})
	}
	if ref.APIVersion != "example.com/v1" || ref.Kind != "Widget" || ref.Name != "web" || ref.UID != "uid-web" {
		t.Errorf("NewControllerRef = %+v", ref)
	}
	if !IsControlledBy(&k8sapi.ObjectMeta{OwnerReferences: []k8sapi.OwnerReference{plain, ref}}, "uid-web") {
		t.Error("IsControlledBy(own) = false")
	}
	if IsControlledBy(&k8sapi.ObjectMeta{OwnerReferences: []k8sapi.OwnerReference{{UID: "uid-web"}}}, "uid-web") {
		t.Error("IsControlledBy(non-controller ref) = true")
	}
	if IsControlledBy(&k8sapi.ObjectMeta{}, "") {
		t.Error(`IsControlledBy(no refs, "") = true`)
	}
}

// samePtr reports whether a and b are both nil or point to equal values.
func samePtr(a, b *bool) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

// ControllerOf finds the controller of the owner resource's apiVersion and
// kind alone.
func TestControllerOf(t *testing.T) {
	widgets := k8sapi.Resource{Group: "example.com", Version: "v1", Resource: "widgets", Kind: "Widget"}
	ref := NewControllerRef(widgets, &k8sapi.ObjectMeta{Name: "web", UID: "uid-web"})
	for _, tt := range []struct {
		name string
		refs []k8sapi.OwnerReference
		want bool
	}{
		{"its controller", []k8sapi.OwnerReference{ref}, true},
		{"another kind", []k8sapi.OwnerReference{{APIVersion: "example.com/v1", Kind: "Gadget", Name: "web", Controller: new(true)}}, false},
		{"another version", []k8sapi.OwnerReference{{APIVersion: "example.com/v2", Kind: "Widget", Name: "web", Controller: new(true)}}, false},
		{"not controller", []k8sapi.OwnerReference{{APIVersion: "example.com/v1", Kind: "Widget", Name: "web"}}, false},
		{"none", nil, false},
	} {
		got := ControllerOf(&k8sapi.ObjectMeta{OwnerReferences: tt.refs}, widgets)
		if (got != nil) != tt.want || got != nil && got.Name != "web" {
			t.Errorf("%s: ControllerOf = %+v, want found %v", tt.name, got, tt.want)
		}
	}
}
