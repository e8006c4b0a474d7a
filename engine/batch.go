package engine

import (
	"context"
	"encoding/json"
	"errors"
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
	// Attempt is the attempt the item names (0: none; see WorkerRef).
	Attempt int32
}

// SettleResult is one item's outcome in a batch settlement.
type SettleResult struct {
	Settlement Settlement
	Err        error
}

// SettleBatch completes and fails many reservations of one worker in one
// transaction: one commit for them all (what a worker finishing many small
// tasks needs). Each item is settled exactly as Complete or Fail would,
// with the same refusals, on its own (see applyEach): a refused item
// changes nothing and the others stand. An occurrence may appear once.
// Only a failure of the database itself fails the whole batch.
func (e *Engine) SettleBatch(ctx context.Context, consumerID int64, workerID string, items []BatchSettlement) ([]SettleResult, error) {
	if len(items) > MaxBatch {
		return nil, BoundExceeded("items", MaxBatch)
	}
	out := make([]SettleResult, len(items))
	if errs := CheckSettlements(items); len(errs) > 0 {
		return nil, fault.New(fault.BadRequest, "invalid_request", "the batch is invalid: nothing was settled").WithErrors(errs)
	}
	for i, it := range items {
		if it.Failure != nil {
			out[i].Err = e.checkFailure(*it.Failure)
		}
	}
	checked := make([]bool, len(items))
	for i := range items {
		checked[i] = out[i].Err != nil
	}
	prelock := make([]uuid.UUID, 0, len(items))
	for i, it := range items {
		if !checked[i] {
			prelock = append(prelock, it.Occurrence)
		}
	}
	refusals, err := e.applyEach(ctx, len(items), func(i int) bool { return checked[i] }, prelock, func(ctx context.Context, q *queries.Queries, i int) error {
		it := items[i]
		ref := WorkerRef{ConsumerID: consumerID, WorkerID: workerID, Occurrence: it.Occurrence, Attempt: it.Attempt}
		var err error
		if it.Failure != nil {
			out[i].Settlement, err = e.failIn(ctx, q, ref, *it.Failure)
		} else {
			out[i].Settlement, err = e.completeIn(ctx, q, ref, it.Outputs)
		}
		return err
	}, nil)
	if err != nil {
		return nil, wrap("settle batch", err)
	}
	for i, r := range refusals {
		if r != nil {
			out[i] = SettleResult{Err: r}
		}
	}
	for i, r := range out {
		if r.Err != nil {
			e.NoteRefusedReport(ctx, WorkerRef{ConsumerID: consumerID, WorkerID: workerID, Occurrence: items[i].Occurrence, Attempt: items[i].Attempt}, r.Err)
		}
	}
	return out, nil
}

// CheckSettlements reports what makes a batch of settlements malformed,
// each problem at its pointer: an item that neither completes nor fails,
// or does both, and an occurrence given twice. A route adds these to the
// problems it found reading the body, so that one answer names them all.
func CheckSettlements(items []BatchSettlement) []fault.FieldError {
	var errs []fault.FieldError
	seen := make(map[uuid.UUID]int, len(items))
	for i, it := range items {
		switch {
		case it.Outputs == nil && it.Failure == nil:
			errs = append(errs, fault.FieldError{Path: fmt.Sprintf("/items/%d", i), Message: "must either complete (outputs) or fail (error_code)"})
		case it.Outputs != nil && it.Failure != nil:
			errs = append(errs, fault.FieldError{Path: fmt.Sprintf("/items/%d", i), Message: "gives both outputs and error_code: an item completes or fails, not both"})
		}
		if j, dup := seen[it.Occurrence]; dup {
			errs = append(errs, fault.FieldError{Path: fmt.Sprintf("/items/%d/id", i), Message: fmt.Sprintf("occurrence %s is item %d already", it.Occurrence, j)})
		} else {
			seen[it.Occurrence] = i
		}
	}
	return errs
}

// errBatchRefusal aborts a batch's fast path when one item is refused.
var errBatchRefusal = errors.New("an item of the batch was refused")

// applyEach applies apply to items 0..n-1 in one transaction: one commit for
// them all. It first runs them all without savepoints, the common case
// where every item is accepted; when one is refused (a fault), that
// transaction is rolled back and every item runs again under a savepoint
// of its own, so a refused item changes nothing and the others stand.
// skip(i) leaves out items already answered. finish, when set, runs last
// in the transaction that commits, told the refusals. It returns each
// item's refusal; an error that is not a refusal fails the whole batch.
func (e *Engine) applyEach(ctx context.Context, n int, skip func(i int) bool, prelock []uuid.UUID, apply func(ctx context.Context, q *queries.Queries, i int) error, finish func(ctx context.Context, q *queries.Queries, refusals []error) error) ([]error, error) {
	refusals := make([]error, n)
	err := e.stateTx(ctx, prelock, func(ctx context.Context, q *queries.Queries, _ pgx.Tx) error {
		for i := range n {
			if skip(i) {
				continue
			}
			if err := apply(ctx, q, i); err != nil {
				if _, refused := fault.As(err); refused {
					return errBatchRefusal
				}
				return err
			}
		}
		if finish != nil {
			return finish(ctx, q, refusals)
		}
		return nil
	})
	if !errors.Is(err, errBatchRefusal) {
		return refusals, err
	}
	err = e.stateTx(ctx, prelock, func(ctx context.Context, q *queries.Queries, tx pgx.Tx) error {
		for i := range n {
			if skip(i) {
				continue
			}
			err := pgx.BeginFunc(ctx, tx, func(sp pgx.Tx) error { return apply(ctx, q.WithTx(sp), i) })
			if err != nil {
				if _, refused := fault.As(err); !refused {
					return err
				}
				refusals[i] = err
			}
		}
		if finish != nil {
			return finish(ctx, q, refusals)
		}
		return nil
	})
	return refusals, err
}
