package k8sapi

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf16"
)

// ErrBodyTooLarge is wrapped by the error returned when a response body or
// a single watch event is larger than the client accepts: 4 MiB for one
// object or watch event, 16 MiB for a list page. Test for it with
// errors.Is.
var ErrBodyTooLarge = errors.New("k8sapi: response body too large")

// ErrClosed is returned by [Watcher.Next] after [Watcher.Close].
var ErrClosed = errors.New("k8sapi: watcher closed")

// APIError is the error returned when the API server answered a request
// with a failure: a non-2xx status, or an ERROR event on a watch.
//
// Status is the server's own metav1.Status when the body was one. When the
// body was something else, such as an HTML page from a proxy, Status is
// synthesized from the HTTP status code and Body holds a trimmed, printable
// snippet of what was received.
type APIError struct {
	// Op is the verb: "get", "list", "watch", "create", "update", "patch"
	// or "delete".
	Op string
	// Resource is the plural resource, with "/subresource" appended when
	// the request was for one.
	Resource string
	// Namespace and Name identify the object; either may be empty.
	Namespace, Name string
	// Code is the HTTP status code. For a watch ERROR event it is the
	// Status's code, which may be 0 if the server did not set one.
	Code int
	// Status is the server's Status, or one synthesized from Code.
	Status Status
	// RetryAfter is how long the server asked the client to wait, from
	// the Status's details.retryAfterSeconds or the Retry-After header
	// (in seconds), capped at a minute. Zero means the server did not say.
	RetryAfter time.Duration
	// Body is a trimmed snippet (at most 256 bytes, what is not printable
	// escaped as by [Escape]) of a body that was not a Status. Empty
	// otherwise.
	Body string
}

// Error returns "k8sapi: <op> <resource> <namespace>/<name>: <code> <reason>: <message>".
// It never contains request headers or credentials.
func (e *APIError) Error() string {
	s := "k8sapi: " + target(e.Op, e.Resource, e.Namespace, e.Name) + ": "
	if e.Code != 0 {
		s += strconv.Itoa(e.Code) + " "
	}
	s += Printable(e.reason(), 64)
	if msg := cmp.Or(e.Body, e.Status.Message); msg != "" {
		s += ": " + Printable(msg, 512)
	}
	return s
}

// reason is the Status's reason, or the one the HTTP code implies.
func (e *APIError) reason() string {
	return cmp.Or(e.Status.Reason, reasonForCode[e.Code])
}

// target returns "op resource ns/name", leaving out what is empty.
func target(op, resource, namespace, name string) string {
	if resource != "" {
		op += " " + resource
	}
	if id := strings.Trim(namespace+"/"+name, "/"); id != "" {
		op += " " + id
	}
	return op
}

// RequestError is the error returned when a request got no answer from the
// server: it could not be sent, the connection failed, the context ended,
// or a limit was exceeded on the client's side. Err is the cause; test it
// with errors.Is, for example against context.DeadlineExceeded.
type RequestError struct {
	Op              string // the verb, as in [APIError]
	Resource        string // plural resource, "/subresource" appended if any
	Namespace, Name string
	Err             error
}

// Error returns "k8sapi: <op> <resource> <namespace>/<name>: <cause>".
func (e *RequestError) Error() string {
	return "k8sapi: " + target(e.Op, e.Resource, e.Namespace, e.Name) + ": " + strings.TrimPrefix(e.Err.Error(), "k8sapi: ")
}

// Unwrap returns the cause.
func (e *RequestError) Unwrap() error { return e.Err }

// DecodeError is the error returned when the server answered with success
// but the body could not be used: malformed or truncated JSON, a body or
// watch event larger than the limit (Err wraps [ErrBodyTooLarge]), or a
// watch event of unknown type. A watch that returns a DecodeError is done.
// Its fields are a [RequestError]'s: the request, and the cause.
type DecodeError RequestError

// Error returns "k8sapi: <op> <resource> <namespace>/<name>: decode: <cause>".
func (e *DecodeError) Error() string {
	return "k8sapi: " + target(e.Op, e.Resource, e.Namespace, e.Name) + ": decode: " + Printable(strings.TrimPrefix(e.Err.Error(), "k8sapi: "), 512)
}

// Unwrap returns the cause.
func (e *DecodeError) Unwrap() error { return e.Err }

// reasonForCode is the reason the server uses for an HTTP status code, for
// errors whose body carried none.
var reasonForCode = map[int]string{
	http.StatusSwitchingProtocols:    "SwitchingProtocols",
	http.StatusBadRequest:            "BadRequest",
	http.StatusUnauthorized:          "Unauthorized",
	http.StatusForbidden:             "Forbidden",
	http.StatusNotFound:              "NotFound",
	http.StatusMethodNotAllowed:      "MethodNotAllowed",
	http.StatusNotAcceptable:         "NotAcceptable",
	http.StatusConflict:              "Conflict",
	http.StatusGone:                  "Gone",
	http.StatusRequestEntityTooLarge: "RequestEntityTooLarge",
	http.StatusUnsupportedMediaType:  "UnsupportedMediaType",
	http.StatusUnprocessableEntity:   "Invalid",
	http.StatusTooManyRequests:       "TooManyRequests",
	http.StatusInternalServerError:   "InternalError",
	http.StatusServiceUnavailable:    "ServiceUnavailable",
	http.StatusGatewayTimeout:        "Timeout",
}

// is reports whether err wraps an *APIError whose reason is one of
// reasons or, when code is not 0, whose code is code.
func is(err error, code int, reasons ...string) bool {
	var e *APIError
	return errors.As(err, &e) && (code != 0 && e.Code == code || slices.Contains(reasons, e.reason()))
}

// IsNotFound reports whether err wraps an [*APIError] saying the object or
// resource does not exist (reason NotFound, or 404 without a reason).
func IsNotFound(err error) bool { return is(err, 0, "NotFound") }

// IsAlreadyExists reports whether err wraps an [*APIError] saying a create
// found the object already there (409, reason AlreadyExists).
func IsAlreadyExists(err error) bool { return is(err, 0, "AlreadyExists") }

// IsConflict reports whether err wraps an [*APIError] saying a write lost a
// race, usually because its resourceVersion is stale (409, reason
// Conflict, or 409 without a reason). AlreadyExists is not a Conflict.
func IsConflict(err error) bool { return is(err, 0, "Conflict") }

// IsGone reports whether err wraps an [*APIError] saying the requested
// resourceVersion or continue token is too old: code 410, reason Expired
// or Gone, or a message containing "too old resource version". The cure is
// a fresh list.
func IsGone(err error) bool {
	var e *APIError
	return is(err, http.StatusGone, "Expired", "Gone") ||
		errors.As(err, &e) && (e.Status.Code == http.StatusGone || strings.Contains(e.Status.Message, "too old resource version"))
}

// IsForbidden reports whether err wraps an [*APIError] saying the client
// may not do this (403, reason Forbidden).
func IsForbidden(err error) bool { return is(err, 0, "Forbidden") }

// IsUnauthorized reports whether err wraps an [*APIError] saying the
// client's credentials were missing or rejected (401, reason Unauthorized).
func IsUnauthorized(err error) bool { return is(err, 0, "Unauthorized") }

// IsInvalid reports whether err wraps an [*APIError] saying the object
// failed validation (422, reason Invalid); Status.Details.Causes lists the
// fields.
func IsInvalid(err error) bool { return is(err, 0, "Invalid") }

// IsTooManyRequests reports whether err wraps an [*APIError] saying the
// server is throttling the client (429, reason TooManyRequests). The
// client retries these itself; the error is seen once retries ran out.
func IsTooManyRequests(err error) bool { return is(err, http.StatusTooManyRequests, "TooManyRequests") }

// IsServerTimeout reports whether err wraps an [*APIError] saying the
// server or a gateway gave up waiting: reason ServerTimeout (the server
// could not finish in time) or Timeout, or code 504.
func IsServerTimeout(err error) bool {
	return is(err, http.StatusGatewayTimeout, "ServerTimeout", "Timeout")
}

// newAPIError builds the error for a failed response from its code,
// headers and (possibly truncated) body.
func newAPIError(op *operation, code int, header http.Header, body []byte) *APIError {
	var st Status
	if len(body) > 0 && json.Unmarshal(body, &st) == nil && st.Kind == "Status" {
		return statusError(op, code, st, header)
	}
	e := statusError(op, code, Status{Status: "Failure", Code: int32(code), Reason: reasonForCode[code]}, header)
	e.Body = Printable(string(body), 256)
	e.Status.Message = e.Body
	return e
}

// statusError builds the error for a Status the server sent, with a
// failed response's headers (nil for a watch ERROR event). RetryAfter is
// the Status's details.retryAfterSeconds, or else the Retry-After header
// in seconds (anything else, including the HTTP-date form the API server
// never sends, means zero), capped at maxRetryAfter.
func statusError(op *operation, code int, st Status, header http.Header) *APIError {
	e := &APIError{Op: op.verb, Resource: op.resource, Namespace: op.namespace, Name: op.name, Code: code, Status: st}
	var secs int64
	if d := st.Details; d != nil && d.RetryAfterSeconds > 0 {
		secs = int64(d.RetryAfterSeconds)
	} else if n, err := strconv.ParseInt(strings.TrimSpace(header.Get("Retry-After")), 10, 64); err == nil {
		secs = n
	}
	e.RetryAfter = time.Duration(min(max(secs, 0), int64(maxRetryAfter/time.Second))) * time.Second
	return e
}

// Printable returns s as one line of at most max bytes, for a message:
// runs of white space collapsed into one space, what is not printable
// escaped as by [Escape], cut at a rune's start. Only the first 4·max
// bytes of s are looked at.
func Printable(s string, max int) string {
	s = Escape(strings.Join(strings.Fields(s[:min(len(s), 4*max)]), " "))
	if len(s) > max {
		s = strings.TrimSpace(strings.ToValidUTF8(s[:max], ""))
	}
	return s
}

// Escape returns s with each rune that is not graphic (see
// [unicode.IsGraphic]: the control characters of C0 and C1 such as ESC,
// BEL and CSI, DEL, format characters such as the bidirectional
// overrides, line and paragraph separators, private-use and unassigned
// code points) written as a JSON escape such as \u001b, in UTF-16 halves
// beyond U+FFFF, and each byte that is not UTF-8 as U+FFFD. What is left
// is safe to print on a terminal, and shows that something was there.
// Backslashes are kept as they are. Print text from a server, a file or a
// user through it.
func Escape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if unicode.IsGraphic(r) {
			b.WriteRune(r)
			continue
		}
		for _, u := range utf16.Encode([]rune{r}) {
			fmt.Fprintf(&b, `\u%04x`, u)
		}
	}
	return b.String()
}
