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
