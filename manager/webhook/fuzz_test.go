package webhook

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
)

// FuzzReviewDecode feeds any body to the review decoders and to the
// server's hooks: a decoder returns a request with a uid or a
// *BadReviewError, never panics; the server answers 200 with a review of
// the request's uid, or 400 with a Status.
func FuzzReviewDecode(f *testing.F) {
	f.Add([]byte(admissionBody("u", "CREATE", `{"spec":{"size":1}}`, "")))
	f.Add([]byte(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"c","desiredAPIVersion":"x/v1","objects":[{"apiVersion":"x/v2"}]}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":null}`))
	f.Add([]byte(`[]`))
	s, err := New(Config{
		Admission: map[string]AdmitFunc{"/m": Mutate(func(_ context.Context, _ *AdmissionRequest, obj *thing) error {
			obj.Spec.Size++
			return nil
		})},
		Conversion: map[string]ConvertFunc{"/c": Converter(Hub[thing]("x/v1"), Hub[thing]("x/v2"))},
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, decode := range []func([]byte) (string, error){
			func(b []byte) (string, error) { r, err := decodeAdmission(b); return uid(r, err) },
			func(b []byte) (string, error) { r, err := decodeConversion(b); return uid(r, err) },
		} {
			id, err := decode(body)
			if _, bad := err.(*BadReviewError); (err != nil && !bad) || (err == nil && id == "") {
				t.Fatalf("decoded uid %q, error %v (%T)", id, err, err)
			}
		}
		for _, path := range []string{"/m", "/c"} {
			code, out := post(t, s, path, string(body))
			var r struct {
				Kind     string
				Response *struct{ UID string }
			}
			if json.Unmarshal(out, &r) != nil || (code == http.StatusOK) != (r.Response != nil && r.Response.UID != "") ||
				(code != http.StatusOK && (code != http.StatusBadRequest || r.Kind != "Status")) {
				t.Fatalf("%s: %d %s", path, code, out)
			}
		}
	})
}

// uid returns the uid of a request decoded, with the decoder's error.
func uid[R interface {
	*AdmissionRequest | *ConversionRequest
}](r R, err error) (string, error) {
	switch r := any(r).(type) {
	case *AdmissionRequest:
		if r != nil {
			return r.UID, err
		}
	case *ConversionRequest:
		if r != nil {
			return r.UID, err
		}
	}
	return "", err
}
