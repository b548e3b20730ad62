package metrics_test

import (
	"os"
	"time"

	"github.com/zerodep-k8s/widget-operator/metrics"
)

// A registry with a labelled counter and a gauge, written in the text
// exposition format, as a scrape of /metrics reads it.
func Example() {
	reg := metrics.NewRegistry()
	syncs := metrics.NewCounterVec("app_syncs_total", "Syncs done, by result.", "result")
	depth := metrics.NewGaugeVec("app_queue_depth", "Keys waiting to be synced.")
	reg.MustRegister(syncs, depth)

	ok := syncs.WithLabelValues("ok") // look a series up once, update it often
	ok.Inc()
	ok.Inc()
	syncs.WithLabelValues("error").Inc()
	depth.WithLabelValues().Set(3)

	reg.WriteTo(os.Stdout) // a Registry is also an http.Handler for "GET /metrics"
	// Output:
	// # HELP app_queue_depth Keys waiting to be synced.
	// # TYPE app_queue_depth gauge
	// app_queue_depth 3
	// # HELP app_syncs_total Syncs done, by result.
	// # TYPE app_syncs_total counter
	// app_syncs_total{result="error"} 1
	// app_syncs_total{result="ok"} 2
}

func ExampleNewHistogramVec() {
	reg := metrics.NewRegistry()
	took := metrics.NewHistogramVec("app_sync_duration_seconds", "Time per sync.", []float64{0.1, 1})
	reg.MustRegister(took)

	h := took.WithLabelValues()
	h.ObserveDuration(50 * time.Millisecond)
	h.ObserveDuration(300 * time.Millisecond)
	h.Observe(2.5)

	reg.WriteTo(os.Stdout)
	// Output:
	// # HELP app_sync_duration_seconds Time per sync.
	// # TYPE app_sync_duration_seconds histogram
	// app_sync_duration_seconds_bucket{le="0.1"} 1
	// app_sync_duration_seconds_bucket{le="1"} 2
	// app_sync_duration_seconds_bucket{le="+Inf"} 3
	// app_sync_duration_seconds_sum 2.85
	// app_sync_duration_seconds_count 3
}
