package k8sapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
)

func ptr[T any](v T) *T { return &v }

// TestVerbs checks, for every verb, the exact request sent and that the
// answer is decoded.
func TestVerbs(t *testing.T) {
	obj := &Deployment{TypeMeta: TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}, ObjectMeta: ObjectMeta{Name: "web", Namespace: "shop", ResourceVersion: "48213"}}
	objJSON, _ := json.Marshal(obj)
	// read is obj as a Get would return it: Update sends it as it was.
	read := *obj
	read.raw = objJSON
	tests := []struct {
		name        string
		call        func(ctx context.Context, d Typed[Deployment]) error
		method      string
		path        string
		query       url.Values
		contentType string
		body        string // exact; "" means no body
	}{{
		name: "get",
		call: func(ctx context.Context, d Typed[Deployment]) error {
			_, err := d.Get(ctx, "shop", "web", GetOptions{})
			return err
		},
		method: "GET", path: "/apis/apps/v1/namespaces/shop/deployments/web",
	}, {
		name: "get status at version",
		call: func(ctx context.Context, d Typed[Deployment]) error {
			_, err := d.Get(ctx, "shop", "web", GetOptions{ResourceVersion: "0", Subresource: "status"})
			return err
		},
		method: "GET", path: "/apis/apps/v1/namespaces/shop/deployments/web/status", query: url.Values{"resourceVersion": {"0"}},
	}, {
		name: "create",
		call: func(ctx context.Context, d Typed[Deployment]) error {
			_, err := d.Create(ctx, "shop", obj, WriteOptions{FieldManager: "widget-operator", DryRun: true})
			return err
		},
		method: "POST", path: "/apis/apps/v1/namespaces/shop/deployments",
		query:       url.Values{"fieldManager": {"widget-operator"}, "dryRun": {"All"}},
		contentType: "application/json", body: string(objJSON),
	}, {
		name: "update",
		call: func(ctx context.Context, d Typed[Deployment]) error {
			_, err := d.Update(ctx, "shop", "web", &read, WriteOptions{})
			return err
		},
		method: "PUT", path: "/apis/apps/v1/namespaces/shop/deployments/web",
		contentType: "application/json", body: string(objJSON),
	}, {
		name: "update status",
		call: func(ctx context.Context, d Typed[Deployment]) error {
			_, err := d.Update(ctx, "shop", "web", &read, WriteOptions{Subresource: "status", FieldManager: "widget-operator"})
			return err
		},
		method: "PUT", path: "/apis/apps/v1/namespaces/shop/deployments/web/status", query: url.Values{"fieldManager": {"widget-operator"}},
		contentType: "application/json", body: string(objJSON),
	}, {
		name: "merge patch",
		call: func(ctx context.Context, d Typed[Deployment]) error {
			_, err := d.Patch(ctx, "shop", "web", MergePatch, []byte(`{"spec":{"replicas":2}}`), PatchOptions{})
			return err
		},
		method: "PATCH", path: "/apis/apps/v1/namespaces/shop/deployments/web",
		contentType: "application/merge-patch+json", body: `{"spec":{"replicas":2}}`,
	}, {
		name: "nil merge patch",
		call: func(ctx context.Context, d Typed[Deployment]) error {
			_, err := d.Patch(ctx, "shop", "web", MergePatch, nil, PatchOptions{})
			return err
		},
		method: "PATCH", path: "/apis/apps/v1/namespaces/shop/deployments/web",
		contentType: "application/merge-patch+json",
	}, {
		name: "json patch",
		call: func(ctx context.Context, d Typed[Deployment]) error {
			_, err := d.Patch(ctx, "shop", "web", JSONPatch, []byte(`[{"op":"replace","path":"/spec/replicas","value":2}]`), PatchOptions{DryRun: true})
			return err
		},
		method: "PATCH", path: "/apis/apps/v1/namespaces/shop/deployments/web", query: url.Values{"dryRun": {"All"}},
		contentType: "application/json-patch+json", body: `[{"op":"replace","path":"/spec/replicas","value":2}]`,
	}, {
		name: "strategic merge patch on status",
		call: func(ctx context.Context, d Typed[Deployment]) error {
			_, err := d.Patch(ctx, "shop", "web", StrategicMergePatch, []byte(`{"status":{"replicas":2}}`), PatchOptions{Subresource: "status"})
			return err
		},
		method: "PATCH", path: "/apis/apps/v1/namespaces/shop/deployments/web/status",
		contentType: "application/strategic-merge-patch+json", body: `{"status":{"replicas":2}}`,
	}, {
		name: "apply patch",
		call: func(ctx context.Context, d Typed[Deployment]) error {
			_, err := d.Patch(ctx, "shop", "web", ApplyPatch, []byte(`{"apiVersion":"apps/v1"}`), PatchOptions{FieldManager: "widget-operator", Force: true})
			return err
		},
		method: "PATCH", path: "/apis/apps/v1/namespaces/shop/deployments/web",
		query:       url.Values{"fieldManager": {"widget-operator"}, "force": {"true"}},
		contentType: "application/apply-patch+yaml", body: `{"apiVersion":"apps/v1"}`,
	}, {
		name: "apply",
		call: func(ctx context.Context, d Typed[Deployment]) error {
			_, err := d.Apply(ctx, "shop", "web", obj, PatchOptions{FieldManager: "widget-operator"})
			return err
		},
		method: "PATCH", path: "/apis/apps/v1/namespaces/shop/deployments/web",
		query:       url.Values{"fieldManager": {"widget-operator"}},
		contentType: "application/apply-patch+yaml", body: string(objJSON),
	}, {
		name: "apply status",
		call: func(ctx context.Context, d Typed[Deployment]) error {
			_, err := d.Apply(ctx, "shop", "web", obj, PatchOptions{FieldManager: "widget-operator", Subresource: "status"})
			return err
		},
		method: "PATCH", path: "/apis/apps/v1/namespaces/shop/deployments/web/status",
		query:       url.Values{"fieldManager": {"widget-operator"}},
		contentType: "application/apply-patch+yaml", body: string(objJSON),
	}, {
		name: "delete",
		call: func(ctx context.Context, d Typed[Deployment]) error {
			return d.Delete(ctx, "shop", "web", DeleteOptions{})
		},
		method: "DELETE", path: "/apis/apps/v1/namespaces/shop/deployments/web",
		contentType: "application/json", body: `{"kind":"DeleteOptions","apiVersion":"v1"}`,
	}, {
		name: "delete with options",
		call: func(ctx context.Context, d Typed[Deployment]) error {
			return d.Delete(ctx, "shop", "web", DeleteOptions{
				PropagationPolicy:  "Foreground",
				Preconditions:      &Preconditions{UID: "6f1c2a9e", ResourceVersion: "48213"},
				GracePeriodSeconds: ptr(int64(0)),
			})
		},
		method: "DELETE", path: "/apis/apps/v1/namespaces/shop/deployments/web",
		contentType: "application/json",
		body:        `{"kind":"DeleteOptions","apiVersion":"v1","propagationPolicy":"Foreground","preconditions":{"uid":"6f1c2a9e","resourceVersion":"48213"},"gracePeriodSeconds":0}`,
	}, {
		name: "list with selectors",
		call: func(ctx context.Context, d Typed[Deployment]) error {
			_, err := d.List(ctx, "shop", ListOptions{LabelSelector: "app in (web,api),tier!=db", FieldSelector: "metadata.name=web", Limit: 50, ResourceVersion: "0", ResourceVersionMatch: "NotOlderThan"})
			return err
		},
		method: "GET", path: "/apis/apps/v1/namespaces/shop/deployments",
		query: url.Values{"labelSelector": {"app in (web,api),tier!=db"}, "fieldSelector": {"metadata.name=web"}, "limit": {"50"},
			"resourceVersion": {"0"}, "resourceVersionMatch": {"NotOlderThan"}},
	}, {
		name: "list all namespaces",
		call: func(ctx context.Context, d Typed[Deployment]) error {
			_, err := d.List(ctx, "", ListOptions{})
			return err
		},
		method: "GET", path: "/apis/apps/v1/deployments",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := "deployment.json"
			if tt.method == "GET" && strings.HasSuffix(tt.path, "deployments") {
				file = "deployments-page2.json"
			}
			srv := newAPIServer(t, serveFile(t, 200, file))
			c, _ := newTestClient(t, srv, func(c *Config) { c.UserAgent = "verbs-test/1" })
			if err := tt.call(t.Context(), For[Deployment](c, Deployments)); err != nil {
				t.Fatal(err)
			}
			reqs := srv.requests()
			if len(reqs) != 1 {
				t.Fatalf("%d requests, want 1", len(reqs))
			}
			r := reqs[0]
			if r.Method != tt.method || r.Path != tt.path {
				t.Errorf("sent %s %s, want %s %s", r.Method, r.Path, tt.method, tt.path)
			}
			q, _ := url.ParseQuery(r.RawQuery)
			if len(q) != 0 || len(tt.query) != 0 {
				if !reflect.DeepEqual(q, tt.query) {
					t.Errorf("query %v, want %v", q, tt.query)
				}
			}
			if r.ContentType != tt.contentType || string(r.Body) != tt.body {
				t.Errorf("sent %q body %s, want %q body %s", r.ContentType, r.Body, tt.contentType, tt.body)
			}
			if r.Accept != "application/json" || r.UserAgent != "verbs-test/1" {
				t.Errorf("accept %q user agent %q", r.Accept, r.UserAgent)
			}
		})
	}
}

func TestGetDecodes(t *testing.T) {
	srv := newAPIServer(t, serveFile(t, 200, "deployment.json"))
	c, _ := newTestClient(t, srv, nil)
	d, err := For[Deployment](c, Deployments).Get(t.Context(), "shop", "web", GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "web" || d.ResourceVersion != "48213" || *d.Spec.Replicas != 3 || d.Status.ReadyReplicas != 3 ||
		d.ControllerOf() == nil || d.ControllerOf().Kind != "Widget" || len(d.Spec.Template.Spec.Containers) != 1 {
		t.Errorf("decoded %+v", d)
	}
	raw, err := For[json.RawMessage](c, Deployments).Get(t.Context(), "shop", "web", GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(*raw), "managedFields") {
		t.Error("json.RawMessage lost the object")
	}
}

func TestCoreAndClusterScopedPaths(t *testing.T) {
	srv := newAPIServer(t, serveFile(t, 200, `deployment.json`))
	c, _ := newTestClient(t, srv, nil)
	ctx := t.Context()
	For[json.RawMessage](c, ConfigMaps).Get(ctx, "kube-system", "a b/c", GetOptions{})
	For[json.RawMessage](c, Namespaces).Get(ctx, "ignored", "shop", GetOptions{})
	For[json.RawMessage](c, CustomResourceDefinitions).Get(ctx, "", "widgets.example.com", GetOptions{})
	want := []string{
		"/api/v1/namespaces/kube-system/configmaps/a%20b%2Fc",
		"/api/v1/namespaces/shop",
		"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com",
	}
	for i, r := range srv.requests() {
		if r.Path != want[i] {
			t.Errorf("path %q, want %q", r.Path, want[i])
		}
	}
}

func TestBadArguments(t *testing.T) {
	srv := newAPIServer(t, func(w http.ResponseWriter, r *http.Request) { t.Errorf("request sent: %s %s", r.Method, r.URL) })
	c, _ := newTestClient(t, srv, nil)
	d := For[Deployment](c, Deployments)
	ctx := t.Context()
	tests := []struct {
		name string
		call func() error
		want string
	}{
		{"get no name", func() error { _, err := d.Get(ctx, "shop", "", GetOptions{}); return err }, "name is empty"},
		{"get no namespace", func() error { _, err := d.Get(ctx, "", "web", GetOptions{}); return err }, "namespace is empty"},
		{"delete no name", func() error { return d.Delete(ctx, "shop", "", DeleteOptions{}) }, "name is empty"},
		{"dot dot", func() error { _, err := d.Get(ctx, "shop", "..", GetOptions{}); return err }, "not valid"},
		{"create no namespace", func() error { _, err := d.Create(ctx, "", &Deployment{}, WriteOptions{}); return err }, "namespace is empty"},
		{"create nil", func() error { _, err := d.Create(ctx, "shop", nil, WriteOptions{}); return err }, "nil object"},
		{"create nil eviction", func() error {
			_, err := d.Create(ctx, "shop", nil, WriteOptions{Subresource: "eviction"})
			return err
		}, "name is empty"},
		{"apply nil", func() error { _, err := d.Apply(ctx, "shop", "web", nil, PatchOptions{FieldManager: "m"}); return err }, "nil object"},
		{"update nil", func() error { _, err := d.Update(ctx, "shop", "web", nil, WriteOptions{}); return err }, "nil object"},
		{"apply no manager", func() error { _, err := d.Apply(ctx, "shop", "web", map[string]string{}, PatchOptions{}); return err }, "FieldManager"},
		{"force on merge", func() error {
			_, err := d.Patch(ctx, "shop", "web", MergePatch, []byte(`{}`), PatchOptions{Force: true})
			return err
		}, "Force"},
		{"unknown patch", func() error { _, err := d.Patch(ctx, "shop", "web", "text/plain", nil, PatchOptions{}); return err }, "unknown patch type"},
		{"apply unencodable", func() error {
			_, err := d.Apply(ctx, "shop", "web", func() {}, PatchOptions{FieldManager: "m"})
			return err
		}, "encode"},
		{"nil client", func() error {
			_, err := For[Deployment](nil, Deployments).Get(ctx, "shop", "web", GetOptions{})
			return err
		}, "nil Client"},
		{"empty resource", func() error { _, err := For[Deployment](c, Resource{}).List(ctx, "", ListOptions{}); return err }, "Resource"},
		{"nil context", func() error {
			var nilCtx context.Context
			_, err := d.Watch(nilCtx, "", ListOptions{})
			return err
		}, "nil Context"},
		{"get nil context", func() error {
			var nilCtx context.Context
			_, err := d.Get(nilCtx, "shop", "web", GetOptions{})
			return err
		}, "nil Context"},
		{"stream nil context", func() error {
			var nilCtx context.Context
			_, err := c.Stream(nilCtx, "/api", nil, "")
			return err
		}, "nil Context"},
		{"stream bad path", func() error { _, err := c.Stream(ctx, "/api/../x", nil, ""); return err }, "path must be clean"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			var re *RequestError
			if !errors.As(err, &re) || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "k8sapi: ") {
				t.Errorf("got %v, want *RequestError containing %q", err, tt.want)
			}
		})
	}
}
