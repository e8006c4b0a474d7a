package engine

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/queries"
)

// BatchSettlement is one item of a batch settlement: a completion (Outputs
// set) or a failure.
type BatchSettlement struct {
	Occurrence uuid.UUID
	Outputs    json.RawMessage // set: complete
	Failure    *Failure        // set: fail
}

// SettleResult is one item's outcome in a batch settlement.
type SettleResult struct {
	Settlement Settlement
	Err        error
}

// SettleBatch completes and fails many reservations of one worker in one
// transaction: one commit for them all (what a worker finishing many small
// tasks needs). Each item is settled exactly as Complete or Fail would,
// with the same refusals, under a savepoint of its own: a refused item
// changes nothing and the others stand. An occurrence may appear once.
// Only a failure of the database itself fails the whole batch.
func (e *Engine) SettleBatch(ctx context.Context, consumerID int64, workerID string, items []BatchSettlement) ([]SettleResult, error) {
	if len(items) > MaxBatch {
		return nil, BoundExceeded("items", MaxBatch)
	}
	out := make([]SettleResult, len(items))
	var errs []fault.FieldError
	seen := make(map[uuid.UUID]int, len(items))
	for i, it := range items {
		if j, dup := seen[it.Occurrence]; dup {
			errs = append(errs, fault.FieldError{Path: fmt.Sprintf("/items/%d/id", i), Message: fmt.Sprintf("occurrence %s is item %d already", it.Occurrence, j)})
		}
		seen[it.Occurrence] = i
		if (it.Outputs == nil) == (it.Failure == nil) {
			errs = append(errs, fault.FieldError{Path: fmt.Sprintf("/items/%d", i), Message: "must complete (outputs) or fail (error_code)"})
		}
	}
	if len(errs) > 0 {
		return nil, fault.New(fault.BadRequest, "invalid_request", "the batch is invalid: nothing was settled").WithErrors(errs)
	}
	for i, it := range items {
		if it.Failure != nil {
			out[i].Err = e.checkFailure(*it.Failure)
		}
	}
	err := e.tx(ctx, func(q *queries.Queries, tx pgx.Tx) error {
		for i, it := range items {
			if out[i].Err != nil {
				continue
			}
			ref := WorkerRef{ConsumerID: consumerID, WorkerID: workerID, Occurrence: it.Occurrence}
			err := pgx.BeginFunc(ctx, tx, func(sp pgx.Tx) error {
				var err error
				if it.Failure != nil {
					out[i].Settlement, err = e.failIn(ctx, q.WithTx(sp), ref, *it.Failure)
				} else {
					out[i].Settlement, err = e.completeIn(ctx, q.WithTx(sp), ref, it.Outputs)
				}
				return err
			})
			if err != nil {
				if _, ok := fault.As(err); !ok {
					return err
				}
				out[i] = SettleResult{Err: err}
			}
		}
		return nil
	})
	if err != nil {
		return nil, wrap("settle batch", err)
	}
	return out, nil
}
