package widget

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/reconcile"
)

// recordingClient is an in-memory API, Reader and EventRecorder that records every
// call, in order, as one line such as "ApplyDeployment default/web". Its
// writes behave like a small API server: they store the object (through
// JSON, so encoding mistakes show) under a new resourceVersion and bump the
// generation when the spec changes. Objects handed out by the Get methods
// are the stored pointers, as a cache would hand them out; writes replace
// them rather than modify them, so a test can check the Reconciler never
// modified what it read. As reconcile.ApplyChild does, its applies
// refuse a stored child that the desired one's controller owner does not
// control, unrecorded: ApplyChild sends no request for it.
type recordingClient struct {
	widgets     map[string]*Widget
	deployments map[string]*k8sapi.Deployment
	services    map[string]*k8sapi.Service
	fail        map[string]error // method name -> error to return
	calls       []string
	bodies      []string // JSON bodies of writes, in order
	rv          int
}

func newRecordingClient() *recordingClient {
	return &recordingClient{
		widgets:     map[string]*Widget{},
		deployments: map[string]*k8sapi.Deployment{},
		services:    map[string]*k8sapi.Service{},
		fail:        map[string]error{},
		rv:          100,
	}
}

func (c *recordingClient) record(method, key string) error {
	c.calls = append(c.calls, method+" "+key)
	return c.fail[method]
}

func (c *recordingClient) nextRV() string {
	c.rv++
	return strconv.Itoa(c.rv)
}

// writes returns the recorded calls that are not reads.
func (c *recordingClient) writes() []string {
	var w []string
	for _, call := range c.calls {
		if !strings.HasPrefix(call, "Get") {
			w = append(w, call)
		}
	}
	return w
}

// notControlled is the refusal of reconcile.ApplyChild to write want over
// have, a stored child that want's controller owner does not control; nil
// when it does.
func notControlled(kind string, have, want *k8sapi.ObjectMeta) error {
	if owner := want.ControllerOf(); owner != nil && reconcile.IsControlledBy(have, owner.UID) {
		return nil
	}
	return &reconcile.NotControlledError{Kind: kind, Existing: *have}
}

// reader reads one of the fake's maps as a cache would, recording each
// read as "Get<kind> namespace/name".
type reader[T any] struct {
	c    *recordingClient
	kind string
	m    map[string]*T
}

func (r reader[T]) Get(ns, name string) (*T, bool) {
	r.c.record("Get"+r.kind, k8sapi.Key(ns, name))
	obj, ok := r.m[k8sapi.Key(ns, name)]
	return obj, ok
}

// reconciler sets r's readers to c's maps, and returns r.
func (c *recordingClient) reconciler(r *Reconciler) *Reconciler {
	r.Widgets = reader[Widget]{c, "Widget", c.widgets}
	r.Deployments = reader[k8sapi.Deployment]{c, "Deployment", c.deployments}
	r.Services = reader[k8sapi.Service]{c, "Service", c.services}
	return r
}

func (c *recordingClient) ApplyDeployment(_ context.Context, d *DeploymentApply) (*k8sapi.Deployment, error) {
	key := k8sapi.Key(d.Namespace, d.Name)
	if old := c.deployments[key]; old != nil {
		if err := notControlled("Deployment", &old.ObjectMeta, d.GetObjectMeta()); err != nil {
			return nil, err
		}
	}
	if err := c.record("ApplyDeployment", key); err != nil {
		return nil, err
	}
	var got k8sapi.Deployment
	c.roundTrip(d, &got)
	if old := c.deployments[key]; old != nil {
		got.UID, got.Generation, got.Status = old.UID, old.Generation, old.Status
		if !reflect.DeepEqual(old.Spec, got.Spec) {
			got.Generation++
		}
	} else {
		got.UID, got.Generation = "uid-deployment-"+d.Name, 1
	}
	got.ResourceVersion = c.nextRV()
	c.deployments[key] = &got
	return &got, nil
}

func (c *recordingClient) ApplyService(_ context.Context, s *ServiceApply) (*k8sapi.Service, error) {
	key := k8sapi.Key(s.Namespace, s.Name)
	if old := c.services[key]; old != nil {
		if err := notControlled("Service", &old.ObjectMeta, s.GetObjectMeta()); err != nil {
			return nil, err
		}
	}
	if err := c.record("ApplyService", key); err != nil {
		return nil, err
	}
	var got k8sapi.Service
	c.roundTrip(s, &got)
	if old := c.services[key]; old != nil {
		got.UID = old.UID
	} else {
		got.UID = "uid-service-" + s.Name
	}
	got.ResourceVersion = c.nextRV()
	c.services[key] = &got
	return &got, nil
}

func (c *recordingClient) PatchWidgetStatus(_ context.Context, ns, name string, patch []byte) error {
	key := k8sapi.Key(ns, name)
	if err := c.record("PatchWidgetStatus", key); err != nil {
		return err
	}
	c.bodies = append(c.bodies, string(patch))
	old := c.widgets[key]
	if old == nil {
		return fmt.Errorf("recordingClient: patch of missing widget %s", key)
	}
	var p struct {
		Status *WidgetStatus `json:"status"`
	}
	if err := json.Unmarshal(patch, &p); err != nil || p.Status == nil {
		return fmt.Errorf("recordingClient: bad status patch %s: %v", patch, err)
	}
	var w Widget
	c.roundTrip(old, &w)
	w.Status = *p.Status
	w.ResourceVersion = c.nextRV()
	var stored Widget
	c.roundTrip(&w, &stored)
	c.widgets[key] = &stored
	return nil
}

func (c *recordingClient) Event(ref k8sapi.ObjectReference, eventType, reason, note string) {
	c.calls = append(c.calls, fmt.Sprintf("Event %s %s %s: %s", eventType, reason, k8sapi.Key(ref.Namespace, ref.Name), note))
}

// roundTrip encodes in and decodes the result into out, recording the body.
func (c *recordingClient) roundTrip(in, out any) {
	b, err := json.Marshal(in)
	if err != nil {
		panic(err) // a test bug: every input here is a plain struct
	}
	if _, isWidget := in.(*Widget); !isWidget {
		c.bodies = append(c.bodies, string(b))
	}
	if err := json.Unmarshal(b, out); err != nil {
		panic(err)
	}
}

// snapshot encodes every stored object, to check later that no one
// modified them in place.
func (c *recordingClient) snapshot(t *testing.T) func() {
	t.Helper()
	type held struct {
		ptr  any
		json string
	}
	var all []held
	add := func(p any) {
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, held{p, string(b)})
	}
	for _, w := range c.widgets {
		add(w)
	}
	for _, d := range c.deployments {
		add(d)
	}
	for _, s := range c.services {
		add(s)
	}
	return func() {
		t.Helper()
		for _, h := range all {
			b, _ := json.Marshal(h.ptr)
			if string(b) != h.json {
				t.Errorf("a cached object was modified in place:\nbefore %s\nafter  %s", h.json, b)
			}
		}
	}
}
