package k8sapi

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// urlRecorder is an http.RoundTripper that records each request's URL and
// answers 200 with body, its Content-Length given.
type urlRecorder struct {
	urls []string
	body []byte
}

func (u *urlRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	u.urls = append(u.urls, r.URL.String())
	return &http.Response{StatusCode: 200, Header: http.Header{}, ContentLength: int64(len(u.body)), Request: r,
		Body: io.NopCloser(bytes.NewReader(u.body))}, nil
}

// A request carries a query string only when it has options: no bare "?".
func TestRequestURLs(t *testing.T) {
	rt := &urlRecorder{body: []byte(`{"metadata":{"name":"web"}}`)}
	c, err := New(&Config{Host: "https://api.example/base/", Transport: rt})
	if err != nil {
		t.Fatal(err)
	}
	d := For[Deployment](c, Deployments)
	if _, err := d.Get(t.Context(), "shop", "web", GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Get(t.Context(), "shop", "web", GetOptions{ResourceVersion: "0"}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"https://api.example/base/apis/apps/v1/namespaces/shop/deployments/web",
		"https://api.example/base/apis/apps/v1/namespaces/shop/deployments/web?resourceVersion=0",
	}
	if strings.Join(rt.urls, "\n") != strings.Join(want, "\n") {
		t.Errorf("URLs\n%s\nwant\n%s", strings.Join(rt.urls, "\n"), strings.Join(want, "\n"))
	}
}

// An object of exactly ObjectLimit bytes is read, announced by its
// Content-Length or not; one byte more is refused.
func TestObjectAtTheLimit(t *testing.T) {
	obj := `{"metadata":{"name":"web"}}`
	body := []byte(obj + strings.Repeat(" ", 1000-len(obj)))
	get := func(body []byte) error {
		c, err := New(&Config{Host: "https://api.example", Transport: &urlRecorder{body: body}, ObjectLimit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		_, err = For[Deployment](c, Deployments).Get(t.Context(), "shop", "web", GetOptions{})
		return err
	}
	if err := get(body); err != nil {
		t.Errorf("object of exactly ObjectLimit bytes: %v", err)
	}
	if err := get(append(body, ' ')); !errors.Is(err, ErrBodyTooLarge) {
		t.Errorf("object one byte over ObjectLimit: %v, want ErrBodyTooLarge", err)
	}
}

// A list or watch sends only the options that are set: a watch without a
// timeout asks for none.
func TestListOptionsQuery(t *testing.T) {
	tests := []struct {
		opts  ListOptions
		watch bool
		want  string
	}{
		{ListOptions{}, false, ""},
		{ListOptions{}, true, "watch=1"},
		{ListOptions{Limit: 5, TimeoutSeconds: 30}, false, "limit=5"},
		{ListOptions{TimeoutSeconds: 30, AllowWatchBookmarks: true}, true, "allowWatchBookmarks=true&timeoutSeconds=30&watch=1"},
		{ListOptions{ShardSelector: "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')"}, false,
			"shardSelector=shardRange%28object.metadata.uid%2C+%270x0000000000000000%27%2C+%270x10000000000000000%27%29"},
		{ListOptions{ShardSelector: "s", LabelSelector: "a=b"}, true, "labelSelector=a%3Db&shardSelector=s&watch=1"},
	}
	for _, tt := range tests {
		if got := tt.opts.query(tt.watch).Encode(); got != tt.want {
			t.Errorf("%+v, watch %v: query %q, want %q", tt.opts, tt.watch, got, tt.want)
		}
	}
}
