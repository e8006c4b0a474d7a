package pull

import (
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/auth"
	"github.com/relais/relais/internal/httpjson"
)

// deferredJSON is one deferred occurrence as its consumer lists it: where
// it stands and what it belongs to, never its values (the worker that
// deferred it had them; a list reads none).
type deferredJSON struct {
	ID          uuid.UUID  `json:"id"`
	Definition  string     `json:"definition"`
	Revision    int        `json:"revision"`
	InstanceID  uuid.UUID  `json:"instance_id"`
	Node        string     `json:"node"`
	ProcessKey  string     `json:"process"`
	BusinessKey *string    `json:"business_key"`
	WorkerID    *string    `json:"worker_id"`
	Attempt     int        `json:"attempt"`
	DeferredAt  *time.Time `json:"deferred_at"`
	DeferReason *string    `json:"defer_reason"`
	DeadlineAt  *time.Time `json:"deadline_at"`
}

// listDeferred lists the caller's deferred occurrences, newest first: a
// back end that lost the ids it handed to people (a crash between defer
// and its own write, a restored database) finds them again here, where
// only operators could.
func (p *Protocol) listDeferred(w http.ResponseWriter, r *http.Request) error {
	before, limit, err := httpjson.PageParams[*uuid.UUID](r, "definition", "worker_id")
	if err != nil {
		return err
	}
	pr, _ := auth.FromContext(r.Context())
	q := r.URL.Query()
	occs, err := p.eng.ListDeferred(r.Context(), pr.ConsumerID, engine.DeferredFilter{Definition: q.Get("definition"), WorkerID: q.Get("worker_id"),
		Before: before, Limit: limit + 1})
	if err != nil {
		return err
	}
	httpjson.Encode(w, http.StatusOK, httpjson.NewPage(occs, limit, func(o engine.Occurrence) any { return o.ID }, func(o engine.Occurrence) deferredJSON {
		return deferredJSON{ID: o.ID, Definition: o.Definition, Revision: o.Revision, InstanceID: o.InstanceID, Node: o.Node, ProcessKey: o.ProcessKey,
			BusinessKey: o.BusinessKey, WorkerID: o.WorkerID, Attempt: o.Attempts, DeferredAt: o.DeferredAt, DeferReason: o.DeferReason, DeadlineAt: o.DeadlineAt}
	}))
	return nil
}
