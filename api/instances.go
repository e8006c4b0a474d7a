package api

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

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
		if len(idem) > 200 {
			return fault.New(fault.BadRequest, "invalid_request", "Idempotency-Key is longer than 200 characters")
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

var instanceStatuses = map[string]bool{"running": true, "held": true, "completed": true, "failed": true, "cancelled": true}

func (a *API) listInstances() http.Handler {
	return a.handle(func(w http.ResponseWriter, r *http.Request) error {
		before, limit, err := httpjson.PageParams[*uuid.UUID](r)
		if err != nil {
			return err
		}
		q := r.URL.Query()
		if s := q.Get("status"); s != "" && !instanceStatuses[s] {
			return fault.New(fault.BadRequest, "invalid_request", "status must be running, held, completed, failed or cancelled")
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

type batchStartItem struct {
	IdempotencyKey string          `json:"idempotency_key"`
	Version        int             `json:"version"`
	Inputs         json.RawMessage `json:"inputs"`
	BusinessKey    *string         `json:"business_key"`
}

type batchStartRequest struct {
	Items []batchStartItem `json:"items"`
}

// batchItemJSON is one item's outcome in a batch answer: the status it
// would have had alone, and its result or its problem.
type batchItemJSON struct {
	Index    int            `json:"index"`
	Status   int            `json:"status"`
	Instance *instanceJSON  `json:"instance,omitempty"`
	Problem  map[string]any `json:"problem,omitempty"`
}

// startInstances starts up to engine.MaxBatch instances in one
// transaction; each item is answered on its own (201 created, 200
// replayed, or its problem), the request itself is 200.
func (a *API) startInstances() http.Handler {
	return a.handle(func(w http.ResponseWriter, r *http.Request) error {
		req, err := httpjson.Decode[batchStartRequest](w, r, a.cfg.MaxBodyBytes)
		if err != nil {
			return err
		}
		switch {
		case len(req.Items) == 0:
			return fault.New(fault.BadRequest, "invalid_request", "items must hold at least one start").
				WithErrors([]fault.FieldError{{Path: "/items", Message: "must hold 1 to " + strconv.Itoa(engine.MaxBatch) + " items"}})
		case len(req.Items) > engine.MaxBatch:
			return engine.BoundExceeded("items", engine.MaxBatch)
		}
		key := chi.URLParam(r, "key")
		reqs := make([]engine.StartRequest, len(req.Items))
		var errs []fault.FieldError
		for i, it := range req.Items {
			if len(it.IdempotencyKey) > 200 {
				errs = append(errs, fault.FieldError{Path: "/items/" + strconv.Itoa(i) + "/idempotency_key", Message: "must be at most 200 characters"})
			}
			reqs[i] = engine.StartRequest{ProcessKey: key, Version: it.Version, Inputs: it.Inputs, BusinessKey: it.BusinessKey, IdempotencyKey: it.IdempotencyKey}
		}
		if len(errs) > 0 {
			return fault.New(fault.BadRequest, "invalid_request", "the batch is invalid").WithErrors(errs)
		}
		results, err := a.eng.StartInstances(r.Context(), reqs)
		if err != nil {
			return err
		}
		out := struct {
			Items []batchItemJSON `json:"items"`
		}{Items: make([]batchItemJSON, len(results))}
		for i, res := range results {
			item := batchItemJSON{Index: i}
			if res.Err != nil {
				fe, _ := fault.As(res.Err)
				item.Status, item.Problem = httpjson.ProblemOf(fe)
				prefixPaths(item.Problem, "/items/"+strconv.Itoa(i))
			} else {
				item.Status = http.StatusOK
				if res.Created {
					item.Status = http.StatusCreated
				}
				inst := toInstanceJSON(res.Instance, false)
				item.Instance = &inst
			}
			out.Items[i] = item
		}
		httpjson.Encode(w, http.StatusOK, out)
		return nil
	})
}

// prefixPaths makes an item's error pointers point into the batch body.
func prefixPaths(problem map[string]any, prefix string) {
	errs, _ := problem["errors"].([]fault.FieldError)
	out := make([]fault.FieldError, len(errs))
	for i, e := range errs {
		out[i] = fault.FieldError{Path: prefix + e.Path, Message: e.Message}
	}
	if len(out) > 0 {
		problem["errors"] = out
	}
}
