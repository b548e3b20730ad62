package k8sapi

import (
	"net/http"
	"net/url"
	"testing"
)

// ServesShardSelector lists one object with a selector of everything, and
// tells a server that echoes it (a gate-on Kubernetes 1.37) from one that
// lists without it; an error is the list's.
func TestServesShardSelector(t *testing.T) {
	const all = "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')"
	tests := []struct {
		name   string
		code   int
		answer string
		want   bool
	}{
		{"echoed", 200, `{"kind":"ConfigMapList","metadata":{"resourceVersion":"9","shardInfo":{"selector":"` + all + `"}},"items":[{"metadata":{"name":"a"}}]}`, true},
		{"echoed, no object", 200, `{"metadata":{"shardInfo":{"selector":"` + all + `"}},"items":[]}`, true},
		{"ignored", 200, `{"kind":"ConfigMapList","metadata":{"resourceVersion":"9","continue":"x"},"items":[{"metadata":{"name":"a"}}]}`, false},
		{"forbidden", 403, `{"kind":"Status","status":"Failure","reason":"Forbidden","code":403}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newAPIServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tt.code)
				w.Write([]byte(tt.answer))
			})
			c, _ := newTestClient(t, srv, nil)
			got, err := ServesShardSelector(t.Context(), c, ConfigMaps, "ns")
			if got != tt.want || (err != nil) != (tt.code != 200) || tt.code == 403 && !IsForbidden(err) {
				t.Errorf("ServesShardSelector = %v, %v; want %v", got, err, tt.want)
			}
			reqs := srv.requests()
			want := url.Values{"limit": {"1"}, "shardSelector": {all}}.Encode()
			if len(reqs) != 1 || reqs[0].Method != "GET" || reqs[0].Path != "/api/v1/namespaces/ns/configmaps" || reqs[0].RawQuery != want {
				t.Errorf("requests %+v, want one GET of /api/v1/namespaces/ns/configmaps?%s", reqs, want)
			}
		})
	}
}
