package engine

import (
	"context"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/queries"
)

// ActionErase deletes an ended instance's data before retention would (a
// data subject's request to erase it). Not an action a filter applies:
// each instance is erased on its own, by an admin.
const ActionErase Action = "erase"

// Erasure is what erasing an instance deleted.
type Erasure struct {
	InstanceID  uuid.UUID
	Occurrences int64
	Attempts    int64
	// Applied is false when the instance had already been erased: Record
	// is then that erasure's audit record and nothing else changed.
	Applied bool
	Record  OperatorAction
}

// Erase deletes an ended instance (completed, failed or cancelled) with
// its occurrences, attempts and settle tokens, as retention would once
// its period passed, and records who erased it and why in the operator
// audit log, in one transaction. The audit records that name the instance
// stay (ids, staff names and reasons, never its values). A running or held
// instance is refused (409 instance_not_ended: stop it first). Erasing it
// again answers the first erasure (Applied false): a client whose answer
// was lost may ask again.
func (e *Engine) Erase(ctx context.Context, actor Actor, id uuid.UUID, reason string) (Erasure, error) {
	if err := checkReason(reason); err != nil {
		return Erasure{}, err
	}
	out := Erasure{InstanceID: id}
	err := e.tx(ctx, func(q *queries.Queries, _ pgx.Tx) error {
		row, err := q.InstanceLock(ctx, queries.InstanceLockParams{ID: id, Now: e.at()})
		if isNoRows(err) {
			return e.erasedBefore(ctx, q, id, &out)
		}
		if err != nil {
			return err
		}
		switch s := row.Instance.Status; s {
		case InstanceCompleted, InstanceFailed, InstanceCancelled:
		default:
			// An allow-list: a status added later is not erasable unsaid.
			return fault.New(fault.Conflict, "instance_not_ended", "instance %s is %s: only an ended instance can be erased; stop it first", id, s)
		}
		gone, err := q.InstanceErase(ctx, id)
		if err != nil {
			return err
		}
		out.Occurrences, out.Attempts, out.Applied = gone.Occurrences, gone.Attempts, true
		if err := q.OperatorActionInsert(ctx, queries.OperatorActionInsertParams{At: row.Now, ActorID: actor.tokenID(),
			ActorName: actor.Name, Action: string(ActionErase), Reason: strings.TrimSpace(reason), InstanceID: id}); err != nil {
			return err
		}
		return e.erasedBefore(ctx, q, id, &out)
	})
	if err != nil {
		return Erasure{}, wrap("erase instance", err)
	}
	if out.Applied {
		e.logger.Info("instance erased", "instance", id, "occurrences", out.Occurrences, "attempts", out.Attempts, "actor", actor.Name)
	}
	e.expireCounts()
	return out, nil
}

// erasedBefore reads the audit record of id's erasure into out: the
// instance is not there, and was erased when its newest record is an
// erasure; otherwise it is not found (never started, or deleted by
// retention: nothing is left to erase).
func (e *Engine) erasedBefore(ctx context.Context, q *queries.Queries, id uuid.UUID, out *Erasure) error {
	rec, erased, err := erasureRecord(ctx, q, id)
	if err != nil {
		return err
	}
	if !erased {
		return notKept("instance %s", id)
	}
	out.Record = rec
	return nil
}

// ErasureOf is the erasure recorded on instance id, if it was erased: a
// link to it outlives it (an alert, a bookmark), and its page can say who
// erased it rather than only that nothing is there.
func (e *Engine) ErasureOf(ctx context.Context, id uuid.UUID) (OperatorAction, bool, error) {
	rec, erased, err := erasureRecord(ctx, e.q, id)
	if err != nil {
		return OperatorAction{}, false, wrap("erasure of instance "+id.String(), err)
	}
	return rec, erased, nil
}

// erasureRecord is the audit record of id's erasure, when its newest
// operator action is one.
func erasureRecord(ctx context.Context, q *queries.Queries, id uuid.UUID) (OperatorAction, bool, error) {
	last, err := q.OperatorActionLatest(ctx, id)
	switch {
	case isNoRows(err):
		return OperatorAction{}, false, nil
	case err != nil:
		return OperatorAction{}, false, err
	case last.Action != string(ActionErase):
		return OperatorAction{}, false, nil
	}
	return OperatorAction{ID: last.ID, At: last.At, ActorName: last.ActorName, Action: last.Action, Reason: last.Reason,
		InstanceID: id, InstanceDeleted: true}, true, nil
}
