package server

import (
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/forwarded"
	"github.com/relais/relais/internal/httpjson"
)

// headAsGet routes HEAD requests to the GET route of their path, as RFC
// 9110 expects of every GET resource (monitors and link checkers send
// HEAD); net/http drops the body. No route is registered for HEAD itself.
// chi's middleware.GetHead does this only where its look-ahead finds no
// HEAD route, and that look-ahead wrongly finds one at the root of every
// r.Route subrouter (/api/v1/definitions answered 405).
func headAsGet(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead {
			if rctx := chi.RouteContext(r.Context()); rctx != nil {
				rctx.RouteMethod = http.MethodGet
			}
		}
		next.ServeHTTP(w, r)
	})
}

// strictTransportSecurity tells browsers that reached Relais over HTTPS
// (directly, or through a trusted proxy) to use nothing else for a year.
// Sent over cleartext it would be ignored, and it would wrongly promise
// HTTPS on a deployment that has none.
func strictTransportSecurity(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if forwarded.IsHTTPS(r) {
			w.Header().Set("Strict-Transport-Security", "max-age=31536000")
		}
		next.ServeHTTP(w, r)
	})
}

// recoverPanics answers a panicking handler with the 500 internal problem
// every API error is (DESIGN §8), where chi's Recoverer writes an empty
// 500. The panic value and stack are logged, never shown: the value may
// hold anything. http.ErrAbortHandler is panicked again, since it asks
// net/http to abort the response; so is any panic after the response
// started, because a problem cannot follow a partial answer and an aborted
// connection tells the client the answer is incomplete.
func recoverPanics(logger *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ww, ok := w.(middleware.WrapResponseWriter)
			if !ok {
				ww = middleware.NewWrapResponseWriter(w, r.ProtoMajor)
			}
			defer func() {
				v := recover()
				if v == nil {
					return
				}
				if v == http.ErrAbortHandler {
					panic(v)
				}
				logger.ErrorContext(r.Context(), "handler panicked", "method", r.Method, "path", r.URL.Path,
					"request_id", middleware.GetReqID(r.Context()), "panic", panicText(v), "stack", string(debug.Stack()))
				if ww.Status() != 0 {
					panic(http.ErrAbortHandler)
				}
				// An internal fault is written with the generic detail only.
				httpjson.WriteError(ww, r, nil, fault.New(fault.Internal, "internal", "handler panic"))
			}()
			next.ServeHTTP(ww, r)
		})
	}
}

// panicText describes a panic value for the log. The runtime's own panics
// (nil dereference, index out of range) say nothing of the data; any other
// value may hold a payload, which logs must never show (DESIGN §5), so
// only its type is written: the stack says where it came from.
func panicText(v any) string {
	if re, ok := v.(runtime.Error); ok {
		return re.Error()
	}
	return fmt.Sprintf("a value of type %T (not logged: it may hold payload data)", v)
}

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
				"request_id", middleware.GetReqID(r.Context()), "client", forwarded.Of(r).Addr)
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

// refuseNUL answers 400 for an address whose path or query holds the NUL
// character: PostgreSQL stores it in no text value, so a filter, cursor or
// name holding one would otherwise fail as a 500 where it is looked up.
// Bodies are checked where JSON is read (jsontree).
func refuseNUL(logger *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") == "" {
				// Every route needs a token: without one, its 401 comes first.
				next.ServeHTTP(w, r)
				return
			}
			var errs []fault.FieldError
			if strings.ContainsRune(r.URL.Path, 0) {
				errs = append(errs, fault.FieldError{Path: "path", Message: `the NUL character (\u0000) is not allowed`})
			}
			for name, values := range r.URL.Query() {
				for _, v := range values {
					if strings.ContainsRune(name, 0) || strings.ContainsRune(v, 0) {
						errs = append(errs, fault.FieldError{Path: strings.ReplaceAll(name, "\x00", ""), Message: `the NUL character (\u0000) is not allowed`})
						break
					}
				}
			}
			if len(errs) > 0 {
				slices.SortFunc(errs, func(a, b fault.FieldError) int { return strings.Compare(a.Path, b.Path) })
				httpjson.WriteError(w, r, logger, fault.New(fault.BadRequest, "invalid_request", "the request's address holds a NUL character").WithErrors(errs))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}
