package websocket

// Tests against a real kube-apiserver, started by testenv/controlplane.

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/testenv/controlplane"
)

var plane = controlplane.Shared{Options: controlplane.Options{Bare: true}}

func TestMain(m *testing.M) { os.Exit(plane.Run(m)) }

// The API server serves a watch over WebSocket: one JSON event per
// message. Its refusal of the upgrade is a typed error.
func TestAPIServerWatch(t *testing.T) {
	p := plane.Get(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cert, key := p.AdminCertificate()
	d, err := NewDialer(&k8sapi.Config{Host: p.Host(), CAData: p.CAData(), CertData: cert, KeyData: key})
	if err != nil {
		t.Fatal(err)
	}
	d.Origin = p.Host() // the API server's watch handler refuses a handshake without one
	ns := p.TestNamespace(t)
	c, _, err := d.Dial(ctx, "/api/v1/namespaces/"+ns+"/configmaps", map[string][]string{"watch": {"true"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := p.Do(ctx, http.MethodPost, "/api/v1/namespaces/"+ns+"/configmaps", map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]string{"name": "seen"},
	}, nil); err != nil {
		t.Fatal(err)
	}
	_, msg, err := c.ReadMessage()
	if err != nil {
		t.Fatal(err)
	}
	var ev struct {
		Type   string `json:"type"`
		Object struct {
			Metadata struct{ Name string } `json:"metadata"`
		} `json:"object"`
	}
	if err := json.Unmarshal(msg, &ev); err != nil || ev.Type != "ADDED" || ev.Object.Metadata.Name != "seen" {
		t.Fatalf("event %s: %v", msg, err)
	}

	anon, err := NewDialer(&k8sapi.Config{Host: p.Host(), CAData: p.CAData()})
	if err != nil {
		t.Fatal(err)
	}
	anon.Origin = p.Host()
	_, _, err = anon.Dial(ctx, "/api/v1/namespaces/"+ns+"/configmaps", map[string][]string{"watch": {"true"}}, nil)
	if !k8sapi.IsForbidden(err) || !strings.Contains(err.Error(), "anonymous") {
		t.Fatalf("anonymous watch: %v, want Forbidden", err)
	}
}
