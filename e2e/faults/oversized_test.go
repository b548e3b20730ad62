package faults

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/e2e/harness"
	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/widget"
)

// oversizedInjector is the injector of TestOversizedObjects. It refuses
// the operator's streaming lists of Deployments, as a server without them
// does, so that the operator lists them in pages. While on, it answers
// those lists with a page holding one Deployment of 17 MiB, over the
// client's 16 MiB list page limit on its own, and refuses its Deployment
// watches as expired, so that it lists.
type oversizedInjector struct {
	on   atomic.Bool
	ns   string
	page []byte
}

func (h *oversizedInjector) inject(r *http.Request) http.Handler {
	if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, "/namespaces/"+h.ns+"/deployments") {
		return nil
	}
	q := r.URL.Query()
	if q.Get("sendInitialEvents") == "true" {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			statusJSON(w, http.StatusUnprocessableEntity, "Invalid", "sendInitialEvents is not served")
		})
	}
	if !h.on.Load() {
		return nil
	}
	if q.Get("watch") == "1" || q.Get("watch") == "true" {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			statusJSON(w, http.StatusGone, "Expired", "too old resource version")
		})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(h.page)
	})
}

// TestOversizedObjects: list pages and objects too large for the client.
//
// First, 100 Deployments of the operator's own label, with no replicas
// and an annotation of 200 KiB each (20 MiB, over the 16 MiB list page
// limit), are in the namespace before the operator starts. Its Deployment
// list, too large at the server's cache and then in pages of 250 and 125,
// shrinks to pages of 62, and the operator becomes ready and reconciles.
//
// Then an HTTPS proxy puts a Deployment of 17 MiB, which no page size can
// carry, into every Deployment list: the list fails with a clear error and
// /readyz reports it. Once that object is gone (the proxy stops), the
// operator lists again, becomes ready and reconciles; its peak RSS stays
// under the 128 MiB of its pod's limit.
func TestOversizedObjects(t *testing.T) {
	p := env.Plane.Get(t)
	ns := p.TestNamespace(t)
	c := admin(t, p)

	padding := strings.Repeat("p", 200<<10)
	names := make([]string, 100)
	for i := range names {
		names[i] = fmt.Sprintf("padded-%03d", i)
	}
	forEach(t, names, 8, func(name string) error {
		replicas := int32(0)
		labels := map[string]string{"app": name, widget.LabelManagedBy: widget.FieldManager}
		d := &k8sapi.Deployment{
			TypeMeta: k8sapi.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
			ObjectMeta: k8sapi.ObjectMeta{Name: name, Labels: labels,
				Annotations: map[string]string{"example.com/padding": padding}},
			Spec: k8sapi.DeploymentSpec{
				Replicas: &replicas,
				Selector: &k8sapi.LabelSelector{MatchLabels: map[string]string{"app": name}},
				Template: k8sapi.PodTemplateSpec{
					ObjectMeta: k8sapi.ObjectMeta{Labels: map[string]string{"app": name}},
					Spec:       k8sapi.PodSpec{Containers: []k8sapi.Container{{Name: "c", Image: image}}},
				},
			},
		}
		_, err := deployments(c).Create(ctxFor(t, time.Minute), ns, d, k8sapi.WriteOptions{})
		return err
	})

	// The operator's first list asks for resourceVersion "0", which the
	// server's watch cache may answer from before the last creates: wait
	// until it holds them all, so that the list is the 20 MiB one.
	cert, key := p.AdminCertificate()
	big, err := k8sapi.New(&k8sapi.Config{Host: p.Host(), CAData: p.CAData(), CertData: cert, KeyData: key, ListPageLimit: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, func() (bool, string) {
		list, err := deployments(big).List(ctxFor(t, time.Minute), ns, k8sapi.ListOptions{ResourceVersion: "0"})
		n := 0
		if err == nil {
			n = len(list.Items)
		}
		return n == len(names), fmt.Sprintf("%d of %d Deployments in the watch cache (%v)", n, len(names), err)
	})
	proxy := harness.StartHTTPSProxy(t, p)
	h := &oversizedInjector{ns: ns, page: []byte(`{"kind":"DeploymentList","apiVersion":"apps/v1","metadata":{"resourceVersion":"1"},"items":[` +
		`{"metadata":{"name":"huge","namespace":"` + ns + `","labels":{"` + widget.LabelManagedBy + `":"` + widget.FieldManager + `"},` +
		`"annotations":{"example.com/padding":"` + strings.Repeat("h", 17<<20) + `"}}}]}`)}
	proxy.SetInjector(h.inject)
	o := startOpVia(t, p, proxy.URL, proxy.CAFile, "--namespace", ns)
	o.waitReadyz(t, http.StatusOK, 3*time.Minute)
	waitAllReady(t, c, ns, createWidgets(t, c, ns, "before", 1, 1), 2*time.Minute)
	if n := o.count("streaming list refused; using list and watch"); n != 1 {
		t.Errorf("%d refused streaming lists in the log, want 1 (the Deployments')", n)
	}
	if n := o.count("list page too large; page size now 62"); n == 0 {
		t.Errorf("no shrinking to 62 in the log:\n%s", harness.Tail(o.Log(), 4096))
	}
	var limits []string
	for _, r := range proxy.Requests() {
		u, err := url.Parse(r.URI)
		if err != nil || r.Watch || !strings.HasSuffix(u.Path, "/deployments") {
			continue
		}
		q := u.Query()
		limits = append(limits, q.Get("limit")+"@"+q.Get("resourceVersion"))
	}
	t.Logf("Deployment lists (limit@resourceVersion): %v", limits)
	if got := strings.Join(limits, " "); !strings.HasPrefix(got, "500@0 250@ 125@ 62@ 62@") {
		t.Errorf("Deployment lists %s, want 500@0 250@ 125@ 62@ 62@ ...", got)
	}

	// An object too large for any page.
	h.on.Store(true)
	proxy.DropStreams()
	eventually(t, 2*time.Minute, func() (bool, string) {
		o.alive(t)
		n := o.count("one object is over the client's size limit")
		return n > 0, fmt.Sprintf("%d failed lists in the log", n)
	})
	o.waitReadyz(t, http.StatusServiceUnavailable, time.Minute)
	for _, line := range strings.Split(o.Log(), "\n") {
		if strings.Contains(line, "one object is over the client's size limit") {
			t.Logf("log: %s", harness.Tail(line, 400))
			break
		}
	}

	// The object is gone.
	h.on.Store(false)
	o.waitReadyz(t, http.StatusOK, 2*time.Minute)
	waitAllReady(t, c, ns, createWidgets(t, c, ns, "after", 1, 1), 2*time.Minute)
	o.alive(t)
	if log := o.Log(); strings.Contains(log, "panic") || strings.Contains(log, "goroutine ") {
		t.Errorf("a panic in the log:\n%s", harness.Tail(log, 4096))
	}
	rss, err := harness.PeakRSS(o.Cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	const bound = 128 << 20
	t.Logf("peak RSS: %d MiB (bound %d MiB)", rss>>20, bound>>20)
	if rss > bound {
		t.Errorf("peak RSS %d MiB over the bound of %d MiB", rss>>20, bound>>20)
	}
}
