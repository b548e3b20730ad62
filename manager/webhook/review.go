package webhook

import (
	"encoding/json"
	"fmt"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// The apiVersion and kind of the reviews a [Server] answers.
const (
	admissionVersion  = "admission.k8s.io/v1"
	conversionVersion = "apiextensions.k8s.io/v1"
)

// AdmissionRequest is the request of an AdmissionReview
// (admission.k8s.io/v1): the object the API server is about to store or
// delete, and who asks.
type AdmissionRequest struct {
	UID         string               `json:"uid"`
	Kind        GroupVersionKind     `json:"kind"`
	Resource    GroupVersionResource `json:"resource"`
	SubResource string               `json:"subResource,omitempty"`
	Name        string               `json:"name,omitempty"`
	Namespace   string               `json:"namespace,omitempty"`
	// Operation is CREATE, UPDATE, DELETE or CONNECT.
	Operation string   `json:"operation"`
	UserInfo  UserInfo `json:"userInfo"`
	// Object is the object as it would be stored (empty on DELETE);
	// OldObject the object stored (empty on CREATE and CONNECT).
	Object    json.RawMessage `json:"object,omitempty"`
	OldObject json.RawMessage `json:"oldObject,omitempty"`
	// DryRun is true when nothing will be stored: a hook with side
	// effects must then have none.
	DryRun *bool `json:"dryRun,omitempty"`
	// Options are the operation's options, such as a CreateOptions.
	Options json.RawMessage `json:"options,omitempty"`
}

// GroupVersionKind names a kind in one version of its API group.
type GroupVersionKind struct {
	Group   string `json:"group"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
}

// GroupVersionResource names a resource in one version of its API group.
type GroupVersionResource struct {
	Group    string `json:"group"`
	Version  string `json:"version"`
	Resource string `json:"resource"`
}

// UserInfo is the user who made the request.
type UserInfo struct {
	Username string              `json:"username,omitempty"`
	UID      string              `json:"uid,omitempty"`
	Groups   []string            `json:"groups,omitempty"`
	Extra    map[string][]string `json:"extra,omitempty"`
}

// ConversionRequest is the request of a ConversionReview
// (apiextensions.k8s.io/v1): objects of one kind to convert to
// DesiredAPIVersion.
type ConversionRequest struct {
	UID               string            `json:"uid"`
	DesiredAPIVersion string            `json:"desiredAPIVersion"`
	Objects           []json.RawMessage `json:"objects"`
}

// PatchOp is one operation of a JSON patch (RFC 6902), such as
// {"op": "add", "path": "/spec/size", "value": 3}. Value is left out of
// a remove; a null value is the JSON null.
type PatchOp struct {
	Op    string          `json:"op"`
	Path  string          `json:"path"`
	Value json.RawMessage `json:"value,omitempty"`
}

// admissionReview and conversionReview are the reviews as they travel.
type admissionReview struct {
	k8sapi.TypeMeta
	Request  *AdmissionRequest  `json:"request,omitempty"`
	Response *admissionResponse `json:"response,omitempty"`
}

type admissionResponse struct {
	UID       string         `json:"uid"`
	Allowed   bool           `json:"allowed"`
	Status    *k8sapi.Status `json:"status,omitempty"`
	Patch     []byte         `json:"patch,omitempty"` // the JSON of the []PatchOp, as base64
	PatchType string         `json:"patchType,omitempty"`
}

type conversionReview struct {
	k8sapi.TypeMeta
	Request  *ConversionRequest  `json:"request,omitempty"`
	Response *conversionResponse `json:"response,omitempty"`
}

type conversionResponse struct {
	UID              string            `json:"uid"`
	ConvertedObjects []json.RawMessage `json:"convertedObjects"`
	Result           k8sapi.Status     `json:"result"`
}

// BadReviewError is the error of a review that cannot be answered: not
// JSON, not a review of the version the hook takes, or without a request
// or its uid. The server answers it with 400 and a Status, as the API
// server's own handlers answer a malformed request.
type BadReviewError struct {
	Reason string
}

func (e *BadReviewError) Error() string { return "webhook: bad review: " + e.Reason }

// decodeAdmission decodes an AdmissionReview (admission.k8s.io/v1) with a
// request and its uid.
func decodeAdmission(body []byte) (*AdmissionRequest, error) {
	var r admissionReview
	if err := decodeReview(body, &r, &r.TypeMeta, admissionVersion, "AdmissionReview"); err != nil {
		return nil, err
	}
	if r.Request == nil || r.Request.UID == "" {
		return nil, &BadReviewError{"an AdmissionReview needs a request with a uid"}
	}
	return r.Request, nil
}

// decodeConversion decodes a ConversionReview (apiextensions.k8s.io/v1)
// with a request, its uid and a desired apiVersion.
func decodeConversion(body []byte) (*ConversionRequest, error) {
	var r conversionReview
	if err := decodeReview(body, &r, &r.TypeMeta, conversionVersion, "ConversionReview"); err != nil {
		return nil, err
	}
	if r.Request == nil || r.Request.UID == "" || r.Request.DesiredAPIVersion == "" {
		return nil, &BadReviewError{"a ConversionReview needs a request with a uid and a desiredAPIVersion"}
	}
	for i, o := range r.Request.Objects {
		if len(o) == 0 || o[0] != '{' {
			return nil, &BadReviewError{fmt.Sprintf("object %d is not a JSON object", i)}
		}
	}
	return r.Request, nil
}

// decodeReview decodes one JSON value, nothing after it, into v, and
// checks its apiVersion and kind, which tm points at.
func decodeReview(body []byte, v any, tm *k8sapi.TypeMeta, apiVersion, kind string) error {
	if err := json.Unmarshal(body, v); err != nil {
		return &BadReviewError{"not a " + kind + ": " + err.Error()}
	}
	if tm.APIVersion != apiVersion || tm.Kind != kind {
		return &BadReviewError{fmt.Sprintf("got apiVersion %q kind %q, want %s %s", tm.APIVersion, tm.Kind, apiVersion, kind)}
	}
	return nil
}
