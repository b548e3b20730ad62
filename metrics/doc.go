// Package metrics is a small Prometheus registry: counters, gauges and
// histograms, with or without labels, and values read from a function at
// scrape time, written in the text exposition format version 0.0.4.
//
// Create metrics, register them with a [Registry], and serve the registry:
//
//	reg := metrics.NewRegistry()
//	reqs := metrics.NewCounterVec("app_requests_total", "Requests served.", "code")
//	reg.MustRegister(reqs, metrics.NewRuntimeCollector(time.Now()))
//	http.Handle("GET /metrics", reg)
//	...
//	reqs.WithLabelValues("200").Inc()
//
// Constructors never fail: a bad metric name, label name or bucket list is
// remembered and reported by [Registry.Register], so one place checks every
// programmer error. Updating a metric is lock-free (atomics); a labelled
// child is found under a lock, so hot paths should look a child up
// once and keep it. [Series.Observe] does not allocate.
//
// The output is stable: families sorted by name, series by their label
// values, histogram buckets in order, then _sum and _count. Numbers are
// written as Prometheus reads them: +Inf, -Inf, NaN, integers without an
// exponent when they are exact, others in the shortest form that reads
// back the same.
//
// The standard families ([NewControllerMetrics],
// [NewWorkqueueMetrics], [NewWatchMetrics], [NewAPIMetrics]) carry the
// names and labels dashboards expect.
package metrics
