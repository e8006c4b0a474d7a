// Package api is the JSON design and observation API under /api/v1
// (DESIGN §9): definitions, processes, instances, occurrences, consumers,
// and the audit log of revealed sensitive values.
// Handlers decode, call the engine, and encode; the domain lives in engine.
package api

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/httpjson"
)

// API holds what the handlers share.
type API struct {
	logger *slog.Logger
	// maxBody bounds a request body (RELAIS_MAX_BODY_BYTES).
	maxBody int64
	eng     *engine.Engine
	// allow sets a 405's Allow header from the replica's routes (paths
	// from the root).
	allow *httpjson.Allow
	// ends holds the reads of an instance that wait for it to end, up to
	// maxWait each.
	ends    EndWaiter
	maxWait time.Duration
}

// EndWaiter holds reads that wait for an instance to leave running
// (internal/endwait): Wait returns once it did, d passed, ctx ended or the
// replica stops; an error refuses the wait (the replica holds its most),
// or is still's, which checks the caller's credentials when tokens change.
type EndWaiter interface {
	Wait(ctx context.Context, id uuid.UUID, d time.Duration, still func(context.Context) error) error
}

// New returns the API on eng, reading bodies of up to maxBody bytes;
// allow answers which methods a path takes; ends holds the reads that
// wait for an instance to end, up to maxWait.
func New(logger *slog.Logger, maxBody int64, eng *engine.Engine, allow *httpjson.Allow, ends EndWaiter, maxWait time.Duration) *API {
	return &API{logger: logger, maxBody: maxBody, eng: eng, allow: allow, ends: ends, maxWait: maxWait}
}

// handle adapts an error-returning handler for a route that reads no
// query parameter and honours no Idempotency-Key: either is refused (400
// at its name) rather than ignored, since a client that sends one means
// something by it (?version=2 on a start, a key on a token's creation)
// that would silently not happen.
func (a *API) handle(h func(w http.ResponseWriter, r *http.Request) error) http.Handler {
	return a.serve(h, false, false)
}

// handleQuery is handle for a route that checks its own query parameters
// (a list's filters and cursor, a write's dry_run).
func (a *API) handleQuery(h func(w http.ResponseWriter, r *http.Request) error) http.Handler {
	return a.serve(h, true, false)
}

// handleIdempotent is handle for the routes that read Idempotency-Key
// themselves: a start honours it, a batch of starts refuses it for its
// items' keys.
func (a *API) handleIdempotent(h func(w http.ResponseWriter, r *http.Request) error) http.Handler {
	return a.serve(h, false, true)
}

// handleNoBody is handle for a write that takes no body (a DELETE, a
// snapshot): one sent is refused as any body's unknown members are, since
// its client would believe it was read.
func (a *API) handleNoBody(h func(w http.ResponseWriter, r *http.Request) error) http.Handler {
	return a.handle(func(w http.ResponseWriter, r *http.Request) error {
		if _, err := httpjson.DecodeOrZero[struct{}](w, r, a.maxBody); err != nil {
			return err
		}
		return h(w, r)
	})
}

func (a *API) serve(h func(w http.ResponseWriter, r *http.Request) error, query, idempotent bool) http.Handler {
	return httpjson.ErrorHandler(a.logger, func(w http.ResponseWriter, r *http.Request) error {
		if !query {
			if err := httpjson.NoParams(r); err != nil {
				return err
			}
		}
		if !idempotent {
			if err := httpjson.NoIdempotencyKey(r); err != nil {
				return err
			}
		}
		return h(w, r)
	})
}

// located names, in Location, what a 201 created.
func located(w http.ResponseWriter, path string) { w.Header().Set("Location", path) }

// immutable answers attempts to change revisions and releases, saying
// what to do instead ({key} in instead is the path's key).
func (a *API) immutable(what, instead string) http.Handler {
	return a.refusing(func(r *http.Request) error {
		instead := strings.ReplaceAll(instead, "{key}", url.PathEscape(chi.URLParam(r, "key")))
		return fault.New(fault.MethodNotAllowed, "immutable", "%s cannot be changed or deleted: %s", what, instead)
	})
}

// notAllowed answers a method a route does not serve where the router
// would otherwise take the path for another route's (GET
// /instances/actions for an instance's id).
func (a *API) notAllowed() http.Handler {
	return a.refusing(func(r *http.Request) error {
		return fault.New(fault.MethodNotAllowed, "method_not_allowed", "%s is not allowed on %s", r.Method, r.URL.Path)
	})
}

// refusing answers every request with the 405 problem gives, its Allow
// header listing what the path does take (never this route's method).
func (a *API) refusing(problem func(*http.Request) error) http.Handler {
	return httpjson.NotAllowed{Handler: a.handle(func(w http.ResponseWriter, r *http.Request) error {
		a.allow.Set(w, r.URL.EscapedPath())
		return problem(r)
	})}
}
