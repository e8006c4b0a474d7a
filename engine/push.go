package engine

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/pgfault"
	"github.com/relais/relais/queries"
)

// PushSettleWindow is how long a replica keeps trying to record a push
// call's result while the database cannot take it (a restart, a failover).
const PushSettleWindow = 30 * time.Second

// PushGrace is added to a push call's budget to form its lock: a replica
// alive at the end of the budget settles the call itself, retrying through
// a database outage for PushSettleWindow; past the grace, the call is
// presumed orphaned by a crash and fails outcome_unknown. A grace shorter
// than the window let the timers, once the database was back, fail as
// orphaned a call whose live replica held its answer and was about to
// record it.
const PushGrace = PushSettleWindow + 5*time.Second

// CallBudget is how long a push call may take: the least of its node's
// timeout, its destination's max_timeout (nil: none known) and Relais's
// ceiling, RELAIS_PUSH_MAX_TIMEOUT (zero: none). A timeout of zero or less
// takes the others'. The push runner and the console, which shows the
// budget, read it here.
func CallBudget(timeout time.Duration, destCap *time.Duration, ceiling time.Duration) time.Duration {
	if destCap != nil && (timeout <= 0 || *destCap < timeout) {
		timeout = *destCap
	}
	if ceiling > 0 && (timeout <= 0 || ceiling < timeout) {
		timeout = ceiling
	}
	return timeout
}

// PushCall is a claimed push occurrence, ready to be delivered.
type PushCall struct {
	ID         uuid.UUID
	InstanceID uuid.UUID
	Definition string
	Revision   int
	Attempt    int
	Inputs     json.RawMessage // in clear: delivered to the destination
	DeadlineAt *time.Time
	// Timeout is the call's budget: the node's, capped by the destination's
	// current max_timeout.
	Timeout     time.Duration
	Destination string
	URL         string
	Headers     map[string]string
	// SigningSecret, when set, signs the call (Relais-Signature).
	SigningSecret string
	// Protected are the inputs' sensitive and secret values, for scrubbing
	// the destination's error messages.
	Protected []string
}

// PushReservation names a reserved push occurrence by its attempt.
type PushReservation struct {
	ID      uuid.UUID
	Attempt int
	// KeyMissing says this replica cannot open the call's values (sealed
	// with a data key it lacks, or it has none): handed back, the call is
	// made by a replica that has the key, and this one claims no more
	// for a while.
	KeyMissing bool
}

// ClaimPush reserves up to max push occurrences for this replica (workerID
// names it in attempts). The reservation is the record that a call is
// about to be made: it is never made twice. Calls the database's absence
// kept from being prepared (it went away after the claim's COMMIT) come
// back as unprepared: no request was sent, and the caller hands each back
// with HandBackPush once the database answers, rather than leave it for
// the timers to fail as outcome_unknown. So do calls whose values this
// replica cannot open for want of a data key (KeyMissing): failed
// push_unprepared, a payment would be refused for good for a replica's
// configuration (lifecycle QA: 28 orders during a key roll-out).
func (e *Engine) ClaimPush(ctx context.Context, workerID string, max int) (calls []PushCall, unprepared []PushReservation, err error) {
	rows, err := e.hot.OccurrenceClaimPush(ctx, queries.OccurrenceClaimPushParams{Now: e.at(), MaxTasks: int32(max), WorkerID: &workerID, Grace: PushGrace,
		Turn: int64(e.pushClaims.Add(1) % math.MaxInt32)})
	if err != nil {
		return nil, nil, wrap("claim push", err)
	}
	calls = make([]PushCall, 0, len(rows))
	for _, row := range rows {
		o := queries.Occurrence(row)
		c, err := e.pushCall(ctx, o)
		if err != nil && pgfault.Unreachable(err) {
			e.logger.Warn("push occurrence not prepared: the database is unavailable; it is handed back once the database answers", "occurrence", o.ID, "err", err)
			unprepared = append(unprepared, PushReservation{ID: o.ID, Attempt: int(o.Attempts)})
			continue
		}
		if err != nil && keyMissing(err) {
			e.logger.Error("push occurrence cannot be opened by this replica: sealed with a data key it lacks ("+sameKeys+"); handed back for a replica that has it, no attempt spent",
				"occurrence", o.ID, "err", err)
			unprepared = append(unprepared, PushReservation{ID: o.ID, Attempt: int(o.Attempts), KeyMissing: true})
			continue
		}
		if err != nil {
			// The reservation stands; fail it now rather than leave it for
			// outcome_unknown, since no call was made.
			e.logger.Error("push occurrence cannot be prepared", "occurrence", o.ID, "err", err)
			if _, serr := e.SettlePush(ctx, o.ID, int(o.Attempts), PushResult{ErrorCode: CodePushUnprepared, Message: "the call could not be prepared: " + errMessage(err)}); serr != nil {
				// Left reserved, the timer fails it as outcome_unknown
				// once its grace is over.
				e.logger.Error("push occurrence could not be failed as unprepared", "occurrence", o.ID, "err", serr)
			}
			continue
		}
		calls = append(calls, c)
	}
	return calls, unprepared, nil
}

// HandBackPush hands back a push reservation whose call was not made, its
// attempt given back: claimable again at once. One settled or stopped
// meanwhile is left as it is.
func (e *Engine) HandBackPush(ctx context.Context, res PushReservation) error {
	id, attempt := res.ID, res.Attempt
	return e.tx(ctx, func(q *queries.Queries, _ pgx.Tx) error {
		r, err := e.runForOccurrence(ctx, q, id)
		if err != nil {
			return err
		}
		row, err := q.OccurrenceLock(ctx, queries.OccurrenceLockParams{ID: id, Now: e.at()})
		if err != nil {
			return err
		}
		o := row.Occurrence
		if o.Status != StatusReserved || int(o.Attempts) != attempt {
			return nil // settled or stopped meanwhile
		}
		var out Settlement
		return r.release(o, OutcomeReleased, &out, nil)
	})
}

// The error codes Relais fails a push occurrence with (a destination's
// own answer is CodeDestinationHTTP and its status; the timers' are
// TimerCodes).
const (
	// CodePushUnprepared: the call could not be prepared (its inputs
	// could not be opened, its destination is gone); no call was made.
	CodePushUnprepared = "push_unprepared"
	// CodeDestinationHTTP prefixes the status of an answer that is no
	// 2xx: destination_http_503 (a redirect too: destination_http_302).
	CodeDestinationHTTP  = "destination_http_"
	CodeConnectionFailed = "connection_failed"
	CodeResponseTooLarge = "response_too_large"
	// CodeInvalidOutputs: the answer is no {"outputs"} object, or its
	// outputs violate the pinned revision (a pull worker's refused
	// outputs are answered with it too).
	CodeInvalidOutputs = "invalid_outputs"
	// CodeCallAborted ends a call whose instance was stopped: the
	// occurrence is cancelled, not failed, so none carries this code.
	CodeCallAborted = "call_aborted"
)

// CodeInvalidInputs fails, from birth, an occurrence whose inputs could
// not be built or break its revision; a retry cannot offer it again.
const CodeInvalidInputs = "invalid_inputs"

// FailureCodes are the error codes Relais itself fails occurrences with,
// besides CodeDestinationHTTP and a status (the README lists them).
var FailureCodes = []string{CodeInvalidInputs, CodeInvalidOutputs, CodePushUnprepared, CodeConnectionFailed, CodeResponseTooLarge,
	CodeDeadlineExceeded, CodeOutcomeUnknown, CodeAttemptsExhausted}

func errMessage(err error) string {
	if fe, ok := fault.As(err); ok {
		return fe.Detail
	}
	return "internal error (see logs)"
}

func (e *Engine) pushCall(ctx context.Context, o queries.Occurrence) (PushCall, error) {
	inputs, err := e.unseal(o.Inputs, o.SealedInputs, aadOccurrenceInputs(o.ID))
	if err != nil {
		return PushCall{}, err
	}
	rev, err := e.revision(ctx, e.q, o.DefinitionKey, int(o.Revision))
	if err != nil {
		return PushCall{}, err
	}
	if o.Destination == nil || o.Timeout == nil {
		return PushCall{}, errors.New("push occurrence without destination or timeout")
	}
	dest, err := e.destinationCall(ctx, e.q, *o.Destination)
	if err != nil {
		return PushCall{}, err
	}
	return PushCall{ID: o.ID, InstanceID: o.InstanceID, Definition: o.DefinitionKey, Revision: int(o.Revision), Attempt: int(o.Attempts),
		Inputs: inputs, DeadlineAt: o.DeadlineAt, Timeout: CallBudget(*o.Timeout, &dest.MaxTimeout, 0), Destination: *o.Destination, URL: dest.URL, Headers: dest.Headers,
		SigningSecret: dest.SigningSecret, Protected: rev.Working.Inputs.ProtectedStrings(inputs)}, nil
}

// PushResult is what a push call produced: outputs (the body's "outputs"),
// or an error code and message.
type PushResult struct {
	Outputs   json.RawMessage
	ErrorCode string
	Message   string
	// Took is how long the call took, for the log line of a call whose
	// outputs are refused here (every other failure is logged by the
	// runner, which has it at hand).
	Took time.Duration
}

// SettlePush records the result of a push call made for attempt. Valid
// outputs complete the node (route derived, instance advanced); anything
// else fails the occurrence with its code, and the process's error handling
// decides: there is no automatic retry. It returns the code the occurrence
// failed with: res.ErrorCode, or invalid_outputs when the outputs broke the
// pinned contract; "" when it completed. A result for an occurrence that
// is no longer in that attempt (cancelled, or failed by the timer) changes
// nothing and returns the refusal.
func (e *Engine) SettlePush(ctx context.Context, id uuid.UUID, attempt int, res PushResult) (string, error) {
	// rejected names the destination whose outputs broke the contract,
	// logged once the failure is committed (the runner logs the failures
	// it sees itself; this one only the contract reveals).
	rejected := ""
	err := e.tx(ctx, func(q *queries.Queries, _ pgx.Tx) error {
		r, err := e.runForOccurrence(ctx, q, id)
		if err != nil {
			return err
		}
		row, err := q.OccurrenceLock(ctx, queries.OccurrenceLockParams{ID: id, Now: e.at()})
		if err != nil {
			return err
		}
		o := row.Occurrence
		switch {
		case o.Status == StatusCancelled:
			return fault.New(fault.Conflict, "occurrence_cancelled", "occurrence %s was cancelled", id)
		case o.Status != StatusReserved || int(o.Attempts) != attempt:
			return fault.New(fault.Conflict, "already_settled", "occurrence %s is %s", id, o.Status)
		}
		if pastDeadline(o, r.now) {
			// As for a pull worker's late result: the deadline wins,
			// whether or not the timer got there first.
			res = PushResult{ErrorCode: CodeDeadlineExceeded, Message: "the call ended after the occurrence's deadline, " + o.DeadlineAt.UTC().Format(time.RFC3339Nano) + ": its result is not taken"}
			return r.fail(o, OutcomeExpired, res.ErrorCode, res.Message)
		}
		rev, err := e.revision(ctx, q, o.DefinitionKey, int(o.Revision))
		if err != nil {
			return err
		}
		if res.ErrorCode == CodePushUnprepared {
			// Relais's own words, which quote no value: scrubbing them
			// would open the inputs, which is what may have failed (a
			// key this replica does not have yet).
			return r.fail(o, OutcomeFailed, res.ErrorCode, scrubMessage(res.Message, nil))
		}
		if res.ErrorCode != "" {
			protected, err := e.protectedOf(ctx, q, o)
			if err != nil {
				return err
			}
			return r.fail(o, OutcomeFailed, res.ErrorCode, scrubMessage(res.Message, protected))
		}
		_, ov, err := e.Validators(rev)
		if err != nil {
			return err
		}
		if vs := ov.Validate(res.Outputs); len(vs) > 0 {
			rejected = deref(o.Destination)
			// The violations quote the destination's answer (its keys and
			// values), which may echo the inputs and may be any size: the
			// message is scrubbed and bounded like one the destination
			// wrote.
			protected, err := e.protectedOf(ctx, q, o)
			if err != nil {
				return err
			}
			return r.fail(o, OutcomeRejected, CodeInvalidOutputs, scrubMessage("the destination's outputs violate the pinned revision: "+describeViolations(protectedUndescribed(rev.Working.Outputs, vs)), protected))
		}
		outputs := ov.Integers(res.Outputs)
		route, err := rev.Working.Route(outputs)
		if err != nil {
			return err
		}
		return r.complete(o, rev, outputs, canonicalOutputs(outputs), route)
	})
	if err != nil {
		return "", wrap("settle push", err)
	}
	if rejected != "" {
		e.logger.Warn("push call failed", "occurrence", id, "destination", rejected, "code", CodeInvalidOutputs, "took", res.Took.Round(time.Millisecond))
		return CodeInvalidOutputs, nil
	}
	return res.ErrorCode, nil
}
