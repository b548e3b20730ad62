package reconcile

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/watch"
)

// fakeNameTaken is a fake of an API server that holds ns/x, as a
// Transport: a create is refused with 409 AlreadyExists, a get returns
// existing, an apply echoes its body. It records every request as
// "METHOD path".
type fakeNameTaken struct {
	existing string // the JSON of the object held
	mu       sync.Mutex
	requests []string
}

func (f *fakeNameTaken) RoundTrip(r *http.Request) (*http.Response, error) {
	f.mu.Lock()
	f.requests = append(f.requests, r.Method+" "+r.URL.Path)
	f.mu.Unlock()
	rec := httptest.NewRecorder()
	rec.Header().Set("Content-Type", "application/json")
	switch r.Method {
	case http.MethodPost:
		rec.WriteHeader(http.StatusConflict)
		io.WriteString(rec, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"AlreadyExists","code":409,"message":"configmaps \"x\" already exists"}`)
	case http.MethodGet:
		io.WriteString(rec, f.existing)
	default:
		io.Copy(rec, r.Body)
	}
	return rec.Result(), nil
}

// A wanted child without a controller owner reference is applied over no
// object: not over one the cache holds, nor over one found when the
// create is refused because the name is taken, whoever controls it.
func TestApplyChildWithoutOwner(t *testing.T) {
	foreign := `{"metadata":{"namespace":"ns","name":"x","resourceVersion":"1"}}`
	controlled := `{"metadata":{"namespace":"ns","name":"x","resourceVersion":"1",` +
		`"ownerReferences":[{"apiVersion":"v1","kind":"Owner","name":"o","uid":"uid-o","controller":true}]}}`
	for _, tt := range []struct {
		name     string
		cached   bool   // the cache holds existing
		existing string // the object of the name
		requests []string
	}{
		{"cached, no controller", true, foreign, nil},
		{"cached, controlled", true, controlled, nil},
		{"name taken, no controller", false, foreign,
			[]string{"POST /api/v1/namespaces/ns/configmaps", "GET /api/v1/namespaces/ns/configmaps/x"}},
		{"name taken, controlled", false, controlled,
			[]string{"POST /api/v1/namespaces/ns/configmaps", "GET /api/v1/namespaces/ns/configmaps/x"}},
	} {
		fake := &fakeNameTaken{existing: tt.existing}
		client, err := k8sapi.New(&k8sapi.Config{Host: "https://apiserver.test", Transport: fake})
		if err != nil {
			t.Fatal(err)
		}
		cache := watch.NewCache(watch.Config[obj]{Name: "configmaps"})
		if tt.cached {
			var o obj
			if err := json.Unmarshal([]byte(tt.existing), &o); err != nil {
				t.Fatal(err)
			}
			cache.Wrote(nil, &o) // as if listed
		}
		want := &obj{TypeMeta: k8sapi.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: k8sapi.ObjectMeta{Namespace: "ns", Name: "x"}}
		got, err := ApplyChild(t.Context(), cache, k8sapi.For[obj](client, k8sapi.ConfigMaps), "test", want)
		var nc *NotControlledError
		if !errors.As(err, &nc) || nc.Existing.Name != "x" || nc.Kind != "ConfigMap" {
			t.Errorf("%s: ApplyChild = %+v, %v, want a *NotControlledError for ConfigMap ns/x", tt.name, got, err)
		}
		if !slices.Equal(fake.requests, tt.requests) {
			t.Errorf("%s: ApplyChild sent %q, want %q", tt.name, fake.requests, tt.requests)
		}
	}
}
