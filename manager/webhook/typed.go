package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// AdmitFunc answers one admission request. A nil error admits it, changed
// by patch, a JSON patch (RFC 6902) of the request's Object; a nil patch
// changes nothing, and only a mutating webhook may return one. An error
// refuses it: the client sees the error's message, with the code of a
// [*Refusal], 403 for other errors.
type AdmitFunc func(ctx context.Context, req *AdmissionRequest) (patch []PatchOp, err error)

// ConvertFunc converts one object, the JSON of an object of the kind the
// hook serves, to the apiVersion to, and returns the converted object's
// JSON. An error fails the whole review, with the error's message.
type ConvertFunc func(ctx context.Context, obj json.RawMessage, to string) (json.RawMessage, error)

// Refusal is an error that refuses an admission request with a code of
// its own, such as 422 (Invalid) or 409 (Conflict).
type Refusal struct {
	Code    int32  // an HTTP status code: 400 or above
	Reason  string // a StatusReason, such as "Invalid"; may be empty
	Message string
}

func (r *Refusal) Error() string { return r.Message }

// Validate returns the AdmitFunc of a validating hook over objects of type
// T: f gets the request, its Object decoded (nil on DELETE) and its
// OldObject (nil on CREATE and CONNECT), and an error of f refuses. An
// object that does not decode into T is refused with 400.
func Validate[T any](f func(ctx context.Context, req *AdmissionRequest, obj, old *T) error) AdmitFunc {
	return func(ctx context.Context, req *AdmissionRequest) ([]PatchOp, error) {
		obj, err := decodeObject[T](req.Object)
		if err != nil {
			return nil, err
		}
		old, err := decodeObject[T](req.OldObject)
		if err != nil {
			return nil, err
		}
		return nil, f(ctx, req, obj, old)
	}
}

// Mutate returns the AdmitFunc of a mutating hook over objects of type T:
// f changes the request's Object, decoded, in place, and the patch
// answered is the difference between its JSON before and after f, so
// that the fields T does not name are kept as they are. An error of f
// refuses. A request without an Object (a DELETE) is admitted unchanged.
func Mutate[T any](f func(ctx context.Context, req *AdmissionRequest, obj *T) error) AdmitFunc {
	return func(ctx context.Context, req *AdmissionRequest) ([]PatchOp, error) {
		obj, err := decodeObject[T](req.Object)
		if obj == nil || err != nil {
			return nil, err
		}
		before, err := json.Marshal(obj)
		if err != nil {
			return nil, err
		}
		if err := f(ctx, req, obj); err != nil {
			return nil, err
		}
		after, err := json.Marshal(obj)
		if err != nil {
			return nil, err
		}
		return diff(req.Object, before, after)
	}
}

// decodeObject decodes raw into a new T, or returns nil when raw is empty
// or null.
func decodeObject[T any](raw json.RawMessage) (*T, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	obj := new(T)
	if err := json.Unmarshal(raw, obj); err != nil {
		return nil, &Refusal{Code: 400, Reason: "BadRequest", Message: "webhook: decoding the object: " + err.Error()}
	}
	return obj, nil
}

// Version is one served version of a kind, for [Converter]: how its
// objects convert to and from the hub type H, the one every version
// converts through (often the storage version's). Make it with
// [VersionOf] or [Hub].
type Version[H any] struct {
	apiVersion string                 // such as "example.com/v2"
	toHub      func([]byte, *H) error // decodes an object and converts it
	fromHub    func(*H) (any, error)  // converts an object, to be encoded
}

// VersionOf returns the version apiVersion, whose objects decode into T:
// toHub converts one to the hub, fromHub the hub to one.
func VersionOf[T, H any](apiVersion string, toHub func(from *T, to *H) error, fromHub func(from *H, to *T) error) Version[H] {
	return Version[H]{
		apiVersion: apiVersion,
		toHub: func(raw []byte, h *H) error {
			var t T
			if err := json.Unmarshal(raw, &t); err != nil {
				return err
			}
			return toHub(&t, h)
		},
		fromHub: func(h *H) (any, error) {
			var t T
			return &t, fromHub(h, &t)
		},
	}
}

// Hub returns the version apiVersion whose objects are the hub type H
// itself.
func Hub[H any](apiVersion string) Version[H] {
	return Version[H]{
		apiVersion: apiVersion,
		toHub:      func(raw []byte, h *H) error { return json.Unmarshal(raw, h) },
		fromHub:    func(h *H) (any, error) { return h, nil },
	}
}

// Converter returns the ConvertFunc of a kind served in versions: an
// object is decoded in its own version, converted to the hub, and from it
// to the version asked for, whose apiVersion it is given, and the kind of
// the object given. An object
// already in the version asked for is returned as it is. The converted
// object keeps the metadata of the object given but its labels and
// annotations, which are the conversion's: the API server refuses any
// other change of it, and fields of metadata that the types do not name
// are kept.
func Converter[H any](versions ...Version[H]) ConvertFunc {
	versions = slices.Clone(versions)
	find := func(apiVersion string) (Version[H], error) {
		i := slices.IndexFunc(versions, func(v Version[H]) bool { return v.apiVersion == apiVersion && v.toHub != nil })
		if i < 0 {
			return Version[H]{}, fmt.Errorf("webhook: no conversion of apiVersion %q", apiVersion)
		}
		return versions[i], nil
	}
	return func(_ context.Context, obj json.RawMessage, to string) (json.RawMessage, error) {
		var head struct {
			APIVersion string          `json:"apiVersion"`
			Kind       json.RawMessage `json:"kind"`
			Metadata   json.RawMessage `json:"metadata"`
		}
		if err := json.Unmarshal(obj, &head); err != nil {
			return nil, fmt.Errorf("webhook: converting an object: %w", err)
		}
		apiVersion := head.APIVersion
		if apiVersion == to {
			return obj, nil
		}
		from, err := find(apiVersion)
		if err != nil {
			return nil, err
		}
		into, err := find(to)
		if err != nil {
			return nil, err
		}
		var hub H
		if err := from.toHub(obj, &hub); err != nil {
			return nil, fmt.Errorf("webhook: converting from %s: %w", apiVersion, err)
		}
		out, err := into.fromHub(&hub)
		if err != nil {
			return nil, fmt.Errorf("webhook: converting to %s: %w", to, err)
		}
		return withMetadata(head.Kind, head.Metadata, out, to)
	}
}

// withMetadata returns the JSON of out, with apiVersion to, and kind and
// metadata, the original object's, whose labels and annotations are
// out's.
func withMetadata(kind, metadata json.RawMessage, out any, to string) (json.RawMessage, error) {
	outJSON, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("webhook: encoding the converted object: %w", err)
	}
	var c map[string]json.RawMessage
	var cm struct{ Labels, Annotations json.RawMessage }
	m := map[string]json.RawMessage{}
	if err := errors.Join(json.Unmarshal(outJSON, &c), unmarshalObject(c["metadata"], &cm), unmarshalObject(metadata, &m)); err != nil || c == nil {
		return nil, errors.New("webhook: the converted object is not a JSON object")
	}
	for k, v := range map[string]json.RawMessage{"labels": cm.Labels, "annotations": cm.Annotations} {
		if len(v) > 0 && string(v) != "null" {
			m[k] = v
		} else {
			delete(m, k)
		}
	}
	c["apiVersion"], _ = json.Marshal(to)
	if kind != nil {
		c["kind"] = kind
	}
	c["metadata"] = appendObject(nil, m)
	return appendObject(nil, c), nil
}

// unmarshalObject unmarshals raw into v, unless raw is empty or null.
func unmarshalObject(raw json.RawMessage, v any) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return json.Unmarshal(raw, v)
}

// appendObject appends the JSON object of m, its keys sorted and its
// values as they are (json.Marshal would scan each again to compact it).
func appendObject(b []byte, m map[string]json.RawMessage) []byte {
	b = append(b, '{')
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(append(appendKey(b, k), ':'), m[k]...)
	}
	return append(b, '}')
}

// appendKey appends k as a JSON string: as it is when it has nothing to
// escape, as the keys of objects mostly do.
func appendKey(b []byte, k string) []byte {
	for _, c := range []byte(k) {
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(k)
			return append(b, q...)
		}
	}
	return append(append(append(b, '"'), k...), '"')
}
