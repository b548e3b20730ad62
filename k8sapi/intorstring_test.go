package k8sapi

import (
	"encoding/json"
	"testing"
)

func TestIntOrStringJSON(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    IntOrString
		out     string // "" means in
		wantErr bool
	}{
		{in: `8080`, want: FromInt(8080)},
		{in: `0`, want: IntOrString{}},
		{in: `-1`, want: FromInt(-1)},
		{in: `2147483647`, want: FromInt(2147483647)},
		{in: `"http"`, want: FromString("http")},
		{in: `"25%"`, want: FromString("25%")},
		{in: `""`, want: FromString("")},
		{in: `"8080"`, want: FromString("8080")},
		{in: `"\u0068ttp"`, want: FromString("http"), out: `"http"`},
		{in: ` 42 `, want: FromInt(42), out: `42`},
		{in: `2147483648`, wantErr: true},
		{in: `1.5`, wantErr: true},
		{in: `1e3`, wantErr: true},
		{in: `true`, wantErr: true},
		{in: `{}`, wantErr: true},
		{in: `[1]`, wantErr: true},
	} {
		var got IntOrString
		err := json.Unmarshal([]byte(tc.in), &got)
		if tc.wantErr {
			if err == nil {
				t.Errorf("%s: decoded as %#v, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: got %#v, %v; want %#v", tc.in, got, err, tc.want)
			continue
		}
		out, err := json.Marshal(got)
		want := tc.out
		if want == "" {
			want = tc.in
		}
		if err != nil || string(out) != want {
			t.Errorf("%s: marshalled as %s, %v; want %s", tc.in, out, err, want)
		}
	}
}

func TestIntOrStringAccessors(t *testing.T) {
	if v := FromInt(80); v.IsString() || v.Int() != 80 || v.String() != "80" {
		t.Errorf("FromInt(80) = %#v", v)
	}
	if v := FromString("http"); !v.IsString() || v.Int() != 0 || v.String() != "http" {
		t.Errorf(`FromString("http") = %#v`, v)
	}
	if FromString("80") == FromInt(80) {
		t.Error(`FromString("80") == FromInt(80)`)
	}
	// null keeps the value, and the zero value is left out with omitzero.
	p := ServicePort{Port: 80, TargetPort: FromInt(8080)}
	if err := json.Unmarshal([]byte(`{"targetPort":null}`), &p); err != nil || p.TargetPort != FromInt(8080) {
		t.Errorf("null: %#v, %v", p.TargetPort, err)
	}
	b, _ := json.Marshal(ServicePort{Port: 80})
	if string(b) != `{"port":80}` {
		t.Errorf("zero targetPort marshalled as %s", b)
	}
	b, _ = json.Marshal(ServicePort{Port: 80, TargetPort: FromString("http")})
	if string(b) != `{"port":80,"targetPort":"http"}` {
		t.Errorf("string targetPort marshalled as %s", b)
	}
}
