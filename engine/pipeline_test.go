package engine

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestAPipeTxOfDeferredWritesCommitsThem: a transaction whose every
// statement is deferred (":exec", sent with COMMIT) commits them, hot or
// not.
func TestAPipeTxOfDeferredWritesCommitsThem(t *testing.T) {
	ctx := context.Background()
	e := setup(t)
	if _, err := e.pool.Exec(ctx, "create table pipe_probe (n int)"); err != nil {
		t.Fatal(err)
	}
	const insert = "-- name: PipeProbe :exec\ninsert into pipe_probe values ($1)"
	for i, hot := range []bool{false, true} {
		err := inPipeTx(ctx, e.pool, hot, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, insert, i)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := e.pool.QueryRow(ctx, "select count(*) from pipe_probe").Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d rows committed (%v), want 2", n, err)
	}
}

// TestAnEmptyPipeTxSendsNothing: a transaction that issued no statement
// costs no round trip, hot or not.
func TestAnEmptyPipeTxSendsNothing(t *testing.T) {
	ctx := context.Background()
	log := &sqlLog{}
	pool := poolLike(t, setup(t), func(c *pgxpool.Config) { c.ConnConfig.Tracer = log })
	for _, hot := range []bool{false, true} {
		if err := inPipeTx(ctx, pool, hot, func(pgx.Tx) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if n := log.batchCount() + len(log.alone); n != 0 {
		t.Fatalf("%d batches or statements sent for empty transactions, want 0", n)
	}
}

// TestAFailedCommitLeavesItsConnectionReusable: a deferred write that
// fails at COMMIT fails the transaction, and its connection, rolled back,
// serves the next one instead of being closed.
func TestAFailedCommitLeavesItsConnectionReusable(t *testing.T) {
	ctx := context.Background()
	pool := poolLike(t, setup(t), func(c *pgxpool.Config) { c.MaxConns = 1 })
	if _, err := pool.Exec(ctx, "create table commit_probe (n int primary key)"); err != nil {
		t.Fatal(err)
	}
	var before, after int32
	if err := pool.QueryRow(ctx, "select pg_backend_pid()").Scan(&before); err != nil {
		t.Fatal(err)
	}
	const insert = "-- name: CommitProbe :exec\ninsert into commit_probe values ($1)"
	err := inPipeTx(ctx, pool, true, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, insert, 1); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, insert, 1) // a duplicate key, found at COMMIT
		return err
	})
	if !isUniqueViolation(err, "") {
		t.Fatalf("commit: %v, want a unique violation", err)
	}
	if err := pool.QueryRow(ctx, "select pg_backend_pid()").Scan(&after); err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Fatalf("backend %d after the failed commit, %d before: the connection was closed instead of rolled back", after, before)
	}
	var n int
	if err := pool.QueryRow(ctx, "select count(*) from commit_probe").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d rows after the failed commit (%v), want 0", n, err)
	}
}

// TestAQuerySentWithCommitCountsOnlyIfItCommits: commitWithNext sends a
// query with COMMIT; its rows read fine, and a COMMIT that fails (a
// deferred constraint) is reported by their Err and by Commit, and the
// connection is reused.
func TestAQuerySentWithCommitCountsOnlyIfItCommits(t *testing.T) {
	ctx := context.Background()
	log := &sqlLog{}
	pool := poolLike(t, setup(t), func(c *pgxpool.Config) { c.MaxConns = 1; c.ConnConfig.Tracer = log })
	if _, err := pool.Exec(ctx, "create table with_commit (n int unique deferrable initially deferred)"); err != nil {
		t.Fatal(err)
	}
	const insert = "-- name: WithCommit :exec\ninsert into with_commit values ($1)"
	for _, dup := range []bool{false, true} {
		batches := log.batchCount()
		var n int
		var rowsErr error
		err := inPipeTx(ctx, pool, false, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, insert, 1); err != nil {
				return err
			}
			if dup {
				if _, err := tx.Exec(ctx, insert, 1); err != nil {
					return err
				}
			}
			tx.(*pipeTx).commitWithNext()
			rows, err := tx.Query(ctx, "select count(*)::int from with_commit")
			if err != nil {
				return err
			}
			for rows.Next() {
				if err := rows.Scan(&n); err != nil {
					return err
				}
			}
			rowsErr = rows.Err()
			return nil
		})
		if got := log.batchCount() - batches; got != 1 {
			t.Errorf("dup %v: %d round trips, want 1", dup, got)
		}
		if !dup && (err != nil || rowsErr != nil || n != 1) {
			t.Fatalf("read %d, rows %v, commit %v; want 1 and no error", n, rowsErr, err)
		}
		if dup && (!isUniqueViolation(err, "") || !isUniqueViolation(rowsErr, "")) {
			t.Fatalf("commit %v, rows %v; want the unique violation from both", err, rowsErr)
		}
		if _, err := pool.Exec(ctx, "delete from with_commit"); err != nil {
			t.Fatalf("the connection after it: %v", err)
		}
	}
}
