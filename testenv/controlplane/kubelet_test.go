package controlplane_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The apiserver reaches kwok's kubelet endpoint over verified TLS: a
// Pod's log is the plane's Pod log file.
func TestKubeletEndpointServesLogs(t *testing.T) {
	p := shared.Get(t)
	ctx := testContext(t)
	if err := p.CreateNamespace(ctx, "kubelet-logs"); err != nil {
		t.Fatal(err)
	}
	if err := p.RunPod(ctx, "kubelet-logs", "p"); err != nil {
		t.Fatal(err)
	}
	if err := p.ResetPodLog(); err != nil {
		t.Fatal(err)
	}
	if err := p.AppendPodLog(time.Now(), "stdout", "hello from the pod"); err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.Host()+"/api/v1/namespaces/kubelet-logs/pods/p/log", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := p.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "hello from the pod") {
		t.Fatalf("log: %d %s", resp.StatusCode, body)
	}
	if err := p.AppendPodLog(time.Now(), "stdout", "two\nlines"); err == nil {
		t.Fatal("AppendPodLog took a line with a newline")
	}
}
