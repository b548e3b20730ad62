package widget

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestWidgetSpecDecode(t *testing.T) {
	tests := []struct {
		name        string
		spec        string
		wantImage   string
		wantReplica *int32
		wantPort    *int32
		wantInvalid string
	}{
		{name: "full", spec: `{"image":"nginx","replicas":3,"port":80}`, wantImage: "nginx", wantReplica: ptr(int32(3)), wantPort: ptr(int32(80))},
		{name: "missing optional fields", spec: `{"image":"nginx"}`, wantImage: "nginx"},
		{name: "nulls", spec: `{"image":null,"replicas":null,"port":null}`},
		{name: "null spec", spec: `null`},
		{name: "zero is kept", spec: `{"image":"a","replicas":0}`, wantImage: "a", wantReplica: ptr(int32(0))},
		{name: "integral float", spec: `{"image":"a","replicas":3.0,"port":8e3}`, wantImage: "a", wantReplica: ptr(int32(3)), wantPort: ptr(int32(8000))},
		{name: "unknown fields named", spec: `{"image":"a","color":"blue","Replica":2}`, wantImage: "a",
			wantInvalid: `spec."Replica": unknown field; spec."color": unknown field`},
		{name: "replicas string", spec: `{"image":"a","replicas":"three"}`, wantImage: "a",
			wantInvalid: `spec.replicas: must be an integer, got string "three"`},
		{name: "numeric string is still a string", spec: `{"image":"a","replicas":"3"}`, wantImage: "a",
			wantInvalid: `spec.replicas: must be an integer, got string "3"`},
		{name: "replicas fraction", spec: `{"image":"a","replicas":1.5}`, wantImage: "a",
			wantInvalid: `spec.replicas: must be an integer, got 1.5`},
		{name: "replicas beyond int32", spec: `{"image":"a","replicas":5000000000}`, wantImage: "a",
			wantInvalid: `spec.replicas: 5000000000 is out of range 1..10`},
		{name: "replicas beyond int64", spec: `{"image":"a","replicas":-1e400}`, wantImage: "a",
			wantInvalid: `spec.replicas: -1e400 is out of range 1..10`},
		{name: "port boolean", spec: `{"image":"a","port":true}`, wantImage: "a",
			wantInvalid: `spec.port: must be an integer, got boolean true`},
		{name: "image number and port array", spec: `{"image":42,"port":[80]}`,
			wantInvalid: `spec.image: must be a string, got number 42; spec.port: must be an integer, got array`},
		{name: "long string is cut", spec: `{"image":"a","replicas":"` + strings.Repeat("x", 100) + `"}`, wantImage: "a",
			wantInvalid: `spec.replicas: must be an integer, got string "` + strings.Repeat("x", 64) + `..."`},
		{name: "spec is a string", spec: `"nginx"`, wantInvalid: `spec: must be an object, got string`},
		{name: "spec is an array", spec: `[1]`, wantInvalid: `spec: must be an object, got array`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w Widget
			doc := `{"metadata":{"name":"w","namespace":"ns"},"spec":` + tt.spec + `,"status":{"phase":"Ready"}}`
			if err := json.Unmarshal([]byte(doc), &w); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if w.Name != "w" || w.Namespace != "ns" || w.Status.Phase != "Ready" {
				t.Errorf("object lost: %+v", w)
			}
			s := w.Spec
			if s.Image != tt.wantImage || !int32PtrEqual(s.Replicas, tt.wantReplica) || !int32PtrEqual(s.Port, tt.wantPort) || s.Invalid != tt.wantInvalid {
				t.Errorf("spec = {Image:%q Replicas:%v Port:%v Invalid:%q}\nwant {Image:%q Replicas:%v Port:%v Invalid:%q}",
					s.Image, show(s.Replicas), show(s.Port), s.Invalid, tt.wantImage, show(tt.wantReplica), show(tt.wantPort), tt.wantInvalid)
			}
			if tt.wantInvalid != "" && Validate(s) != tt.wantInvalid {
				t.Errorf("Validate = %q, want the decode problem", Validate(s))
			}
		})
	}
}

func show(p *int32) any {
	if p == nil {
		return "nil"
	}
	return *p
}

func TestWidgetStatusDecodeTolerant(t *testing.T) {
	var w Widget
	doc := `{"metadata":{"name":"w"},"spec":{"image":"a"},"status":{"phase":7,"readyReplicas":"x"}}`
	if err := json.Unmarshal([]byte(doc), &w); err != nil {
		t.Fatalf("decode: %v", err)
	}
	if w.Name != "w" || w.Spec.Image != "a" || w.Status.Phase != "" || w.Status.ReadyReplicas != 0 {
		t.Errorf("got %+v", w)
	}
}

func TestWidgetEncode(t *testing.T) {
	w := Widget{Spec: WidgetSpec{Image: "a", Replicas: ptr(int32(2)), Invalid: "ignored"}}
	w.Name = "w"
	b, err := json.Marshal(&w)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"metadata":{"name":"w"},"spec":{"image":"a","replicas":2},"status":{"readyReplicas":0,"phase":"","observedGeneration":0,"conditions":null}}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		spec WidgetSpec
		want string
	}{
		{"valid", WidgetSpec{Image: "registry.k8s.io/pause:3.10", Replicas: ptr(int32(3)), Port: ptr(int32(8080))}, ""},
		{"valid with defaults", WidgetSpec{Image: "nginx"}, ""},
		{"bounds", WidgetSpec{Image: "nginx", Replicas: ptr(int32(10)), Port: ptr(int32(65535))}, ""},
		{"low bounds", WidgetSpec{Image: "nginx", Replicas: ptr(int32(1)), Port: ptr(int32(1))}, ""},
		{"empty image", WidgetSpec{}, "spec.image: must not be empty"},
		{"image at max length", WidgetSpec{Image: strings.Repeat("é", 512)}, ""},
		{"image too long", WidgetSpec{Image: strings.Repeat("é", 513)}, "spec.image: 513 characters is longer than 512"},
		{"image with space", WidgetSpec{Image: "ngi nx"}, `spec.image: must not contain whitespace or non-printable characters, found ' ' at character 4`},
		{"image with tab after multibyte", WidgetSpec{Image: "é\tx"}, `spec.image: must not contain whitespace or non-printable characters, found '\t' at character 2`},
		{"image with trailing newline", WidgetSpec{Image: "nginx\n"}, `spec.image: must not contain whitespace or non-printable characters, found '\n' at character 6`},
		{"image with no-break space", WidgetSpec{Image: "a\u00a0b"}, `spec.image: must not contain whitespace or non-printable characters, found '\u00a0' at character 2`},
		{"image with a terminal title", WidgetSpec{Image: "nginx\x1b]0;owned\a"}, `spec.image: must not contain whitespace or non-printable characters, found '\x1b' at character 6`},
		{"image with BEL", WidgetSpec{Image: "nginx\a"}, `spec.image: must not contain whitespace or non-printable characters, found '\a' at character 6`},
		{"image with DEL", WidgetSpec{Image: "ngin\x7fx"}, `spec.image: must not contain whitespace or non-printable characters, found '\x7f' at character 5`},
		{"image with C1 CSI", WidgetSpec{Image: "é\u009b2J"}, `spec.image: must not contain whitespace or non-printable characters, found '\u009b' at character 2`},
		{"image with bidi override", WidgetSpec{Image: "nginx\u202e"}, `spec.image: must not contain whitespace or non-printable characters, found '\u202e' at character 6`},
		{"image of symbols and letters", WidgetSpec{Image: "registry.example/ünïcode@sha256:ab_c-d~"}, ""},
		{"replicas zero", WidgetSpec{Image: "a", Replicas: ptr(int32(0))}, "spec.replicas: 0 is out of range 1..10"},
		{"replicas 50", WidgetSpec{Image: "a", Replicas: ptr(int32(50))}, "spec.replicas: 50 is out of range 1..10"},
		{"port zero", WidgetSpec{Image: "a", Port: ptr(int32(0))}, "spec.port: 0 is out of range 1..65535"},
		{"port too big", WidgetSpec{Image: "a", Port: ptr(int32(65536))}, "spec.port: 65536 is out of range 1..65535"},
		{"everything wrong", WidgetSpec{Replicas: ptr(int32(-1)), Port: ptr(int32(-2))},
			"spec.image: must not be empty; spec.replicas: -1 is out of range 1..10; spec.port: -2 is out of range 1..65535"},
		{"decode problem wins", WidgetSpec{Invalid: "spec.port: must be an integer, got array"}, "spec.port: must be an integer, got array"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Validate(tt.spec); got != tt.want {
				t.Errorf("Validate = %q\n          want %q", got, tt.want)
			}
		})
	}
}

// FuzzWidgetDecode checks that no spec, however malformed, loses the
// Widget, panics, or validates as fine while holding an out-of-range value.
func FuzzWidgetDecode(f *testing.F) {
	for _, s := range []string{`{"image":"a","replicas":3}`, `{"replicas":"three"}`, `null`, `[]`, `{"port":1e99}`, `{"image":{"x":1}}`, `7`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		if !json.Valid([]byte(spec)) {
			return
		}
		var w Widget
		doc := `{"metadata":{"name":"w"},"spec":` + spec + `}`
		if err := json.Unmarshal([]byte(doc), &w); err != nil {
			t.Fatalf("decode of valid JSON failed: %v", err)
		}
		if w.Name != "w" {
			t.Fatalf("name lost")
		}
		if Validate(w.Spec) == "" {
			r, p := w.Spec.ReplicasOrDefault(), w.Spec.PortOrDefault()
			if r < MinReplicas || r > MaxReplicas || p < MinPort || p > MaxPort || w.Spec.Image == "" {
				t.Fatalf("valid spec out of range: %+v", w.Spec)
			}
		}
	})
}
