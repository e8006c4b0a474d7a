package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/relais/relais/internal/pgfault"
	"github.com/relais/relais/queries"
)

// groupCommit runs the single writes that arrive together (a start, a
// completion, a failure: one per request) in one transaction, the way
// PostgreSQL groups the WAL flushes of concurrent commits, but a step
// earlier: one BEGIN and one COMMIT for the group, so one flush and far
// less per-transaction work on the server. Under load that work, not the
// statements, is most of what a one-item request costs PostgreSQL.
//
// No write waits for company: a write that finds the engine idle runs at
// once, alone. Writes that arrive while a group runs queue, and the lane
// takes the whole queue as its next group when it frees. One lane is
// enough while groups are quick, and a second would halve the groups for
// nothing: on 2 cores, one lane instead of two cut the transactions per
// occurrence of the bench's cycle by 35 % and PostgreSQL's CPU per
// occurrence by a quarter. A group can be slow, though (a lock wait, a
// deadlock resolved after deadlock_timeout), and nothing should stall
// behind it: when writes have queued for spill, another lane opens, up to
// lanes. Each write keeps the outcome it would have had alone:
//   - a refused write (a fault) changes nothing and the others stand: the
//     group runs again with a savepoint per write (applyEach);
//   - a group the database aborts (a deadlock between two groups, say, or
//     one write's unexpected error) runs again one write per transaction,
//     so that each gets its own answer;
//   - a lost connection fails every write of the group, as it would have
//     failed each alone (a COMMIT whose answer is lost is unknown either way).
//
// Once a write is taken into a group it runs to its end even if its caller
// gives up (a request whose COMMIT was sent cannot be called back either);
// one still queued when its context ends is dropped.
type groupCommit struct {
	e *Engine
	// lanes bounds the groups in flight (connections used); max bounds the
	// writes of one group (one transaction must stay short).
	lanes, max int
	// spill is how long queued writes wait for the busy lanes before
	// another opens.
	spill time.Duration

	mu    sync.Mutex
	queue []*groupWrite
	busy  int
	// spilling is armed while writes queue behind busy lanes and another
	// lane may open.
	spilling *time.Timer
}

// groupWrite is one write waiting for, or running in, a group.
type groupWrite struct {
	ctx context.Context
	// occurrence is the occurrence a settlement locks (zero for a start):
	// the group locks them all up front (see txState).
	occurrence uuid.UUID
	apply      func(ctx context.Context, q *queries.Queries) error
	// statement is set when apply is one statement: alone, it runs
	// without a transaction of its own (the statement is one).
	statement bool
	taken     bool      // under groupCommit.mu
	queued    time.Time // when it was submitted
	// refill, when set, is the claim to make with the transaction's
	// COMMIT if apply settled an attempt (settled, set by apply on each
	// run); refilled is what it got (see Engine.refill).
	refill   *ClaimRequest
	settled  bool
	refilled []queries.Occurrence
	err      error
	done     chan struct{}
}

// Group commit defaults. A group's round trips and commit take a
// millisecond or two under load: writes that waited 10 ms are behind one
// that is stuck, not slow.
const (
	defaultGroupLanes = 2
	defaultSpill      = 10 * time.Millisecond
	maxGroup          = 100
	// groupTimeout bounds a group's transaction, which no caller can cancel.
	groupTimeout = time.Minute
)

func newGroupCommit(e *Engine, lanes int) *groupCommit {
	if lanes < 1 {
		lanes = defaultGroupLanes
	}
	return &groupCommit{e: e, lanes: lanes, max: maxGroup, spill: defaultSpill}
}

// write runs apply in a transaction, alone or with the writes that arrive
// with it, and returns its outcome. apply must use the context it is given
// (the group's, which its caller cannot cancel under the other writes), not
// its caller's. It may run more than once (a group
// rolled back and run again); only its last run's effects are committed, so
// it must set its results afresh on every run.
func (g *groupCommit) write(ctx context.Context, occurrence uuid.UUID, apply func(ctx context.Context, q *queries.Queries) error) error {
	return g.submit(ctx, &groupWrite{ctx: ctx, occurrence: occurrence, apply: apply, done: make(chan struct{})})
}

// statement is write for a write that is one statement (a claim): alone it
// runs as that statement, one round trip, and in a group it is one more
// statement of the group's transaction, whose commit it shares.
func (g *groupCommit) statement(ctx context.Context, apply func(ctx context.Context, q *queries.Queries) error) error {
	return g.submit(ctx, &groupWrite{ctx: ctx, apply: apply, statement: true, done: make(chan struct{})})
}

func (g *groupCommit) submit(ctx context.Context, w *groupWrite) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w.apply = recovered(w.apply)
	w.queued = time.Now()
	g.mu.Lock()
	g.queue = append(g.queue, w)
	var group []*groupWrite
	if g.busy == 0 {
		// A lane is taken only for a group to run: the caller's context
		// may have ended since it was checked, leaving nothing to take.
		if group = g.takeLocked(); len(group) > 0 {
			g.busy++
		}
	} else {
		g.armLocked(g.spill)
	}
	g.mu.Unlock()
	if len(group) > 0 {
		// This caller leads the group its write is in; the lane then passes
		// to a goroutine of its own if more writes queued meanwhile.
		g.run(ctx, group)
		g.next(ctx)
	}
	select {
	case <-w.done:
		return w.err
	case <-ctx.Done():
	}
	g.mu.Lock()
	if !w.taken {
		for i, q := range g.queue {
			if q == w {
				g.queue = append(g.queue[:i], g.queue[i+1:]...)
				break
			}
		}
		g.mu.Unlock()
		return ctx.Err()
	}
	g.mu.Unlock()
	<-w.done
	return w.err
}

// takeLocked takes up to max queued writes whose callers still wait.
func (g *groupCommit) takeLocked() []*groupWrite {
	var group []*groupWrite
	n := 0
	for _, w := range g.queue {
		if len(group) == g.max {
			g.queue[n] = w
			n++
			continue
		}
		if w.ctx.Err() != nil {
			w.taken, w.err = true, w.ctx.Err()
			close(w.done)
			continue
		}
		w.taken = true
		group = append(group, w)
	}
	clear(g.queue[n:])
	g.queue = g.queue[:n]
	return group
}

// armLocked makes sure queued writes open another lane once they have
// waited spill, if one is left by then.
func (g *groupCommit) armLocked(after time.Duration) {
	if g.spilling == nil && g.busy < g.lanes {
		g.spilling = time.AfterFunc(after, g.spillOver)
	}
}

// spillOver opens another lane for the queued writes if the oldest has
// waited spill, or waits for it to.
func (g *groupCommit) spillOver() {
	g.mu.Lock()
	g.spilling = nil
	var group []*groupWrite
	if len(g.queue) > 0 && g.busy < g.lanes {
		if waited := time.Since(g.queue[0].queued); waited < g.spill {
			g.armLocked(g.spill - waited)
		} else if group = g.takeLocked(); len(group) > 0 {
			g.busy++
		}
	}
	g.mu.Unlock()
	if len(group) > 0 {
		// The group's values (a tracer's labels) are its first write's.
		ctx := group[0].ctx
		g.run(ctx, group)
		g.next(ctx)
	}
}

// next hands the lane to a goroutine that runs the queued writes, group
// after group, or frees it when nothing queued.
func (g *groupCommit) next(ctx context.Context) {
	if group := g.nextGroup(); len(group) > 0 {
		go func() {
			for ; len(group) > 0; group = g.nextGroup() {
				g.run(ctx, group)
			}
		}()
	}
}

// nextGroup takes the queued writes as the lane's next group, or frees the
// lane when none wait.
func (g *groupCommit) nextGroup() []*groupWrite {
	g.mu.Lock()
	defer g.mu.Unlock()
	group := g.takeLocked()
	if len(group) == 0 {
		g.busy--
	}
	return group
}

// run commits group and answers each of its writes.
func (g *groupCommit) run(ctx context.Context, group []*groupWrite) {
	// The group outlives any one caller: the leader's context gives its
	// values (a tracer's labels), not its cancellation.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), groupTimeout)
	defer cancel()
	defer func() {
		for _, w := range group {
			close(w.done)
		}
	}()
	if len(group) == 1 {
		group[0].err = g.e.alone(ctx, group[0])
		return
	}
	var prelock []uuid.UUID
	for _, w := range group {
		if w.occurrence != uuid.Nil {
			prelock = append(prelock, w.occurrence)
		}
	}
	refusals, err := g.e.applyEach(ctx, len(group), func(int) bool { return false }, prelock, func(ctx context.Context, q *queries.Queries, i int) error {
		return group[i].apply(ctx, q)
	}, func(ctx context.Context, q *queries.Queries, refusals []error) error {
		return g.e.refill(ctx, q, group, refusals)
	})
	switch {
	case err == nil:
		for i, w := range group {
			w.err = refusals[i]
		}
	case pgfault.Lost(err), errors.Is(err, errCommitUnknown):
		for _, w := range group {
			w.err = err
		}
	default:
		// Rolled back: each write on its own, for its own answer.
		for _, w := range group {
			w.err = g.e.alone(ctx, w)
		}
	}
}

// alone runs w in a transaction of its own, or as its one statement.
func (e *Engine) alone(ctx context.Context, w *groupWrite) error {
	if w.statement {
		return w.apply(ctx, e.hot)
	}
	var prelock []uuid.UUID
	if w.occurrence != uuid.Nil {
		// Its locks in one round trip, not two.
		prelock = []uuid.UUID{w.occurrence}
	}
	return e.stateTx(ctx, prelock, func(ctx context.Context, q *queries.Queries, _ pgx.Tx) error {
		if err := w.apply(ctx, q); err != nil {
			return err
		}
		return e.refill(ctx, q, []*groupWrite{w}, nil)
	})
}

// refill runs, last in a group's transaction and sent with its COMMIT, the
// claims its settlements asked for (see Engine.CompleteAndClaim): one per
// claim request, for as many tasks as the writes that asked with it
// settled an attempt, shared among them in order. A write refused, or
// that settled nothing (a replay), asks for nothing.
func (e *Engine) refill(ctx context.Context, q *queries.Queries, group []*groupWrite, refusals []error) error {
	type claim struct {
		req    *ClaimRequest
		writes []*groupWrite
	}
	var claims []*claim
	for i, w := range group {
		w.refilled = nil
		if w.refill == nil || !w.settled || (refusals != nil && refusals[i] != nil) {
			continue
		}
		var c *claim
		for _, have := range claims {
			if have.req == w.refill {
				c = have
				break
			}
		}
		if c == nil {
			c = &claim{req: w.refill}
			claims = append(claims, c)
		}
		c.writes = append(c.writes, w)
	}
	for k, c := range claims {
		if k == len(claims)-1 {
			txStateOf(ctx).tx.commitWithNext()
		}
		rows, err := q.OccurrenceClaimPull(ctx, queries.OccurrenceClaimPullParams{
			DefinitionKeys: c.req.Pairs.Keys, Revisions: c.req.Pairs.Revisions, Now: e.at(), MaxTasks: int32(len(c.writes)),
			ConsumerID: &c.req.ConsumerID, WorkerID: &c.req.WorkerID, LockDuration: c.req.LockDuration})
		if err != nil {
			return err
		}
		for j, row := range rows {
			c.writes[j].refilled = []queries.Occurrence{queries.Occurrence(row)}
		}
	}
	return nil
}

// recovered turns a panic of apply into its error: a write that panics
// fails alone (its group runs again without it, as after any error), and
// the lane that ran it lives on.
func recovered(apply func(ctx context.Context, q *queries.Queries) error) func(ctx context.Context, q *queries.Queries) error {
	return func(ctx context.Context, q *queries.Queries) (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("engine: a write panicked: %v\n%s", p, debug.Stack())
			}
		}()
		return apply(ctx, q)
	}
}
