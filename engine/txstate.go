package engine

import (
	"context"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/relais/relais/queries"
)

// txState is what one transaction carrying many writes (a batch, a group)
// reads once for all of them instead of a round trip each: its clock, and
// the instances and occurrences its settlements will lock, locked up front
// in one statement. A row locked up front is handed to the first write
// that asks for it only: a later write may follow a change an earlier one
// made, so it reads the row again (the lock is already this transaction's).
type txState struct {
	clock *time.Time
	// locked are the rows locked up front, by occurrence, until handed
	// out; handed are the instances handed out already.
	locked map[uuid.UUID]queries.SettlementLockRow
	handed map[uuid.UUID]bool
	// tx is the transaction, which says whether BEGIN has left.
	tx *pipeTx
}

type txStateKey struct{}

// txStateOf is the state of the transaction ctx runs in, or nil.
func txStateOf(ctx context.Context) *txState {
	st, _ := ctx.Value(txStateKey{}).(*txState)
	return st
}

// stateTx runs fn in one transaction whose state (see txState) fn's
// context carries, once the instances then the occurrences of prelock are
// locked, each in id order: two such transactions never deadlock on each
// other, and each takes the locks a settlement takes, in the same order.
func (e *Engine) stateTx(ctx context.Context, prelock []uuid.UUID, fn func(ctx context.Context, q *queries.Queries, tx pgx.Tx) error) error {
	return e.inTx(ctx, true, func(tx pgx.Tx) error {
		q := e.q.WithTx(tx)
		st := &txState{tx: tx.(*pipeTx)}
		ctx := context.WithValue(ctx, txStateKey{}, st)
		if len(prelock) > 0 {
			if err := st.lock(ctx, e, q, prelock); err != nil {
				return err
			}
		}
		return fn(ctx, q, tx)
	})
}

func (st *txState) lock(ctx context.Context, e *Engine, q *queries.Queries, ids []uuid.UUID) error {
	ids = slices.Clone(ids)
	slices.SortFunc(ids, func(a, b uuid.UUID) int { return slices.Compare(a[:], b[:]) })
	ids = slices.Compact(ids)
	fresh, sent := !st.tx.sent, time.Now()
	rows, err := q.SettlementLock(ctx, queries.SettlementLockParams{OccurrenceIds: ids, Now: e.at()})
	if err != nil {
		return err
	}
	st.locked = make(map[uuid.UUID]queries.SettlementLockRow, len(rows))
	st.handed = make(map[uuid.UUID]bool, len(rows))
	answered := time.Now()
	for _, r := range rows {
		st.locked[r.Occurrence.ID] = r
		now := r.Now
		st.clock = &now
	}
	if st.clock != nil && fresh {
		e.clock.observe(*st.clock, sent, answered)
	}
	return nil
}

// take hands out occurrence and its instance as locked up front, to the
// first write of that instance only: a later one may follow a change an
// earlier write made (a failure cancelling its siblings), so it reads the
// rows again, their locks being this transaction's already.
func (st *txState) take(occurrence uuid.UUID) (queries.SettlementLockRow, bool) {
	if st == nil {
		return queries.SettlementLockRow{}, false
	}
	r, ok := st.locked[occurrence]
	if !ok || st.handed[r.Instance.ID] {
		return queries.SettlementLockRow{}, false
	}
	delete(st.locked, occurrence)
	st.handed[r.Instance.ID] = true
	return r, true
}

// now is the transaction's clock, fixed by the first write that needs it:
// the database's clock as this replica follows it (see dbClock) while a
// reading is fresh and nothing was sent yet (a transaction already begun
// has a clock of its own, which its other statements use), so that a
// start under load costs no round trip of its own; read otherwise.
func (st *txState) now(ctx context.Context, e *Engine, q *queries.Queries) (time.Time, error) {
	if st.clock == nil {
		fresh := !st.tx.sent
		if e.now != nil {
			t := e.now().UTC().Truncate(time.Microsecond)
			st.clock = &t
		} else if t, ok := e.clock.now(time.Now()); ok && fresh {
			// The database keeps microseconds.
			t = t.Truncate(time.Microsecond)
			st.clock = &t
		} else {
			sent := time.Now()
			t, err := q.Clock(ctx, nil)
			if err != nil {
				return time.Time{}, err
			}
			if fresh {
				e.clock.observe(t, sent, time.Now())
			}
			st.clock = &t
		}
	}
	return *st.clock, nil
}
