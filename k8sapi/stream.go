package k8sapi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"path"
	"strings"
)

// Stream sends a GET for urlPath, an escaped path from the API server's
// root such as "/apis" or Pods.Path("shop", "web-0", "log"), with query,
// asking for the media type accept (empty means application/json). It
// returns the body of a 2xx answer as a stream, which the caller reads and
// must close; closing it, or the end of ctx, ends the request.
//
// Stream is for what the verbs of [Typed] do not cover, such as discovery
// documents and pod logs. Sending is authenticated, rate-limited and
// retried as for any GET; the body has no size limit, so the caller
// bounds what it reads. Failures are typed as for the verbs, with Op "get"
// and urlPath as Resource.
func (c *Client) Stream(ctx context.Context, urlPath string, query url.Values, accept string) (io.ReadCloser, error) {
	op := &operation{verb: "get", resource: urlPath, method: http.MethodGet, path: urlPath, query: query, accept: accept}
	switch {
	case ctx == nil:
		return nil, op.requestError(errors.New("nil Context"))
	case !strings.HasPrefix(urlPath, "/") || strings.ContainsAny(urlPath, "?#"):
		return nil, op.requestError(errors.New("path must start with / and hold no query"))
	case path.Clean(urlPath) != urlPath:
		return nil, op.requestError(errors.New(`path must be clean: no "." or ".." segments, no trailing or double slashes`))
	}
	resp, err := c.do(ctx, op)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}
