package main

import (
	"encoding/json"
	"net"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/conversion"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// The work both servers do: a Route of examples/versions, stored in v1
// (target "host:port") and served in v2 (target split, and a weight kept
// in an annotation of v1), converted both ways, and a validation that its
// target is not taken, against an index of targets in memory.
const (
	group        = "versions.example.com"
	v2Annotation = group + "/v2-spec"
)

type specV1 struct {
	Target string `json:"target"`
}

type specV2 struct {
	Target target `json:"target"`
	Weight int32  `json:"weight,omitempty"`
}

type target struct {
	Host string `json:"host"`
	Port int32  `json:"port,omitempty"`
}

func split(s string) target {
	host, port, err := net.SplitHostPort(s)
	n, perr := strconv.ParseUint(port, 10, 16)
	if err != nil || perr != nil || n == 0 || join(target{host, int32(n)}) != s {
		return target{Host: s}
	}
	return target{host, int32(n)}
}

func join(t target) string {
	if t.Port == 0 {
		return t.Host
	}
	return net.JoinHostPort(t.Host, strconv.Itoa(int(t.Port)))
}

// toV1 and toV2 convert the specs and the annotations, the same for both
// servers.
func toV1(from specV2, ann map[string]string) (specV1, map[string]string) {
	out := map[string]string{}
	for k, v := range ann {
		out[k] = v
	}
	if from.Weight != 0 {
		b, _ := json.Marshal(specV2{Weight: from.Weight})
		out[v2Annotation] = string(b)
	}
	return specV1{Target: join(from.Target)}, out
}

func toV2(from specV1, ann map[string]string) (specV2, map[string]string) {
	to := specV2{Target: split(from.Target)}
	out := map[string]string{}
	for k, v := range ann {
		out[k] = v
	}
	if a, ok := out[v2Annotation]; ok {
		var extra specV2
		json.Unmarshal([]byte(a), &extra)
		to.Weight = extra.Weight
		delete(out, v2Annotation)
	}
	return to, out
}

// The kit's types.
type kitV1 struct {
	k8sapi.TypeMeta
	k8sapi.ObjectMeta `json:"metadata"`
	Spec              specV1 `json:"spec"`
}

type kitV2 struct {
	k8sapi.TypeMeta
	k8sapi.ObjectMeta `json:"metadata"`
	Spec              specV2 `json:"spec"`
}

// controller-runtime's types, as a kubebuilder project writes them: the
// hub (v1) and a Convertible spoke (v2), registered in a scheme.
type crV1 struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              specV1 `json:"spec"`
}

type crV2 struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              specV2 `json:"spec"`
}

func (r *crV1) DeepCopyObject() runtime.Object {
	c := *r
	r.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	return &c
}

func (r *crV2) DeepCopyObject() runtime.Object {
	c := *r
	r.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	return &c
}

func (*crV1) Hub() {}

func (r *crV2) ConvertTo(dst conversion.Hub) error {
	h := dst.(*crV1)
	h.ObjectMeta = r.ObjectMeta
	h.Spec, h.Annotations = toV1(r.Spec, r.Annotations)
	return nil
}

func (r *crV2) ConvertFrom(src conversion.Hub) error {
	h := src.(*crV1)
	r.ObjectMeta = h.ObjectMeta
	r.Spec, r.Annotations = toV2(h.Spec, h.Annotations)
	return nil
}

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for v, obj := range map[string]runtime.Object{"v1": &crV1{}, "v2": &crV2{}} {
		gv := schema.GroupVersion{Group: group, Version: v}
		s.AddKnownTypeWithName(gv.WithKind("Route"), obj)
		metav1.AddToGroupVersion(s, gv)
	}
	return s
}
