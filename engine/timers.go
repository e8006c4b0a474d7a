package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/relais/relais/queries"
)

// timerBatch bounds one timer pass so a backlog is worked through in
// several short transactions rather than one long one.
const timerBatch = 100

// RunTimers settles what only time moves forward: occurrences past their
// deadline (deadline_exceeded), pull occurrences whose last attempt's lock
// expired (attempts_exhausted), and push calls whose replica died in flight
// (outcome_unknown: the destination is never called again). Any replica may
// run it: each occurrence is taken with SKIP LOCKED and re-checked under its
// locks, so it is settled exactly once. It returns how many it settled.
func (e *Engine) RunTimers(ctx context.Context) (int, error) {
	due, err := e.q.OccurrenceDueForTimer(ctx, queries.OccurrenceDueForTimerParams{Now: e.at(), Max: timerBatch})
	if err != nil {
		return 0, wrap("timers", err)
	}
	settled := 0
	for _, d := range due {
		if ctx.Err() != nil {
			break
		}
		done, err := e.settleDue(ctx, d.InstanceID, d.ID)
		if err != nil {
			e.logger.Error("timer settlement failed", "occurrence", d.ID, "err", err)
			continue
		}
		if done {
			settled++
		}
	}
	return settled, nil
}

func (e *Engine) settleDue(ctx context.Context, instanceID, id uuid.UUID) (bool, error) {
	done := false
	err := e.tx(ctx, func(q *queries.Queries, _ pgx.Tx) error {
		r, ok, err := e.runFor(ctx, q, instanceID, true)
		if err != nil || !ok {
			return err
		}
		o, err := q.OccurrenceLockSkipLocked(ctx, id)
		if isNoRows(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if o.Status != StatusAvailable && o.Status != StatusReserved && o.Status != StatusDeferred {
			return nil
		}
		lockGone := o.Status == StatusReserved && o.LockExpiresAt != nil && !o.LockExpiresAt.After(r.now)
		switch {
		case o.DeadlineAt != nil && !o.DeadlineAt.After(r.now):
			done = true
			if o.Status == StatusReserved {
				// The holder learns at once (a worker stream, a push call in
				// flight), not at its next extension.
				if err := q.Notify(ctx, queries.NotifyParams{Channel: ChannelCancel, Payload: CancelPayload(o.ID, CancelDeadlineExceeded)}); err != nil {
					return err
				}
			}
			return r.fail(o, OutcomeExpired, "deadline_exceeded",
				fmt.Sprintf("the deadline (%s after creation) passed", formatDuration(derefDuration(o.Deadline))))
		case lockGone && o.Mode == ModePush:
			done = true
			return r.fail(o, OutcomeFailed, "outcome_unknown",
				"the replica calling the destination stopped before the answer; the call is not repeated")
		case lockGone && attemptsLeft(o) == 0:
			done = true
			return r.fail(o, OutcomeExpired, "attempts_exhausted",
				fmt.Sprintf("the lock of the last attempt (%d of %d) expired", o.Attempts, o.MaxAttempts))
		}
		return nil
	})
	return done, wrap("settle due occurrence", err)
}

func derefDuration(d *time.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return *d
}

// RunTimerLoop runs RunTimers every interval until ctx ends, and sooner when
// a pass found a full batch (a backlog).
func (e *Engine) RunTimerLoop(ctx context.Context, interval time.Duration) {
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := e.RunTimers(ctx)
		if err != nil && ctx.Err() == nil {
			e.logger.Warn("timer pass failed", "err", err)
		}
		if _, err := e.PruneWorkers(ctx); err != nil && ctx.Err() == nil {
			e.logger.Warn("worker catalog pruning failed", "err", err)
		}
		next := interval
		if n >= timerBatch {
			next = 0
		}
		t.Reset(next)
	}
}
