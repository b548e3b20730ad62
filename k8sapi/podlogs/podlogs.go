// Package podlogs reads a pod container's logs as a stream, as
// "kubectl logs" does, through the API server's pods/log subresource.
//
// The operator does not import this package; it is for tools.
package podlogs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// ErrInvalidOptions is wrapped by the error of a call whose arguments the
// server would refuse; nothing is sent then.
var ErrInvalidOptions = errors.New("podlogs: invalid options")

// Options say which logs to read. The zero value reads all of the only
// container's current logs, once, without timestamps.
type Options struct {
	// Container names the container. Empty means the pod's only one; the
	// server refuses it for a pod with several.
	Container string
	// Follow keeps the stream open, with new lines as they are written,
	// until the container stops, ctx ends or the stream is closed.
	Follow bool
	// Previous reads the logs of the container's previous instance, the
	// one that last terminated.
	Previous bool
	// SinceSeconds, when positive, starts that many seconds back. Zero
	// means no such limit. At most one of SinceSeconds and SinceTime may
	// be set.
	SinceSeconds int64
	// SinceTime, when not zero, starts at that time (sent to the second).
	SinceTime time.Time
	// TailLines, when not nil, starts that many lines before the end.
	// Nil means from the start.
	TailLines *int64
	// Timestamps prefixes each line with its RFC 3339 time.
	Timestamps bool
	// LimitBytes, when positive, ends the stream after about that many
	// bytes. Zero means no limit.
	LimitBytes int64
}

// query checks o and returns the request's parameters.
func (o Options) query() (url.Values, error) {
	switch {
	case o.SinceSeconds < 0:
		return nil, fmt.Errorf("%w: SinceSeconds %d is negative", ErrInvalidOptions, o.SinceSeconds)
	case o.SinceSeconds > 0 && !o.SinceTime.IsZero():
		return nil, fmt.Errorf("%w: SinceSeconds and SinceTime are both set", ErrInvalidOptions)
	case o.TailLines != nil && *o.TailLines < 0:
		return nil, fmt.Errorf("%w: TailLines %d is negative", ErrInvalidOptions, *o.TailLines)
	case o.LimitBytes < 0:
		return nil, fmt.Errorf("%w: LimitBytes %d is negative", ErrInvalidOptions, o.LimitBytes)
	}
	q := url.Values{}
	if o.Container != "" {
		q.Set("container", o.Container)
	}
	for k, on := range map[string]bool{"follow": o.Follow, "previous": o.Previous, "timestamps": o.Timestamps} {
		if on {
			q.Set(k, "true")
		}
	}
	if o.SinceSeconds > 0 {
		q.Set("sinceSeconds", strconv.FormatInt(o.SinceSeconds, 10))
	}
	if !o.SinceTime.IsZero() {
		q.Set("sinceTime", o.SinceTime.UTC().Format(time.RFC3339))
	}
	if o.TailLines != nil {
		q.Set("tailLines", strconv.FormatInt(*o.TailLines, 10))
	}
	if o.LimitBytes > 0 {
		q.Set("limitBytes", strconv.FormatInt(o.LimitBytes, 10))
	}
	return q, nil
}

// Stream opens the logs of pod in namespace and returns them as a stream,
// which the caller reads and must close; closing it, or the end of ctx,
// ends the request. With opts.Follow the stream lasts as long as the
// container writes.
//
// Bad arguments fail with an error wrapping [ErrInvalidOptions]. The
// server's refusals are k8sapi errors: [k8sapi.IsNotFound] for a missing
// pod, a 400 (k8sapi.APIError with Code 400) for a missing or ambiguous
// container or a container not started yet. A stream cut off part way
// fails the Read with the connection's error.
func Stream(ctx context.Context, c *k8sapi.Client, namespace, pod string, opts Options) (io.ReadCloser, error) {
	switch {
	case c == nil:
		return nil, fmt.Errorf("%w: nil Client", ErrInvalidOptions)
	case namespace == "" || pod == "":
		return nil, fmt.Errorf("%w: namespace and pod name are required", ErrInvalidOptions)
	case badName(namespace) || badName(pod):
		return nil, fmt.Errorf("%w: %q and %q are not valid names", ErrInvalidOptions, namespace, pod)
	}
	q, err := opts.query()
	if err != nil {
		return nil, err
	}
	// The server writes text/plain; "*/*" accepts it whatever the
	// negotiation.
	return c.Stream(ctx, k8sapi.Pods.Path(namespace, pod, "log"), q, "*/*")
}

func badName(s string) bool { return s == "." || s == ".." }
