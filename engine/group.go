package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
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
// A write that finds the engine idle runs at once, alone. Writes that
// arrive while a group runs queue, and the lane takes the whole queue as
// its next group when it frees, unless fewer queued than the group just
// answered: then it waits a little for those writers to come back (see
// gatherLocked). One lane is
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
// gives up (a request whose COMMIT was sent cannot be called back either),
// unless the database stops answering (CutShortWrites); one still queued
// when its context ends is dropped.
type groupCommit struct {
	e *Engine
	// lanes bounds the groups in flight (connections used); max bounds the
	// writes of one group (one transaction must stay short).
	lanes, max int
	// spill is how long queued writes wait for the busy lanes before
	// another opens; gather bounds a free lane's wait for company (see
	// gatherLocked).
	spill, gather time.Duration

	mu    sync.Mutex
	queue []*groupWrite
	busy  int
	// spilling is armed while writes queue behind busy lanes and another
	// lane may open.
	spilling *time.Timer
	// gathering is set while a free lane waits for the writers the group
	// it just ran answered (see gatherLocked); expect is the queue that
	// ends the wait, gen tells the wait's timer from a later one's.
	gathering bool
	expect    int
	gen       uint64
	// trust is how far recent waits paid off: a filled one raises it, one
	// that lapsed with writes waiting lowers it twice as much, and at 0
	// the lane waits only every gatherProbe groups (untrusted counts them).
	trust, untrusted int
	// running are the groups in flight, for CutShortWrites (under
	// runningMu: not the queue's lock, which every write takes).
	runningMu sync.Mutex
	running   map[*runningGroup]struct{}

	// What GroupCommits reports.
	groups, writes, gathersFilled, gathersLapsed, gathersIdle atomic.Uint64
}

// runningGroup is a group in flight: cut ends its transaction.
type runningGroup struct {
	cut   context.CancelCauseFunc
	began time.Time
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
	// refillTag is the tag its claim was made under (the request's, made
	// unique to the statement): the one to ask again under when the
	// COMMIT's answer is lost.
	refillTag string
	err       error
	done      chan struct{}
}

// Group commit defaults. A group's round trips and commit take a
// millisecond or two under load: writes that waited 10 ms are behind one
// that is stuck, not slow.
const (
	defaultGroupLanes = 2
	defaultSpill      = 10 * time.Millisecond
	maxGroup          = 100
	// maxGather bounds a free lane's wait for company (see gatherLocked);
	// maxTrust and gatherProbe set how it learns whether waiting pays.
	maxGather   = 2 * time.Millisecond
	maxTrust    = 8
	gatherProbe = 16
	// groupTimeout bounds a group's transaction, which no caller can cancel.
	groupTimeout = time.Minute
)

func newGroupCommit(e *Engine, lanes int) *groupCommit {
	if lanes < 1 {
		lanes = defaultGroupLanes
	}
	return &groupCommit{e: e, lanes: lanes, max: maxGroup, spill: defaultSpill, gather: maxGather, trust: 1,
		running: map[*runningGroup]struct{}{}}
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
	switch {
	case g.gathering:
		if len(g.queue) >= g.expect {
			// The awaited writers are here: this caller runs them on the
			// waiting lane (unless every one gave up meanwhile).
			group = g.endGatherLocked(true)
		}
		if len(g.queue) > 0 {
			// Whatever the gathering lane runs may get stuck.
			g.armLocked(g.spill)
		}
	case g.busy == 0:
		// A lane is taken only for a group to run: the caller's context
		// may have ended since it was checked, leaving nothing to take.
		if group = g.takeLocked(); len(group) > 0 {
			g.busy++
		}
	default:
		g.armLocked(g.spill)
	}
	g.mu.Unlock()
	switch {
	case len(group) == 0:
	case slices.Contains(group, w):
		// This caller leads the group its write is in; the lane then passes
		// to a goroutine of its own if more writes queued meanwhile.
		g.lead(ctx, group)
	default:
		// Its write was dropped (its caller gave up) or left for the next
		// group (a full one): the others' group is not for this caller to
		// wait on.
		go g.lead(group[0].ctx, group)
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
		g.lead(group[0].ctx, group)
	}
}

// lead runs group on a lane the caller holds, then hands the lane on: to
// a goroutine of its own for the writes queued meanwhile, to the writers
// of a gathering lane, or back.
func (g *groupCommit) lead(ctx context.Context, group []*groupWrite) {
	if next := g.runThenNext(ctx, group); len(next) > 0 {
		go func() {
			for len(next) > 0 {
				next = g.runThenNext(ctx, next)
			}
		}()
	}
}

// runThenNext runs group, settles what the lane does next (see nextGroup),
// and only then answers the group's writes: a writer answered first could
// come back before the lane looks at its queue, and be counted twice in
// what a gathering lane waits for.
func (g *groupCommit) runThenNext(ctx context.Context, group []*groupWrite) []*groupWrite {
	defer func() {
		for _, w := range group {
			close(w.done)
		}
	}()
	began := time.Now()
	g.run(ctx, group)
	return g.nextGroup(len(group), time.Since(began))
}

// nextGroup takes the queued writes as the lane's next group after a group
// of ran writes that took so long, lets the lane gather, or frees it when
// none wait.
func (g *groupCommit) nextGroup(ran int, took time.Duration) []*groupWrite {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gathering {
		// Another lane waits for company (this one was opened past a
		// stuck group): the writes queued are for that lane to run.
		g.busy--
		return nil
	}
	if g.gatherLocked(ran, took) {
		return nil
	}
	group := g.takeLocked()
	if len(group) == 0 {
		g.busy--
	}
	return group
}

// gatherLocked lets the lane wait for company before its next group when
// that group would be smaller than the one it just ran.
//
// The writers a group answers mostly come back: a producer starts its
// next instance, a worker completes its next task. Taken at once, the
// writes queued while the group ran make a small group, the lane is busy
// with it when the answered writers return, and they wait for it to end,
// then run as a group of their own: four producers settle into groups of
// one and three, two transactions where one would do. Waiting for them
// costs the queued writes less than that, as long as the wait is shorter
// than the group just run (took): the lane waits at most that long (and
// at most gather), and runs as soon as as many writes queue as it just
// answered plus those already queued. A lone write on an idle engine
// still runs at once: after a group of one the lane does not wait. When the
// writers come back too late for the wait (it lapses rather than fills),
// the lane stops waiting but for a probe now and then (see trust).
func (g *groupCommit) gatherLocked(ran int, took time.Duration) bool {
	if ran < 2 || len(g.queue) >= ran {
		// After a lone write there is nothing to gather: the first write
		// to come would end the wait as it would take a free lane.
		return false
	}
	if g.trust == 0 {
		// Recent waits lapsed: the writers come back too late (clients in
		// other processes on busy cores, say) for waiting to pay. Every
		// so often the lane waits anyway, to learn whether they now come
		// in time.
		if g.untrusted++; g.untrusted < gatherProbe {
			return false
		}
		g.untrusted = 0
	}
	g.gathering = true
	g.expect = len(g.queue) + ran
	g.gen++
	gen := g.gen
	time.AfterFunc(min(took, g.gather), func() { g.gathered(gen) })
	return true
}

// gathered ends a lane's wait for company at its deadline: it runs what
// queued, or frees the lane.
func (g *groupCommit) gathered(gen uint64) {
	g.mu.Lock()
	if !g.gathering || g.gen != gen {
		g.mu.Unlock()
		return
	}
	group := g.endGatherLocked(false)
	g.mu.Unlock()
	if len(group) > 0 {
		g.lead(group[0].ctx, group)
	}
}

// endGatherLocked ends the lane's wait for company, filled (every awaited
// writer came) or lapsed at its deadline, and takes what queued as the
// lane's next group; with nothing queued it frees the lane (the wait
// ended idle). What it counts teaches the lane whether waiting pays.
func (g *groupCommit) endGatherLocked(filled bool) []*groupWrite {
	g.gathering = false
	group := g.takeLocked()
	switch {
	case len(group) == 0:
		g.gathersIdle.Add(1)
		g.busy--
	case filled:
		g.gathersFilled.Add(1)
		g.trust = min(g.trust+1, maxTrust)
	default:
		g.gathersLapsed.Add(1)
		// Writes waited for writers that came too late: the wait cost
		// them and gained the group little.
		g.trust = max(g.trust-2, 0)
	}
	return group
}

// CutShortWrites ends the grouped writes' transactions in flight for
// longer than patience: the replica's probe got no answer from
// PostgreSQL. A group otherwise runs until its own timeout (a minute)
// against a server that hangs (a frozen machine, a network black hole),
// and its writers with it, though their requests were cut short: their
// answers wait for the group's. Those cut are answered as writes whose
// outcome is unknown (503 database_unavailable, to be repeated as they
// were). A group younger than patience is spared, as the requests are:
// the database may merely be slow.
func (e *Engine) CutShortWrites(patience time.Duration) {
	before := time.Now().Add(-patience)
	e.eachRunningGroup(func(rg *runningGroup) {
		if rg.began.Before(before) {
			rg.cut(pgfault.ErrUnresponsive)
		}
	})
}

// eachRunningGroup calls f for each group in flight, the starts' too (SRE
// QA: starts held by a frozen server waited out their minute where
// settlements answered in seconds), under its lane's lock.
func (e *Engine) eachRunningGroup(f func(rg *runningGroup)) {
	for _, g := range []*groupCommit{e.group, e.starts} {
		g.runningMu.Lock()
		for rg := range g.running {
			f(rg)
		}
		g.runningMu.Unlock()
	}
}

// WritesStalledFor is how long the oldest grouped write in flight (a
// start's, a settlement's) has waited for its transaction, 0 with none:
// a database that answers reads while its commits hang (a frozen WAL
// disk, a lock held by hand) stalls every start behind one, which its
// readiness must tell (SRE QA: /readyz stayed ready, its probe only
// reading).
func (e *Engine) WritesStalledFor() time.Duration {
	var oldest time.Time
	e.eachRunningGroup(func(rg *runningGroup) {
		if oldest.IsZero() || rg.began.Before(oldest) {
			oldest = rg.began
		}
	})
	if oldest.IsZero() {
		return 0
	}
	return time.Since(oldest)
}

// run commits group and sets each of its writes' outcome (runThenNext
// answers them).
func (g *groupCommit) run(ctx context.Context, group []*groupWrite) {
	// The group outlives any one caller: the leader's context gives its
	// values (a tracer's labels), not its cancellation. Only a database
	// that stopped answering cuts it short (CutShortWrites).
	ctx, cut := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cut(nil)
	ctx, cancel := context.WithTimeout(ctx, groupTimeout)
	defer cancel()
	rg := &runningGroup{cut: cut, began: time.Now()}
	g.runningMu.Lock()
	g.running[rg] = struct{}{}
	g.runningMu.Unlock()
	defer func() {
		g.runningMu.Lock()
		delete(g.running, rg)
		g.runningMu.Unlock()
		if errors.Is(context.Cause(ctx), pgfault.ErrUnresponsive) {
			// Whatever the cut statements answered (a cancelled context),
			// the group's outcome is unknown: its COMMIT may have been
			// sent.
			for _, w := range group {
				if w.err != nil {
					w.err = fmt.Errorf("%w: %w", errCommitUnknown, context.Cause(ctx))
				}
			}
		}
	}()
	g.groups.Add(1)
	g.writes.Add(uint64(len(group)))
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
		w.refilled, w.refillTag = nil, ""
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
		var tag *string
		if c.req.RequestID != "" {
			// A stream's refills are tagged as its own claims are (see
			// ClaimRequest.TagOnly): one whose COMMIT answer is lost is
			// asked again under its tag, which names this statement's
			// rows alone (a stream publishes one request for many).
			t := c.req.RequestID + "/" + strconv.FormatUint(e.refills.Add(1), 36)
			tag = &t
			for _, w := range c.writes {
				w.refillTag = t
			}
		}
		rows, err := q.OccurrenceClaimPull(ctx, queries.OccurrenceClaimPullParams{
			DefinitionKeys: c.req.Pairs.Keys, Revisions: c.req.Pairs.Revisions, Turn: e.turn(), Now: e.at(), MaxTasks: int32(len(c.writes)),
			ConsumerID: &c.req.ConsumerID, WorkerID: &c.req.WorkerID, LockDuration: c.req.LockDuration, RequestID: tag})
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

// GroupCommitStats are what one kind of group commit did since the engine
// started: its groups (one transaction each, unless one was run again
// write by write), the writes they held, and how its lanes' waits for
// company ended (see gatherLocked): filled, every awaited writer came;
// lapsed at their deadline, running what came; or idle, nothing came and
// the lane was freed (the load paused or ended).
type GroupCommitStats struct {
	// Lane is "starts" or "settlements" (settlements and claims).
	Lane                                      string
	Groups, Writes                            uint64
	GathersFilled, GathersLapsed, GathersIdle uint64
}

// GroupCommits reports the group commits of starts and of settlements.
func (e *Engine) GroupCommits() []GroupCommitStats {
	stats := func(lane string, g *groupCommit) GroupCommitStats {
		return GroupCommitStats{Lane: lane, Groups: g.groups.Load(), Writes: g.writes.Load(),
			GathersFilled: g.gathersFilled.Load(), GathersLapsed: g.gathersLapsed.Load(), GathersIdle: g.gathersIdle.Load()}
	}
	return []GroupCommitStats{stats("starts", e.starts), stats("settlements", e.group)}
}
