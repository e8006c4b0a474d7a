package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/httpjson"
)

type startRequest struct {
	Version     int             `json:"version"`
	Inputs      json.RawMessage `json:"inputs"`
	BusinessKey *string         `json:"business_key"`
}

type pathStep struct {
	Node         string     `json:"node"`
	OccurrenceID uuid.UUID  `json:"occurrence_id"`
	Definition   string     `json:"definition"`
	Revision     int        `json:"revision"`
	Mode         string     `json:"mode"`
	Status       string     `json:"status"`
	Route        *string    `json:"route"`
	ErrorCode    *string    `json:"error_code"`
	CreatedAt    time.Time  `json:"created_at"`
	SettledAt    *time.Time `json:"settled_at"`
}

type instanceJSON struct {
	ID          uuid.UUID       `json:"id"`
	Process     string          `json:"process"`
	Version     int             `json:"version"`
	Status      string          `json:"status"`
	BusinessKey *string         `json:"business_key"`
	EndNode     *string         `json:"end_node"`
	ErrorCode   *string         `json:"error_code"`
	CreatedAt   time.Time       `json:"created_at"`
	EndedAt     *time.Time      `json:"ended_at"`
	Inputs      json.RawMessage `json:"inputs,omitempty"`
	Path        []pathStep      `json:"path,omitempty"`
}

func toInstanceJSON(i engine.Instance, withInputs bool) instanceJSON {
	out := instanceJSON{ID: i.ID, Process: i.ProcessKey, Version: i.Version, Status: i.Status, BusinessKey: i.BusinessKey,
		EndNode: i.EndNode, ErrorCode: i.ErrorCode, CreatedAt: i.CreatedAt, EndedAt: i.EndedAt}
	if withInputs {
		out.Inputs = i.Inputs
	}
	return out
}

func (a *API) startInstance() http.Handler {
	return a.handle(func(w http.ResponseWriter, r *http.Request) error {
		req, err := httpjson.Decode[startRequest](w, r, a.cfg.MaxBodyBytes)
		if err != nil {
			return err
		}
		idem := r.Header.Get("Idempotency-Key")
		if !utf8.ValidString(idem) {
			return fault.New(fault.BadRequest, "invalid_request", "Idempotency-Key must be UTF-8 text").
				WithErrors([]fault.FieldError{{Path: "Idempotency-Key", Message: "holds bytes that are not UTF-8 text"}})
		}
		if len(idem) > engine.MaxIdempotencyKey {
			return fault.New(fault.BadRequest, "invalid_request", "Idempotency-Key is longer than %d bytes", engine.MaxIdempotencyKey).
				WithErrors([]fault.FieldError{{Path: "Idempotency-Key", Message: fmt.Sprintf("is longer than %d bytes", engine.MaxIdempotencyKey)}})
		}
		inst, created, err := a.eng.StartInstance(r.Context(), engine.StartRequest{ProcessKey: chi.URLParam(r, "key"), Version: req.Version,
			Inputs: req.Inputs, BusinessKey: req.BusinessKey, IdempotencyKey: idem})
		if err != nil {
			return err
		}
		status := http.StatusOK
		if created {
			status = http.StatusCreated
		}
		return a.writeInstance(w, r, inst, status)
	})
}

func (a *API) writeInstance(w http.ResponseWriter, r *http.Request, inst engine.Instance, status int) error {
	occs, err := a.eng.InstanceOccurrences(r.Context(), inst.ID)
	if err != nil {
		return err
	}
	out := toInstanceJSON(inst, true)
	out.Path = []pathStep{}
	for _, o := range occs {
		out.Path = append(out.Path, pathStep{Node: o.Node, OccurrenceID: o.ID, Definition: o.Definition, Revision: o.Revision, Mode: o.Mode,
			Status: o.Status, Route: o.Route, ErrorCode: o.ErrorCode, CreatedAt: o.CreatedAt, SettledAt: o.SettledAt})
	}
	httpjson.Encode(w, status, out)
	return nil
}

func idParam(r *http.Request, what string) (uuid.UUID, error) {
	id, err := uuid.Parse(chi.URLParam(r, "id"))
	if err != nil {
		return uuid.UUID{}, fault.New(fault.NotFound, "not_found", "%s %q not found", what, chi.URLParam(r, "id"))
	}
	return id, nil
}

func (a *API) getInstance() http.Handler {
	return a.handle(func(w http.ResponseWriter, r *http.Request) error {
		id, err := idParam(r, "instance")
		if err != nil {
			return err
		}
		inst, err := a.eng.GetInstance(r.Context(), id)
		if err != nil {
			return err
		}
		return a.writeInstance(w, r, inst, http.StatusOK)
	})
}

func (a *API) stopInstance() http.Handler {
	return a.handle(func(w http.ResponseWriter, r *http.Request) error {
		id, err := idParam(r, "instance")
		if err != nil {
			return err
		}
		inst, err := a.eng.StopInstance(r.Context(), id)
		if err != nil {
			return err
		}
		return a.writeInstance(w, r, inst, http.StatusOK)
	})
}

var instanceStatuses = map[string]bool{"running": true, "completed": true, "failed": true, "cancelled": true}

func (a *API) listInstances() http.Handler {
	return a.handle(func(w http.ResponseWriter, r *http.Request) error {
		before, limit, err := httpjson.PageParams[*uuid.UUID](r)
		if err != nil {
			return err
		}
		q := r.URL.Query()
		if s := q.Get("status"); s != "" && !instanceStatuses[s] {
			return fault.New(fault.BadRequest, "invalid_request", "status must be running, completed, failed or cancelled")
		}
		insts, err := a.eng.ListInstances(r.Context(), engine.InstanceFilter{ProcessKey: q.Get("process"), Status: q.Get("status"),
			BusinessKey: q.Get("business_key"), Before: before, Limit: limit + 1})
		if err != nil {
			return err
		}
		httpjson.Encode(w, http.StatusOK, httpjson.NewPage(insts, limit, func(i engine.Instance) any { return i.ID },
			func(i engine.Instance) instanceJSON { return toInstanceJSON(i, false) }))
		return nil
	})
}
