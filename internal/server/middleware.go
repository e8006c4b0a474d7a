package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mathrand "math/rand/v2"
	"net/http"
	"os"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/relais/relais/internal/auth"
	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/forwarded"
	"github.com/relais/relais/internal/httpauth"
	"github.com/relais/relais/internal/httpjson"
	"github.com/relais/relais/internal/pgfault"
	"github.com/relais/relais/stream"
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
			ctx, problem := httpjson.WithProblemNote(r.Context())
			ctx, principal := auth.WithNote(ctx)
			r = r.WithContext(ctx)
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
			method := methodLabel(r.Method)
			metrics.requests.WithLabelValues(method, route, strconv.Itoa(status)).Inc()
			metrics.duration.WithLabelValues(method, route).Observe(elapsed.Seconds())
			code := problem()
			if code == pgfault.UnavailableCode {
				metrics.databaseUnavailable.Inc()
			}
			level := slog.LevelInfo
			switch {
			case status == http.StatusServiceUnavailable:
				// Expected in operation (a database restart, a replica
				// stopping for a deploy, a key rotation under way): the
				// cause is logged once where it is found, not per request.
				level = slog.LevelWarn
			case status == http.StatusHTTPVersionNotSupported, status == http.StatusNotImplemented:
				// 501: a worker-protocol procedure the service lacks (a
				// client's typo, a Zeebe client's ActivateJobs).
				// The client's doing (a gRPC stream over HTTP/1.1, which
				// any caller without a token can send): an ERROR line
				// would page whoever alerts on them (security QA).
				level = slog.LevelWarn
			case status >= 500:
				level = slog.LevelError
			}
			if route == "/healthz" || route == "/readyz" || route == "/metrics" || route == stream.HeartbeatPath {
				// Probes, scrapes and each stream's heartbeat every few
				// seconds: a line each would drown the rest.
				level = slog.LevelDebug
			}
			if !logger.Enabled(r.Context(), level) {
				// An access log filtered out costs nothing: building its
				// attributes is most of what this middleware allocates.
				return
			}
			// https is the scheme Relais believes (TLS, or a trusted proxy's
			// X-Forwarded-Proto): what an operator checks a proxy against.
			client := forwarded.Of(r)
			attrs := []any{"method", r.Method, "route", route, "path", r.URL.Path,
				"status", status, "kib", kib(ww.BytesWritten()), "duration", elapsed.Round(time.Microsecond),
				"request_id", middleware.GetReqID(r.Context()), "client", client.Addr, "https", client.HTTPS}
			if code != "" {
				attrs = append(attrs, "code", code)
			}
			if r.URL.RawQuery != "" && r.URL.Query().Get("dry_run") == "true" {
				// The path leaves the query out: a dry run's 422 or 201
				// (relais apply's checks) read as a refusal or a creation
				// (soak QA). Parsed only when there is a query: a worker's
				// reports, every request of a cycle, have none.
				attrs = append(attrs, "dry_run", true)
			}
			if p, ok := principal(); ok && p.TokenID != 0 {
				// Who asked, by token id (its name is in the token list and
				// its token.created line), and a consumer's by its id too
				// (consumer tokens are not in the token list): a refused
				// attempt on personal data, a 403 on a reveal, is traced.
				attrs = append(attrs, "actor_token_id", p.TokenID)
				if p.ConsumerID != 0 {
					attrs = append(attrs, "actor_consumer_id", p.ConsumerID)
				}
			}
			logger.Log(r.Context(), level, "request", attrs...)
		})
	}
}

type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	// databaseUnavailable counts 503 database_unavailable answers (API
	// problems and console pages alike).
	databaseUnavailable prometheus.Counter
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
		databaseUnavailable: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "relais_database_unavailable_total", Help: "Requests answered 503 database_unavailable because PostgreSQL could not be reached.",
		}),
	}
	reg.MustRegister(m.requests, m.duration, m.databaseUnavailable)
	return m
}

// noSniff forbids browsers to read an API answer as anything but its
// declared type: answers quote what clients sent (names, descriptions,
// the JSON Schemas of contracts), which must never run as a page.
func noSniff(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		next.ServeHTTP(w, r)
	})
}

// metricsToken makes next answer only requests bearing token, when set
// (security QA: the metrics name definitions, consumers, destinations
// and their volumes to whoever reaches the listener). Its refusal is a
// problem as the API's are, without saying what the token should be.
func metricsToken(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		given, ok := httpauth.Bearer(r.Header) // the scheme in any case, the header once
		got := sha256.Sum256([]byte(given))
		if !ok || subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="relais-metrics"`)
			detail := "/metrics takes the bearer token RELAIS_METRICS_TOKEN sets (Prometheus: authorization's credentials_file)"
			if len(r.Header.Values("Authorization")) > 1 {
				detail += ", given once: this request gives the Authorization header more than once"
			}
			httpjson.WriteError(w, r, nil, fault.New(fault.Unauthorized, "unauthorized", "%s", detail))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// noStore keeps API answers out of every cache, the browser's included:
// they carry tokens shown once, secrets delivered in clear, a consumer's
// view. A route whose answer never changes says so itself (a revision's
// JSON Schema), overriding it.
func noStore(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// dryRunMarked says Relais-Applied: false on every answer to a request
// that asks ?dry_run=true, a refusal included, whoever refuses it (a body
// check before the route, the route's own checks): nothing was applied,
// and a client reading the header learns it whatever the status. A route
// that takes no dry_run refuses the parameter, which applies nothing
// either.
func dryRunMarked(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Parsed only when named: every start and completion passes here.
		if strings.Contains(r.URL.RawQuery, "dry_run") && r.URL.Query().Get("dry_run") == "true" {
			w.Header().Set("Relais-Applied", "false")
		}
		next.ServeHTTP(w, r)
	})
}

// bodyReadTimeout bounds the reading of a request body, from the end of
// its headers to its last byte (a variable for tests).
var bodyReadTimeout = 30 * time.Second

// bodyDeadline gives every request body bodyReadTimeout to arrive, on any
// route (the API, the facade, the console's forms, the worker protocol's
// unary calls): otherwise a client could hold a connection, and the body
// read so far, for as long as it cares to send slowly. The deadline is
// lifted once the body has been read, so that it never ends a long poll
// or a slow handler, and never applies to Subscribe or to gRPC
// reflection, whose requests are the start of a stream.
func bodyDeadline(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 || r.URL.Path == stream.SubscribePath ||
			strings.HasPrefix(r.URL.Path, "/grpc.reflection.") {
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(bodyReadTimeout)); err != nil {
			// A writer without deadlines (a recorder in tests).
			next.ServeHTTP(w, r)
			return
		}
		r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
		next.ServeHTTP(w, r)
	})
}

// closeHTTP1 closes an HTTP/1 connection after the answer. On HTTP/2 a
// Connection: close would shut the whole connection down, with every
// other request it carries.
func closeHTTP1(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor == 1 {
		w.Header().Set("Connection", "close")
	}
}

// deadlineBody lifts its connection's read deadline at the end of the body.
type deadlineBody struct {
	io.ReadCloser
	rc     *http.ResponseController
	lifted bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.lifted {
		b.lifted = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		// The connection's error names both ends' addresses, which a
		// route that shows its reading error (the worker protocol's
		// deadline_exceeded) would pass on to the client.
		err = errBodyTimeout
	}
	return n, err
}

// errBodyTimeout is a body's read past bodyReadTimeout, as a client may
// read it; it is os.ErrDeadlineExceeded to errors.Is.
var errBodyTimeout = fmt.Errorf("the request body did not arrive within %s of the request: %w", bodyReadTimeout, os.ErrDeadlineExceeded)

// strictBodies reads the body of every write request and refuses, before
// any route sees it, one above maxBytes (413 body_too_large) or one that
// is not strict JSON (400 invalid_json: malformed, invalid UTF-8, an
// escaped lone surrogate or a duplicate key, each at its pointer). Routes
// that take no body (a snapshot, a stop, a rotation, a delete) would
// otherwise ignore what they were sent and act; routes that decode one
// would store U+FFFD where a client sent something else. The route reads
// the body again from memory.
//
// Only an authenticated request's body is read (an unknown token's 401
// comes first, from the route, without reading it), and within
// bodyReadTimeout: otherwise anyone could make the server hold up to
// maxBytes per connection for as long as they care to send slowly.
func strictBodies(logger *slog.Logger, maxBytes int64, authenticated func(*http.Request) (*http.Request, bool)) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet || r.Method == http.MethodHead || r.Method == http.MethodOptions ||
				r.Body == nil || r.Body == http.NoBody {
				next.ServeHTTP(w, r)
				return
			}
			r, ok := authenticated(r)
			if !ok {
				// The route refuses it without reading the body; closing
				// an HTTP/1 connection after the answer spares reading the
				// rest (net/http would, to reuse the connection). HTTP/2
				// drops the one stream's body; its shared connection stays.
				closeHTTP1(w, r)
				next.ServeHTTP(w, r)
				return
			}
			if enc := r.Header.Get("Content-Encoding"); enc != "" && !strings.EqualFold(enc, "identity") {
				// Read as JSON, a compressed body fails on its first byte
				// with a message about an invalid character.
				closeHTTP1(w, r)
				httpjson.WriteError(w, r, logger, fault.New(fault.BadRequest, "invalid_request", "Content-Encoding %s is not supported: send the body uncompressed", enc).
					WithErrors([]fault.FieldError{{Path: "Content-Encoding", Message: "not supported: send the body uncompressed"}}))
				return
			}
			body, err := httpjson.ReadBody(w, r, maxBytes)
			if err != nil {
				// What is left of the body is not read: an HTTP/1
				// connection ends with this answer.
				closeHTTP1(w, r)
				if errors.Is(err, os.ErrDeadlineExceeded) {
					err = fault.New(fault.Timeout, "body_timeout", "the request body did not arrive within %s of the request", bodyReadTimeout)
				}
				httpjson.WriteError(w, r, logger, err)
				return
			}
			if err := httpjson.CheckBody(body); err != nil {
				httpjson.WriteError(w, r, logger, err)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			next.ServeHTTP(w, r)
		})
	}
}

// methodLabel is the method as the metrics label it: any client may send
// any token as a method, and each would otherwise open series of its own.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "other"
}

// refuseUnstorable answers 400 for an address whose path or query holds
// the NUL character or bytes that are not UTF-8 text (both arrive
// percent-encoded): PostgreSQL stores neither in a text value, so a
// filter, cursor or name holding one would otherwise fail as a 500 where
// it is looked up. Bodies are checked where JSON is read. A query string
// that cannot be read at all is refused here too.
func refuseUnstorable(logger *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") == "" {
				// Every route needs a token: without one, its 401 comes first.
				next.ServeHTTP(w, r)
				return
			}
			if msg := httpjson.QueryProblem(r.URL.RawQuery); msg != "" {
				// url.Values drops what it cannot read and goes on: a
				// ?dry_run=true% would be applied for real, a filter
				// ignored with the whole list answered.
				httpjson.WriteError(w, r, logger, fault.New(fault.BadRequest, "invalid_request", "the request's query string cannot be read: nothing was done").
					WithErrors([]fault.FieldError{{Path: "query", Message: msg}}))
				return
			}
			problem := httpjson.UnstorableText
			var errs []fault.FieldError
			if msg := problem(r.URL.Path); msg != "" {
				errs = append(errs, fault.FieldError{Path: "path", Message: msg})
			}
			for name, values := range r.URL.Query() {
				for _, v := range values {
					msg := problem(name)
					if msg == "" {
						msg = problem(v)
					}
					if msg != "" {
						errs = append(errs, fault.FieldError{Path: httpjson.PrintableName(name), Message: msg})
						break
					}
				}
			}
			if len(errs) > 0 {
				slices.SortFunc(errs, func(a, b fault.FieldError) int { return strings.Compare(a.Path, b.Path) })
				httpjson.WriteError(w, r, logger, fault.New(fault.BadRequest, "invalid_request", "the request's address holds a NUL character or bytes that are not UTF-8 text").WithErrors(errs))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// requestIDs names requests: a prefix drawn at start (two replicas' ids
// differ) and a random part per request, so that a client cannot predict
// another request's id and file its own under it. chi's own names carry
// the host's name, which a client has no business learning.
type requestIDs struct {
	prefix string
}

func newRequestIDs() *requestIDs {
	var b [4]byte
	rand.Read(b[:]) // never fails: crypto/rand crashes the program rather than return an error
	return &requestIDs{prefix: hex.EncodeToString(b[:])}
}

func (ids *requestIDs) next() string {
	return fmt.Sprintf("%s-%012x", ids.prefix, mathrand.Uint64()&(1<<48-1))
}

// validRequestID is what a client's X-Request-Id must be to be kept:
// short, and nothing a log line or a header could be bent by.
var validRequestID = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// requestID names every request (the id the client sent in X-Request-Id,
// if it is one, so that its logs and ours meet) and answers the name in
// X-Request-Id: an error's log line is found by it (problem documents
// carry it too, as http_request_id).
func requestID(ids *requestIDs) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id := r.Header.Get("X-Request-Id")
			if !validRequestID.MatchString(id) {
				id = ids.next()
			}
			w.Header().Set("X-Request-Id", id)
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), middleware.RequestIDKey, id)))
		})
	}
}

// kib is an answer's size in KiB, rounded up: in bytes, two reveals' (or
// two fetches') lines would tell the lengths of the protected values they
// carried apart.
func kib(bytes int) int {
	return (bytes + 1023) / 1024
}
