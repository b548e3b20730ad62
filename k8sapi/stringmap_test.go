package k8sapi

import (
	"encoding/json"
	"maps"
	"testing"
)

func TestStringMapDecodesLikeEncodingJSON(t *testing.T) {
	for _, in := range []string{
		`null`, `{}`, ` { } `, `{"a":"1"}`, `{"a":"1","b":"2"}`, `{ "a" : "1" , "b" : "" }`,
		`{"a":null}`, `{"a":"1","a":"2"}`, `{"esc\"aped":"tab\there \u00e9 \ud83d\ude00"}`,
		"{\"bad\xffutf8\":\"x\"}", `{"app.kubernetes.io/name":"widget","app.kubernetes.io/instance":"web"}`,
		`{"a":1}`, `{"a":{}}`, `{"a":[]}`, `{"a":true}`, `[]`, `"s"`, `7`,
	} {
		var want map[string]string
		wantErr := json.Unmarshal([]byte(in), &want)
		var got StringMap
		gotErr := json.Unmarshal([]byte(in), &got)
		if (wantErr == nil) != (gotErr == nil) {
			t.Errorf("%s: err %v, encoding/json says %v", in, gotErr, wantErr)
			continue
		}
		if wantErr == nil && (!maps.Equal(got, StringMap(want)) || (got == nil) != (want == nil)) {
			t.Errorf("%s: got %#v, want %#v", in, got, want)
		}
	}
}

// FuzzStringMap checks the decoder against encoding/json on any input.
func FuzzStringMap(f *testing.F) {
	for _, s := range []string{`{"a":"1","b":null}`, `null`, `{"x\n":"\u0041"}`, `{"a":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var want map[string]string
		wantErr := json.Unmarshal(in, &want)
		var got StringMap
		gotErr := json.Unmarshal(in, &got)
		if (wantErr == nil) != (gotErr == nil) {
			t.Fatalf("%q: err %v, encoding/json says %v", in, gotErr, wantErr)
		}
		if wantErr == nil && (!maps.Equal(got, StringMap(want)) || (got == nil) != (want == nil)) {
			t.Fatalf("%q: got %#v, want %#v", in, got, want)
		}
	})
}

// Called directly, as any json.Unmarshaler may be, with input that ends
// early, UnmarshalJSON returns an error and never reads past the end.
func TestStringMapTruncatedInput(t *testing.T) {
	for _, in := range []string{``, `  `, `{`, `{ `, `{"a`, `{"a"`, `{"a" `, `{"a":`, `{"a": `, `{"a":"b"`, `{"a":"b" `, `{"a":"b",`, `{"a":"b", `, `{"a":"b\`, `"`} {
		var m StringMap
		if err := m.UnmarshalJSON([]byte(in)); err == nil {
			t.Errorf("UnmarshalJSON(%q) = nil error, map %v", in, m)
		}
	}
}
