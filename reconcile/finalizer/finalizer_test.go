package finalizer

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/reconcile"
)

// obj is an object of any kind: metadata only.
type obj struct {
	k8sapi.TypeMeta
	k8sapi.ObjectMeta `json:"metadata"`
}

var tOld = time.Date(2025, 2, 1, 8, 0, 0, 0, time.UTC)

// recordingPatcher records each JSON patch as "ns/name <body>".
type recordingPatcher struct {
	calls []string
	err   error
}

func (p *recordingPatcher) JSONPatch(_ context.Context, ns, name string, patch []byte) error {
	p.calls = append(p.calls, k8sapi.Key(ns, name)+" "+string(patch))
	return p.err
}

func TestFinalizerRun(t *testing.T) {
	const fin = "example.com/cleanup"
	errPatch := errors.New("409 Conflict")
	errCleanup := errors.New("bucket busy")
	tests := []struct {
		name        string
		finalizers  []string
		deleting    bool
		rv          string
		patchErr    error
		cleanupErr  error
		wantProceed bool
		wantCleanup bool
		wantCalls   []string
		wantErr     error
	}{
		{name: "present", finalizers: []string{fin}, rv: "5", wantProceed: true},
		{name: "add to none", rv: "5", wantProceed: true, wantCalls: []string{
			`default/web [{"op":"test","path":"/metadata/resourceVersion","value":"5"},{"op":"add","path":"/metadata/finalizers","value":["example.com/cleanup"]}]`}},
		{name: "add to others", finalizers: []string{"other"}, rv: "6", wantProceed: true, wantCalls: []string{
			`default/web [{"op":"test","path":"/metadata/resourceVersion","value":"6"},{"op":"add","path":"/metadata/finalizers/-","value":"example.com/cleanup"}]`}},
		{name: "add fails", rv: "5", patchErr: errPatch, wantErr: errPatch, wantCalls: []string{
			`default/web [{"op":"test","path":"/metadata/resourceVersion","value":"5"},{"op":"add","path":"/metadata/finalizers","value":["example.com/cleanup"]}]`}},
		{name: "add without resourceVersion", wantErr: ErrNoResourceVersion},
		{name: "deleting", finalizers: []string{"other", fin}, deleting: true, rv: "9", wantCleanup: true, wantCalls: []string{
			`default/web [{"op":"test","path":"/metadata/resourceVersion","value":"9"},{"op":"test","path":"/metadata/finalizers/1","value":"example.com/cleanup"},{"op":"remove","path":"/metadata/finalizers/1"}]`}},
		{name: "cleanup fails", finalizers: []string{fin}, deleting: true, rv: "9", cleanupErr: errCleanup, wantCleanup: true, wantErr: errCleanup},
		{name: "remove fails", finalizers: []string{fin}, deleting: true, rv: "9", patchErr: errPatch, wantCleanup: true, wantErr: errPatch, wantCalls: []string{
			`default/web [{"op":"test","path":"/metadata/resourceVersion","value":"9"},{"op":"test","path":"/metadata/finalizers/0","value":"example.com/cleanup"},{"op":"remove","path":"/metadata/finalizers/0"}]`}},
		{name: "deleting, already finalized", finalizers: []string{"other"}, deleting: true, rv: "9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &obj{ObjectMeta: k8sapi.ObjectMeta{Namespace: "default", Name: "web"}}
			w.Finalizers, w.ResourceVersion = slices.Clone(tt.finalizers), tt.rv
			if tt.deleting {
				w.DeletionTimestamp = &tOld
			}
			p := &recordingPatcher{err: tt.patchErr}
			f := &Finalizer{Name: fin, Patcher: p}
			cleaned := false
			proceed, err := f.Run(context.Background(), w, func(context.Context) error { cleaned = true; return tt.cleanupErr })
			if proceed != tt.wantProceed || cleaned != tt.wantCleanup || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Errorf("Run = %v, %v (cleanup ran: %v); want %v, %v (cleanup %v)", proceed, err, cleaned, tt.wantProceed, tt.wantErr, tt.wantCleanup)
			}
			if !slices.Equal(p.calls, tt.wantCalls) {
				t.Errorf("patches:\n got %q\nwant %q", p.calls, tt.wantCalls)
			}
			if !slices.Equal(w.Finalizers, tt.finalizers) {
				t.Errorf("object modified: finalizers %q", w.Finalizers)
			}
			if err != nil {
				var re *reconcile.Error
				if !errors.As(err, &re) || re.Name != "web" {
					t.Errorf("error %v is not a *reconcile.Error naming the object", err)
				}
			}
		})
	}
	w := &obj{ObjectMeta: k8sapi.ObjectMeta{Namespace: "default", Name: "web"}}
	if HasFinalizer(w, fin) {
		t.Error("HasFinalizer on an object without finalizers = true")
	}
	w.Finalizers = []string{"a", fin}
	if !HasFinalizer(w, fin) {
		t.Error("HasFinalizer = false")
	}
}

func TestJSONPatcherFunc(t *testing.T) {
	var got string
	var p JSONPatcher = JSONPatcherFunc(func(_ context.Context, ns, name string, patch []byte) error {
		got = k8sapi.Key(ns, name) + " " + string(patch)
		return nil
	})
	if err := p.JSONPatch(context.Background(), "a", "b", []byte("[]")); err != nil || got != "a/b []" {
		t.Errorf("got %q, %v", got, err)
	}
}
