package worker

import (
	"context"
	"iter"
	"net/url"
	"strconv"
	"time"
)

// DeferredOccurrence is one of the consumer's deferred occurrences, as
// Deferred lists it: where it stands, never its inputs.
type DeferredOccurrence struct {
	ID          string     `json:"id"`
	Definition  string     `json:"definition"`
	Revision    int        `json:"revision"`
	InstanceID  string     `json:"instance_id"`
	Node        string     `json:"node"`
	Process     string     `json:"process"`
	BusinessKey *string    `json:"business_key"`
	WorkerID    string     `json:"worker_id"` // the worker that deferred it
	Attempt     int        `json:"attempt"`
	DeferredAt  time.Time  `json:"deferred_at"`
	DeferReason *string    `json:"defer_reason"`
	DeadlineAt  *time.Time `json:"deadline_at"` // nil without a deadline
}

// DeferredFilter narrows Deferred; zero fields do not filter.
type DeferredFilter struct {
	Definition string // one definition key
	WorkerID   string // the worker that deferred them
}

// deferredPageSize is how many occurrences one request of Deferred reads.
var deferredPageSize = 200

// Deferred lists the consumer's deferred occurrences not settled yet,
// newest occurrences first (by creation, not deferral), page after page
// as the loop asks for them: for a service that lost track of what it
// handed to people (it stopped between Defer and writing the id down) to
// settle them by id (CompleteDeferred, FailDeferred) or issue their front
// end a new token. Any worker of the
// consumer lists them all, whoever deferred them. A request that fails is
// retried as CompleteDeferred's are, until ctx ends; then, or on a
// refusal, the loop gets the error and stops.
func (w *Worker) Deferred(ctx context.Context, f DeferredFilter) iter.Seq2[DeferredOccurrence, error] {
	return func(yield func(DeferredOccurrence, error) bool) {
		cursor := ""
		for {
			q := url.Values{"limit": {strconv.Itoa(deferredPageSize)}}
			if f.Definition != "" {
				q.Set("definition", f.Definition)
			}
			if f.WorkerID != "" {
				q.Set("worker_id", f.WorkerID)
			}
			if cursor != "" {
				q.Set("cursor", cursor)
			}
			var page struct {
				Items      []DeferredOccurrence `json:"items"`
				NextCursor string               `json:"next_cursor"`
			}
			err := w.retried(ctx, "deferred", func(ctx context.Context) error {
				return w.get(ctx, "/api/v1/pull/deferred?"+q.Encode(), &page)
			})
			if err != nil {
				yield(DeferredOccurrence{}, err)
				return
			}
			for _, o := range page.Items {
				if !yield(o, nil) {
					return
				}
			}
			if page.NextCursor == "" {
				return
			}
			cursor = page.NextCursor
		}
	}
}
