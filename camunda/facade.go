// Package camunda is the Camunda 7 external-task facade (DESIGN §14): the
// REST calls Camunda's external task clients make under /engine-rest,
// mapped onto the engine's pull protocol. A topic is a definition key (or
// pattern), variables are the occurrence's typed inputs and outputs, errors
// are Camunda's {type, message, code} bodies. Relais's own guarantees stay:
// grants, validation against the pinned revision, and no settlement after
// the lock expired.
package camunda

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/auth"
	"github.com/relais/relais/internal/config"
	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/httpjson"
	"github.com/relais/relais/internal/longpoll"
	"github.com/relais/relais/internal/pgfault"
)

// Facade serves the Camunda external-task routes.
type Facade struct {
	logger *slog.Logger
	bounds config.Pull
	body   int64
	eng    *engine.Engine
	hub    *longpoll.Hub
	// lookup authenticates a waiting fetch's credentials again after each
	// wait (the engine's token lookup, as the pull protocol's).
	lookup auth.Lookup
	// heartbeat is the worker streams' heartbeat: a poller stays live in
	// the worker catalog for its wait plus engine.LiveHeartbeats of them.
	heartbeat time.Duration
	// fetches count what relais_pull_claimed_total and
	// relais_pull_fetches_total count of the pull protocol's fetches: an
	// operator whose Camunda clients stopped fetching sees it.
	fetches *longpoll.FetchCounters
}

// New returns the facade on eng, waking long polls through hub (the one the
// pull protocol shares); reg, when not nil, registers its metrics.
func New(logger *slog.Logger, cfg config.Polling, eng *engine.Engine, hub *longpoll.Hub, reg prometheus.Registerer) *Facade {
	f := &Facade{logger: logger, bounds: cfg.Pull, body: cfg.MaxBodyBytes, eng: eng, lookup: eng.LookupToken, hub: hub, heartbeat: cfg.Heartbeat,
		fetches: longpoll.NewFetchCounters(prometheus.CounterOpts{Name: "relais_camunda_claimed_total", Help: "Occurrences locked by the Camunda facade's fetchAndLock."},
			prometheus.CounterOpts{Name: "relais_camunda_fetches_total",
				Help: "The Camunda facade's fetchAndLock requests that asked for tasks, by result: claimed, empty, too_many_waiters."}, reg),
	}
	return f
}

// contentType is what every JSON answer carries, exactly: the official
// JavaScript client parses a body only when the header is this string.
const contentType = "application/json"

// encode writes v as JSON with the status.
func encode(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString(`{"type":"RestException","message":"the answer could not be encoded","code":0}`)
	}
	w.Header().Set("Content-Type", contentType)
	// Answers quote paths and values a client sent: JSON, never sniffed.
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// exception is Camunda's error body.
type exception struct {
	Type    string `json:"type"`
	Message string `json:"message"`
	Code    int    `json:"code"`
}

// Camunda's exception types, by what the client did wrong.
const (
	restException     = "RestException"           // a task operation refused (wrong worker, unknown task)
	invalidRequest    = "InvalidRequestException" // a malformed request
	authentication    = "AuthenticationException" // no or unknown credentials
	authorization     = "AuthorizationException"  // credentials without the right
	notFoundException = "NotFoundException"       // no such route
	notAllowed        = "NotAllowedException"     // no such method on the route
	notSupported      = "NotSupportedException"   // a body that is not JSON
	engineException   = "ProcessEngineException"  // Relais failed (500)
)

// statusOf maps a Relais fault onto Camunda's status and exception type.
// A lock refusal is 400, as Camunda answers a worker that does not hold
// the lock; a settled or cancelled occurrence, or one past its deadline
// (which fails it), is no longer an external task (404, as Camunda answers
// for a completed or deleted one).
func statusOf(fe *fault.Error) (int, string) {
	switch fe.Code {
	case "already_settled", "occurrence_cancelled", engine.CodeDeadlineExceeded:
		return http.StatusNotFound, restException
	case "lock_expired", "locked_by_other_worker", "not_reserved", "not_deferred":
		return http.StatusBadRequest, restException
	}
	switch fe.Kind {
	case fault.BadRequest, fault.Unprocessable:
		return http.StatusBadRequest, invalidRequest
	case fault.Unauthorized:
		return http.StatusUnauthorized, authentication
	case fault.Forbidden:
		return http.StatusForbidden, authorization
	case fault.NotFound:
		return http.StatusNotFound, restException
	case fault.MethodNotAllowed:
		return http.StatusMethodNotAllowed, notAllowed
	case fault.Conflict:
		return http.StatusBadRequest, restException
	case fault.TooLarge:
		return http.StatusRequestEntityTooLarge, invalidRequest
	case fault.TooManyRequests:
		return http.StatusTooManyRequests, restException
	case fault.Unavailable:
		return http.StatusServiceUnavailable, restException
	}
	return http.StatusInternalServerError, engineException
}

// messageOf is the exception message of fe: its Relais code, its detail,
// and every field problem with its JSON pointer.
func messageOf(fe *fault.Error) string {
	var b strings.Builder
	b.WriteString(fe.Code)
	b.WriteString(": ")
	b.WriteString(fe.Detail)
	if fe.Code == "unknown_field" {
		// The detail lists the members already; each problem would only
		// say "unknown field" after its pointer again.
		return b.String()
	}
	for i, e := range fe.Errors {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		if e.Path != "" {
			b.WriteString(e.Path)
			b.WriteString(" ")
		}
		b.WriteString(e.Message)
	}
	return b.String()
}

// writeError answers err as Camunda does. Errors that are not faults are
// internal: logged with their detail, answered with a generic message.
func (f *Facade) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if cut := pgfault.CutShort(r.Context()); cut != nil {
		err = cut
	}
	if httpjson.ClientGone(w, r, f.logger, err) {
		return
	}
	fe, ok := fault.As(err)
	if !ok || fe.Kind == fault.Internal {
		f.logger.ErrorContext(r.Context(), "internal error", "method", r.Method, "path", r.URL.Path, "err", err)
		fe = fault.New(fault.Internal, "internal", "an internal error occurred; it has been logged")
	}
	// The request log names the code, as a REST route's does: a Camunda
	// client only logs a refusal, and the replica's log was the operator's
	// one trace of it (Camunda QA).
	httpjson.NoteProblem(r.Context(), fe.Code)
	status, typ := statusOf(fe)
	if fe.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(fe.RetryAfter.Seconds()+0.999)))
	}
	if status == http.StatusUnauthorized {
		w.Header().Add("WWW-Authenticate", `Basic realm="relais"`)
		w.Header().Add("WWW-Authenticate", `Bearer realm="relais"`)
	}
	encode(w, status, exception{Type: typ, Message: messageOf(fe), Code: 0})
}

// handle turns a handler that returns an error into an http.Handler that
// answers the error as Camunda does.
func (f *Facade) handle(h func(w http.ResponseWriter, r *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			f.writeError(w, r, err)
		}
	})
}

// badRequest is a 400 naming the request member at fault.
func badRequest(path, format string, args ...any) *fault.Error {
	return fault.New(fault.BadRequest, "invalid_request", "the request is invalid").
		WithErrors([]fault.FieldError{{Path: path, Message: fmt.Sprintf(format, args...)}})
}

// unsupported refuses a Camunda parameter Relais cannot honour, rather than
// ignoring it and answering what the client did not ask for. Its detail
// names the member: a field error saying it again would only repeat it in
// the message (see messageOf).
func unsupported(path, why string) *fault.Error {
	return fault.New(fault.BadRequest, "not_supported", "%s is not supported by Relais: %s", path, why)
}
