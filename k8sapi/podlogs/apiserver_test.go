package podlogs

// Tests against a real kube-apiserver, started by testenv/controlplane.
// Build its binaries first: go run ./hack/localcluster build
//
// These tests use a bare plane, with no node: they cover what the API
// server itself answers, the refusals and the empty log of a pod not yet
// on a node. kubelet_test.go reads a running container's log through
// kwok's kubelet endpoint, on a full plane of its own.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/testenv/controlplane"
)

// plane is a bare one: no scheduler, so pods stay without a node.
var plane = controlplane.Shared{Options: controlplane.Options{Bare: true}}

func TestMain(m *testing.M) {
	code := plane.Run(m)
	kubeletPlane.Close()
	os.Exit(code)
}

const twoContainers = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-0"},
 "spec":{"containers":[{"name":"app","image":"registry.example.com/app:1"},{"name":"sidecar","image":"registry.example.com/sidecar:1"}]}}`

func TestAPIServerLogs(t *testing.T) {
	p := plane.Get(t)
	ns := p.TestNamespace(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cert, key := p.AdminCertificate()
	c, err := k8sapi.New(&k8sapi.Config{Host: p.Host(), CAData: p.CAData(), CertData: cert, KeyData: key})
	if err != nil {
		t.Fatal(err)
	}

	_, err = Stream(ctx, c, ns, "web-0", Options{})
	if !k8sapi.IsNotFound(err) {
		t.Fatalf("missing pod: %v, want NotFound", err)
	}
	record(t, "status-404-pod.json", err)

	// A bare plane has no controller to make the default ServiceAccount.
	if err := p.CreateServiceAccount(ctx, ns, "default"); err != nil {
		t.Fatal(err)
	}
	pod := json.RawMessage(twoContainers)
	if _, err := k8sapi.For[json.RawMessage](c, k8sapi.Pods).Create(ctx, ns, &pod, k8sapi.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = Stream(ctx, c, ns, "web-0", Options{})
	var ae *k8sapi.APIError
	if !errors.As(err, &ae) || ae.Code != 400 || !strings.Contains(ae.Status.Message, "a container name must be specified") {
		t.Fatalf("two containers, none named: %v, want 400", err)
	}
	record(t, "status-400-container.json", err)
	if _, err = Stream(ctx, c, ns, "web-0", Options{Container: "nope"}); !errors.As(err, &ae) || ae.Code != 400 {
		t.Fatalf("unknown container: %v, want 400", err)
	}

	// Not on a node: the server answers an empty log, also when following.
	tail := int64(10)
	for _, opts := range []Options{{Container: "app"}, {Container: "sidecar", Follow: true, Timestamps: true, TailLines: &tail, SinceSeconds: 60}} {
		rc, err := Stream(ctx, c, ns, "web-0", opts)
		if err != nil {
			t.Fatalf("%+v: %v", opts, err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || len(b) != 0 {
			t.Errorf("%+v: read %q, %v; want an empty log", opts, b, err)
		}
	}
}

// record writes the Status of err to testdata when RECORD_TESTDATA is set,
// for the httptest tests to replay.
func record(t *testing.T, name string, err error) {
	t.Helper()
	var ae *k8sapi.APIError
	if os.Getenv("RECORD_TESTDATA") == "" || !errors.As(err, &ae) {
		return
	}
	b, jerr := json.Marshal(ae.Status)
	if jerr != nil {
		t.Fatal(jerr)
	}
	if werr := os.WriteFile(filepath.Join("testdata", name), append(b, '\n'), 0o644); werr != nil {
		t.Fatal(werr)
	}
}
