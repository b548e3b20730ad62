package reconcile

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
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

var errTransient = errors.New("connection reset by peer")

func TestClassify(t *testing.T) {
	terminating := apiErr(403, "Forbidden", "unable to create new content in namespace default because it is being terminated",
		k8sapi.StatusCause{Type: "NamespaceTerminating", Field: "metadata.namespace"})
	for _, tt := range []struct {
		err  error
		want Class
	}{
		{terminating, Moot},
		{fmt.Errorf("reconcile: apply deployment: %w", terminating), Moot},
		{apiErr(404, "NotFound", "namespaces \"gone\" not found"), Moot},
		{errRejected, Permanent},
		{&Error{Op: "apply deployment", Err: errRejected}, Permanent},
		{apiErr(400, "BadRequest", "malformed"), Permanent},
		{&TerminalError{Err: errTransient}, Permanent},
		{&Error{Op: "split key", Err: k8sapi.ErrInvalidKey}, Permanent},
		{errQuota, Waiting},
		{errRBAC, Waiting},
		{apiErr(409, "Conflict", "the object has been modified"), Transient},
		{apiErr(429, "TooManyRequests", "slow down"), Transient},
		{apiErr(500, "InternalError", "etcd"), Transient},
		{apiErr(503, "ServiceUnavailable", ""), Transient},
		{apiErr(504, "Timeout", ""), Transient},
		{apiErr(401, "Unauthorized", ""), Transient},
		{errTransient, Transient},
		{context.DeadlineExceeded, Transient},
		{errors.New("NamespaceTerminating"), Transient},
	} {
		if got := Classify(tt.err); got != tt.want {
			t.Errorf("Classify(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// A TerminalError without a cause still has a message.
func TestTerminalErrorWithoutCause(t *testing.T) {
	var err error = &TerminalError{}
	if err.Error() != "terminal error" || !IsTerminal(err) || Classify(err) != Permanent {
		t.Errorf("TerminalError{} = %q, terminal %v, class %v", err.Error(), IsTerminal(err), Classify(err))
	}
}
