package k8sapi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"time"
)

const (
	defaultMaxRetries = 5
	// maxRetryAfter caps the wait a server may ask for with Retry-After.
	maxRetryAfter = 60 * time.Second
)

// retryBackoff is the backoff before a retry when the server gave no
// Retry-After, jittered.
var retryBackoff = Backoff{Base: 200 * time.Millisecond, Max: 30 * time.Second}

// retryableStatus reports whether an answer with this code is worth
// retrying: 429 always (the server did not process the request), 5xx
// other than 501 only for a GET, the one idempotent method the client
// sends (Client.Stream included), which may be sent again whatever
// happened to the first try.
func retryableStatus(method string, code int) bool {
	return code == http.StatusTooManyRequests || method == http.MethodGet && code >= 500 && code != http.StatusNotImplemented
}

// retryableError reports whether a transport error is worth retrying: any
// error for a GET, otherwise only errors that happened
// before the request could have been sent (dial, DNS, proxy connect).
// Context errors, TLS trust failures and size limits never are.
func retryableError(method string, err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrBodyTooLarge) {
		return false
	}
	// TLS trust problems do not go away by retrying.
	if has[*tls.CertificateVerificationError](err) || has[x509.UnknownAuthorityError](err) || has[x509.HostnameError](err) || has[x509.CertificateInvalidError](err) || has[tls.AlertError](err) {
		return false
	}
	if method == http.MethodGet || has[*net.DNSError](err) {
		return true
	}
	op, ok := errors.AsType[*net.OpError](err)
	return ok && (op.Op == "dial" || op.Op == "proxyconnect")
}

// has reports whether err's tree holds an error of type E.
func has[E error](err error) bool {
	_, ok := errors.AsType[E](err)
	return ok
}

// sleepCtx waits for d or until ctx ends, whichever comes first, and
// returns ctx's error in the second case.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
