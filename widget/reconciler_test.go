package widget

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/queue"
	"github.com/zerodep-k8s/widget-operator/reconcile"
)

var (
	t0      = time.Date(2025, 3, 1, 10, 0, 0, 500_000_000, time.UTC) // the clock's "now" in atT0's bubbles
	t0Trunc = t0.Truncate(time.Second)
	tOld    = time.Date(2025, 2, 1, 8, 0, 0, 0, time.UTC)
)

func ptr[T any](v T) *T { return &v }

// atT0 runs f in a synctest bubble whose clock reads t0 as f starts: the
// Reconciler reads time.Now, which the bubble fakes, and f moves the
// clock on with time.Sleep.
func atT0(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		time.Sleep(time.Until(t0))
		f(t)
	})
}

// widget returns default/web: image nginx:1.27, 3 replicas, port 8080.
func widget() *Widget {
	return &Widget{
		TypeMeta:   k8sapi.TypeMeta{APIVersion: WidgetAPIVersion, Kind: WidgetKind},
		ObjectMeta: k8sapi.ObjectMeta{Namespace: "default", Name: "web", UID: "uid-web", Generation: 1, ResourceVersion: "10"},
		Spec:       WidgetSpec{Image: "nginx:1.27", Replicas: ptr(int32(3)), Port: ptr(int32(8080))},
	}
}

// ownedDeployment returns w's desired Deployment as the server would hold
// it, with ready pods and Available.
func ownedDeployment(t testing.TB, w *Widget, ready int32) *k8sapi.Deployment {
	t.Helper()
	var d k8sapi.Deployment
	roundTripT(t, DesiredDeployment(w), &d)
	d.UID, d.Generation, d.ResourceVersion = "uid-deployment-web", 1, "20"
	d.Status = k8sapi.DeploymentStatus{
		ObservedGeneration: 1, Replicas: ready, UpdatedReplicas: ready, ReadyReplicas: ready, AvailableReplicas: ready,
		Conditions: []k8sapi.Condition{
			{Type: "Available", Status: "True", Reason: "MinimumReplicasAvailable"},
			{Type: "Progressing", Status: "True", Reason: "NewReplicaSetAvailable"},
		},
	}
	return &d
}

func ownedService(t testing.TB, w *Widget) *k8sapi.Service {
	t.Helper()
	var s k8sapi.Service
	roundTripT(t, DesiredService(w), &s)
	s.UID, s.ResourceVersion = "uid-service-web", "21"
	s.Spec.Type, s.Spec.ClusterIP = "ClusterIP", "10.96.0.10" // server defaults
	return &s
}

func roundTripT(t testing.TB, in, out any) {
	t.Helper()
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
}

func readyStatus(w *Widget, since time.Time) WidgetStatus {
	return WidgetStatus{ReadyReplicas: 3, Phase: PhaseReady, ObservedGeneration: w.Generation,
		Conditions: []k8sapi.Condition{{Type: ConditionReady, Status: "True", ObservedGeneration: w.Generation,
			LastTransitionTime: since, Reason: ReasonReady, Message: "3/3 replicas ready"}}}
}

// readyWorld is a Widget whose children and status are all up to date.
func readyWorld(t testing.TB) *recordingClient {
	c := newRecordingClient()
	w := widget()
	w.Status = readyStatus(w, tOld)
	c.widgets["default/web"] = w
	c.deployments["default/web"] = ownedDeployment(t, w, 3)
	c.services["default/web"] = ownedService(t, w)
	return c
}

var reads = []string{"GetWidget default/web", "GetDeployment default/web", "GetService default/web"}

func calls(extra ...string) []string { return append(slices.Clone(reads), extra...) }

var errTransient = errors.New("connection reset by peer")

func TestReconcile(t *testing.T) {
	tests := []struct {
		name      string
		world     func(t *testing.T) *recordingClient
		key       string // "" means default/web
		wantCalls []string
		wantErr   error  // matched with errors.Is
		wantPatch string // the status patch body, when one is sent
	}{
		{
			name: "create",
			world: func(t *testing.T) *recordingClient {
				c := newRecordingClient()
				c.widgets["default/web"] = widget()
				return c
			},
			wantCalls: calls("ApplyDeployment default/web",
				"ApplyService default/web", "Event Normal Created default/web: Created Deployment and Service default/web", "PatchWidgetStatus default/web"),
			wantPatch: `{"status":{"readyReplicas":0,"phase":"Pending","observedGeneration":1,"conditions":[{"type":"Ready","status":"False","observedGeneration":1,"lastTransitionTime":"2025-03-01T10:00:00Z","reason":"DeploymentPending","message":"waiting for the Deployment controller to observe Deployment default/web"}]}}`,
		},
		{
			name:      "no-op: status already correct",
			world:     func(t *testing.T) *recordingClient { return readyWorld(t) },
			wantCalls: reads,
		},
		{
			name: "no-op: others added labels, containers, ports and owners",
			world: func(t *testing.T) *recordingClient {
				c := readyWorld(t)
				d := ownedDeployment(t, c.widgets["default/web"], 3)
				d.Labels["team"] = "blue"
				d.OwnerReferences = append(d.OwnerReferences, k8sapi.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "uid-x"})
				d.Spec.Template.Spec.Containers = append(d.Spec.Template.Spec.Containers, k8sapi.Container{Name: "sidecar", Image: "envoy"})
				c.deployments["default/web"] = d
				s := ownedService(t, c.widgets["default/web"])
				s.Spec.Ports = append(s.Spec.Ports, k8sapi.ServicePort{Name: "metrics", Port: 9090, TargetPort: k8sapi.FromInt(9090)})
				c.services["default/web"] = s
				return c
			},
			wantCalls: reads,
		},
		{
			name: "spec update",
			world: func(t *testing.T) *recordingClient {
				c := readyWorld(t)
				w := widget()
				w.Generation, w.Spec.Image = 2, "nginx:1.28"
				w.Status = c.widgets["default/web"].Status
				c.widgets["default/web"] = w
				return c
			},
			wantCalls: calls("ApplyDeployment default/web", "Event Normal Updated default/web: Updated Deployment default/web", "PatchWidgetStatus default/web"),
			wantPatch: `{"status":{"readyReplicas":3,"phase":"Progressing","observedGeneration":2,"conditions":[{"type":"Ready","status":"False","observedGeneration":2,"lastTransitionTime":"2025-03-01T10:00:00Z","reason":"RolloutInProgress","message":"Deployment default/web: generation 2 not yet observed (observed 1)"}]}}`,
		},
		{
			name: "replicas changed behind our back",
			world: func(t *testing.T) *recordingClient {
				c := readyWorld(t)
				c.deployments["default/web"].Spec.Replicas = ptr(int32(7))
				return c
			},
			wantCalls: calls("ApplyDeployment default/web", "Event Normal Updated default/web: Updated Deployment default/web", "PatchWidgetStatus default/web"),
			wantPatch: `{"status":{"readyReplicas":3,"phase":"Progressing","observedGeneration":1,"conditions":[{"type":"Ready","status":"False","observedGeneration":1,"lastTransitionTime":"2025-03-01T10:00:00Z","reason":"RolloutInProgress","message":"Deployment default/web: generation 2 not yet observed (observed 1)"}]}}`,
		},
		{
			name: "deleted service",
			world: func(t *testing.T) *recordingClient {
				c := readyWorld(t)
				delete(c.services, "default/web")
				return c
			},
			wantCalls: calls("ApplyService default/web", "Event Normal Created default/web: Created Service default/web"),
		},
		{
			name: "deleted deployment",
			world: func(t *testing.T) *recordingClient {
				c := readyWorld(t)
				delete(c.deployments, "default/web")
				return c
			},
			wantCalls: calls("ApplyDeployment default/web", "Event Normal Created default/web: Created Deployment default/web", "PatchWidgetStatus default/web"),
			wantPatch: `{"status":{"readyReplicas":0,"phase":"Pending","observedGeneration":1,"conditions":[{"type":"Ready","status":"False","observedGeneration":1,"lastTransitionTime":"2025-03-01T10:00:00Z","reason":"DeploymentPending","message":"waiting for the Deployment controller to observe Deployment default/web"}]}}`,
		},
		{
			name: "ownership conflict: deployment without controller",
			world: func(t *testing.T) *recordingClient {
				c := readyWorld(t)
				c.widgets["default/web"].Status = WidgetStatus{}
				c.deployments["default/web"].OwnerReferences = nil
				return c
			},
			wantCalls: calls("PatchWidgetStatus default/web",
				"Event Warning OwnershipConflict default/web: Deployment default/web exists and has no controller"),
			wantPatch: `{"status":{"readyReplicas":0,"phase":"Failed","observedGeneration":1,"conditions":[{"type":"Ready","status":"False","observedGeneration":1,"lastTransitionTime":"2025-03-01T10:00:00Z","reason":"OwnershipConflict","message":"Deployment default/web exists and has no controller"}]}}`,
		},
		{
			name: "ownership conflict: service of another controller",
			world: func(t *testing.T) *recordingClient {
				c := readyWorld(t)
				other := widget()
				other.UID = "uid-old-web"
				c.services["default/web"].OwnerReferences = []k8sapi.OwnerReference{reconcile.NewControllerRef(Widgets, &other.ObjectMeta)}
				return c
			},
			wantCalls: calls("PatchWidgetStatus default/web",
				"Event Warning OwnershipConflict default/web: Service default/web exists and is controlled by Widget web (uid uid-old-web)"),
			wantPatch: `{"status":{"readyReplicas":3,"phase":"Failed","observedGeneration":1,"conditions":[{"type":"Ready","status":"False","observedGeneration":1,"lastTransitionTime":"2025-03-01T10:00:00Z","reason":"OwnershipConflict","message":"Service default/web exists and is controlled by Widget web (uid uid-old-web)"}]}}`,
		},
		{
			// The first conflict found is reported: the Deployment's,
			// as it is applied first.
			name: "ownership conflict: both children",
			world: func(t *testing.T) *recordingClient {
				c := readyWorld(t)
				c.widgets["default/web"].Status = WidgetStatus{}
				c.deployments["default/web"].OwnerReferences = nil
				c.services["default/web"].OwnerReferences = nil
				return c
			},
			wantCalls: calls("PatchWidgetStatus default/web",
				"Event Warning OwnershipConflict default/web: Deployment default/web exists and has no controller"),
			wantPatch: `{"status":{"readyReplicas":0,"phase":"Failed","observedGeneration":1,"conditions":[{"type":"Ready","status":"False","observedGeneration":1,"lastTransitionTime":"2025-03-01T10:00:00Z","reason":"OwnershipConflict","message":"Deployment default/web exists and has no controller"}]}}`,
		},
		{
			name: "invalid spec",
			world: func(t *testing.T) *recordingClient {
				c := newRecordingClient()
				w := widget()
				w.Spec.Replicas = ptr(int32(50))
				c.widgets["default/web"] = w
				return c
			},
			wantCalls: calls("PatchWidgetStatus default/web",
				"Event Warning InvalidSpec default/web: spec.replicas: 50 is out of range 1..10"),
			wantPatch: `{"status":{"readyReplicas":0,"phase":"Failed","observedGeneration":1,"conditions":[{"type":"Ready","status":"False","observedGeneration":1,"lastTransitionTime":"2025-03-01T10:00:00Z","reason":"InvalidSpec","message":"spec.replicas: 50 is out of range 1..10"}]}}`,
		},
		{
			name: "invalid spec already reported",
			world: func(t *testing.T) *recordingClient {
				c := newRecordingClient()
				w := widget()
				w.Spec.Replicas = ptr(int32(50))
				w.Status = WidgetStatus{Phase: PhaseFailed, ObservedGeneration: 1, Conditions: []k8sapi.Condition{{
					Type: ConditionReady, Status: "False", ObservedGeneration: 1, LastTransitionTime: tOld,
					Reason: ReasonInvalidSpec, Message: "spec.replicas: 50 is out of range 1..10"}}}
				c.widgets["default/web"] = w
				return c
			},
			wantCalls: reads,
		},
		{
			name: "progress deadline exceeded",
			world: func(t *testing.T) *recordingClient {
				c := readyWorld(t)
				d := c.deployments["default/web"]
				d.Status.ReadyReplicas = 1
				d.Status.Conditions = []k8sapi.Condition{
					{Type: "Available", Status: "False"},
					{Type: "Progressing", Status: "False", Reason: "ProgressDeadlineExceeded", Message: `ReplicaSet "web-5d4" has timed out progressing.`},
				}
				return c
			},
			wantCalls: calls("PatchWidgetStatus default/web",
				`Event Warning ProgressDeadlineExceeded default/web: Deployment default/web: ReplicaSet "web-5d4" has timed out progressing.`),
			wantPatch: `{"status":{"readyReplicas":1,"phase":"Failed","observedGeneration":1,"conditions":[{"type":"Ready","status":"False","observedGeneration":1,"lastTransitionTime":"2025-03-01T10:00:00Z","reason":"ProgressDeadlineExceeded","message":"Deployment default/web: ReplicaSet \"web-5d4\" has timed out progressing."}]}}`,
		},
		{
			name: "transient error applying the deployment",
			world: func(t *testing.T) *recordingClient {
				c := newRecordingClient()
				c.widgets["default/web"] = widget()
				c.fail["ApplyDeployment"] = errTransient
				return c
			},
			wantCalls: calls("ApplyDeployment default/web",
				"Event Warning ReconcileError default/web: reconcile: apply deployment default/web: connection reset by peer"),
			wantErr: errTransient,
		},
		{
			name: "transient error patching the status",
			world: func(t *testing.T) *recordingClient {
				c := newRecordingClient()
				c.widgets["default/web"] = widget()
				c.fail["PatchWidgetStatus"] = errTransient
				return c
			},
			wantCalls: calls("ApplyDeployment default/web", "ApplyService default/web", "Event Normal Created default/web: Created Deployment and Service default/web",
				"PatchWidgetStatus default/web",
				"Event Warning ReconcileError default/web: reconcile: patch widget status default/web: connection reset by peer"),
			wantErr: errTransient,
		},
		{
			name:      "widget not found",
			world:     func(t *testing.T) *recordingClient { return newRecordingClient() },
			wantCalls: []string{"GetWidget default/web"},
		},
		{
			name: "widget being deleted",
			world: func(t *testing.T) *recordingClient {
				c := newRecordingClient()
				w := widget()
				w.DeletionTimestamp = &tOld
				c.widgets["default/web"] = w
				return c
			},
			wantCalls: []string{"GetWidget default/web"},
		},
		{
			name:    "bad key",
			world:   func(t *testing.T) *recordingClient { return newRecordingClient() },
			key:     "a/b/c",
			wantErr: k8sapi.ErrInvalidKey,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			atT0(t, func(t *testing.T) {
				c := tt.world(t)
				check := c.snapshot(t)
				r := c.reconciler(&Reconciler{Client: c, Recorder: c})
				key := tt.key
				if key == "" {
					key = "default/web"
				}
				res, err := r.Reconcile(context.Background(), key)
				check()
				if !slices.Equal(c.calls, tt.wantCalls) {
					t.Errorf("calls:\n got %q\nwant %q", c.calls, tt.wantCalls)
				}
				if res != (queue.Result{}) {
					t.Errorf("result = %+v, want done", res)
				}
				if tt.wantErr != nil {
					if !errors.Is(err, tt.wantErr) {
						t.Fatalf("err = %v, want %v", err, tt.wantErr)
					}
					if !strings.HasPrefix(err.Error(), "reconcile: ") {
						t.Errorf("error %q lacks the package prefix", err)
					}
					return
				}
				if err != nil {
					t.Fatalf("Reconcile: %v", err)
				}
				if tt.wantPatch != "" {
					if p := c.lastStatusPatch(); p != tt.wantPatch {
						t.Errorf("status patch:\n got %s\nwant %s", p, tt.wantPatch)
					}
				}

				// Whatever the first pass did, a second pass over the world
				// it left makes no write call at all.
				c.calls = nil
				check = c.snapshot(t)
				if _, err := r.Reconcile(context.Background(), key); err != nil {
					t.Fatalf("second Reconcile: %v", err)
				}
				check()
				if w := c.writes(); len(w) != 0 {
					t.Errorf("second pass wrote: %q", w)
				}
			})
		})
	}
}

func (c *recordingClient) lastStatusPatch() string {
	for i := len(c.bodies) - 1; i >= 0; i-- {
		if strings.HasPrefix(c.bodies[i], `{"status":`) {
			return c.bodies[i]
		}
	}
	return ""
}

// TestReconcileLifecycle follows one Widget from creation to Ready and
// through a scale-up, checking the calls of every pass and that each
// settled world costs no write.
func TestReconcileLifecycle(t *testing.T) {
	atT0(t, func(t *testing.T) {
		c := newRecordingClient()
		c.widgets["default/web"] = widget()
		r := c.reconciler(&Reconciler{Client: c, Recorder: c})
		step := func(name string, want ...string) {
			t.Helper()
			c.calls = nil
			if _, err := r.Reconcile(context.Background(), "default/web"); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if !slices.Equal(c.calls, want) {
				t.Errorf("%s: calls:\n got %q\nwant %q", name, c.calls, want)
			}
		}
		phase := func() string { return c.widgets["default/web"].Status.Phase }

		step("create", calls("ApplyDeployment default/web",
			"ApplyService default/web", "Event Normal Created default/web: Created Deployment and Service default/web", "PatchWidgetStatus default/web")...)
		step("settled after create", reads...)
		if phase() != PhasePending {
			t.Fatalf("phase = %q, want Pending", phase())
		}

		// The Deployment controller brings the pods up.
		time.Sleep(time.Minute)
		d := *c.deployments["default/web"]
		d.Status = ownedDeployment(t, c.widgets["default/web"], 3).Status
		c.deployments["default/web"] = &d
		step("pods ready", calls("PatchWidgetStatus default/web")...)
		step("settled when ready", reads...)
		if phase() != PhaseReady {
			t.Fatalf("phase = %q, want Ready", phase())
		}
		readySince, _ := reconcile.FindCondition(c.widgets["default/web"].Status.Conditions, ConditionReady)

		// Scale up to 5.
		time.Sleep(time.Minute)
		w := *c.widgets["default/web"]
		w.Generation, w.Spec.Replicas = 2, ptr(int32(5))
		c.widgets["default/web"] = &w
		step("scale up", calls("ApplyDeployment default/web", "Event Normal Updated default/web: Updated Deployment default/web", "PatchWidgetStatus default/web")...)
		step("settled while scaling", reads...)
		if got := *c.deployments["default/web"].Spec.Replicas; got != 5 {
			t.Errorf("deployment replicas = %d, want 5", got)
		}
		cond, _ := reconcile.FindCondition(c.widgets["default/web"].Status.Conditions, ConditionReady)
		if !cond.LastTransitionTime.Equal(time.Now().Truncate(time.Second)) || cond.LastTransitionTime.Equal(readySince.LastTransitionTime) {
			t.Errorf("Ready went False at %v, want %v", cond.LastTransitionTime, time.Now().Truncate(time.Second))
		}
	})
}

// TestReconcileMalformedWidget decodes a Widget list whose first item has
// a spec of the wrong types: that Widget fails with a precise message and
// its sibling still converges.
func TestReconcileMalformedWidget(t *testing.T) {
	atT0(t, func(t *testing.T) {
		const list = `{"apiVersion":"example.com/v1","kind":"WidgetList","metadata":{"resourceVersion":"7"},"items":[
	 {"apiVersion":"example.com/v1","kind":"Widget","metadata":{"namespace":"default","name":"bad","uid":"uid-bad","generation":1},
	  "spec":{"image":"nginx","replicas":"three","port":{"number":80}}},
	 {"apiVersion":"example.com/v1","kind":"Widget","metadata":{"namespace":"default","name":"good","uid":"uid-good","generation":1},
	  "spec":{"image":"nginx","replicas":2}}]}`
		var l k8sapi.List[Widget]
		if err := json.Unmarshal([]byte(list), &l); err != nil {
			t.Fatalf("decode list: %v", err)
		}
		c := newRecordingClient()
		for i := range l.Items {
			c.widgets[k8sapi.Key(l.Items[i].Namespace, l.Items[i].Name)] = &l.Items[i]
		}
		r := c.reconciler(&Reconciler{Client: c, Recorder: c})
		for _, key := range []string{"default/bad", "default/good"} {
			if _, err := r.Reconcile(context.Background(), key); err != nil {
				t.Fatalf("Reconcile %s: %v", key, err)
			}
		}
		const msg = `spec.replicas: must be an integer, got string "three"; spec.port: must be an integer, got object`
		want := []string{
			"GetWidget default/bad", "GetDeployment default/bad", "GetService default/bad",
			"PatchWidgetStatus default/bad", "Event Warning InvalidSpec default/bad: " + msg,
			"GetWidget default/good", "GetDeployment default/good", "GetService default/good",
			"ApplyDeployment default/good",
			"ApplyService default/good", "Event Normal Created default/good: Created Deployment and Service default/good",
			"PatchWidgetStatus default/good",
		}
		if !slices.Equal(c.calls, want) {
			t.Errorf("calls:\n got %q\nwant %q", c.calls, want)
		}
		bad := c.widgets["default/bad"].Status
		if cond, _ := reconcile.FindCondition(bad.Conditions, ConditionReady); bad.Phase != PhaseFailed || cond.Message != msg {
			t.Errorf("bad widget status = %+v", bad)
		}
		if got := *c.deployments["default/good"].Spec.Replicas; got != 2 {
			t.Errorf("good widget's deployment replicas = %d, want 2", got)
		}
	})
}

// TestReconcileCancelledWriteNoEvent checks that a write cut short by the
// caller stopping is returned as an error but recorded as no Event: it says
// nothing about the Widget.
func TestReconcileCancelledWriteNoEvent(t *testing.T) {
	atT0(t, func(t *testing.T) {
		c := newRecordingClient()
		c.widgets["default/web"] = widget()
		c.fail["ApplyDeployment"] = context.Canceled
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		r := c.reconciler(&Reconciler{Client: c, Recorder: c})
		if _, err := r.Reconcile(ctx, "default/web"); !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		if want := calls("ApplyDeployment default/web"); !slices.Equal(c.calls, want) {
			t.Errorf("calls:\n got %q\nwant %q", c.calls, want)
		}
	})
}

func TestReconcileNilRecorder(t *testing.T) {
	c := newRecordingClient()
	w := widget()
	w.Spec.Image = ""
	c.widgets["default/web"] = w
	r := c.reconciler(&Reconciler{Client: c})
	if _, err := r.Reconcile(context.Background(), "default/web"); err != nil {
		t.Fatal(err)
	}
	if want := calls("PatchWidgetStatus default/web"); !slices.Equal(c.calls, want) {
		t.Errorf("calls:\n got %q\nwant %q", c.calls, want)
	}
	cond, _ := reconcile.FindCondition(c.widgets["default/web"].Status.Conditions, ConditionReady)
	if cond.LastTransitionTime.IsZero() || cond.Message != "spec.image: must not be empty" {
		t.Errorf("condition = %+v", cond)
	}
}

// BenchmarkReconcileNoop measures the pass that runs most often: a settled
// Widget, read from the cache, with nothing to write.
func BenchmarkReconcileNoop(b *testing.B) {
	c := readyWorld(b)
	r := c.reconciler(&Reconciler{Client: c})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		c.calls = c.calls[:0]
		if _, err := r.Reconcile(ctx, "default/web"); err != nil {
			b.Fatal(err)
		}
	}
	if len(c.writes()) != 0 {
		b.Fatalf("wrote: %q", c.writes())
	}
}

// BenchmarkReconcileCreate measures a first pass: two applies and a status
// patch, through the recording fake's JSON round trips.
func BenchmarkReconcileCreate(b *testing.B) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		c := newRecordingClient()
		c.widgets["default/web"] = widget()
		r := c.reconciler(&Reconciler{Client: c})
		if _, err := r.Reconcile(ctx, "default/web"); err != nil {
			b.Fatal(err)
		}
	}
}

// An API whose caches hold only the operator's own objects finds a foreign
// Service when its create is refused: the Widget fails with
// OwnershipConflict, and the Service is not touched again in that pass.
func TestReconcileConflictFoundByCreate(t *testing.T) {
	atT0(t, func(t *testing.T) {
		c := newRecordingClient()
		c.widgets["default/web"] = widget()
		c.fail["ApplyService"] = &reconcile.NotControlledError{Kind: "Service", Existing: k8sapi.ObjectMeta{Namespace: "default", Name: "web"}}
		r := c.reconciler(&Reconciler{Client: c, Recorder: c})
		if _, err := r.Reconcile(context.Background(), "default/web"); err != nil {
			t.Fatal(err)
		}
		want := calls("ApplyDeployment default/web", "ApplyService default/web",
			"Event Normal Created default/web: Created Deployment default/web",
			"PatchWidgetStatus default/web",
			"Event Warning OwnershipConflict default/web: Service default/web exists and has no controller")
		if !slices.Equal(c.calls, want) {
			t.Fatalf("calls:\n got %q\nwant %q", c.calls, want)
		}
		if p := c.lastStatusPatch(); !strings.Contains(p, `"phase":"Failed"`) || !strings.Contains(p, `"reason":"OwnershipConflict"`) {
			t.Fatalf("status patch %s", p)
		}
	})
}
