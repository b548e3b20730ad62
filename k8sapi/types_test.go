package k8sapi

import (
	"encoding/json"
	"testing"
	"time"
)

// MicroTime reads RFC 3339 times and null, and writes UTC with six
// fractional digits, or null for the zero time.
func TestMicroTimeJSON(t *testing.T) {
	var ev Event
	in := `{"eventTime":null,"series":{"count":2,"lastObservedTime":"2026-12-01T08:00:00.123456+01:00"}}`
	if err := json.Unmarshal([]byte(in), &ev); err != nil {
		t.Fatal(err)
	}
	want := time.Date(2026, 12, 1, 7, 0, 0, 123456000, time.UTC)
	if !ev.EventTime.IsZero() || !ev.Series.LastObservedTime.Equal(want) {
		t.Errorf("decoded eventTime %v, lastObservedTime %v", ev.EventTime, ev.Series.LastObservedTime)
	}
	out, err := json.Marshal(ev.Series)
	if err != nil || string(out) != `{"count":2,"lastObservedTime":"2026-12-01T07:00:00.123456Z"}` {
		t.Errorf("encoded %s, %v", out, err)
	}
	if err := json.Unmarshal([]byte(`{"eventTime":"yesterday"}`), &ev); err == nil {
		t.Error("a time that is not RFC 3339: no error")
	}
}
