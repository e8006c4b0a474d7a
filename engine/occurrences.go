package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/relais/relais/queries"
)

// Occurrence is an observation of one occurrence: its inputs and outputs are
// masked by the pinned revision's classification (sensitive and secret
// values never appear).
type Occurrence struct {
	ID            uuid.UUID
	InstanceID    uuid.UUID
	Node          string
	Definition    string
	Revision      int
	Mode          string
	Status        string
	Policy        Policy
	Destination   *string
	Timeout       *time.Duration
	Attempts      int
	ConsumerID    *int64
	ConsumerName  string // of ConsumerID, when it still exists
	WorkerID      *string
	CreatedAt     time.Time
	AvailableAt   time.Time
	ReservedAt    *time.Time
	LockExpiresAt *time.Time
	SettledAt     *time.Time
	DeadlineAt    *time.Time
	Route         *string
	ErrorCode     *string
	ErrorMessage  *string
	// AttemptsLeft is what the budget still allows: max_attempts, plus
	// attempts given back by releases, less those a worker gave up.
	AttemptsLeft int
	DeferredAt   *time.Time
	DeferReason  *string
	// ProcessKey, ProcessVersion and BusinessKey are the instance's,
	// copied onto the occurrence when it was created (empty or 0 for
	// occurrences older than the copies).
	ProcessKey     string
	ProcessVersion int
	BusinessKey    *string
	Inputs         json.RawMessage
	Outputs        json.RawMessage // nil until completed
	AttemptList    []Attempt       // filled by GetOccurrence only
}

// Policy is the execution policy frozen on an occurrence.
type Policy struct {
	MaxAttempts int
	RetryDelay  time.Duration
	// RetryBackoff multiplies RetryDelay after each failure (1: fixed).
	RetryBackoff float64
	// MaxRetryDelay caps a growing delay; nil means Relais's ceiling.
	MaxRetryDelay *time.Duration
	Deadline      *time.Duration
	Priority      int
}

// Attempt is one reservation of an occurrence.
type Attempt struct {
	Number        int
	ConsumerID    *int64
	ConsumerName  *string
	WorkerID      *string
	ReservedAt    time.Time
	LockExpiresAt *time.Time
	EndedAt       *time.Time
	Outcome       *string
	ErrorCode     *string
	ErrorMessage  *string
	// SettledBy is the worker id that settled a deferred attempt (see
	// WorkerRef.SettleToken for SettledWithToken); nil otherwise.
	SettledBy        *string
	SettledWithToken bool
	// Refused counts the reports of the attempt Relais refused (see
	// NoteRefusedReport); the last one's code, pointers and time.
	Refused         int
	RefusedAt       *time.Time
	RefusalCode     *string
	RefusalPointers []string
}

// observed is an occurrence row as an observation statement read it: with
// whether its lock lapsed (relais_lock_lapsed, the one definition of it).
// A lapsed occurrence stays stored as reserved until a claim takes it (no
// sweeper), but it is available again (DESIGN §3), and observers see it so.
type observed struct {
	row    queries.Occurrence
	lapsed bool
}

// occurrenceFromRow makes the observation of o.
func (e *Engine) occurrenceFromRow(ctx context.Context, x observed) (Occurrence, error) {
	rev, err := e.revision(ctx, e.q, x.row.DefinitionKey, int(x.row.Revision))
	if err != nil {
		return Occurrence{}, fmt.Errorf("occurrence %s: revision %s/%d: %w", x.row.ID, x.row.DefinitionKey, x.row.Revision, err)
	}
	return occurrenceOf(x, rev), nil
}

// occurrenceOf is x as observers see it, its inputs and outputs masked by
// the contracts of rev, its revision. It reads nothing, so it cannot fail:
// callers look the revision up (cached) and report when they cannot.
func occurrenceOf(x observed, rev *Revision) Occurrence {
	o := x.row
	if x.lapsed {
		o.Status, o.AvailableAt = StatusAvailable, *o.LockExpiresAt
	}
	out := Occurrence{ID: o.ID, InstanceID: o.InstanceID, Node: o.Node, Definition: o.DefinitionKey, Revision: int(o.Revision),
		Mode: o.Mode, Status: o.Status, Destination: o.Destination, Timeout: o.Timeout, Attempts: int(o.Attempts),
		ConsumerID: o.ConsumerID, WorkerID: o.WorkerID, CreatedAt: o.CreatedAt, AvailableAt: o.AvailableAt, ReservedAt: o.ReservedAt,
		LockExpiresAt: o.LockExpiresAt, SettledAt: o.SettledAt, DeadlineAt: o.DeadlineAt, Route: o.Route, ErrorCode: o.ErrorCode,
		ErrorMessage: o.ErrorMessage, AttemptsLeft: attemptsLeft(o), DeferredAt: o.DeferredAt, DeferReason: o.DeferReason,
		Policy: Policy{MaxAttempts: int(o.MaxAttempts), RetryDelay: o.RetryDelay, RetryBackoff: o.RetryBackoff, MaxRetryDelay: o.MaxRetryDelay,
			Deadline: o.Deadline, Priority: int(o.Priority)},
		Inputs: json.RawMessage("{}"), ProcessKey: deref(o.ProcessKey), BusinessKey: o.BusinessKey,
	}
	if o.ProcessVersion != nil {
		out.ProcessVersion = int(*o.ProcessVersion)
	}
	if o.Inputs == nil && o.SealedInputs == nil {
		// Read from occurrence_heads (a list): no values. A stored
		// occurrence always has inputs, {} at least.
		out.Inputs = nil
		return out
	}
	out.Inputs = rev.Working.Inputs.Mask(o.Inputs)
	if o.Outputs != nil {
		out.Outputs = rev.Working.Outputs.Mask(o.Outputs)
	}
	return out
}

// observations makes the observations of rows, naming their consumers with
// one query for them all.
func (e *Engine) observations(ctx context.Context, rows []observed) ([]Occurrence, error) {
	out := make([]Occurrence, len(rows))
	var ids []int64
	for i, r := range rows {
		var err error
		if out[i], err = e.occurrenceFromRow(ctx, r); err != nil {
			return nil, wrap("observe occurrences", err)
		}
		if id := r.row.ConsumerID; id != nil && !slices.Contains(ids, *id) {
			ids = append(ids, *id)
		}
	}
	if len(ids) == 0 {
		return out, nil
	}
	named, err := e.q.ConsumerNames(ctx, ids)
	if err != nil {
		return nil, wrap("consumer names", err)
	}
	names := make(map[int64]string, len(named))
	for _, n := range named {
		names[n.ID] = n.Name
	}
	for i := range out {
		if out[i].ConsumerID != nil {
			out[i].ConsumerName = names[*out[i].ConsumerID]
		}
	}
	return out, nil
}

// GetOccurrence returns one occurrence (masked) with every attempt.
func (e *Engine) GetOccurrence(ctx context.Context, id uuid.UUID) (Occurrence, error) {
	x, err := e.q.OccurrenceObserve(ctx, queries.OccurrenceObserveParams{ID: id, Now: e.at()})
	if isNoRows(err) {
		return Occurrence{}, notKept("occurrence %s", id)
	}
	if err != nil {
		return Occurrence{}, wrap("get occurrence", err)
	}
	row, lapsed := x.Occurrence, x.Lapsed
	one, err := e.observations(ctx, []observed{{row, lapsed}})
	if err != nil {
		return Occurrence{}, err
	}
	o := one[0]
	attempts, err := e.q.AttemptListByOccurrence(ctx, id)
	if err != nil {
		return Occurrence{}, wrap("list attempts", err)
	}
	o.AttemptList = make([]Attempt, len(attempts))
	for i, a := range attempts {
		o.AttemptList[i] = Attempt{Number: int(a.Number), ConsumerID: a.ConsumerID, ConsumerName: a.ConsumerName, WorkerID: a.WorkerID,
			ReservedAt: a.ReservedAt, LockExpiresAt: a.LockExpiresAt, EndedAt: a.EndedAt, Outcome: a.Outcome,
			ErrorCode: a.ErrorCode, ErrorMessage: a.ErrorMessage, SettledBy: a.SettledBy, SettledWithToken: a.SettledWithToken,
			Refused: int(a.Refusals), RefusedAt: a.RefusedAt, RefusalCode: a.RefusalCode, RefusalPointers: a.RefusalPointers}
		if lapsed && a.Number == row.Attempts && a.EndedAt == nil {
			// What the next claim records: the attempt expired with its lock.
			expired := OutcomeExpired
			o.AttemptList[i].Outcome, o.AttemptList[i].EndedAt = &expired, a.LockExpiresAt
		}
	}
	return o, nil
}

// OccurrenceFilter selects occurrences; zero fields do not filter.
type OccurrenceFilter struct {
	Definition string
	Status     string
	Instance   *uuid.UUID
	Revision   int
	ConsumerID int64
	// Destination keeps the push occurrences calling it.
	Destination string
	// WaitingRetry, when set, keeps the occurrences waiting out a retry
	// delay (true: an attempt failed, attempts are left, available later;
	// with a status, it must be available) or those that do not (false).
	WaitingRetry *bool
	// Triage filters: the instance's process and business key, the error
	// code, and creation and settlement windows [after, before).
	ProcessKey    string
	BusinessKey   string
	ErrorCode     string
	CreatedAfter  *time.Time
	CreatedBefore *time.Time
	SettledAfter  *time.Time
	SettledBefore *time.Time
	Before        *uuid.UUID // keyset cursor: ids below it (newest first)
	// After, when set (and Before is not), asks for the page just above
	// it: the Limit oldest ids greater than After, still returned newest
	// first. It is how a list goes back a page.
	After *uuid.UUID
	Limit int
}

// ListOccurrences returns occurrences newest first, without their inputs
// and outputs (both nil): GetOccurrence has them.
func (e *Engine) ListOccurrences(ctx context.Context, f OccurrenceFilter) ([]Occurrence, error) {
	p := queries.OccurrenceListParams{DefinitionKey: strPtr(f.Definition), Status: strPtr(f.Status), InstanceID: f.Instance,
		Before: f.Before, Max: int32(f.Limit), Now: e.at(),
		ProcessKey: strPtr(f.ProcessKey), BusinessKey: strPtr(f.BusinessKey), ErrorCode: strPtr(f.ErrorCode),
		CreatedFrom: idFrom(f.CreatedAfter), CreatedTo: idTo(f.CreatedBefore), CreatedAfter: f.CreatedAfter, CreatedBefore: f.CreatedBefore, SettledAfter: f.SettledAfter, SettledBefore: f.SettledBefore,
		Destination: strPtr(f.Destination), WaitingRetry: f.WaitingRetry}
	if f.WaitingRetry != nil && *f.WaitingRetry {
		// Their status's index range.
		p.Status = strPtr(StatusAvailable)
	}
	if f.Revision > 0 {
		r := int32(f.Revision)
		p.Revision = &r
	}
	if f.ConsumerID > 0 {
		p.ConsumerID = &f.ConsumerID
	}
	var xs []observed
	if f.After != nil && f.Before == nil {
		rows, err := e.q.OccurrenceListAfter(ctx, queries.OccurrenceListAfterParams{Now: p.Now, DefinitionKey: p.DefinitionKey,
			Status: p.Status, InstanceID: p.InstanceID, Revision: p.Revision, ProcessKey: p.ProcessKey, BusinessKey: p.BusinessKey,
			ErrorCode: p.ErrorCode, CreatedFrom: p.CreatedFrom, CreatedTo: p.CreatedTo, CreatedAfter: p.CreatedAfter,
			CreatedBefore: p.CreatedBefore, SettledAfter: p.SettledAfter,
			SettledBefore: p.SettledBefore, ConsumerID: p.ConsumerID, Destination: p.Destination, WaitingRetry: p.WaitingRetry, After: *f.After, Max: p.Max})
		if err != nil {
			return nil, wrap("list occurrences", err)
		}
		xs = make([]observed, len(rows))
		for i, r := range rows {
			// Ascending from the cursor: reversed, newest first.
			xs[len(rows)-1-i] = observed{queries.Occurrence(r.OccurrenceHead), r.Lapsed}
		}
	} else {
		rows, err := e.q.OccurrenceList(ctx, p)
		if err != nil {
			return nil, wrap("list occurrences", err)
		}
		xs = make([]observed, len(rows))
		for i, r := range rows {
			xs[i] = observed{queries.Occurrence(r.OccurrenceHead), r.Lapsed}
		}
	}
	return e.observations(ctx, xs)
}

// InstanceOccurrences returns an instance's occurrences in the order the
// instance reached their nodes: its path, without their inputs and
// outputs (both nil).
func (e *Engine) InstanceOccurrences(ctx context.Context, id uuid.UUID) ([]Occurrence, error) {
	rows, err := e.q.OccurrenceObserveByInstance(ctx, queries.OccurrenceObserveByInstanceParams{InstanceID: id, Now: e.at()})
	if err != nil {
		return nil, wrap("instance occurrences", err)
	}
	xs := make([]observed, len(rows))
	for i, r := range rows {
		xs[i] = observed{queries.Occurrence(r.OccurrenceHead), r.Lapsed}
	}
	return e.observations(ctx, xs)
}

// HoldingInstance returns, of the given occurrences, the failed ones their
// instance is held at (an incident): its latest failure while it is held.
// An earlier failure the instance went past along an error path is not
// one, though its instance may be held elsewhere now.
func (e *Engine) HoldingInstance(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]bool, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	held, err := e.q.OccurrencesHoldingInstance(ctx, ids)
	if err != nil {
		return nil, wrap("occurrences holding their instance", err)
	}
	out := make(map[uuid.UUID]bool, len(held))
	for _, id := range held {
		out[id] = true
	}
	return out, nil
}
