package main

// An end-to-end test of kget against a real kube-apiserver, started by
// testenv/controlplane. Build its binaries first:
// go run ./hack/localcluster build

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/k8sapi/namespaced"
	"github.com/zerodep-k8s/widget-operator/testenv/controlplane"
	"github.com/zerodep-k8s/widget-operator/testenv/logbuf"
)

var plane = controlplane.Shared{Options: controlplane.Options{Bare: true}}

func TestMain(m *testing.M) {
	code := plane.Run(m)
	kubeletPlane.Close() // pods_test.go's
	os.Exit(code)
}

func TestKget(t *testing.T) {
	p := plane.Get(t)
	ns := p.TestNamespace(t)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	cert, key := p.AdminCertificate()
	c, err := k8sapi.New(&k8sapi.Config{Host: p.Host(), CAData: p.CAData(), CertData: cert, KeyData: key})
	if err != nil {
		t.Fatal(err)
	}
	deployments := namespaced.In(k8sapi.For[json.RawMessage](c, k8sapi.Deployments), ns)
	web := json.RawMessage(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"selector":{"matchLabels":{"app":"web"}},
	 "template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"web","image":"registry.example.com/web:1"}]}}}}`)
	if _, err := deployments.Create(ctx, &web, k8sapi.WriteOptions{}); err != nil {
		t.Fatal(err)
	}

	kget := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(ctx, append([]string{"-kubeconfig", p.Kubeconfig()}, args...), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string // exact, or a prefix when it ends in "..."
		stderr string // a part of it
	}{
		{args: []string{"-n", ns, "deploy"}, stdout: "deployment.apps/web\n"},
		{args: []string{"-n", ns, "Deployment", "web"}, stdout: "deployment.apps/web\n"},
		{args: []string{"-n", ns, "deployments.v1.apps", "web"}, stdout: "deployment.apps/web\n"},
		{args: []string{"-A", "deploy"}, stdout: "deployment.apps/web\n"},
		{args: []string{"-n", ns, "po"}, stdout: ""},
		{args: []string{"ns", ns}, stdout: "namespace/" + ns + "\n"},
		{args: []string{"-n", ns, "-o", "json", "deploy", "web"}, stdout: `{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":"web","namespace":"` + ns + `"...`},
		{args: []string{"-n", ns, "-o", "json", "deploy"}, stdout: `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"apps/v1","kind":"Deployment","metadata":{...`},
		{args: []string{"-n", ns, "-o", "json", "po"}, stdout: `{"apiVersion":"v1","kind":"List","items":[]}` + "\n"},
		{args: []string{"-n", ns, "deploy", "nope"}, code: 1, stderr: "kget: k8sapi: get deployments " + ns + "/nope: 404 NotFound"},
		{args: []string{"gizmos"}, code: 1, stderr: `kget: discovery: resolve "gizmos": no resource type has this name`},
		{args: []string{}, code: 2, stderr: "usage: kget"},
		{args: []string{"-o", "yaml", "po"}, code: 2, stderr: "usage: kget"},
		{args: []string{"-A", "po", "x"}, code: 2, stderr: "usage: kget"},
	} {
		code, stdout, stderr := kget(tc.args...)
		okOut := stdout == tc.stdout
		if prefix, ok := strings.CutSuffix(tc.stdout, "..."); ok {
			okOut = strings.HasPrefix(stdout, prefix)
		}
		if code != tc.code || !okOut || !strings.Contains(stderr, tc.stderr) || (tc.stderr == "") != (stderr == "") {
			t.Errorf("kget %q: exit %d\nstdout %q\nstderr %q\nwant exit %d, stdout %q, stderr with %q",
				tc.args, code, stdout, stderr, tc.code, tc.stdout, tc.stderr)
		}
	}
	// -A lists other namespaces too: a namespace is cluster-scoped.
	if _, stdout, _ := kget("-A", "namespaces"); !strings.Contains(stdout, "namespace/default\n") || !strings.Contains(stdout, "namespace/"+ns+"\n") {
		t.Errorf("kget -A namespaces: %q", stdout)
	}

	// -w: the existing object, then changes, until interrupted.
	wctx, stop := context.WithCancel(ctx)
	var out, errOut logbuf.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(wctx, []string{"-kubeconfig", p.Kubeconfig(), "-n", ns, "-w", "deploy", "web"}, &out, &errOut)
	}()
	waitFor := func(want string) {
		t.Helper()
		for !strings.Contains(out.String(), want) {
			select {
			case code := <-done:
				t.Fatalf("kget -w exited %d before %q; stdout %q stderr %q", code, want, out.String(), errOut.String())
			case <-ctx.Done():
				t.Fatalf("no %q; stdout %q stderr %q", want, out.String(), errOut.String())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	waitFor("ADDED deployment.apps/web\n")
	if _, err := deployments.Patch(ctx, "web", k8sapi.MergePatch, []byte(`{"metadata":{"labels":{"tier":"front"}}}`), k8sapi.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("MODIFIED deployment.apps/web\n")
	if err := deployments.Delete(ctx, "web", k8sapi.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("DELETED deployment.apps/web\n")
	stop()
	if code := <-done; code != 0 {
		t.Errorf("kget -w exited %d after the interrupt; stderr %q", code, errOut.String())
	}
	if want := "ADDED deployment.apps/web\nMODIFIED deployment.apps/web\nDELETED deployment.apps/web\n"; out.String() != want {
		t.Errorf("kget -w wrote %q, want %q", out.String(), want)
	}
}
