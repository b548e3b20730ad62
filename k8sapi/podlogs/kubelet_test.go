package podlogs

import (
	"bufio"
	"context"
	"io"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/testenv/controlplane"
)

// kubeletPlane is a full one: kwok serves the logs of its Running pods
// from the plane's Pod log file, which only this test writes.
var kubeletPlane controlplane.Shared

func TestKubeletLogs(t *testing.T) {
	p := kubeletPlane.Get(t)
	ns := p.TestNamespace(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := p.RunPod(ctx, ns, "p"); err != nil {
		t.Fatal(err)
	}
	cert, key := p.AdminCertificate()
	c, err := k8sapi.New(&k8sapi.Config{Host: p.Host(), CAData: p.CAData(), CertData: cert, KeyData: key})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.ResetPodLog(); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	a, b, l := now.Add(-2*time.Hour), now.Add(-time.Hour), now.Add(-10*time.Second)
	for _, e := range []struct {
		at   time.Time
		line string
	}{{a, "line A"}, {b, "line B"}, {l, "line C"}} {
		if err := p.AppendPodLog(e.at, "stdout", e.line); err != nil {
			t.Fatal(err)
		}
	}
	one := int64(1)
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"all", Options{}, "line A\nline B\nline C\n"},
		{"tailLines", Options{TailLines: &one}, "line C\n"},
		{"sinceTime", Options{SinceTime: now.Add(-90 * time.Minute)}, "line B\nline C\n"},
		{"sinceSeconds", Options{SinceSeconds: 60}, "line C\n"},
		{"timestamps", Options{TailLines: &one, Timestamps: true}, l.Format("2006-01-02T15:04:05.000000000Z07:00") + " line C\n"},
		{"limitBytes", Options{LimitBytes: 9}, "line A\nli"},
	} {
		rc, err := Stream(ctx, c, ns, "p", tc.opts)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || string(got) != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}

	// Follow: a line appended after the call arrives. kwok sends the
	// answer's headers with the first line, and may start to follow a
	// moment after the call: lines are appended until one arrives.
	appended := make(chan struct{})
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-appended:
				return
			case <-tick.C:
				if err := p.AppendPodLog(time.Now(), "stdout", "followed"); err != nil {
					t.Error(err)
					return
				}
			}
		}
	}()
	defer close(appended)
	zero := int64(0)
	rc, err := Stream(ctx, c, ns, "p", Options{Follow: true, TailLines: &zero})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	sc := bufio.NewScanner(rc)
	if !sc.Scan() || sc.Text() != "followed" {
		t.Fatalf("followed stream: %q, %v", sc.Text(), sc.Err())
	}
}
