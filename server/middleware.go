package server

import (
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"
)

// logRequests logs one line per request with the matched route pattern, so
// ids in paths do not explode log cardinality and query strings (which may
// hold filters) are left out.
func logRequests(logger *slog.Logger, metrics *httpMetrics) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
			next.ServeHTTP(ww, r)
			route := chi.RouteContext(r.Context()).RoutePattern()
			if route == "" {
				route = "unmatched"
			}
			elapsed := time.Since(start)
			status := ww.Status()
			if status == 0 {
				status = http.StatusOK
			}
			metrics.requests.WithLabelValues(r.Method, route, strconv.Itoa(status)).Inc()
			metrics.duration.WithLabelValues(r.Method, route).Observe(elapsed.Seconds())
			level := slog.LevelInfo
			if status >= 500 {
				level = slog.LevelError
			}
			if route == "/healthz" || route == "/readyz" || route == "/metrics" {
				level = slog.LevelDebug
			}
			logger.Log(r.Context(), level, "request",
				"method", r.Method, "route", route, "path", r.URL.Path,
				"status", status, "bytes", ww.BytesWritten(), "duration", elapsed.Round(time.Microsecond),
				"request_id", middleware.GetReqID(r.Context()))
		})
	}
}

type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newHTTPMetrics(reg prometheus.Registerer) *httpMetrics {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "relais_http_requests_total", Help: "HTTP requests by method, route pattern and status.",
		}, []string{"method", "route", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "relais_http_request_duration_seconds", Help: "HTTP request latency by method and route pattern.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"method", "route"}),
	}
	reg.MustRegister(m.requests, m.duration)
	return m
}
