package widget

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// The Widget API's identity.
const (
	// WidgetAPIVersion is the apiVersion of Widget objects.
	WidgetAPIVersion = "example.com/v1"
	// WidgetKind is the kind of Widget objects.
	WidgetKind = "Widget"
)

// Widgets is the Widget custom resource: widgets.example.com, version v1,
// kind Widget,
// namespaced.
var Widgets = k8sapi.Resource{Group: "example.com", Version: "v1", Resource: "widgets", Namespaced: true, Kind: WidgetKind}

// MaxNameLength is the longest name a Widget may have: its Service is
// named after it, and a Service's name is a DNS-1035 label.
const MaxNameLength = 63

// Limits and defaults of a Widget's spec. The CRD in manifests/crd.yaml
// states the same ones; the operator checks them again because the CRD in
// a cluster may be older than the operator, or edited.
const (
	MaxImageLength        = 512   // characters (Unicode code points)
	MinReplicas     int32 = 1     // smallest spec.replicas
	MaxReplicas     int32 = 10    // largest spec.replicas
	DefaultReplicas int32 = 1     // spec.replicas when it is missing
	MinPort         int32 = 1     // smallest spec.port
	MaxPort         int32 = 65535 // largest spec.port
	DefaultPort     int32 = 8080  // spec.port when it is missing
)

// Phases of a Widget, as written to status.phase.
const (
	PhasePending     = "Pending"     // the Deployment does not exist yet or has not been looked at
	PhaseProgressing = "Progressing" // the Deployment is rolling out
	PhaseReady       = "Ready"       // every wanted replica is ready and available
	PhaseFailed      = "Failed"      // the Widget cannot be run as it stands; see the Ready condition
)

// ConditionReady is the type of the condition that says whether a Widget is
// running as its spec asks.
const ConditionReady = "Ready"

// Reasons of the Ready condition.
const (
	ReasonReady                    = "Ready"
	ReasonPending                  = "DeploymentPending"
	ReasonProgressing              = "RolloutInProgress"
	ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"
	ReasonInvalidSpec              = "InvalidSpec"
	ReasonOwnershipConflict        = "OwnershipConflict"
	// ReasonChildRejected: the API server refused a child as invalid or
	// malformed (422, 400). Not retried until the Widget or a child
	// changes.
	ReasonChildRejected = "ChildRejected"
	// ReasonQuotaExceeded: a ResourceQuota of the namespace refused a
	// child. Retried at least once every MaxWait, and at once when a
	// ResourceQuota of the namespace changes.
	ReasonQuotaExceeded = "QuotaExceeded"
	// ReasonForbidden: the operator may not write a child (403).
	// Retried at least once every MaxWait.
	ReasonForbidden = "Forbidden"
	// ReasonReconcileError (also an Event reason): a write has failed
	// for TransientGrace or longer, and is still retried with backoff.
)

// Widget is a widgets.example.com/v1 object.
type Widget struct {
	k8sapi.TypeMeta
	k8sapi.ObjectMeta `json:"metadata"`
	Spec              WidgetSpec   `json:"spec"`
	Status            WidgetStatus `json:"status"`
}

// WidgetSpec is what the user asks for. Decoding never fails on a spec
// whose fields have the wrong JSON types: the problem is kept in Invalid
// instead, so that the Widget itself is not lost and can be reported as
// Failed. Fields other than the three below are dropped.
type WidgetSpec struct {
	// Image is the container image to run. Required.
	Image string `json:"image,omitempty"`
	// Replicas is how many pods to run; nil means DefaultReplicas.
	Replicas *int32 `json:"replicas,omitempty"`
	// Port is the port the container listens on; nil means DefaultPort.
	Port *int32 `json:"port,omitempty"`

	// Invalid, when not empty, says why the spec as stored could not be
	// decoded, field by field, such as
	// `spec.replicas: must be an integer, got string "three"`. The fields
	// it names are left at their zero values. It is never encoded.
	Invalid string `json:"-"`
}

// WidgetStatus is what the operator reports. Every field is always encoded,
// so that a merge patch of a whole WidgetStatus also clears old values.
type WidgetStatus struct {
	// ReadyReplicas is the Deployment's ready replica count.
	ReadyReplicas int32 `json:"readyReplicas"`
	// Phase is one of PhasePending, PhaseProgressing, PhaseReady, PhaseFailed.
	Phase string `json:"phase"`
	// ObservedGeneration is the Widget generation this status describes.
	ObservedGeneration int64 `json:"observedGeneration"`
	// Conditions holds at least the ConditionReady condition once the
	// operator has seen the Widget.
	Conditions []k8sapi.Condition `json:"conditions"`
}

// ReplicasOrDefault returns *s.Replicas, or DefaultReplicas when it is nil.
func (s *WidgetSpec) ReplicasOrDefault() int32 { return orDefault(s.Replicas, DefaultReplicas) }

// PortOrDefault returns *s.Port, or DefaultPort when it is nil.
func (s *WidgetSpec) PortOrDefault() int32 { return orDefault(s.Port, DefaultPort) }

// orDefault returns *p, or def when p is nil.
func orDefault(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

// UnmarshalJSON decodes a spec. It returns an error only for input that is
// not JSON at all; fields of the wrong type are reported in s.Invalid.
func (s *WidgetSpec) UnmarshalJSON(data []byte) error {
	*s = WidgetSpec{}
	// Numbers are kept as written, so that a message quotes them so and
	// decodeInt32 sees every digit.
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var spec any
	if err := dec.Decode(&spec); err != nil {
		return fmt.Errorf("widget: decode spec: %w", err)
	}
	// null decodes as no fields at all.
	fields, ok := spec.(map[string]any)
	if !ok && spec != nil {
		kind, _, _ := strings.Cut(describe(spec), " ")
		s.Invalid = "spec: must be an object, got " + kind
		return nil
	}
	var problems []string
	// A field the operator does not know is a mistake it can name: a typo
	// such as "replica", or a CRD newer than the operator.
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if k != "image" && k != "replicas" && k != "port" {
			problems = append(problems, fmt.Sprintf("spec.%s: unknown field", strconv.Quote(shorten(k, 64))))
		}
	}
	// A string or null decodes; anything else is a type error.
	if image, ok := fields["image"].(string); ok || fields["image"] == nil {
		s.Image = image
	} else {
		problems = append(problems, "spec.image: must be a string, got "+describe(fields["image"]))
	}
	var replicasProblem, portProblem string
	s.Replicas, replicasProblem = decodeInt32("spec.replicas", fields["replicas"], MinReplicas, MaxReplicas)
	s.Port, portProblem = decodeInt32("spec.port", fields["port"], MinPort, MaxPort)
	s.Invalid = joinProblems(append(problems, replicasProblem, portProblem)...)
	return nil
}

// UnmarshalJSON decodes a status. A status the operator cannot read (it is
// the operator's own output, so only a hand edit makes one) decodes as the
// zero status rather than failing, so the Widget is still reconciled and
// its status rewritten.
func (st *WidgetStatus) UnmarshalJSON(data []byte) error {
	type plain WidgetStatus
	*st = WidgetStatus{}
	if json.Unmarshal(data, (*plain)(st)) != nil {
		*st = WidgetStatus{}
	}
	return nil
}

// decodeInt32 decodes an optional integer field, v as UnmarshalJSON
// decoded it. It returns the value, or a message naming field when the
// value is not an integer or cannot be held in an int32. Range checks
// within int32 are left to Validate.
func decodeInt32(field string, v any, lo, hi int32) (*int32, string) {
	n, ok := v.(json.Number)
	switch {
	case v == nil:
		return nil, ""
	case !ok:
		return nil, field + ": must be an integer, got " + describe(v)
	}
	// Every int32 is exact in a float64, and so is every whole number
	// beyond: a float says both whether it is whole and whether it fits.
	f, err := strconv.ParseFloat(n.String(), 64)
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange), f != math.Trunc(f):
		return nil, field + ": must be an integer, got " + n.String()
	case f < math.MinInt32 || f > math.MaxInt32:
		return nil, fmt.Sprintf("%s: %s is out of range %d..%d", field, n, lo, hi)
	}
	i := int32(f)
	return &i, ""
}

// describe names the kind of v, a JSON value as UnmarshalJSON decoded it,
// for a message, followed by a short prefix of it when it is a string, a
// number or a boolean, such as `string "three"`.
func describe(v any) string {
	switch v := v.(type) {
	case string:
		return "string " + strconv.Quote(shorten(v, 64))
	case json.Number:
		return "number " + shorten(v.String(), 64)
	case bool:
		return "boolean " + strconv.FormatBool(v)
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "null"
}

// shorten cuts s to at most n runes, marking a cut with "...".
func shorten(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "..."
}

// ValidateWidget checks what the operator needs of a Widget to make its
// children: its name (ValidateName) and its spec (Validate). It returns ""
// when both are valid, else their messages joined by "; ". The CRD in
// manifests/crd.yaml refuses the same Widgets at creation.
func ValidateWidget(w *Widget) string {
	return joinProblems(ValidateName(w.Name), Validate(w.Spec))
}

// joinProblems joins the problems that are not "" with "; ".
func joinProblems(problems ...string) string {
	return strings.Join(slices.DeleteFunc(problems, func(p string) bool { return p == "" }), "; ")
}

// ValidateName checks a Widget's name and returns "" when it can name the
// Widget's Service: a DNS-1035 label, that is at most MaxNameLength
// characters, lower-case letters, digits and '-', starting with a letter
// and ending with a letter or a digit. (A Widget's name is also a
// Deployment's name and a label value, which ask less.)
func ValidateName(name string) string {
	var problems []string
	if len(name) > MaxNameLength {
		problems = append(problems, fmt.Sprintf("metadata.name: %d characters is longer than %d, the longest name the Widget's Service can have",
			len(name), MaxNameLength))
	}
	if !isDNS1035Label(name) {
		problems = append(problems, "metadata.name: must start with a lower-case letter, hold only lower-case letters, digits and '-', "+
			"and end with a letter or digit, so that the Widget's Service can have it (a DNS-1035 label)")
	}
	return strings.Join(problems, "; ")
}

// isDNS1035Label reports whether s matches [a-z]([-a-z0-9]*[a-z0-9])?,
// whatever its length.
func isDNS1035Label(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' || s[len(s)-1] == '-' {
		return false
	}
	return strings.Trim(s, "abcdefghijklmnopqrstuvwxyz0123456789-") == ""
}

// Validate checks a spec and returns "" when it is valid, or a message that
// says exactly what is wrong, such as "spec.replicas: 50 is out of range
// 1..10". Several problems are joined by "; ". Problems found while
// decoding (spec.Invalid) are reported alone, since the fields they name
// hold no value to check.
func Validate(spec WidgetSpec) string {
	if spec.Invalid != "" {
		return spec.Invalid
	}
	return joinProblems(validateImage(spec.Image),
		checkRange("spec.replicas", spec.Replicas, MinReplicas, MaxReplicas),
		checkRange("spec.port", spec.Port, MinPort, MaxPort))
}

// validateImage checks spec.image, as Validate does.
func validateImage(image string) string {
	// Letters, marks, numbers, punctuation and symbols: no whitespace,
	// and nothing a terminal acts on when kubectl prints the image.
	bad := strings.IndexFunc(image, func(r rune) bool { return !unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S) })
	switch n := utf8.RuneCountInString(image); {
	case image == "":
		return "spec.image: must not be empty"
	case n > MaxImageLength:
		return fmt.Sprintf("spec.image: %d characters is longer than %d", n, MaxImageLength)
	case bad >= 0:
		r, _ := utf8.DecodeRuneInString(image[bad:])
		return fmt.Sprintf("spec.image: must not contain whitespace or non-printable characters, found %q at character %d", r, utf8.RuneCountInString(image[:bad])+1)
	}
	return ""
}

func checkRange(field string, v *int32, lo, hi int32) string {
	if v == nil || (*v >= lo && *v <= hi) {
		return ""
	}
	return fmt.Sprintf("%s: %d is out of range %d..%d", field, *v, lo, hi)
}
