package main

import (
	"encoding/json"
	"maps"
	"net"
	"strconv"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// The Route API: group versions.example.com, kind Route, served in v1
// (the storage version) and v2.
const (
	group = "versions.example.com"
	// v2Annotation keeps, on a v1 object, what v2 has and v1 cannot
	// say: the weight, and a target that v1's string would not give back.
	v2Annotation = group + "/v2-spec"
)

// routes is the resource in its storage version, v1.
var routes = k8sapi.Resource{Group: group, Version: "v1", Resource: "routes", Namespaced: true, Kind: "Route"}

// RouteV1 is a Route in v1: its target is one string, "host:port".
type RouteV1 struct {
	k8sapi.TypeMeta
	k8sapi.ObjectMeta `json:"metadata"`
	Spec              struct {
		Target string `json:"target"`
	} `json:"spec"`
	Status RouteStatus `json:"status,omitzero"`
}

// RouteV2 is a Route in v2: its target is split into host and port, and
// it has a weight, which v1 does not.
type RouteV2 struct {
	k8sapi.TypeMeta
	k8sapi.ObjectMeta `json:"metadata"`
	Spec              RouteV2Spec `json:"spec"`
	Status            RouteStatus `json:"status,omitzero"`
}

type RouteV2Spec struct {
	Target Target `json:"target"`
	Weight int32  `json:"weight,omitempty"`
}

// Target is v2's target.
type Target struct {
	Host string `json:"host"`
	Port int32  `json:"port,omitempty"`
}

// RouteStatus is the same in both versions.
type RouteStatus struct {
	URL string `json:"url,omitempty"`
}

// split returns the v2 target of v1's: host and port when target is
// "host:port" with a port of 1 to 65535 that joins back into the same
// string, otherwise the whole string as the host and no port.
func split(target string) Target {
	host, port, err := net.SplitHostPort(target)
	n, perr := strconv.ParseUint(port, 10, 16)
	if err != nil || perr != nil || join(Target{host, int32(n)}) != target {
		return Target{Host: target}
	}
	return Target{host, int32(n)}
}

// join returns the v1 target of v2's: "host:port", or the host alone
// without a port.
func join(t Target) string {
	if t.Port == 0 {
		return t.Host
	}
	return net.JoinHostPort(t.Host, strconv.Itoa(int(t.Port)))
}

// toV1 converts a v2 Route to v1. What v1 cannot hold, the weight and a
// target that v1's string does not give back, goes in v2Annotation.
func toV1(from *RouteV2, to *RouteV1) error {
	to.ObjectMeta, to.Status = from.ObjectMeta, from.Status
	to.Spec.Target = join(from.Spec.Target)
	extra := RouteV2Spec{Weight: from.Spec.Weight}
	if split(to.Spec.Target) != from.Spec.Target {
		extra.Target = from.Spec.Target
	}
	to.Annotations = maps.Clone(from.Annotations)
	delete(to.Annotations, v2Annotation)
	if extra != (RouteV2Spec{}) {
		b, err := json.Marshal(extra)
		if err != nil {
			return err
		}
		if to.Annotations == nil {
			to.Annotations = map[string]string{}
		}
		to.Annotations[v2Annotation] = string(b)
	}
	return nil
}

// toV2 converts a v1 Route to v2, taking back from v2Annotation what
// toV1 put there: the weight, and the target when v1's is still the one
// it gave.
func toV2(from *RouteV1, to *RouteV2) error {
	to.ObjectMeta, to.Status = from.ObjectMeta, from.Status
	to.Spec.Target = split(from.Spec.Target)
	if a, ok := from.Annotations[v2Annotation]; ok {
		var extra RouteV2Spec
		if err := json.Unmarshal([]byte(a), &extra); err != nil {
			return err
		}
		to.Spec.Weight = extra.Weight
		if extra.Target != (Target{}) && join(extra.Target) == from.Spec.Target {
			to.Spec.Target = extra.Target
		}
		to.Annotations = maps.Clone(from.Annotations)
		delete(to.Annotations, v2Annotation)
	}
	return nil
}
