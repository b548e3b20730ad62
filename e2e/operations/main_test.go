// Package operations tests the operator's operational surface end to end:
// metrics, probes, logs, Events, leader election and graceful shutdown,
// with its binary, as its ServiceAccount, against the local control plane.
package operations

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zerodep-k8s/widget-operator/e2e/harness"
	"github.com/zerodep-k8s/widget-operator/k8sapi"
	"github.com/zerodep-k8s/widget-operator/widget"
)

var env harness.Env

func TestMain(m *testing.M) { os.Exit(env.Main(m)) }

var (
	eventually = harness.Eventually
	ctxFor     = harness.Ctx
	widgets    = harness.Widgets
	newWidget  = harness.NewWidget
	admin      = harness.Admin
	kubectl    = harness.Kubectl
	freeAddr   = harness.FreeAddr
)

func waitReady(t *testing.T, c *k8sapi.Client, ns, name string, want int32) *widget.Widget {
	t.Helper()
	return harness.WaitReady(t, c, ns, name, want, 2*time.Minute)
}

const image = "registry.k8s.io/pause:3.10"

// get fetches url and returns the status code and body.
func get(url string) (int, string, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// waitStatus waits until url answers code, and returns the body.
func waitStatus(t *testing.T, url string, code int, timeout time.Duration) string {
	t.Helper()
	var body string
	eventually(t, timeout, func() (bool, string) {
		got, b, err := get(url)
		if err != nil {
			return false, err.Error()
		}
		body = b
		return got == code, fmt.Sprintf("GET %s: %d %q", url, got, b)
	})
	return body
}

// sample is one line of the text exposition.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// exposition is a parsed /metrics answer.
type exposition struct {
	types   map[string]string // family -> counter, gauge, histogram, ...
	samples []sample
}

// parseExposition parses the Prometheus text format 0.0.4 strictly
// enough for a test: every line is a comment, or a sample of a family
// declared by a TYPE line before it.
func parseExposition(t *testing.T, text string) *exposition {
	t.Helper()
	e := &exposition{types: map[string]string{}}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case line == "":
			continue
		case strings.HasPrefix(line, "# TYPE "):
			f := strings.Fields(line)
			if len(f) != 4 {
				t.Fatalf("line %d: bad TYPE line %q", n, line)
			}
			e.types[f[2]] = f[3]
			continue
		case strings.HasPrefix(line, "#"):
			continue
		}
		s, err := parseSample(line)
		if err != nil {
			t.Fatalf("line %d: %v", n, err)
		}
		if e.family(s.name) == "" {
			t.Fatalf("line %d: sample %s of no declared family", n, s.name)
		}
		e.samples = append(e.samples, s)
	}
	return e
}

// family returns the declared family a sample name belongs to, or "".
func (e *exposition) family(name string) string {
	if _, ok := e.types[name]; ok {
		return name
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && e.types[base] == "histogram" {
			return base
		}
	}
	return ""
}

func parseSample(line string) (sample, error) {
	s := sample{labels: map[string]string{}}
	i := strings.IndexAny(line, "{ ")
	if i < 0 {
		return s, fmt.Errorf("no value in %q", line)
	}
	s.name = line[:i]
	rest := line[i:]
	if strings.HasPrefix(rest, "{") {
		rest = rest[1:]
		for !strings.HasPrefix(rest, "}") {
			eq := strings.Index(rest, `="`)
			if eq < 0 {
				return s, fmt.Errorf("bad labels in %q", line)
			}
			name := rest[:eq]
			rest = rest[eq+2:]
			var val strings.Builder
			for {
				if rest == "" {
					return s, fmt.Errorf("unterminated label value in %q", line)
				}
				c := rest[0]
				rest = rest[1:]
				if c == '"' {
					break
				}
				if c == '\\' && rest != "" {
					switch rest[0] {
					case 'n':
						val.WriteByte('\n')
					default:
						val.WriteByte(rest[0])
					}
					rest = rest[1:]
					continue
				}
				val.WriteByte(c)
			}
			s.labels[name] = val.String()
			rest = strings.TrimPrefix(rest, ",")
		}
		rest = rest[1:]
	}
	f := strings.Fields(rest)
	if len(f) < 1 || len(f) > 2 {
		return s, fmt.Errorf("bad value in %q", line)
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return s, fmt.Errorf("bad value in %q: %v", line, err)
	}
	s.value = v
	return s, nil
}

// value returns the value of the one sample of name whose labels include
// want (given as name, value pairs), and whether there is one.
func (e *exposition) value(name string, want ...string) (float64, bool) {
	for _, s := range e.samples {
		if s.name != name {
			continue
		}
		match := true
		for i := 0; i+1 < len(want); i += 2 {
			if s.labels[want[i]] != want[i+1] {
				match = false
				break
			}
		}
		if match {
			return s.value, true
		}
	}
	return 0, false
}

// scrape fetches and parses /metrics at addr.
func scrape(t *testing.T, addr string) (*exposition, string) {
	t.Helper()
	code, body, err := get("http://" + addr + "/metrics")
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", code, err)
	}
	return parseExposition(t, body), body
}

// logRecord is one JSON line of the operator's log, with the attributes
// the tests look at.
type logRecord struct {
	Time            time.Time `json:"time"`
	Level           string    `json:"level"`
	Msg             string    `json:"msg"`
	Controller      string    `json:"controller"`
	Namespace       string    `json:"namespace"`
	Name            string    `json:"name"`
	ResourceVersion *string   `json:"resourceVersion"`
	Result          string    `json:"result"`
	Duration        *int64    `json:"duration"` // nanoseconds
	Informer        string    `json:"informer"`
	Err             string    `json:"err"`
	Version         string    `json:"version"`
	Scope           string    `json:"scope"`
	APIServer       string    `json:"apiServer"`
	Auth            string    `json:"auth"`
	Identity        string    `json:"identity"`
}

// logRecords parses an operator's log. Every line must be a JSON object,
// except the one line the command prints to stderr on a second signal or
// a start-up failure ("widget-operator: ...").
func logRecords(t *testing.T, o *harness.Operator) []logRecord {
	t.Helper()
	var out []logRecord
	for line := range strings.Lines(o.Log()) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "widget-operator: ") {
			continue
		}
		var r logRecord
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			// The last line may be half written.
			if !strings.HasSuffix(o.Log(), "\n") && strings.HasSuffix(strings.TrimSpace(o.Log()), line) {
				continue
			}
			t.Fatalf("a log line that is not JSON: %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

// firstLog returns the first record with message msg, and when it was
// written.
func firstLog(t *testing.T, o *harness.Operator, msg string) (logRecord, bool) {
	t.Helper()
	for _, r := range logRecords(t, o) {
		if r.Msg == msg {
			return r, true
		}
	}
	return logRecord{}, false
}

// countLogs counts the records that match.
func countLogs(t *testing.T, o *harness.Operator, match func(logRecord) bool) int {
	t.Helper()
	n := 0
	for _, r := range logRecords(t, o) {
		if match(r) {
			n++
		}
	}
	return n
}

// eventsAbout lists the Events about the Widget ns/name.
func eventsAbout(t *testing.T, c *k8sapi.Client, ns, name string) []k8sapi.Event {
	t.Helper()
	l, err := k8sapi.For[k8sapi.Event](c, k8sapi.Events).List(ctxFor(t, 10*time.Second), ns, k8sapi.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []k8sapi.Event
	for _, e := range l.Items {
		if e.Regarding.Kind == widget.WidgetKind && e.Regarding.Name == name {
			out = append(out, e)
		}
	}
	return out
}

// waitEvent waits for an Event about ns/name that match accepts, and
// returns it.
func waitEvent(t *testing.T, c *k8sapi.Client, ns, name string, timeout time.Duration, match func(k8sapi.Event) bool) k8sapi.Event {
	t.Helper()
	var found k8sapi.Event
	eventually(t, timeout, func() (bool, string) {
		evs := eventsAbout(t, c, ns, name)
		for _, e := range evs {
			if match(e) {
				found = e
				return true, ""
			}
		}
		return false, "events: " + describeEvents(evs)
	})
	return found
}

func describeEvents(evs []k8sapi.Event) string {
	var b strings.Builder
	for _, e := range evs {
		count := int32(1)
		if e.Series != nil {
			count = e.Series.Count
		}
		fmt.Fprintf(&b, "\n  %s %s x%d: %s", e.Type, e.Reason, count, e.Note)
	}
	return b.String()
}
