// Package podexec runs a command in a pod's container, or attaches to
// its main process, as "kubectl exec" and "kubectl attach" do, through
// the API server's pods/exec and pods/attach subresources over WebSocket.
//
// It speaks v5.channel.k8s.io, which can close stdin, and falls back to
// v4.channel.k8s.io when the server offers only that: each message's
// first byte names its stream (0 stdin, 1 stdout, 2 stderr, 3 the error
// channel, 4 terminal resizes), and the error channel carries the
// command's end as a JSON Status.
//
// RBAC: exec needs "get" and "create" on pods/exec, attach the same on
// pods/attach: a WebSocket upgrade is a GET, and the API server also
// checks create (AuthorizePodWebsocketUpgradeCreatePermission).
//
// The operator does not import this package; it is for tools.
package podexec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/k8sapi/internal/websocket"
)

// The subprotocols, in order of preference.
const (
	ProtocolV5 = "v5.channel.k8s.io"
	ProtocolV4 = "v4.channel.k8s.io"
)

// Stream numbers of the channel protocols.
const (
	streamStdin  = 0
	streamStdout = 1
	streamStderr = 2
	streamError  = 3
	streamResize = 4
	streamClose  = 255 // v5: the next byte names a stream the client closes
)

// errorLimit caps what the error channel may send: its Status, which the
// client decodes whole.
const errorLimit = 64 << 10

// messageLimit caps a Status message quoted in an error.
const messageLimit = 1 << 10

// ErrInvalidOptions is wrapped by the error of a call whose arguments the
// server would refuse; nothing is sent then.
var ErrInvalidOptions = errors.New("podexec: invalid options")

// ErrNoStatus is wrapped by the error of a stream that ended before the
// server said how the command ended: a cut connection, not a result.
var ErrNoStatus = errors.New("podexec: stream ended without the command's status")

// ExitError is a command that ran and exited with a non-zero code.
type ExitError struct {
	Code    int
	Message string // the server's message, at most 1 KiB
}

func (e *ExitError) Error() string {
	return fmt.Sprintf("podexec: command exited with code %d", e.Code)
}

// StatusError is a failure the server reported on the error channel
// other than an exit code, such as a command that could not start.
type StatusError struct {
	Status k8sapi.Status // Message cut to 1 KiB
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("podexec: %s: %s", e.Status.Reason, e.Status.Message)
}

// TerminalSize is a terminal's size in characters.
type TerminalSize struct {
	Width  uint16 `json:"Width"`
	Height uint16 `json:"Height"`
}

// Options say which container and which streams. The zero value runs in
// the pod's only container with no stream attached.
type Options struct {
	// Container names the container. Empty means the pod's only one; the
	// server refuses it for a pod with several.
	Container string
	// Stdin, when not nil, is copied to the command's standard input. At
	// its end, v5 closes the command's stdin; v4 cannot, so the command
	// reads on until it ends by itself.
	Stdin io.Reader
	// Stdout and Stderr, when not nil, receive the command's output. Nil
	// means the stream is not asked for. With TTY, Stderr is not used:
	// the terminal joins both streams into Stdout.
	Stdout, Stderr io.Writer
	// TTY gives the command a terminal.
	TTY bool
	// Resize, when not nil and TTY is set, sends each size received to
	// the terminal, until it is closed or the call returns.
	Resize <-chan TerminalSize
}

func (o *Options) query(command []string) (url.Values, error) {
	if o.Stdin == nil && o.Stdout == nil && o.Stderr == nil {
		return nil, fmt.Errorf("%w: at least one of Stdin, Stdout and Stderr is required", ErrInvalidOptions)
	}
	q := url.Values{"command": command}
	if o.Container != "" {
		q.Set("container", o.Container)
	}
	set := func(k string, on bool) {
		if on {
			q.Set(k, "true")
		}
	}
	set("stdin", o.Stdin != nil)
	set("stdout", o.Stdout != nil)
	set("stderr", o.Stderr != nil && !o.TTY)
	set("tty", o.TTY)
	return q, nil
}

// Client opens exec and attach streams. It is safe for concurrent use.
type Client struct {
	dialer *websocket.Dialer
	// protocols are offered in order; nil means v5, then v4. A test seam.
	protocols []string
}

// New returns a Client for the server cfg describes; cfg is copied.
func New(cfg *k8sapi.Config) (*Client, error) {
	d, err := websocket.NewDialer(cfg)
	if err != nil {
		return nil, err
	}
	return &Client{dialer: d}, nil
}

// Exec runs command in the container and returns when it ends: nil for
// an exit code of 0, an *ExitError for another code, a *StatusError when
// the server reports another failure, an error wrapping [ErrNoStatus]
// when the stream is cut first, and the context's error when ctx ends
// (which ends the stream; the command may go on in the container).
// Refusals of the request are k8sapi errors: [k8sapi.IsNotFound] for a
// missing pod, [k8sapi.IsForbidden] without RBAC, a 400 for a container
// not running.
//
// Exec returns without waiting for a Read of opts.Stdin in progress: the
// goroutine copying stdin ends at that Read's return.
func (c *Client) Exec(ctx context.Context, namespace, pod string, command []string, opts Options) error {
	if len(command) == 0 {
		return fmt.Errorf("%w: empty command", ErrInvalidOptions)
	}
	return c.run(ctx, namespace, pod, "exec", command, opts)
}

// Attach attaches to the container's main process, as Exec does to a
// command, and returns when the process ends or the stream does.
func (c *Client) Attach(ctx context.Context, namespace, pod string, opts Options) error {
	return c.run(ctx, namespace, pod, "attach", nil, opts)
}

func (c *Client) run(ctx context.Context, namespace, pod, sub string, command []string, opts Options) error {
	if namespace == "" || pod == "" || badName(namespace) || badName(pod) {
		return fmt.Errorf("%w: namespace %q and pod %q", ErrInvalidOptions, namespace, pod)
	}
	q, err := opts.query(command)
	if err != nil {
		return err
	}
	conn, proto, err := c.dialer.Dial(ctx, k8sapi.Pods.Path(namespace, pod, sub), q, c.offer())
	if err != nil {
		return err
	}
	s := &session{conn: conn, opts: &opts, v5: proto == ProtocolV5, done: make(chan struct{})}
	return s.run(ctx)
}

func (c *Client) offer() []string {
	if c.protocols != nil {
		return c.protocols
	}
	return []string{ProtocolV5, ProtocolV4}
}

func badName(s string) bool { return s == "." || s == ".." }

// quote cuts s to messageLimit bytes for an error.
func quote(s string) string {
	if len(s) > messageLimit {
		return s[:messageLimit] + "..."
	}
	return s
}

// exitCode returns the code of a NonZeroExitCode status.
func exitCode(st *k8sapi.Status) (int, bool) {
	if st.Reason != "NonZeroExitCode" || st.Details == nil {
		return 0, false
	}
	for _, c := range st.Details.Causes {
		if c.Type == "ExitCode" {
			n, err := strconv.Atoi(c.Message)
			return n, err == nil
		}
	}
	return 0, false
}
