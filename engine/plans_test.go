package engine

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/relais/relais/queries"
)

const readPlanSettings = "select current_setting('plan_cache_mode') || ' ' || current_setting('enable_seqscan') || ' ' || current_setting('jit')"

// TestHotStatementsPlanGenericOnIndexesOnly holds the statements that move
// occurrences to generic plans without sequential scans or JIT (see HotPlans),
// in a transaction and alone, and the rest of the connection's work to
// PostgreSQL's defaults: the one connection of the pool serves all three.
func TestHotStatementsPlanGenericOnIndexesOnly(t *testing.T) {
	ctx := context.Background()
	cfg := setup(t).pool.Config()
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	e := New(pool, Options{})

	const hot = "force_generic_plan off off"
	var cold, got string
	// The server's own settings (PostgreSQL's defaults unless configured).
	if err := pool.QueryRow(ctx, readPlanSettings).Scan(&cold); err != nil || cold == hot {
		t.Fatalf("before: %q, %v", cold, err)
	}
	for range 2 {
		err := e.stateTx(ctx, nil, func(ctx context.Context, _ *queries.Queries, tx pgx.Tx) error {
			return tx.QueryRow(ctx, readPlanSettings).Scan(&got)
		})
		if err != nil || got != hot {
			t.Fatalf("in a stateTx: %q, %v; want %q", got, err, hot)
		}
		if err := (hotDB{pool}).QueryRow(ctx, readPlanSettings).Scan(&got); err != nil || got != hot {
			t.Fatalf("a statement alone: %q, %v; want %q", got, err, hot)
		}
		if err := pool.QueryRow(ctx, readPlanSettings).Scan(&got); err != nil || got != cold {
			t.Fatalf("after them, on the same connection: %q, %v; want %q (the settings must end with their transaction)", got, err, cold)
		}
		if err := e.tx(ctx, func(_ *queries.Queries, tx pgx.Tx) error { return tx.QueryRow(ctx, readPlanSettings).Scan(&got) }); err != nil || got != cold {
			t.Fatalf("in another transaction: %q, %v; want %q", got, err, cold)
		}
	}
}
