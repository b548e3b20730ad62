package widget

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/reconcile"
)

// Timings of the failure classes.
const (
	// MaxWait is the longest wait between two attempts of a Widget that
	// is Waiting: it is tried again at least this often.
	MaxWait = time.Minute
	// FirstWait is the wait before the first retry of a Widget that is
	// Waiting; each retry doubles it, up to MaxWait.
	FirstWait = 10 * time.Second
	// TransientGrace is how long a Transient failure may last before the
	// Widget reports it as Failed, so that a blip does not flap the
	// status.
	TransientGrace = time.Minute
	// MaxMessageBytes caps the server's message quoted in the Ready
	// condition.
	MaxMessageBytes = 1024
)

// refusalProblem is the Problem a Widget reports when the server refused
// the write of its child kind (a Permanent or Waiting class): reason
// ChildRejected, QuotaExceeded or Forbidden, and the server's message.
func refusalProblem(class reconcile.Class, kind, key string, err error) *Problem {
	var ae *k8sapi.APIError
	if !errors.As(err, &ae) {
		return &Problem{Reason: ReasonChildRejected, Message: trimMessage(kind + " " + key + ": " + err.Error())}
	}
	reason := ReasonChildRejected
	if class == reconcile.Waiting {
		reason = ReasonForbidden
		if isQuota(ae) {
			reason = ReasonQuotaExceeded
		}
	}
	msg := fmt.Sprintf("%s %s refused by the API server (%d %s): %s", kind, key, ae.Code, ae.Status.Reason, withoutUser(serverMessage(ae)))
	return &Problem{Reason: reason, Message: trimMessage(msg)}
}

// withoutUser replaces the user an RBAC denial names (`User "system:..."
// cannot create ...`) with "the operator": whoever can read a Widget can
// read its status, and the operator's identity is for its log alone, as
// /readyz withholds it too.
func withoutUser(m string) string {
	before, rest, ok := strings.Cut(m, `User "`)
	if !ok {
		return m
	}
	if _, after, ok := strings.Cut(rest, `" `); ok {
		return before + "the operator " + after
	}
	return m
}

// isQuota reports whether a 403 comes from ResourceQuota admission.
func isQuota(ae *k8sapi.APIError) bool {
	m := ae.Status.Message
	return strings.Contains(m, "exceeded quota: ") || strings.Contains(m, "status unknown for quota: ")
}

// serverMessage is what the server said: its causes, field by field, when
// it gave any, else its message.
func serverMessage(ae *k8sapi.APIError) string {
	var causes []string
	if ae.Status.Details != nil {
		for _, c := range ae.Status.Details.Causes {
			if c.Field != "" {
				c.Message = c.Field + ": " + c.Message
			}
			causes = append(causes, c.Message)
		}
	}
	return cmp.Or(strings.Join(causes, "; "), ae.Status.Message, ae.Body)
}

// trimMessage escapes what is not printable in s (k8sapi.Escape: the
// server's text may hold ESC or BEL, which kubectl would print raw) and
// cuts it to at most MaxMessageBytes bytes, marking a cut with "...".
// What is kept of a cut message is valid UTF-8.
func trimMessage(s string) string {
	if s = k8sapi.Escape(s); len(s) <= MaxMessageBytes {
		return s
	}
	return strings.ToValidUTF8(s[:MaxMessageBytes-len("...")], "") + "..."
}
