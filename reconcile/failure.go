package reconcile

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// Class sorts a failure by what it takes to get past it. [Classify] is the
// one place that decides it; a [Controller] schedules the retry by it, and
// a Reconciler may report it on its object's status.
type Class int

const (
	// Transient failures may pass by themselves: a conflict, throttling,
	// a server error, a timeout, a lost connection. Retry with backoff.
	Transient Class = iota
	// Waiting failures last until someone else acts: a quota is raised,
	// a permission is granted. Retry after a wait, and at once when
	// what is waited on changes.
	Waiting
	// Permanent failures last until the object or one of its children
	// changes: the server refused a child as invalid or malformed, or
	// the request was one that can never work. Do not retry.
	Permanent
	// Moot failures leave nothing to do: the object or its namespace is
	// going away. Do not retry.
	Moot
)

// String returns the class's name, such as "Waiting".
func (c Class) String() string {
	if c < 0 || int(c) >= len(classNames) {
		return fmt.Sprintf("Class(%d)", int(c))
	}
	return classNames[c]
}

var classNames = [...]string{"Transient", "Waiting", "Permanent", "Moot"}

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
	if IsTerminal(err) || errors.Is(err, k8sapi.ErrInvalidKey) {
		return Permanent
	}
	ae, ok := errors.AsType[*k8sapi.APIError](err)
	if !ok {
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

// TerminalError marks an error that retrying cannot fix: a [Controller]
// does not retry it, and waits for a change instead. A Reconciler returns
// one, typically after reporting the failure on its object's status, when
// for example the API server refuses a child as invalid.
type TerminalError struct {
	Err error // the cause
}

// Error returns the cause's message, or "terminal error" without one.
func (e *TerminalError) Error() string {
	if e.Err == nil {
		return "terminal error"
	}
	return e.Err.Error()
}

// Unwrap returns the cause.
func (e *TerminalError) Unwrap() error { return e.Err }

// IsTerminal reports whether err is or wraps a [*TerminalError].
func IsTerminal(err error) bool {
	_, ok := errors.AsType[*TerminalError](err)
	return ok
}

func hasCause(ae *k8sapi.APIError, typ string) bool {
	return ae.Status.Details != nil &&
		slices.ContainsFunc(ae.Status.Details.Causes, func(c k8sapi.StatusCause) bool { return c.Type == typ })
}

// MaxMessageBytes caps the messages that [TrimMessage] returns.
const MaxMessageBytes = 1024

// TrimMessage makes s fit to quote in a status or an Event: it escapes
// what is not printable (k8sapi.Escape: the server's text may hold ESC
// or BEL, which kubectl would print raw) and cuts it to at most
// MaxMessageBytes bytes, marking a cut with "...". What is kept of a cut
// message is valid UTF-8.
func TrimMessage(s string) string {
	if s = k8sapi.Escape(s); len(s) <= MaxMessageBytes {
		return s
	}
	return strings.ToValidUTF8(s[:MaxMessageBytes-len("...")], "") + "..."
}

// ServerMessage is what the API server said in ae: its causes, field by
// field, when it gave any, else its message. The user an RBAC denial
// names (`User "system:..." cannot create ...`) is replaced with "the
// operator": whoever can read an object can read its status, and the
// operator's identity is for its log alone.
func ServerMessage(ae *k8sapi.APIError) string {
	var causes []string
	if ae.Status.Details != nil {
		for _, c := range ae.Status.Details.Causes {
			if c.Field != "" {
				c.Message = c.Field + ": " + c.Message
			}
			causes = append(causes, c.Message)
		}
	}
	return withoutUser(cmp.Or(strings.Join(causes, "; "), ae.Status.Message, ae.Body))
}

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

// IsQuotaExceeded reports whether err is or wraps a 403 from ResourceQuota
// admission.
func IsQuotaExceeded(err error) bool {
	ae, ok := errors.AsType[*k8sapi.APIError](err)
	return ok && ae.Code == http.StatusForbidden &&
		(strings.Contains(ae.Status.Message, "exceeded quota: ") || strings.Contains(ae.Status.Message, "status unknown for quota: "))
}
