package reconcile

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// Class sorts a failure by what it takes to get past it. [Classify] is the
// one place that decides it; the Reconciler reports each class on the
// Widget's status, and a controller schedules the retry by it.
type Class int

const (
	// Transient failures may pass by themselves: a conflict, throttling,
	// a server error, a timeout, a lost connection. Retry with backoff.
	Transient Class = iota
	// Waiting failures last until someone else acts: a quota is raised,
	// a permission is granted. Retry at most once every MaxWait, and at
	// once when what is waited on changes.
	Waiting
	// Permanent failures last until the Widget or one of its children
	// changes: the server refused a child as invalid or malformed, or
	// the request was one that can never work. Do not retry.
	Permanent
	// Moot failures leave nothing to do: the Widget or its namespace is
	// going away. Do not retry.
	Moot
)

// String returns the class's name, such as "Waiting".
func (c Class) String() string {
	switch c {
	case Transient:
		return "Transient"
	case Waiting:
		return "Waiting"
	case Permanent:
		return "Permanent"
	case Moot:
		return "Moot"
	}
	return fmt.Sprintf("Class(%d)", int(c))
}

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

// Classify returns the class of err, the failure of a reconcile or of one
// of its requests:
//
//   - a [*TerminalError], or a key that is not "namespace/name"
//     ([k8sapi.ErrInvalidKey]): Permanent;
//   - an [*k8sapi.APIError]: NamespaceTerminating (a cause of a 403) and
//     404 are Moot; 400 and 422 are Permanent; any other 403 (a quota
//     exceeded, a missing permission) is Waiting; everything else (409,
//     429, 5xx, 401) is Transient;
//   - anything else (no answer, a cancelled request): Transient.
func Classify(err error) Class {
	var te *TerminalError
	if errors.As(err, &te) || errors.Is(err, k8sapi.ErrInvalidKey) {
		return Permanent
	}
	var ae *k8sapi.APIError
	if !errors.As(err, &ae) {
		return Transient
	}
	switch {
	case hasCause(ae, "NamespaceTerminating"), ae.Code == http.StatusNotFound:
		return Moot
	case ae.Code == http.StatusBadRequest, ae.Code == http.StatusUnprocessableEntity:
		return Permanent
	case ae.Code == http.StatusForbidden:
		return Waiting
	}
	return Transient
}

// TerminalError marks an error that retrying cannot fix: the caller should
// not retry it, and wait for a change instead. Reconcile returns one, after
// reporting it on the Widget's status, when the API server refuses a child
// as invalid.
type TerminalError struct {
	Err error // the cause
}

// Error returns the cause's message.
func (e *TerminalError) Error() string { return e.Err.Error() }

// Unwrap returns the cause.
func (e *TerminalError) Unwrap() error { return e.Err }

// IsTerminal reports whether err is or wraps a [*TerminalError].
func IsTerminal(err error) bool {
	var te *TerminalError
	return errors.As(err, &te)
}

// refusalProblem is the Problem a Widget reports when the server refused
// the write of its child kind (a Permanent or Waiting class): reason
// ChildRejected, QuotaExceeded or Forbidden, and the server's message.
func refusalProblem(class Class, kind, key string, err error) *Problem {
	var ae *k8sapi.APIError
	if !errors.As(err, &ae) {
		return &Problem{Reason: ReasonChildRejected, Message: trimMessage(kind + " " + key + ": " + err.Error())}
	}
	reason := ReasonChildRejected
	if class == Waiting {
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
	if ae.Status.Details != nil && len(ae.Status.Details.Causes) > 0 {
		var parts []string
		for _, c := range ae.Status.Details.Causes {
			if c.Field != "" {
				parts = append(parts, c.Field+": "+c.Message)
			} else {
				parts = append(parts, c.Message)
			}
		}
		return strings.Join(parts, "; ")
	}
	if ae.Status.Message != "" {
		return ae.Status.Message
	}
	return ae.Body
}

func hasCause(ae *k8sapi.APIError, typ string) bool {
	if ae.Status.Details == nil {
		return false
	}
	for _, c := range ae.Status.Details.Causes {
		if c.Type == typ {
			return true
		}
	}
	return false
}

// trimMessage cuts s to at most MaxMessageBytes bytes of valid UTF-8,
// marking a cut with "...".
func trimMessage(s string) string {
	if len(s) <= MaxMessageBytes {
		return s
	}
	cut := MaxMessageBytes - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
