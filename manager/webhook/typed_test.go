package webhook

import (
	"crypto/tls"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
)

// thingV2 is thing in another version, whose size is a string.
type thingV2 struct {
	k8sapi.TypeMeta
	k8sapi.ObjectMeta `json:"metadata"`
	Spec              struct {
		Size string `json:"size"`
	} `json:"spec"`
}

// Converter converts through the hub both ways, gives the object the
// apiVersion asked for, keeps the metadata the types drop and takes the
// conversion's labels and annotations; an object in the version asked
// for is returned as it is, and an unknown version is an error.
func TestConverter(t *testing.T) {
	conv := Converter(Hub[thing]("x/v1"), VersionOf("x/v2",
		func(from *thingV2, to *thing) error {
			to.ObjectMeta = from.ObjectMeta
			to.Spec.Size = len(from.Spec.Size)
			to.Annotations = map[string]string{"from": "v2"}
			return nil
		},
		func(from *thing, to *thingV2) error {
			to.ObjectMeta = from.ObjectMeta
			to.Spec.Size = strings.Repeat("x", from.Spec.Size)
			to.Annotations = nil
			return nil
		}))
	v1 := `{"apiVersion":"x/v1","kind":"Thing","metadata":{"name":"a","annotations":{"old":"1"},"managedFields":[{"manager":"m"}]},"spec":{"size":3}}`
	out, err := conv(t.Context(), json.RawMessage(v1), "x/v2")
	want := `{"apiVersion":"x/v2","kind":"Thing","metadata":{"managedFields":[{"manager":"m"}],"name":"a"},"spec":{"size":"xxx"}}`
	if err != nil || string(out) != want {
		t.Errorf("v1 to v2: %s, %v\nwant %s", out, err, want)
	}
	back, err := conv(t.Context(), out, "x/v1")
	want = `{"apiVersion":"x/v1","kind":"Thing","metadata":{"annotations":{"from":"v2"},"managedFields":[{"manager":"m"}],"name":"a"},"spec":{"size":3}}`
	if err != nil || string(back) != want {
		t.Errorf("v2 to v1: %s, %v\nwant %s", back, err, want)
	}
	if same, err := conv(t.Context(), json.RawMessage(v1), "x/v1"); err != nil || string(same) != v1 {
		t.Errorf("v1 to v1: %s, %v; want it as it is", same, err)
	}
	if _, err := conv(t.Context(), json.RawMessage(v1), "x/v3"); err == nil || !strings.Contains(err.Error(), `"x/v3"`) {
		t.Errorf("to v3: %v", err)
	}
	if _, err := Converter(Version[thing]{})(t.Context(), json.RawMessage(`{"apiVersion":"y/v1"}`), ""); err == nil {
		t.Error("a zero Version converts")
	}
}

// The self-signed certificate made again a day later is written to the
// CA bundle file by the handshake that serves it first.
func TestCABundleFileFollowsRenewal(t *testing.T) {
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		file := filepath.Join(dir, "ca.crt")
		s, err := New(Config{CABundleFile: file})
		if err != nil {
			t.Fatal(err)
		}
		first, _ := os.ReadFile(file)
		time.Sleep(25 * time.Hour) // fake time: past the daily renewal
		if _, err := s.tls.GetCertificate(&tls.ClientHelloInfo{}); err != nil {
			t.Fatal(err)
		}
		second, _ := os.ReadFile(file)
		if len(first) == 0 || string(first) == string(second) || string(second) != string(s.CABundle()) {
			t.Errorf("bundle %d bytes, then %d, the same: %v; want the renewed one, as CABundle", len(first), len(second), string(first) == string(second))
		}
	})
}

// appendKey writes a key as encoding/json does: each byte that JSON or
// HTML escaping touches takes the slow path.
func TestAppendKey(t *testing.T) {
	for _, k := range []string{"", "spec", "a b", "quo\"te", "back\\slash", "tab\t", "\x1f", "\x7f", "<a>", "&", "é", "\u2028", "\xff",
		"\"", "\\", "<", ">", "&", "\x00", "\x1f\x1f"} { // each alone, so no other byte takes the slow path for it
		want, _ := json.Marshal(k)
		if got := appendKey(nil, k); string(got) != string(want) {
			t.Errorf("appendKey(%q) = %s, want %s", k, got, want)
		}
	}
}
