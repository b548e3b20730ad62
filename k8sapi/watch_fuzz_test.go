package k8sapi

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// FuzzWatchDecode feeds arbitrary bytes to the watch decoder as a response
// body. It must never panic, must end (the input is finite), and every
// failure must be one of the documented typed errors.
func FuzzWatchDecode(f *testing.F) {
	f.Add([]byte(`{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"1"}}}` + "\n"))
	f.Add([]byte(`{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9","annotations":{"k8s.io/initial-events-end":"true"}}}}`))
	f.Add([]byte(`{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired","message":"too old resource version: 1 (2)"}}`))
	f.Add([]byte(`{"type":"ERROR","object":"garbage"}`))
	f.Add([]byte(`{"type":"MODIFIED","object":{"metadata":{"name":"a"},"spec":{"replicas":"x"}}}{"type":`))
	f.Add([]byte("not json at all\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		op := &operation{verb: "watch", resource: "deployments", namespace: "ns"}
		w := newWatcher[Deployment](op, io.NopCloser(bytes.NewReader(body)), func() {}, 1<<20)
		defer w.Close()
		for range len(body) + 1 {
			_, err := w.Next()
			if err == nil {
				continue
			}
			var apiErr *APIError
			var decErr *DecodeError
			var reqErr *RequestError
			if err != io.EOF && !errors.As(err, &apiErr) && !errors.As(err, &decErr) && !errors.As(err, &reqErr) {
				t.Fatalf("untyped error %T: %v", err, err)
			}
			return
		}
		t.Fatalf("more events than bytes in %q", body)
	})
}
