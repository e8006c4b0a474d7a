package engine

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/relais/relais/queries"
)

// HotPlans goes ahead of the statements that move occurrences (starts,
// claims, settlements: every stateTx, and a claim sent alone), for the
// rest of their transaction:
//
//   - plan_cache_mode force_generic_plan: PostgreSQL re-plans a prepared
//     statement on every execution while its generic plan looks costlier
//     than a plan for the given values, which is always the case for a
//     statement over arrays of ids (it assumes ten elements). Measured on
//     the cycle benchmark, the claim and the settlement lock were planned
//     at every call, and planning them took longer than running them
//     (0.55 to 0.7 ms a call): about a third of PostgreSQL's CPU.
//   - enable_seqscan off: a generic plan is made once per connection, and
//     made while a table is small (a fresh database) it reads the table
//     whole; kept while the table grows, every settlement would read
//     every occurrence. Each of these statements is written for an index.
//   - jit off: a generic plan does not know max_tasks or how many
//     definitions a worker subscribes to, so its estimated cost can pass
//     jit_above_cost, and compiling took 20 ms of a claim that runs in
//     0.2 (measured on the backlog benchmark, 1,000,000 other rows).
//
// Both are local to the transaction: reads with optional filters (lists,
// the console) keep plans made for their values.
const HotPlans = "select set_config('plan_cache_mode', 'force_generic_plan', true), set_config('enable_seqscan', 'off', true), set_config('jit', 'off', true)"

// hotTag ends the text of every statement run behind HotPlans, so that
// its prepared statement (the driver keeps one per text and connection) is
// not the one the same query uses elsewhere: a plan made there, with
// sequential scans allowed, would otherwise serve here too, and one made
// here would serve there.
const hotTag = "\n-- hot (HotPlans)"

// hotDB runs each statement in a transaction of its own, after HotPlans,
// in one round trip: statements pipelined up to one Sync share an
// implicit transaction.
type hotDB struct{ pool *pgxpool.Pool }

// hotQueries runs queries the way hotDB does.
func hotQueries(pool *pgxpool.Pool) *queries.Queries { return queries.New(hotDB{pool}) }

func (h hotDB) send(ctx context.Context, sql string, args []any) (pgx.BatchResults, error) {
	b := &pgx.Batch{}
	b.Queue(HotPlans)
	b.Queue(sql+hotTag, args...)
	br := h.pool.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return nil, err
	}
	return br, nil
}

func (h hotDB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	br, err := h.send(ctx, sql, args)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	return lastExec(br)
}

func (h hotDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	br, err := h.send(ctx, sql, args)
	if err != nil {
		return nil, err
	}
	return lastRows(br)
}

func (h hotDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return firstRow(h.Query(ctx, sql, args...))
}
