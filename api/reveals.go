package api

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/auth"
	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/httpjson"
)

// revealJSON is one reveal audit record; it never holds the value.
type revealJSON struct {
	ID           int64     `json:"id"`
	OccurrenceID uuid.UUID `json:"occurrence_id"`
	Side         string    `json:"side"`
	Field        string    `json:"field"`
	Principal    string    `json:"principal"`
	// TokenID tells apart tokens that share a name (names are not
	// unique); null for a principal without a stored token.
	TokenID    *int64    `json:"token_id"`
	RevealedAt time.Time `json:"revealed_at"`
	// Reason is null for reveals recorded before reasons were required.
	Reason *string `json:"reason"`
	// OccurrenceDeleted is true once retention deleted the occurrence:
	// the record outlives it.
	OccurrenceDeleted bool `json:"occurrence_deleted"`
}

// revealOccurrence shows an admin one sensitive value of an occurrence in
// clear and records it in the audit log (the engine commits the record
// before it returns the value).
func (a *API) revealOccurrence() http.Handler {
	return a.handle(func(w http.ResponseWriter, r *http.Request) error {
		id, err := idParam(r, "occurrence")
		if err != nil {
			return err
		}
		req, err := httpjson.Decode[struct {
			Side   string `json:"side"`
			Field  string `json:"field"`
			Reason string `json:"reason"`
		}](w, r, a.maxBody)
		if err != nil {
			return err
		}
		p, ok := auth.FromContext(r.Context())
		if !ok {
			return fault.New(fault.Unauthorized, "unauthorized", "a bearer token is required")
		}
		got, err := a.eng.RevealValue(r.Context(), p, id, req.Side, req.Field, req.Reason)
		if err != nil {
			return err
		}
		// The answer holds a protected value in clear: no cache may keep it.
		w.Header().Set("Cache-Control", "no-store")
		httpjson.Encode(w, http.StatusOK, struct {
			Value   json.RawMessage `json:"value"`
			AuditID int64           `json:"audit_id"`
		}{got.Value, got.Audit.ID})
		return nil
	})
}

// listReveals is the reveal audit log, newest first, optionally of one
// occurrence.
func (a *API) listReveals() http.Handler {
	return a.handleQuery(func(w http.ResponseWriter, r *http.Request) error {
		before, limit, err := httpjson.PageParams[int64](r, "occurrence")
		if err != nil {
			return err
		}
		f := engine.RevealFilter{Before: before, Limit: limit + 1}
		if s := r.URL.Query().Get("occurrence"); s != "" {
			occ, err := uuid.Parse(s)
			if err != nil {
				return fault.New(fault.BadRequest, "invalid_request", "invalid filter").
					WithErrors([]fault.FieldError{{Path: "occurrence", Message: "must be an occurrence id"}})
			}
			f.Occurrence = &occ
		}
		reveals, err := a.eng.ListReveals(r.Context(), f)
		if err != nil {
			return err
		}
		httpjson.Encode(w, http.StatusOK, httpjson.NewPage(reveals, limit, func(rv engine.Reveal) any { return rv.ID }, func(rv engine.Reveal) revealJSON {
			return revealJSON{ID: rv.ID, OccurrenceID: rv.OccurrenceID, Side: rv.Side, Field: rv.Field, Principal: rv.Principal, TokenID: rv.TokenID, RevealedAt: rv.RevealedAt, Reason: rv.Reason,
				OccurrenceDeleted: rv.OccurrenceDeleted}
		}))
		return nil
	})
}
