package k8sapi

import (
	"encoding/json"
	"net/http"
	"reflect"
	"testing"
)

func TestMergeJSON(t *testing.T) {
	for _, tc := range []struct {
		name           string
		base, was, now string
		want           string
	}{{
		name: "unknown fields survive a change",
		base: `{"a":1,"x":{"y":2},"spec":{"replicas":1,"strategy":{"type":"Recreate"}}}`,
		was:  `{"a":1,"spec":{"replicas":1}}`,
		now:  `{"a":1,"spec":{"replicas":5}}`,
		want: `{"a":1,"spec":{"replicas":5,"strategy":{"type":"Recreate"}},"x":{"y":2}}`,
	}, {
		name: "a cleared field is deleted",
		base: `{"metadata":{"resourceVersion":"7","labels":{"a":"1","b":"2"},"managedFields":[]}}`,
		was:  `{"metadata":{"resourceVersion":"7","labels":{"a":"1","b":"2"}}}`,
		now:  `{"metadata":{"labels":{"a":"1"}}}`,
		want: `{"metadata":{"labels":{"a":"1"},"managedFields":[]}}`,
	}, {
		name: "a field set that was not there",
		base: `{"metadata":{"labels":{},"uid":"u"}}`,
		was:  `{"metadata":{"uid":"u"}}`,
		now:  `{"metadata":{"uid":"u","labels":{"a":"1"}}}`,
		want: `{"metadata":{"labels":{"a":"1"},"uid":"u"}}`,
	}, {
		name: "a changed container keeps env and resources",
		base: `{"containers":[{"name":"a","image":"1","env":[{"name":"E","value":"v"}]},{"name":"b","image":"1","resources":{"limits":{"cpu":"1"}}}]}`,
		was:  `{"containers":[{"name":"a","image":"1"},{"name":"b","image":"1"}]}`,
		now:  `{"containers":[{"name":"b","image":"2"},{"name":"a","image":"1"},{"name":"c","image":"3"}]}`,
		want: `{"containers":[{"image":"2","name":"b","resources":{"limits":{"cpu":"1"}}},{"env":[{"name":"E","value":"v"}],"image":"1","name":"a"},{"image":"3","name":"c"}]}`,
	}, {
		name: "unnamed elements of an array that kept its length pair by position",
		base: `{"ports":[{"port":80,"nodePort":30080},{"port":443,"nodePort":30443}]}`,
		was:  `{"ports":[{"port":80},{"port":443}]}`,
		now:  `{"ports":[{"port":81},{"port":443}]}`,
		want: `{"ports":[{"nodePort":30080,"port":81},{"nodePort":30443,"port":443}]}`,
	}, {
		name: "unnamed elements of a shorter array pair only when unchanged",
		base: `{"ports":[{"port":80,"nodePort":30080},{"port":443,"nodePort":30443}]}`,
		was:  `{"ports":[{"port":80},{"port":443}]}`,
		now:  `{"ports":[{"port":443},{"port":8443}]}`,
		want: `{"ports":[{"nodePort":30443,"port":443},{"port":8443}]}`,
	}, {
		name: "unnamed elements pair with their equals first, then by free position",
		base: `{"ports":[{"port":80,"nodePort":30080},{"port":443,"nodePort":30443}]}`,
		was:  `{"ports":[{"port":80},{"port":443}]}`,
		now:  `{"ports":[{"port":81},{"port":80}]}`,
		want: `{"ports":[{"port":81},{"nodePort":30080,"port":80}]}`,
	}, {
		name: "an unchanged value is base's whole",
		base: `{"spec":{"template":{"spec":{"volumes":[{"name":"v","emptyDir":{}}]}}},"n":1.50}`,
		was:  `{"spec":{"template":{"spec":{}}},"n":1.50}`,
		now:  `{"spec":{"template":{"spec":{}}},"n":2}`,
		want: `{"n":2,"spec":{"template":{"spec":{"volumes":[{"emptyDir":{},"name":"v"}]}}}}`,
	}, {
		name: "a type change takes now",
		base: `{"a":{"b":1}}`,
		was:  `{"a":{}}`,
		now:  `{"a":"s"}`,
		want: `{"a":"s"}`,
	}} {
		got, err := mergeJSON([]byte(tc.base), []byte(tc.was), []byte(tc.now))
		if err != nil || string(got) != tc.want {
			t.Errorf("%s:\n got %s, %v\nwant %s", tc.name, got, err, tc.want)
		}
	}
	if _, err := mergeJSON([]byte(`{`), []byte(`{}`), []byte(`{}`)); err == nil {
		t.Error("bad base: no error")
	}
}

// TestUpdateKeepsUnknownFields updates a Deployment read with Get, and one
// built by hand, through the reduced struct: the fields it lacks
// (strategy, resources, managedFields...) are sent back.
func TestUpdateKeepsUnknownFields(t *testing.T) {
	srv := newAPIServer(t, serveFile(t, 200, "deployment.json"))
	c, _ := newTestClient(t, srv, nil)
	deployments := For[Deployment](c, Deployments)
	d, err := deployments.Get(t.Context(), "shop", "web", GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Spec.Replicas = ptr(int32(5))
	d.Spec.Template.Spec.Containers[0].Image = "registry.example.com/shop/web:1.9.0"
	delete(d.Labels, "widgets.example.com/owner")
	updated, err := deployments.Update(t.Context(), "shop", "web", d, WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// What Update returned is kept too: no read before the next one.
	if _, err := deployments.Update(t.Context(), "shop", "web", updated, WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	// By hand: Update reads the object first.
	byHand := &Deployment{ObjectMeta: ObjectMeta{Name: "web", Namespace: "shop"}, Spec: DeploymentSpec{Replicas: ptr(int32(1))}}
	if _, err := deployments.Update(t.Context(), "shop", "web", byHand, WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	reqs := srv.requests()
	var methods []string
	for _, r := range reqs {
		methods = append(methods, r.Method)
	}
	if !reflect.DeepEqual(methods, []string{"GET", "PUT", "PUT", "GET", "PUT"}) {
		t.Fatalf("requests %v, want GET PUT PUT GET PUT", methods)
	}
	var orig, sent, sent2 map[string]any
	for _, x := range []struct {
		b []byte
		v *map[string]any
	}{{testdata(t, "deployment.json"), &orig}, {reqs[1].Body, &sent}, {reqs[4].Body, &sent2}} {
		if err := json.Unmarshal(x.b, x.v); err != nil {
			t.Fatal(err)
		}
	}
	path := func(m map[string]any, keys ...any) any {
		var v any = m
		for _, k := range keys {
			switch k := k.(type) {
			case string:
				v = v.(map[string]any)[k]
			case int:
				v = v.([]any)[k]
			}
		}
		return v
	}
	for _, keys := range [][]any{
		{"spec", "strategy"}, {"spec", "revisionHistoryLimit"}, {"spec", "progressDeadlineSeconds"},
		{"spec", "template", "spec", "containers", 0, "resources"}, {"spec", "template", "spec", "dnsPolicy"},
		{"metadata", "managedFields"}, {"metadata", "uid"}, {"metadata", "annotations"}, {"metadata", "resourceVersion"},
	} {
		if !reflect.DeepEqual(path(sent, keys...), path(orig, keys...)) || path(orig, keys...) == nil {
			t.Errorf("%v: sent %v, read %v", keys, path(sent, keys...), path(orig, keys...))
		}
	}
	if path(sent, "spec", "replicas") != 5.0 || path(sent, "spec", "template", "spec", "containers", 0, "image") != "registry.example.com/shop/web:1.9.0" {
		t.Errorf("changes not sent: %s", reqs[1].Body)
	}
	if _, ok := path(sent, "metadata", "labels").(map[string]any)["widgets.example.com/owner"]; ok {
		t.Error("a deleted label was sent")
	}
	// The object built by hand replaces the fields the struct names...
	if path(sent2, "spec", "replicas") != 1.0 || path(sent2, "metadata", "labels") != nil || path(sent2, "metadata", "resourceVersion") != nil {
		t.Errorf("update of an object built by hand sent %s", reqs[4].Body)
	}
	// ...and keeps the others.
	if !reflect.DeepEqual(path(sent2, "spec", "strategy"), path(orig, "spec", "strategy")) {
		t.Errorf("update of an object built by hand lost the strategy: %s", reqs[4].Body)
	}
}

// TestUpdateRawMessageSendsItAsIs: a json.RawMessage is the whole object.
func TestUpdateRawMessageSendsItAsIs(t *testing.T) {
	srv := newAPIServer(t, serveFile(t, 200, "deployment.json"))
	c, _ := newTestClient(t, srv, nil)
	obj := json.RawMessage(`{"metadata":{"name":"web"}}`)
	if _, err := For[json.RawMessage](c, Deployments).Update(t.Context(), "shop", "web", &obj, WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	reqs := srv.requests()
	if len(reqs) != 1 || reqs[0].Method != http.MethodPut || string(reqs[0].Body) != string(obj) {
		t.Fatalf("requests %+v", reqs)
	}
}

// TestUpdateReadFails: when the object cannot be read first, nothing is
// written and the read's error is returned.
func TestUpdateReadFails(t *testing.T) {
	srv := newAPIServer(t, serveFile(t, 404, "status-404-notfound.json"))
	c, _ := newTestClient(t, srv, nil)
	_, err := For[Deployment](c, Deployments).Update(t.Context(), "shop", "web", &Deployment{}, WriteOptions{})
	if !IsNotFound(err) {
		t.Fatalf("err = %v, want NotFound", err)
	}
	if reqs := srv.requests(); len(reqs) != 1 || reqs[0].Method != http.MethodGet {
		t.Fatalf("requests %+v, want one GET", reqs)
	}
}

// TestUpdateSubresourceReadsThatSubresource: an object with nothing kept
// is read first from the subresource being updated, not from the object.
func TestUpdateSubresourceReadsThatSubresource(t *testing.T) {
	srv := newAPIServer(t, serveFile(t, 200, "deployment.json"))
	c, _ := newTestClient(t, srv, nil)
	byHand := &Deployment{ObjectMeta: ObjectMeta{Name: "web", Namespace: "shop"}}
	if _, err := For[Deployment](c, Deployments).Update(t.Context(), "shop", "web", byHand, WriteOptions{Subresource: "status"}); err != nil {
		t.Fatal(err)
	}
	reqs := srv.requests()
	const want = "/apis/apps/v1/namespaces/shop/deployments/web/status"
	if len(reqs) != 2 || reqs[0].Method != http.MethodGet || reqs[0].Path != want || reqs[1].Method != http.MethodPut || reqs[1].Path != want {
		t.Fatalf("requests %+v, want GET then PUT of %s", reqs, want)
	}
}
