package api

import (
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/httpjson"
)

type subscriptionJSON struct {
	Definition string   `json:"definition"`
	Revisions  []int    `json:"revisions,omitempty"`
	Fields     []string `json:"fields,omitempty"`
}

// workerJSON is a live worker of the catalog (DESIGN §10).
type workerJSON struct {
	ID            uuid.UUID          `json:"id"`
	Consumer      consumerRef        `json:"consumer"`
	WorkerID      string             `json:"worker_id"`
	Protocol      string             `json:"protocol"`
	Transport     *string            `json:"transport"`
	Replica       string             `json:"replica"`
	Subscriptions []subscriptionJSON `json:"subscriptions"`
	Definitions   []string           `json:"definitions"`
	InFlight      int                `json:"in_flight"`
	// LapsedLastHour counts the locks its worker id let lapse within
	// engine.LapseWindow (an hour), LastLapsedAt the latest.
	LapsedLastHour int        `json:"lapsed_last_hour"`
	LastLapsedAt   *time.Time `json:"last_lapsed_at"`
	ConnectedAt    time.Time  `json:"connected_at"`
	LastSeenAt     time.Time  `json:"last_seen_at"`
}

func toWorkerJSON(w engine.Worker) workerJSON {
	out := workerJSON{ID: w.ID, Consumer: consumerRef{ID: w.ConsumerID, Name: w.ConsumerName}, WorkerID: w.WorkerID, Protocol: w.Protocol,
		Replica: w.Replica, Subscriptions: make([]subscriptionJSON, len(w.Subscriptions)), Definitions: w.Definitions,
		InFlight: w.InFlight, LapsedLastHour: w.Lapsed, ConnectedAt: w.ConnectedAt, LastSeenAt: w.LastSeenAt}
	if w.Transport != "" {
		out.Transport = &w.Transport
	}
	if w.Lapsed > 0 {
		out.LastLapsedAt = &w.LastLapsedAt
	}
	for i, s := range w.Subscriptions {
		out.Subscriptions[i] = subscriptionJSON{Definition: s.Definition, Revisions: s.Revisions, Fields: s.Fields}
	}
	if out.Definitions == nil {
		out.Definitions = []string{}
	}
	return out
}

// listWorkers lists the live workers, of one definition when the route
// names it (404 for an unknown definition).
func (a *API) listWorkers(perDefinition bool) http.Handler {
	return a.handleQuery(func(w http.ResponseWriter, r *http.Request) error {
		after, limit, err := httpjson.PageParams[*uuid.UUID](r)
		if err != nil {
			return err
		}
		f := engine.WorkerFilter{After: after, Limit: limit + 1}
		if perDefinition {
			key := chi.URLParam(r, "key")
			if _, err := a.eng.FindDefinition(r.Context(), key); err != nil {
				return err
			}
			f.Definition = key
		}
		workers, err := a.eng.ListWorkers(r.Context(), f)
		if err != nil {
			return err
		}
		httpjson.Encode(w, http.StatusOK, httpjson.NewPage(workers, limit, func(w engine.Worker) any { return w.ID }, toWorkerJSON))
		return nil
	})
}

// lapseJSON is a worker id that let locks lapse within the last hour.
type lapseJSON struct {
	Consumer       consumerRef `json:"consumer"`
	WorkerID       string      `json:"worker_id"`
	LapsedLastHour int         `json:"lapsed_last_hour"`
	LastLapsedAt   time.Time   `json:"last_lapsed_at"`
	Live           bool        `json:"live"`
}

// listLapses lists the worker ids that let locks lapse within the last
// hour, connected now or not (?definition= for one definition's): a worker
// that dies and restarts leaves the live list between its lives, or takes
// a new id each time, which the live list no longer shows.
func (a *API) listLapses() http.Handler {
	return a.handleQuery(func(w http.ResponseWriter, r *http.Request) error {
		after, limit, err := httpjson.PageParams[*engine.LapseCursor](r, "definition")
		if err != nil {
			return err
		}
		definition := r.URL.Query().Get("definition")
		if definition != "" {
			if _, err := a.eng.FindDefinition(r.Context(), definition); err != nil {
				return err
			}
		}
		rows, err := a.eng.ListLapses(r.Context(), definition, after, limit+1)
		if err != nil {
			return err
		}
		httpjson.Encode(w, http.StatusOK, httpjson.NewPage(rows, limit,
			func(l engine.WorkerLapses) any {
				return engine.LapseCursor{ConsumerID: l.ConsumerID, WorkerID: l.WorkerID}
			},
			func(l engine.WorkerLapses) lapseJSON {
				return lapseJSON{Consumer: consumerRef{ID: l.ConsumerID, Name: l.ConsumerName}, WorkerID: l.WorkerID,
					LapsedLastHour: l.Lapsed, LastLapsedAt: l.LastLapsedAt, Live: l.Live}
			}))
		return nil
	})
}
