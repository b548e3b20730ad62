package widget_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/testenv/controlplane"
	"github.com/zerodep-k8s/widget-operator/widget"
)

// TestAPIServerCRDAgreesWithValidate sends Widgets to the real API server
// with the CRD of manifests/crd.yaml (dry run, strict field validation)
// and checks that it accepts exactly those that ValidateWidget accepts:
// the CRD refuses at creation what the operator could never run, and the
// operator refuses the same when a CRD lets it through.
func TestAPIServerCRDAgreesWithValidate(t *testing.T) {
	p := plane.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	installWidgetCRD(t, p)
	ns := p.TestNamespace(t)

	const image = "registry.k8s.io/pause:3.10"
	long := func(n int) string { return strings.Repeat("a", n) }
	tests := []struct {
		name, spec string
		why        string // a part of the API server's message when it refuses; "" to skip the check
	}{
		{"web", `{"image":"nginx"}`, ""},
		{"a", `{"image":"nginx","replicas":10,"port":65535}`, ""},
		{long(63), `{"image":"nginx","replicas":1,"port":1}`, ""},
		{"a-1", `{"image":"` + long(512) + `"}`, ""},
		{"x9", `{"image":"` + image + `","replicas":null}`, ""},
		// The name: the Service named after the Widget needs a DNS-1035 label.
		{long(64), `{"image":"nginx"}`, "at most 63 characters"},
		{"1web", `{"image":"nginx"}`, "DNS-1035"},
		{"web.shop", `{"image":"nginx"}`, "DNS-1035"},
		{"web-", `{"image":"nginx"}`, ""},
		{"Web", `{"image":"nginx"}`, ""},
		{"web_1", `{"image":"nginx"}`, ""},
		// The image.
		{"no-image", `{"replicas":1}`, "spec.image"},
		{"empty-image", `{"image":""}`, "spec.image"},
		{"long-image", `{"image":"` + long(513) + `"}`, "spec.image"},
		{"space", `{"image":"nginx latest"}`, "whitespace"},
		{"tab", `{"image":"nginx\tlatest"}`, "whitespace"},
		{"vtab", `{"image":"nginx\u000b"}`, "whitespace"},
		{"nel", `{"image":"nginx\u0085"}`, "whitespace"},
		{"nbsp", `{"image":"nginx\u00a0"}`, "whitespace"},
		{"line-sep", `{"image":"\u2028nginx"}`, "whitespace"},
		{"ideographic-space", `{"image":"nginx\u3000"}`, "whitespace"},
		// What a terminal acts on, or hides, when kubectl prints the image.
		{"zero-width-space", `{"image":"nginx\u200b"}`, "non-printable"},
		{"esc-title-bel", `{"image":"nginx\u001b]0;owned\u0007\u001b[2J"}`, "non-printable"},
		{"bel", `{"image":"nginx\u0007"}`, "non-printable"},
		{"nul", `{"image":"nginx\u0000"}`, "non-printable"},
		{"del", `{"image":"nginx\u007f"}`, "non-printable"},
		{"c1-csi", `{"image":"nginx\u009b2J"}`, "non-printable"},
		{"bidi-override", `{"image":"nginx\u202e"}`, "non-printable"},
		{"tag-character", `{"image":"nginx\udb40\udc41"}`, "non-printable"},
		{"private-use", `{"image":"nginx\ue000"}`, "non-printable"},
		{"printable-unicode", `{"image":"registry.example/ünïcode:✓"}`, ""},
		{"image-number", `{"image":7}`, "spec.image"},
		// Replicas and port.
		{"replicas-0", `{"image":"nginx","replicas":0}`, "spec.replicas"},
		{"replicas-11", `{"image":"nginx","replicas":11}`, "spec.replicas"},
		{"replicas-negative", `{"image":"nginx","replicas":-1}`, "spec.replicas"},
		{"replicas-string", `{"image":"nginx","replicas":"3"}`, "spec.replicas"},
		{"replicas-fraction", `{"image":"nginx","replicas":1.5}`, "spec.replicas"},
		{"replicas-huge", `{"image":"nginx","replicas":1e12}`, "spec.replicas"},
		{"port-0", `{"image":"nginx","port":0}`, "spec.port"},
		{"port-65536", `{"image":"nginx","port":65536}`, "spec.port"},
		// The spec as a whole.
		{"spec-number", `42`, "spec"},
		{"unknown-field", `{"image":"nginx","colour":"blue"}`, "colour"},
	}
	path := "/apis/example.com/v1/namespaces/" + ns + "/widgets?dryRun=All&fieldValidation=Strict"
	for _, tt := range tests {
		t.Run(strings.ReplaceAll(shortName(tt.name), ".", "_"), func(t *testing.T) {
			body := fmt.Sprintf(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":%q},"spec":%s}`, tt.name, tt.spec)
			err := p.Do(ctx, http.MethodPost, path, []byte(body), nil)
			var se *controlplane.StatusError
			if err != nil && !(errors.As(err, &se) && (se.Code == http.StatusUnprocessableEntity || se.Code == http.StatusBadRequest)) {
				t.Fatal(err)
			}
			var w widget.Widget
			if err := json.Unmarshal([]byte(body), &w); err != nil {
				t.Fatal(err)
			}
			ours := widget.ValidateWidget(&w)
			switch {
			case err == nil && ours != "":
				t.Errorf("the CRD accepts it, ValidateWidget refuses it: %s", ours)
			case err != nil && ours == "":
				t.Errorf("ValidateWidget accepts it, the CRD refuses it: %s", se.Body)
			case err != nil && tt.why != "" && !strings.Contains(se.Body, tt.why):
				t.Errorf("the API server's message does not say %q: %s", tt.why, se.Body)
			}
		})
	}
}

// TestAPIServerNameRefusalNamesTheField: the refusal of a Widget whose
// name the CRD's rules on the root refuse names the field, as kubectl
// prints it, without the "<nil>" a rule on the root gives without a
// fieldPath.
func TestAPIServerNameRefusalNamesTheField(t *testing.T) {
	p := plane.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	installWidgetCRD(t, p)
	ns := p.TestNamespace(t)
	for _, name := range []string{"dot.ted", strings.Repeat("a", 64)} {
		body := fmt.Sprintf(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":%q},"spec":{"image":"nginx"}}`, name)
		err := p.Do(ctx, http.MethodPost, "/apis/example.com/v1/namespaces/"+ns+"/widgets?dryRun=All", []byte(body), nil)
		var se *controlplane.StatusError
		if !errors.As(err, &se) || se.Code != http.StatusUnprocessableEntity {
			t.Fatalf("%s: %v, want a 422", shortName(name), err)
		}
		var st struct {
			Message string `json:"message"`
			Details struct {
				Causes []struct{ Field string } `json:"causes"`
			} `json:"details"`
		}
		if err := json.Unmarshal([]byte(se.Body), &st); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %s", shortName(name), st.Message)
		if !strings.Contains(st.Message, "metadata.name: Invalid value") || strings.Contains(st.Message, "<nil>") {
			t.Errorf("the refusal does not name metadata.name, or says <nil>: %s", st.Message)
		}
		if len(st.Details.Causes) == 0 || st.Details.Causes[0].Field != "metadata.name" {
			t.Errorf("causes %+v, want metadata.name", st.Details.Causes)
		}
	}
}

func shortName(s string) string {
	if len(s) > 20 {
		return fmt.Sprintf("%s..%d", s[:8], len(s))
	}
	return s
}

// installWidgetCRD applies manifests/crd.yaml with the plane's kubectl and
// waits until Widgets are served.
func installWidgetCRD(t *testing.T, p *controlplane.Plane) {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	crd := filepath.Join(filepath.Dir(filepath.Dir(file)), "manifests", "crd.yaml")
	kubectl := func(args ...string) {
		t.Helper()
		cmd := exec.Command(p.Binaries().Kubectl, append([]string{"--kubeconfig", p.Kubeconfig()}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	kubectl("apply", "--server-side", "--force-conflicts", "-f", crd)
	kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd/widgets.example.com")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for { // served once a list succeeds
		err := p.Do(ctx, http.MethodGet, "/apis/example.com/v1/widgets?limit=1", nil, nil)
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("widgets not served: %v", err)
		}
		<-time.After(100 * time.Millisecond)
	}
}
