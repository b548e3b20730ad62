package main

import (
	"encoding/json"
	"testing"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/manager/webhook"
)

var convert = webhook.Converter(webhook.Hub[RouteV1](group+"/v1"), webhook.VersionOf(group+"/v2", toV1, toV2))

// roundTrip converts obj to the version via and back, and fails unless
// it comes back equal.
func roundTrip(t *testing.T, obj any, via string) json.RawMessage {
	t.Helper()
	in, _ := json.Marshal(obj)
	var head k8sapi.TypeMeta
	json.Unmarshal(in, &head)
	mid, err := convert(t.Context(), in, via)
	if err != nil {
		t.Fatalf("%s to %s: %v", in, via, err)
	}
	back, err := convert(t.Context(), mid, head.APIVersion)
	if err != nil || canonical(back) != canonical(in) {
		t.Errorf("%s\nto %s: %s\nback: %s, %v", in, via, mid, back, err)
	}
	return mid
}

// Every v1 target and every v2 spec round-trips through the other
// version unchanged, however odd; v2's weight and a target v1 cannot
// hold are kept in the annotation, beside the object's own.
func TestConversionRoundTrips(t *testing.T) {
	for _, target := range []string{"db:5432", "db", "", "db:0", "db:080", "db:70000", "[::1]:80", "::1", "[::1]", ":80", "a:b:80", "db:x"} {
		r := &RouteV1{TypeMeta: k8sapi.TypeMeta{APIVersion: group + "/v1", Kind: "Route"}, ObjectMeta: k8sapi.ObjectMeta{Name: "r", Namespace: "ns"}}
		r.Spec.Target = target
		roundTrip(t, r, group+"/v2")
	}
	for _, spec := range []RouteV2Spec{{Target{"db", 5432}, 0}, {Target{"db", 5432}, 7}, {Target{"db", 0}, 0}, {Target{"db:1", 0}, 3},
		{Target{"::1", 80}, 0}, {Target{"", 0}, 0}, {Target{"a:b", 0}, 0}, {Target{"db:5432", 5432}, 0}} {
		for _, ann := range []map[string]string{nil, {"team": "a"}} {
			r := &RouteV2{TypeMeta: k8sapi.TypeMeta{APIVersion: group + "/v2", Kind: "Route"},
				ObjectMeta: k8sapi.ObjectMeta{Name: "r", Annotations: ann}, Spec: spec, Status: RouteStatus{URL: "u"}}
			roundTrip(t, r, group+"/v1")
		}
	}
	r := &RouteV2{TypeMeta: k8sapi.TypeMeta{APIVersion: group + "/v2", Kind: "Route"}, Spec: RouteV2Spec{Target{"db", 5432}, 7}}
	var v1 RouteV1
	json.Unmarshal(roundTrip(t, r, group+"/v1"), &v1)
	if v1.Spec.Target != "db:5432" || v1.Annotations[v2Annotation] != `{"target":{"host":""},"weight":7}` {
		t.Errorf("v1: %+v, want db:5432 and the weight in %s", v1, v2Annotation)
	}
}

// canonical returns the JSON of b with its keys sorted.
func canonical(b []byte) string {
	var v any
	json.Unmarshal(b, &v)
	out, _ := json.Marshal(v)
	return string(out)
}

// A v1 target edited after a v2 write wins over the target the
// annotation kept; the weight stays.
func TestConversionAfterAnEditInV1(t *testing.T) {
	v1 := []byte(`{"apiVersion":"versions.example.com/v1","kind":"Route","metadata":{"name":"r","annotations":{"versions.example.com/v2-spec":"{\"target\":{\"host\":\"db:1\"},\"weight\":7}"}},"spec":{"target":"other:2"}}`)
	out, err := convert(t.Context(), v1, group+"/v2")
	var v2 RouteV2
	if err != nil || json.Unmarshal(out, &v2) != nil || v2.Spec != (RouteV2Spec{Target{"other", 2}, 7}) || v2.Annotations != nil {
		t.Errorf("v2: %s, %v; want other:2 split, weight 7, no annotation", out, err)
	}
}

// The annotation is the conversion's own: one a v2 client set is not
// carried into v1, where it would not decode.
func TestConversionDropsAForeignAnnotation(t *testing.T) {
	r := &RouteV2{TypeMeta: k8sapi.TypeMeta{APIVersion: group + "/v2", Kind: "Route"},
		ObjectMeta: k8sapi.ObjectMeta{Name: "r", Annotations: map[string]string{v2Annotation: "junk"}}, Spec: RouteV2Spec{Target: Target{"db", 1}}}
	in, _ := json.Marshal(r)
	out, err := convert(t.Context(), in, group+"/v1")
	var v1 RouteV1
	if err != nil || json.Unmarshal(out, &v1) != nil || v1.Annotations != nil || v1.Spec.Target != "db:1" {
		t.Errorf("v1: %s, %v; want db:1 without the annotation", out, err)
	}
}
