package websocket

import (
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// acceptGUID is the GUID of RFC 6455 section 1.3.
const acceptGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// AcceptKey returns the Sec-WebSocket-Accept value for a
// Sec-WebSocket-Key.
func AcceptKey(key string) string {
	h := sha1.Sum([]byte(key + acceptGUID))
	return base64.StdEncoding.EncodeToString(h[:])
}

// ErrHandshake is wrapped by the error of an upgrade the server did not
// complete as RFC 6455 section 4.1 requires.
var ErrHandshake = errors.New("websocket: handshake failed")

// Dialer opens WebSocket connections to the API server through a
// k8sapi.Client of its own, so that they are authenticated, impersonated,
// rate limited and their refusals typed as the client's other requests
// are. It is safe for concurrent use.
type Dialer struct {
	client *k8sapi.Client
	// MaxMessage is the cap on one message of each Conn; zero means
	// DefaultMaxMessage. Set it before the first Dial.
	MaxMessage int
	// Origin, when not empty, is sent as the handshake's Origin header,
	// which the API server's watch over WebSocket requires. The pod
	// streams need none.
	Origin string
}

// NewDialer returns a Dialer for the server cfg describes. cfg is copied;
// its WrapTransport, if any, still wraps every attempt.
func NewDialer(cfg *k8sapi.Config) (*Dialer, error) {
	if cfg == nil {
		return nil, errors.New("websocket: nil Config")
	}
	c := *cfg
	wrap := cfg.WrapTransport
	c.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if wrap != nil {
			rt = wrap(rt)
		}
		return upgrader{rt}
	}
	client, err := k8sapi.New(&c)
	if err != nil {
		return nil, err
	}
	return &Dialer{client: client}, nil
}

// Client returns the Dialer's k8sapi.Client, for the ordinary requests of
// the same caller.
func (d *Dialer) Client() *k8sapi.Client { return d.client }

// Dial sends a GET for urlPath (escaped, from the server's root) with
// query, asking to switch to WebSocket with one of protocols, in order of
// preference. It returns the connection and the protocol the server chose.
// The server's refusals are k8sapi errors (an *k8sapi.APIError for a 403,
// 404 or 400); a server that answers but does not switch fails with an
// error wrapping [ErrHandshake]. ctx bounds the handshake only: the
// caller closes the Conn.
func (d *Dialer) Dial(ctx context.Context, urlPath string, query url.Values, protocols []string) (*Conn, string, error) {
	var nonce [16]byte
	rand.Read(nonce[:])
	up := &upgrade{key: base64.StdEncoding.EncodeToString(nonce[:]), protocols: protocols, origin: d.Origin}
	body, err := d.client.Stream(context.WithValue(ctx, upgradeKey{}, up), urlPath, query, "*/*")
	if err != nil {
		return nil, "", err
	}
	rwc, ok := body.(io.ReadWriteCloser)
	if up.resp == nil || !ok {
		body.Close()
		return nil, "", fmt.Errorf("%w: the server answered without switching protocols", ErrHandshake)
	}
	proto, err := up.check()
	if err != nil {
		rwc.Close()
		return nil, "", err
	}
	return NewConn(rwc, d.MaxMessage), proto, nil
}

// upgrade is one handshake, carried by the request's context to the
// upgrader and back.
type upgrade struct {
	key       string
	protocols []string
	origin    string
	resp      *http.Response // the 101 answer; nil until there is one
}

type upgradeKey struct{}

// check verifies the 101 answer and returns the chosen protocol.
func (u *upgrade) check() (string, error) {
	h := u.resp.Header
	proto := h.Get("Sec-WebSocket-Protocol")
	switch {
	case !strings.EqualFold(h.Get("Upgrade"), "websocket"):
		return "", fmt.Errorf("%w: Upgrade header %q", ErrHandshake, h.Get("Upgrade"))
	case !headerHasToken(h, "Connection", "upgrade"):
		return "", fmt.Errorf("%w: Connection header %q", ErrHandshake, h.Get("Connection"))
	case h.Get("Sec-WebSocket-Accept") != AcceptKey(u.key):
		return "", fmt.Errorf("%w: wrong Sec-WebSocket-Accept", ErrHandshake)
	case h.Get("Sec-WebSocket-Extensions") != "":
		return "", fmt.Errorf("%w: an extension the client did not ask for", ErrHandshake)
	case proto != "" && !slices.Contains(u.protocols, proto):
		return "", fmt.Errorf("%w: protocol %q the client did not ask for", ErrHandshake, proto)
	}
	return proto, nil
}

func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// upgrader adds the handshake's headers to a request whose context
// carries an upgrade, and hands its 101 answer to the Dialer as a 200
// whose body is the connection, so that the k8sapi.Client, which takes
// only 2xx answers for a stream, returns it. Other requests pass through.
type upgrader struct{ next http.RoundTripper }

func (u upgrader) RoundTrip(req *http.Request) (*http.Response, error) {
	up, _ := req.Context().Value(upgradeKey{}).(*upgrade)
	if up == nil {
		return u.next.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", up.key)
	if up.origin != "" {
		req.Header.Set("Origin", up.origin)
	}
	if len(up.protocols) > 0 {
		req.Header.Set("Sec-WebSocket-Protocol", strings.Join(up.protocols, ", "))
	}
	resp, err := u.next.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		return resp, err
	}
	up.resp = resp
	switched := *resp
	switched.StatusCode, switched.Status = http.StatusOK, "200 OK (101 Switching Protocols)"
	return &switched, nil
}
