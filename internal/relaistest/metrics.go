package relaistest

import "github.com/relais/relais/internal/promtext"

// Sample is one line of a Prometheus text exposition (see promtext).
type Sample = promtext.Sample

// Metrics are the samples of one scrape of /metrics (see promtext).
type Metrics = promtext.Metrics

// Metrics scrapes the replica's /metrics.
func (e *Env) Metrics() Metrics {
	e.T.Helper()
	r := e.Must(200, "GET", "/metrics", "", nil)
	m, err := promtext.Parse(string(r.Body))
	if err != nil {
		e.T.Fatalf("/metrics: %v", err)
	}
	return m
}

// ParseMetrics reads a Prometheus text exposition (promtext.Parse).
func ParseMetrics(text string) (Metrics, error) { return promtext.Parse(text) }
