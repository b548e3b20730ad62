package faults

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/e2e/harness"
	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/widget"
)

// padMeta adds n labels to labels, about 77 bytes each in JSON (any
// number of labels is valid; short keys keep managedFields small), and
// returns them with one annotation of 250 KiB (the API server holds all
// annotations to 256 KiB).
func padMeta(n int, labels map[string]string) (map[string]string, map[string]string) {
	for i := range n {
		labels[fmt.Sprintf("k%05d", i)] = strings.Repeat("v", 63)
	}
	return labels, map[string]string{"pad": strings.Repeat("a", 250<<10)}
}

// hostileDeployment is a paused Deployment of about 1.3 MB with the
// operator's label and no Widget as its controller: what any tenant who
// may create a Deployment can make.
func hostileDeployment(name string) json.RawMessage {
	sel := map[string]string{"app": name}
	labels, annotations := padMeta(4500, map[string]string{"app": name, widget.LabelManagedBy: widget.FieldManager})
	tlabels, tannotations := padMeta(4500, map[string]string{"app": name})
	b, _ := json.Marshal(map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": name, "labels": labels, "annotations": annotations},
		"spec": map[string]any{"replicas": 0, "paused": true, "selector": map[string]any{"matchLabels": sel},
			"template": map[string]any{
				"metadata": map[string]any{"labels": tlabels, "annotations": tannotations},
				"spec":     map[string]any{"containers": []any{map[string]any{"name": "c", "image": image}}},
			}},
	})
	return b
}

// TestTenantCannotMoveMemory repeats the audit's attack on the caches: in
// the operator's namespace, 90 Deployments of about 1.3 MB that carry the
// operator's label but no Widget as controller (45 before the operator
// starts, read by its list, and 45 after, read by its watch), and 20
// Widgets of about 1 MB of labels and annotations. The operator, under
// its pod's soft memory limit, goes on reconciling: the 20 Widgets and one
// created after the attack go Ready, and its peak RSS stays under the
// pod's limit. Before its caches were trimmed the same attack took the
// heap to 139 MB.
func TestTenantCannotMoveMemory(t *testing.T) {
	p := env.Plane.Get(t)
	ns := p.TestNamespace(t)
	c := admin(t, p)
	raw := k8sapi.For[json.RawMessage](c, k8sapi.Deployments)
	create := func(prefix string, n int) {
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("%s-%02d", prefix, i)
		}
		forEach(t, names, 4, func(name string) error {
			body := hostileDeployment(name)
			_, err := raw.Create(ctxFor(t, 2*time.Minute), ns, &body, k8sapi.WriteOptions{})
			return err
		})
	}
	create("before", 45)
	// As the operator reads it, with its managedFields.
	b, err := raw.Get(ctxFor(t, time.Minute), ns, "before-00", k8sapi.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("a hostile Deployment is %d bytes", len(*b))

	t.Setenv("CONTAINER_MEMORY_LIMIT", strconv.Itoa(podMemoryLimit))
	o := startOp(t, p, "--namespace", ns)
	o.waitReadyz(t, http.StatusOK, 3*time.Minute)
	create("after", 45)

	names := make([]string, 20)
	for i := range names {
		names[i] = fmt.Sprintf("big-%02d", i)
	}
	forEach(t, names, 4, func(name string) error {
		w := harness.NewWidget(name, image, 1)
		w.Labels, w.Annotations = padMeta(9000, map[string]string{})
		_, err := widgets(c).Create(ctxFor(t, 2*time.Minute), ns, w, k8sapi.WriteOptions{})
		return err
	})
	// One at a time: a list of them is over the client's page limit.
	for _, name := range append(names, createWidgets(t, c, ns, "after-attack", 1, 1)...) {
		harness.WaitReady(t, c, ns, name, 1, 3*time.Minute)
	}
	o.alive(t)

	rss, err := harness.PeakRSS(o.Cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("peak RSS: %d MiB (bound %d MiB); heap in use: %.1f MiB", rss>>20, podMemoryLimit>>20, o.metric(t, "go_memstats_heap_alloc_bytes")/(1<<20))
	if rss > podMemoryLimit {
		t.Errorf("peak RSS %d MiB over the pod's limit of %d MiB", rss>>20, podMemoryLimit>>20)
	}
}
