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
