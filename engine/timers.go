package engine

import (
	"context"
	"fmt"
	"github.com/relais/relais/internal/outage"
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
	pass, err := e.RunTimerPass(ctx)
	return pass.Settled, err
}

// TimerPass is what one timer pass found and did.
type TimerPass struct {
	// Due is how many occurrences were due (at most one batch); Settled
	// how many of them this pass settled (another replica may have taken
	// the others, or they changed meanwhile).
	Due, Settled int
	// Lag is how overdue the longest-overdue occurrence found was, by the
	// database clock: how late the timers run. Zero when nothing was due.
	Lag time.Duration
	// Took is how long the pass took.
	Took time.Duration
	// Failed counts what the pass failed, by error code (TimerCodes).
	Failed map[string]int
}

// The codes the timers fail occurrences with.
const (
	CodeDeadlineExceeded  = "deadline_exceeded"
	CodeOutcomeUnknown    = "outcome_unknown"
	CodeAttemptsExhausted = "attempts_exhausted"
)

// TimerCodes are the codes the timers fail occurrences with.
var TimerCodes = []string{CodeDeadlineExceeded, CodeOutcomeUnknown, CodeAttemptsExhausted}

// RunTimerPass is RunTimers, answering what the pass found: the oldest
// due first, one batch at most.
func (e *Engine) RunTimerPass(ctx context.Context) (TimerPass, error) {
	began := time.Now()
	due, err := e.q.OccurrenceDueForTimer(ctx, queries.OccurrenceDueForTimerParams{Now: e.at(), Max: timerBatch})
	if err != nil {
		return TimerPass{Took: time.Since(began)}, wrap("timers", err)
	}
	pass := TimerPass{Due: len(due), Failed: map[string]int{}}
	if len(due) > 0 {
		// The query answers the longest overdue first.
		pass.Lag = max(due[0].Overdue, 0)
	}
	for _, d := range due {
		if ctx.Err() != nil {
			break
		}
		code, err := e.settleDue(ctx, d.InstanceID, d.ID)
		if err != nil {
			e.logger.Error("timer settlement failed", "occurrence", d.ID, "err", err)
			continue
		}
		if code != "" {
			pass.Settled++
			pass.Failed[code]++
		}
	}
	pass.Took = time.Since(began)
	return pass, nil
}

// settleDue fails one due occurrence, answering the code it failed it
// with, or "" when it was not (another replica took it, or it changed).
func (e *Engine) settleDue(ctx context.Context, instanceID, id uuid.UUID) (string, error) {
	code := ""
	// orphaned names the destination of a push call failed outcome_unknown,
	// logged once that is committed: an operator asks the destination
	// whether the call took effect.
	orphaned := ""
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
		case pastDeadline(o, r.now):
			code = CodeDeadlineExceeded
			if o.Status == StatusReserved {
				// The holder learns at once (a worker stream, a push call in
				// flight), not at its next extension.
				if err := q.Notify(ctx, queries.NotifyParams{Channel: ChannelCancel, Payload: CancelPayload(o.ID, CancelDeadlineExceeded)}); err != nil {
					return err
				}
			}
			// An operator's retry starts the deadline again (push QA: the
			// message still said "after creation").
			from := "creation"
			if o.DeadlineAt != nil && o.Deadline != nil && o.DeadlineAt.Sub(o.CreatedAt) > derefDuration(o.Deadline)+time.Second {
				from = "the operator's retry at " + o.DeadlineAt.Add(-derefDuration(o.Deadline)).UTC().Format(time.RFC3339)
			}
			msg := fmt.Sprintf("the deadline (%s after %s) passed", formatDuration(derefDuration(o.Deadline)), from)
			if o.Status == StatusAvailable && deref(o.ErrorCode) != "" {
				// A retry was waiting: the worker's own code is said, which
				// deadline_exceeded replaces (Temporal QA: GATEWAY_DOWN
				// was left in the attempts alone).
				msg += "; its last attempt had failed " + *o.ErrorCode
				if o.DeadlineAt != nil && o.AvailableAt.After(*o.DeadlineAt) {
					msg += ", its retry due only after the deadline"
				}
			}
			return r.fail(o, OutcomeExpired, code, msg)
		case lockGone && o.Mode == ModePush:
			code = CodeOutcomeUnknown
			orphaned = deref(o.Destination)
			return r.fail(o, OutcomeFailed, code,
				"the replica that reserved the call recorded no answer within its budget and grace (it stopped, or could not reach the database): the call may have been made, and is not repeated")
		case lockGone && attemptsLeft(o) == 0:
			code = CodeAttemptsExhausted
			how := "its lock expired"
			a, err := q.AttemptEnding(ctx, queries.AttemptEndingParams{OccurrenceID: o.ID, Number: o.Attempts})
			switch {
			case err != nil && !isNoRows(err):
				return err
			case err == nil && a.Outcome != nil && *a.Outcome == OutcomeDisconnected:
				// Ended by its stream, not by the clock (QA); its stream
				// counted the lapse.
				how = "the worker stream holding it ended (its worker left, or was dropped after three heartbeats went unacknowledged)"
			case err == nil && a.Outcome == nil && o.ConsumerID != nil && o.WorkerID != nil:
				// No claim takes this lock back to count its lapse.
				if err := q.WorkerLapseRecord(ctx, queries.WorkerLapseRecordParams{OccurrenceID: o.ID, Attempt: o.Attempts,
					ConsumerID: *o.ConsumerID, WorkerID: *o.WorkerID, DefinitionKey: o.DefinitionKey, LapsedAt: *o.LockExpiresAt}); err != nil {
					return err
				}
			}
			// Counted as the policy box reads (max_attempts), what was
			// given back apart: "4 of the 4 allowed" under a policy of 3
			// read as a miscount (Camunda QA).
			which := fmt.Sprintf("attempt %d of max_attempts %d", o.Attempts, o.MaxAttempts)
			// The credit is net of what workers gave up: "attempt 3 of
			// max_attempts 3" after an unlock and a lowered budget read
			// as three runs spent (Camunda QA).
			switch given := o.AttemptCredit + o.AttemptsWaived; {
			case o.AttemptsWaived > 0:
				which = fmt.Sprintf("attempt %d: max_attempts %d, plus %d given back (handed back unfinished, or an operator's retry), less %d its worker gave up (a failure lowering the attempts left)",
					o.Attempts, o.MaxAttempts, given, o.AttemptsWaived)
			case given > 0:
				which = fmt.Sprintf("attempt %d: max_attempts %d, plus %d given back (handed back unfinished, or an operator's retry)", o.Attempts, o.MaxAttempts, given)
			}
			return r.fail(o, OutcomeExpired, code, fmt.Sprintf("the last attempt (%s) ended: %s", which, how))
		}
		return nil
	})
	if err == nil && orphaned != "" {
		e.logger.Warn("push outcome unknown: the replica that reserved the call recorded no answer (it stopped, or could not reach the database); the call is not repeated",
			"occurrence", id, "destination", orphaned, "instance", instanceID)
	}
	if err != nil {
		return "", wrap("settle due occurrence", err)
	}
	return code, nil
}

func derefDuration(d *time.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return *d
}

// RunTimerLoop runs RunTimers every interval until ctx ends, and sooner when
// a pass found a full batch (a backlog). observe, when not nil, is told of
// every pass that could read what was due (for metrics).
func (e *Engine) RunTimerLoop(ctx context.Context, interval time.Duration, observe func(TimerPass)) {
	t := time.NewTimer(interval)
	defer t.Stop()
	passes, prunes := outage.New(e.logger, "timer pass"), outage.New(e.logger, "worker catalog pruning")
	chores := outage.New(e.logger, "housekeeping (worker lapses, console sessions)")
	var lastChores time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pass, err := e.RunTimerPass(ctx)
		switch {
		case err == nil:
			passes.Succeeded()
		case ctx.Err() == nil:
			passes.Failed(err)
		}
		if err == nil && observe != nil {
			observe(pass)
		}
		switch _, err := e.PruneWorkers(ctx); {
		case err == nil:
			prunes.Succeeded()
		case ctx.Err() == nil:
			prunes.Failed(err)
		}
		if time.Since(lastChores) >= housekeepEvery {
			switch err := e.Housekeep(ctx); {
			case err == nil:
				lastChores = time.Now()
				chores.Succeeded()
			case ctx.Err() == nil:
				chores.Failed(err)
			}
		}
		next := interval
		if pass.Settled >= timerBatch {
			next = 0
		}
		t.Reset(next)
	}
}

// housekeepEvery bounds how often a replica's timer loop runs Housekeep.
const housekeepEvery = time.Minute

// housekeepBatch bounds the worker lapses one Housekeep deletes: a replica
// that died holding thousands of locks leaves as many rows, forgotten over
// a few passes (the catalog counts only those within LapseWindow).
const housekeepBatch = 1000

// Housekeep forgets what outlived its use: the worker catalog's lapses
// older than LapseWindow, and the console sessions expired now. Any
// replica may run it, at any time.
func (e *Engine) Housekeep(ctx context.Context) error {
	now := e.Now()
	if _, err := e.q.WorkerLapsesPrune(ctx, queries.WorkerLapsesPruneParams{Before: now.Add(-LapseWindow), Max: housekeepBatch}); err != nil {
		return wrap("prune worker lapses", err)
	}
	_, err := e.q.ConsoleSessionsPurge(ctx, now)
	return wrap("purge console sessions", err)
}
