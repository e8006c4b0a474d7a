// Package api is the JSON design and observation API under /api/v1
// (DESIGN §9): definitions, processes, instances, occurrences, consumers,
// and the audit log of revealed sensitive values.
// Handlers decode, call the engine, and encode; the domain lives in engine.
package api

import (
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/relais/relais/config"
	"github.com/relais/relais/engine"
	"github.com/relais/relais/fault"
	"github.com/relais/relais/httpjson"
)

// API holds what the handlers share.
type API struct {
	logger *slog.Logger
	cfg    config.Config
	eng    *engine.Engine
}

// New returns the API on eng.
func New(logger *slog.Logger, cfg config.Config, eng *engine.Engine) *API {
	return &API{logger: logger, cfg: cfg, eng: eng}
}

// handle adapts an error-returning handler.
func (a *API) handle(h func(w http.ResponseWriter, r *http.Request) error) http.Handler {
	return httpjson.ErrorHandler(a.logger, h)
}

// page is a list answer: {"items": [...], "next_cursor": "..."}.
type page[T any] struct {
	Items      []T    `json:"items"`
	NextCursor string `json:"next_cursor,omitempty"`
}

const (
	defaultLimit = 50
	maxLimit     = 500
)

// pageParams reads ?cursor=&limit= and decodes the cursor into C.
func pageParams[C any](r *http.Request) (C, int, error) {
	var c C
	limit := defaultLimit
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxLimit {
			return c, 0, fault.New(fault.BadRequest, "invalid_request", "limit must be an integer from 1 to %d", maxLimit).
				WithErrors([]fault.FieldError{{Path: "limit", Message: "out of range"}})
		}
		limit = n
	}
	if s := r.URL.Query().Get("cursor"); s != "" {
		b, err := base64.RawURLEncoding.DecodeString(s)
		if err == nil {
			err = json.Unmarshal(b, &c)
		}
		if err != nil {
			return c, 0, fault.New(fault.BadRequest, "invalid_cursor", "the cursor is not one this API returned")
		}
	}
	return c, limit, nil
}

// newPage builds a list answer from up to limit+1 rows (the extra row only
// says there is a next page): item converts a row, cursor gives the keyset
// position of the last row returned.
func newPage[T, R any](rows []T, limit int, cursor func(T) any, item func(T) R) page[R] {
	p := page[R]{Items: make([]R, 0, min(len(rows), limit))}
	for i, row := range rows {
		if i == limit {
			p.NextCursor = encodeCursor(cursor(rows[i-1]))
			break
		}
		p.Items = append(p.Items, item(row))
	}
	return p
}

func encodeCursor(c any) string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

// immutable answers attempts to change revisions and releases.
func (a *API) immutable(what string) http.Handler {
	return a.handle(func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Allow", "GET")
		return fault.New(fault.MethodNotAllowed, "immutable", "%s cannot be changed or deleted", what)
	})
}
