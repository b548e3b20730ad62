package widget

import (
	"errors"
	"fmt"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/reconcile"
)

// Timings of the failure classes.
const (
	// MaxWait is the longest wait between two attempts of a Widget that
	// is Waiting: it is tried again at least this often.
	MaxWait = reconcile.DefaultMaxWait
	// FirstWait is the wait before the first retry of a Widget that is
	// Waiting; each retry doubles it, up to MaxWait.
	FirstWait = reconcile.DefaultFirstWait
	// TransientGrace is how long a Transient failure may last before the
	// Widget reports it as Failed, so that a blip does not flap the
	// status.
	TransientGrace = time.Minute
)

// refusalProblem is the Problem a Widget reports when the server refused
// the write of its child kind (a Permanent or Waiting class): reason
// ChildRejected, QuotaExceeded or Forbidden, and the server's message.
func refusalProblem(class reconcile.Class, kind, key string, err error) *Problem {
	ae, ok := errors.AsType[*k8sapi.APIError](err)
	if !ok {
		return &Problem{Reason: ReasonChildRejected, Message: reconcile.TrimMessage(kind + " " + key + ": " + err.Error())}
	}
	reason := ReasonChildRejected
	if class == reconcile.Waiting {
		reason = ReasonForbidden
		if reconcile.IsQuotaExceeded(ae) {
			reason = ReasonQuotaExceeded
		}
	}
	msg := fmt.Sprintf("%s %s refused by the API server (%d %s): %s", kind, key, ae.Code, ae.Status.Reason, reconcile.ServerMessage(ae))
	return &Problem{Reason: reason, Message: reconcile.TrimMessage(msg)}
}
