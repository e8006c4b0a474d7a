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
	clock       *time.Time
	instanceOf  map[uuid.UUID]uuid.UUID // occurrence → its instance
	instances   map[uuid.UUID]queries.Instance
	occurrences map[uuid.UUID]queries.Occurrence
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
	return e.tx(ctx, func(q *queries.Queries, tx pgx.Tx) error {
		st := &txState{}
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
	rows, err := q.SettlementLock(ctx, queries.SettlementLockParams{OccurrenceIds: ids, Now: e.at()})
	if err != nil {
		return err
	}
	st.instanceOf = make(map[uuid.UUID]uuid.UUID, len(rows))
	st.instances = make(map[uuid.UUID]queries.Instance, len(rows))
	st.occurrences = make(map[uuid.UUID]queries.Occurrence, len(rows))
	for _, r := range rows {
		st.instanceOf[r.Occurrence.ID] = r.Instance.ID
		st.instances[r.Instance.ID] = r.Instance
		st.occurrences[r.Occurrence.ID] = r.Occurrence
		now := r.Now
		st.clock = &now
	}
	return nil
}

// instanceFor hands out the locked instance of occurrence, once.
func (st *txState) instanceFor(occurrence uuid.UUID) (queries.Instance, time.Time, bool) {
	if st == nil || st.clock == nil {
		return queries.Instance{}, time.Time{}, false
	}
	id, ok := st.instanceOf[occurrence]
	if !ok {
		return queries.Instance{}, time.Time{}, false
	}
	inst, ok := st.instances[id]
	if !ok {
		return queries.Instance{}, time.Time{}, false
	}
	delete(st.instances, id)
	return inst, *st.clock, true
}

// occurrence hands out a locked occurrence, once.
func (st *txState) occurrence(id uuid.UUID) (queries.Occurrence, bool) {
	if st == nil {
		return queries.Occurrence{}, false
	}
	o, ok := st.occurrences[id]
	if ok {
		delete(st.occurrences, id)
	}
	return o, ok
}

// now is the transaction's clock, read by the first write that needs it.
func (st *txState) now(ctx context.Context, e *Engine, q *queries.Queries) (time.Time, error) {
	if st.clock == nil {
		t, err := q.Clock(ctx, e.at())
		if err != nil {
			return time.Time{}, err
		}
		st.clock = &t
	}
	return *st.clock, nil
}
