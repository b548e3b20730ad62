package widget

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/queue"
	"github.com/zerodep-k8s/widget-operator/reconcile"
)

func apiErr(code int, reason, msg string, causes ...k8sapi.StatusCause) *k8sapi.APIError {
	e := &k8sapi.APIError{Op: "create", Resource: "deployments", Namespace: "default", Name: "web", Code: code,
		Status: k8sapi.Status{Status: "Failure", Reason: reason, Message: msg, Code: int32(code)}}
	if len(causes) > 0 {
		e.Status.Details = &k8sapi.StatusDetails{Causes: causes}
	}
	return e
}

var (
	errRejected = apiErr(422, "Invalid", `Deployment.apps "web" is invalid: [...]`,
		k8sapi.StatusCause{Type: "FieldValueInvalid", Field: "spec.template.spec.containers[0].image", Message: "Invalid value: \"bad\": not allowed here"})
	errQuota = apiErr(403, "Forbidden", `deployments.apps "web" is forbidden: exceeded quota: q, requested: count/deployments.apps=1, used: count/deployments.apps=0, limited: count/deployments.apps=0`)
	errRBAC  = apiErr(403, "Forbidden", `services is forbidden: User "system:serviceaccount:widget-system:widget-operator" cannot create resource "services" in API group "" in the namespace "default"`)
)

func TestValidateName(t *testing.T) {
	for _, tt := range []struct {
		name string
		want string // a part of the message; "" means valid
	}{
		{"web", ""},
		{"a", ""},
		{"a-1", ""},
		{strings.Repeat("a", 63), ""},
		{strings.Repeat("a", 64), "64 characters is longer than 63"},
		{"1web", "must start with a lower-case letter"},
		{"web-", "must start with a lower-case letter"},
		{"web.shop", "DNS-1035"},
		{"Web", "DNS-1035"},
		{"", "DNS-1035"},
	} {
		got := ValidateName(tt.name)
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("ValidateName(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
	w := widget()
	w.Name, w.Spec.Replicas = "9lives", ptr(int32(0))
	if got := ValidateWidget(w); !strings.HasPrefix(got, "metadata.name: ") || !strings.HasSuffix(got, "; spec.replicas: 0 is out of range 1..10") {
		t.Errorf("ValidateWidget = %q", got)
	}
}

// A child the server refuses as invalid: Failed with ChildRejected and the
// server's causes, one Warning Event, a terminal error; no second attempt
// until the Widget's generation or a child changes.
func TestReconcileChildRejected(t *testing.T) {
	atT0(t, func(t *testing.T) {
		c := newRecordingClient()
		c.widgets["default/web"] = widget()
		c.fail["ApplyDeployment"] = errRejected
		r := c.reconciler(&Reconciler{Client: c, Recorder: c})
		res, err := r.Reconcile(context.Background(), "default/web")
		if !reconcile.IsTerminal(err) || reconcile.Classify(err) != reconcile.Permanent || !errors.Is(err, errRejected) || res != (queue.Result{}) {
			t.Fatalf("Reconcile = %+v, %v; want a terminal error", res, err)
		}
		const msg = `Deployment default/web refused by the API server (422 Invalid): spec.template.spec.containers[0].image: Invalid value: "bad": not allowed here`
		want := calls("ApplyDeployment default/web", "PatchWidgetStatus default/web", "Event Warning ChildRejected default/web: "+msg)
		if !slices.Equal(c.calls, want) {
			t.Fatalf("calls:\n got %q\nwant %q", c.calls, want)
		}
		st := c.widgets["default/web"].Status
		if cond, _ := reconcile.FindCondition(st.Conditions, ConditionReady); st.Phase != PhaseFailed || cond.Reason != ReasonChildRejected || cond.Message != msg {
			t.Fatalf("status %+v", st)
		}

		// Our own status write comes back, and an hour passes: nothing is
		// sent again.
		for _, step := range []time.Duration{0, time.Hour} {
			time.Sleep(step)
			c.calls = nil
			if res, err := r.Reconcile(context.Background(), "default/web"); err != nil || res != (queue.Result{}) {
				t.Fatalf("later Reconcile = %+v, %v", res, err)
			}
			if !slices.Equal(c.calls, reads) {
				t.Fatalf("later calls %q, want only reads", c.calls)
			}
		}

		// A new generation is tried again; the server accepts it.
		w := *c.widgets["default/web"]
		w.Generation, w.Spec.Image = 2, "nginx:1.28"
		c.widgets["default/web"] = &w
		delete(c.fail, "ApplyDeployment")
		c.calls = nil
		if _, err := r.Reconcile(context.Background(), "default/web"); err != nil {
			t.Fatal(err)
		}
		if got := c.widgets["default/web"].Status.Phase; got != PhasePending {
			t.Fatalf("phase after the fix = %q", got)
		}
	})
}

// A refusal of the Service is tried again when the Deployment changes.
func TestReconcileChildRejectedRetriedWhenChildChanges(t *testing.T) {
	atT0(t, func(t *testing.T) {
		c := newRecordingClient()
		c.widgets["default/web"] = widget()
		c.fail["ApplyService"] = apiErr(422, "Invalid", "Service \"web\" is invalid: spec.ports[1].name: Duplicate value: \"http\"")
		r := c.reconciler(&Reconciler{Client: c, Recorder: c})
		if _, err := r.Reconcile(context.Background(), "default/web"); !reconcile.IsTerminal(err) {
			t.Fatalf("err = %v, want terminal", err)
		}
		c.calls = nil
		if _, err := r.Reconcile(context.Background(), "default/web"); err != nil || !slices.Equal(c.calls, reads) {
			t.Fatalf("unchanged: err %v, calls %q", err, c.calls)
		}
		d := *c.deployments["default/web"]
		d.ResourceVersion = "999"
		c.deployments["default/web"] = &d
		c.calls = nil
		if _, err := r.Reconcile(context.Background(), "default/web"); !reconcile.IsTerminal(err) {
			t.Fatalf("err = %v, want terminal", err)
		}
		if want := calls("ApplyService default/web"); !slices.Equal(c.calls, want) {
			t.Fatalf("after the Deployment changed: calls %q, want %q (no second status write or Event)", c.calls, want)
		}
	})
}

// Waiting refusals: Failed with QuotaExceeded or Forbidden, a retry after
// the wait and not before, none of the Widget's status or Events
// written again, and RetryQuota to try a quota's refusal at once.
func TestReconcileWaiting(t *testing.T) {
	for _, tt := range []struct {
		name, method, kind, reason string
		err                        error
		said                       string // the server's message as the status quotes it
	}{
		{"quota", "ApplyDeployment", "Deployment", ReasonQuotaExceeded, errQuota, errQuota.Status.Message},
		// The status withholds the operator's identity.
		{"rbac", "ApplyService", "Service", ReasonForbidden, errRBAC,
			`services is forbidden: the operator cannot create resource "services" in API group "" in the namespace "default"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			atT0(t, func(t *testing.T) {
				c := newRecordingClient()
				c.widgets["default/web"] = widget()
				c.fail[tt.method] = tt.err
				r := c.reconciler(&Reconciler{Client: c, Recorder: c})
				res, err := r.Reconcile(context.Background(), "default/web")
				if reconcile.Classify(err) != reconcile.Waiting || reconcile.IsTerminal(err) || res.RequeueAfter != FirstWait {
					t.Fatalf("Reconcile = %+v, %v; want Waiting and a retry in %v", res, err, FirstWait)
				}
				st := c.widgets["default/web"].Status
				cond, _ := reconcile.FindCondition(st.Conditions, ConditionReady)
				wantMsg := tt.kind + " default/web refused by the API server (403 Forbidden): " + tt.said
				if st.Phase != PhaseFailed || cond.Reason != tt.reason || cond.Message != wantMsg {
					t.Fatalf("status %+v", st)
				}
				if n := countPrefix(c.calls, "Event Warning"); n != 1 {
					t.Fatalf("%d Warning Events, want 1: %q", n, c.calls)
				}

				// Woken early with nothing changed: nothing sent, and the
				// retry is still due at the same time.
				time.Sleep(5 * time.Second)
				c.calls = nil
				res, err = r.Reconcile(context.Background(), "default/web")
				if err != nil || res.RequeueAfter != FirstWait-5*time.Second || !slices.Equal(c.calls, reads) {
					t.Fatalf("early: %+v, %v, calls %q", res, err, c.calls)
				}

				// Due: tried again, refused again, nothing else written;
				// the wait doubles.
				time.Sleep(FirstWait)
				c.calls = nil
				res, err = r.Reconcile(context.Background(), "default/web")
				if reconcile.Classify(err) != reconcile.Waiting || res.RequeueAfter != 2*FirstWait || len(c.writes()) != 1 || !strings.HasPrefix(c.writes()[0], tt.method) {
					t.Fatalf("due: %+v, %v, writes %q", res, err, c.writes())
				}

				// A quota's refusal is tried at once after RetryQuota,
				// another one when due; allowed now, so it goes on and
				// the backoff is forgotten.
				if tt.reason == ReasonQuotaExceeded {
					r.RetryQuota("default")
				} else {
					time.Sleep(2 * FirstWait)
				}
				delete(c.fail, tt.method)
				c.calls = nil
				res, err = r.Reconcile(context.Background(), "default/web")
				if err != nil || res != (queue.Result{}) || c.widgets["default/web"].Status.Phase != PhasePending {
					t.Fatalf("after the wait ended: %+v, %v, status %+v", res, err, c.widgets["default/web"].Status)
				}
				// Refused again later: the backoff was forgotten with
				// the success, so the wait starts over.
				c.fail[tt.method] = tt.err
				delete(c.deployments, "default/web")
				delete(c.services, "default/web")
				if res, _ := r.Reconcile(context.Background(), "default/web"); res.RequeueAfter != FirstWait {
					t.Errorf("wait after a success %v, want %v: the backoff was not forgotten", res.RequeueAfter, FirstWait)
				}
			})
		})
	}
}

// The wait starts at FirstWait and doubles up to MaxWait.
func TestReconcileWaitingDefaultBackoff(t *testing.T) {
	atT0(t, func(t *testing.T) {
		c := newRecordingClient()
		c.widgets["default/web"] = widget()
		c.fail["ApplyDeployment"] = errQuota
		r := c.reconciler(&Reconciler{Client: c})
		var waits []time.Duration
		for range 6 {
			res, _ := r.Reconcile(context.Background(), "default/web")
			waits = append(waits, res.RequeueAfter)
			time.Sleep(res.RequeueAfter)
		}
		var want []time.Duration
		for i := range 6 {
			want = append(want, min(FirstWait<<i, MaxWait))
		}
		if want[0] >= MaxWait || want[5] != MaxWait {
			t.Fatalf("FirstWait %v and MaxWait %v make no ramp", FirstWait, MaxWait)
		}
		if !slices.Equal(waits, want) {
			t.Fatalf("waits %v, want %v", waits, want)
		}
		// RetryQuota starts the ramp over: the new quota may reach admission
		// late.
		r.RetryQuota("default")
		if res, _ := r.Reconcile(context.Background(), "default/web"); res.RequeueAfter != FirstWait {
			t.Fatalf("wait after RetryQuota %v, want %v", res.RequeueAfter, FirstWait)
		}
	})
}

// Transient failures are retried with the caller's backoff and show on the
// status only once they have lasted TransientGrace; then once per message.
func TestReconcileTransientGrace(t *testing.T) {
	atT0(t, func(t *testing.T) {
		c := newRecordingClient()
		c.widgets["default/web"] = widget()
		c.fail["ApplyDeployment"] = apiErr(503, "ServiceUnavailable", "etcd leader changed")
		r := c.reconciler(&Reconciler{Client: c, Recorder: c})
		for _, after := range []time.Duration{0, 10 * time.Second, 59 * time.Second} {
			time.Sleep(time.Until(t0.Add(after)))
			res, err := r.Reconcile(context.Background(), "default/web")
			if reconcile.Classify(err) != reconcile.Transient || res != (queue.Result{}) {
				t.Fatalf("at %v: %+v, %v", after, res, err)
			}
			if n := countPrefix(c.calls, "PatchWidgetStatus"); n != 0 {
				t.Fatalf("at %v: status written before the grace ran out", after)
			}
		}
		time.Sleep(time.Until(t0.Add(TransientGrace)))
		c.calls = nil
		if _, err := r.Reconcile(context.Background(), "default/web"); reconcile.Classify(err) != reconcile.Transient {
			t.Fatalf("err = %v", err)
		}
		st := c.widgets["default/web"].Status
		cond, _ := reconcile.FindCondition(st.Conditions, ConditionReady)
		if st.Phase != PhaseFailed || cond.Reason != ReasonReconcileError || !strings.Contains(cond.Message, "etcd leader changed") ||
			!strings.Contains(cond.Message, "failing since 2025-03-01T10:00:00Z") {
			t.Fatalf("status %+v", st)
		}
		if want := calls("ApplyDeployment default/web", "PatchWidgetStatus default/web", "Event Warning ReconcileError default/web: "+cond.Message); !slices.Equal(c.calls, want) {
			t.Fatalf("calls:\n got %q\nwant %q", c.calls, want)
		}
		// The next failure with the same message writes nothing.
		time.Sleep(time.Minute)
		c.calls = nil
		r.Reconcile(context.Background(), "default/web")
		if w := c.writes(); len(w) != 1 {
			t.Fatalf("writes %q, want the one apply", w)
		}
		// Recovered: the failure run is over, and a later blip starts a new
		// grace.
		delete(c.fail, "ApplyDeployment")
		if _, err := r.Reconcile(context.Background(), "default/web"); err != nil {
			t.Fatal(err)
		}
		if p := c.widgets["default/web"].Status.Phase; p != PhasePending {
			t.Fatalf("phase after recovery %q", p)
		}
		if later := time.Now().Add(time.Hour); !r.failed.FailingSince("default/web", later).Equal(later) {
			t.Fatal("the failures of default/web still remembered after success")
		}
	})
}

// A namespace being deleted, or a Widget gone: nothing to do, no error.
func TestReconcileMoot(t *testing.T) {
	atT0(t, func(t *testing.T) {
		c := newRecordingClient()
		c.widgets["default/web"] = widget()
		c.fail["ApplyDeployment"] = apiErr(403, "Forbidden", "namespace default is being terminated",
			k8sapi.StatusCause{Type: "NamespaceTerminating"})
		r := c.reconciler(&Reconciler{Client: c, Recorder: c})
		if res, err := r.Reconcile(context.Background(), "default/web"); err != nil || res != (queue.Result{}) {
			t.Fatalf("terminating: %+v, %v", res, err)
		}
		if w := c.writes(); len(w) != 1 {
			t.Fatalf("writes %q, want the refused apply only", w)
		}
		delete(c.fail, "ApplyDeployment")
		c.fail["PatchWidgetStatus"] = apiErr(404, "NotFound", "widgets.example.com \"web\" not found")
		if res, err := r.Reconcile(context.Background(), "default/web"); err != nil || res != (queue.Result{}) {
			t.Fatalf("gone: %+v, %v", res, err)
		}
	})
}

// The server's message is trimmed to reconcile.MaxMessageBytes in the condition.
func TestReconcileRefusalMessageTrimmed(t *testing.T) {
	atT0(t, func(t *testing.T) {
		var causes []k8sapi.StatusCause
		for i := range 100 {
			causes = append(causes, k8sapi.StatusCause{Field: fmt.Sprintf("spec.f%d", i), Message: "Invalid value: something long enough to add up"})
		}
		c := newRecordingClient()
		c.widgets["default/web"] = widget()
		c.fail["ApplyDeployment"] = apiErr(422, "Invalid", "", causes...)
		r := c.reconciler(&Reconciler{Client: c})
		r.Reconcile(context.Background(), "default/web")
		cond, _ := reconcile.FindCondition(c.widgets["default/web"].Status.Conditions, ConditionReady)
		if len(cond.Message) > reconcile.MaxMessageBytes || !strings.Contains(cond.Message, "spec.f0: Invalid value") || !strings.HasSuffix(cond.Message, "...") {
			t.Fatalf("message of %d bytes: %q", len(cond.Message), cond.Message)
		}
	})
}

// A 422 whose causes hold ESC and BEL (the audit's case) is quoted in the
// Ready condition and the Event with those escaped, not raw.
func TestReconcileRefusalMessageEscaped(t *testing.T) {
	atT0(t, func(t *testing.T) {
		c := newRecordingClient()
		c.widgets["default/web"] = widget()
		c.fail["ApplyDeployment"] = apiErr(422, "Invalid", "",
			k8sapi.StatusCause{Field: "metadata.labels", Message: "Invalid value: \"\x1b]0;owned\a\x1b[2J\""})
		r := c.reconciler(&Reconciler{Client: c, Recorder: c})
		r.Reconcile(context.Background(), "default/web")
		cond, _ := reconcile.FindCondition(c.widgets["default/web"].Status.Conditions, ConditionReady)
		const want = `Deployment default/web refused by the API server (422 Invalid): metadata.labels: Invalid value: "\u001b]0;owned\u0007\u001b[2J"`
		if cond.Message != want {
			t.Fatalf("Ready message %q, want %q", cond.Message, want)
		}
		if !slices.Contains(c.calls, "Event Warning ChildRejected default/web: "+want) {
			t.Fatalf("calls %q, want the Event with the escaped message", c.calls)
		}
	})
}

func countPrefix(calls []string, prefix string) int {
	n := 0
	for _, c := range calls {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

// A ResourceQuota change ends the wait of the Widgets of its namespace
// that a quota refused, and of no other.
func TestRetryQuota(t *testing.T) {
	atT0(t, func(t *testing.T) {
		c := newRecordingClient()
		quota, rbac, elsewhere := widget(), widget(), widget()
		rbac.Name, rbac.UID = "rbac", "uid-rbac"
		elsewhere.Namespace, elsewhere.UID = "other", "uid-other"
		for _, w := range []*Widget{quota, rbac, elsewhere} {
			c.widgets[w.Namespace+"/"+w.Name] = w
		}
		r := c.reconciler(&Reconciler{Client: c, Recorder: c})
		c.fail["ApplyDeployment"] = errQuota
		for _, key := range []string{"default/web", "other/web"} {
			if _, err := r.Reconcile(context.Background(), key); reconcile.Classify(err) != reconcile.Waiting {
				t.Fatalf("%s: %v, want a Waiting refusal", key, err)
			}
		}
		delete(c.fail, "ApplyDeployment")
		c.fail["ApplyService"] = errRBAC
		if _, err := r.Reconcile(context.Background(), "default/rbac"); reconcile.Classify(err) != reconcile.Waiting {
			t.Fatalf("default/rbac: %v, want a Waiting refusal", err)
		}
		if got := r.RetryQuota("default"); !slices.Equal(got, []string{"default/web"}) {
			t.Fatalf("RetryQuota(default) = %q, want [default/web]", got)
		}
		if got := r.RetryQuota("default"); got != nil {
			t.Fatalf("RetryQuota(default) again = %q, want none: the wait already ended", got)
		}
		if got := r.RetryQuota("other"); !slices.Equal(got, []string{"other/web"}) {
			t.Fatalf("RetryQuota(other) = %q, want [other/web]", got)
		}
	})
}
