package engine

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestAPipeTxOfDeferredWritesCommitsThem: a transaction whose every
// statement is deferred (":exec", sent with COMMIT) commits them, with or
// without a prelude; one that issued nothing commits nothing.
func TestAPipeTxOfDeferredWritesCommitsThem(t *testing.T) {
	ctx := context.Background()
	e := setup(t)
	if _, err := e.pool.Exec(ctx, "create table pipe_probe (n int)"); err != nil {
		t.Fatal(err)
	}
	const insert = "-- name: PipeProbe :exec\ninsert into pipe_probe values ($1)"
	for i, prelude := range [][]string{nil, {HotPlans}} {
		err := inPipeTx(ctx, e.pool, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, insert, i)
			return err
		}, prelude...)
		if err != nil {
			t.Fatal(err)
		}
		if err := inPipeTx(ctx, e.pool, func(pgx.Tx) error { return nil }, prelude...); err != nil {
			t.Fatalf("an empty transaction: %v", err)
		}
	}
	var n int
	if err := e.pool.QueryRow(ctx, "select count(*) from pipe_probe").Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d rows committed (%v), want 2", n, err)
	}
}
