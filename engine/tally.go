package engine

import (
	"cmp"
	"context"
	"slices"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/relais/relais/queries"
)

// InstanceStarted is the event InstanceCounts reports for a start; the
// others are the statuses an instance ends in.
const InstanceStarted = "started"

// instanceEvent is an instance started, or ended in a status, that a
// transaction noted and the replica counts once it commits.
type instanceEvent struct{ process, event string }

// countInstance notes on q's transaction that an instance of process
// started or ended (event): counted by the replica once the transaction
// commits, never for one rolled back, nor for a savepoint rolled back to
// (a refused item of a batch, a refused write of a group). Outside a
// pipelined transaction (every instance change runs in one) it notes
// nothing.
func countInstance(q *queries.Queries, process, event string) {
	switch t := q.DB().(type) {
	case *pipeTx:
		t.tally = append(t.tally, instanceEvent{process, event})
	case *pipeSavepoint:
		t.parent.tally = append(t.parent.tally, instanceEvent{process, event})
	}
}

// instanceCounts are the instances this replica started and ended, by
// process and event, since it started: what its transactions noted and
// committed.
type instanceCounts struct {
	mu     sync.Mutex
	counts map[instanceEvent]uint64
}

func (c *instanceCounts) add(tally []instanceEvent) {
	if len(tally) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil {
		c.counts = map[instanceEvent]uint64{}
	}
	for _, ev := range tally {
		c.counts[ev]++
	}
}

// InstanceCount is how many instances of a process this replica started
// (Event InstanceStarted) or ended in a status (Event: completed, failed,
// cancelled) since it started.
type InstanceCount struct {
	Process, Event string
	Count          uint64
}

// InstanceCounts reports the instances this replica started and ended,
// ordered by process then event: each replica counts what its own
// transactions committed, so the sum over replicas is the whole.
func (e *Engine) InstanceCounts() []InstanceCount {
	c := &e.instanceCounts
	c.mu.Lock()
	out := make([]InstanceCount, 0, len(c.counts))
	for ev, n := range c.counts {
		out = append(out, InstanceCount{Process: ev.process, Event: ev.event, Count: n})
	}
	c.mu.Unlock()
	slices.SortFunc(out, func(a, b InstanceCount) int {
		return cmp.Or(cmp.Compare(a.Process, b.Process), cmp.Compare(a.Event, b.Event))
	})
	return out
}

// inTx runs fn in one pipelined transaction (a hot one if hot, see
// HotPlans) and, once it commits, counts the instance events it noted.
func (e *Engine) inTx(ctx context.Context, hot bool, fn func(tx pgx.Tx) error) error {
	var tx *pipeTx
	err := inPipeTx(ctx, e.pool, hot, func(t pgx.Tx) error {
		tx = t.(*pipeTx)
		return fn(t)
	})
	if err == nil && tx != nil {
		e.instanceCounts.add(tx.tally)
	}
	return err
}
