package engine

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
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
	pool := poolLike(t, setup(t), func(c *pgxpool.Config) { c.MaxConns = 1 })
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

// TestAClaimAndASettlementRunBehindHotPlans: a claim sent alone and a
// settlement's transaction carry HotPlans ahead of them in their batch,
// and their statements the hot tag (a prepared statement of their own).
func TestAClaimAndASettlementRunBehindHotPlans(t *testing.T) {
	ctx := context.Background()
	e, base, log := tracedEngine(t)
	if _, err := start(e, "hot"); err != nil {
		t.Fatal(err)
	}
	c := consumer(t, base)
	r := claimOne(t, e, c, "w")
	if _, err := e.Complete(ctx, WorkerRef{ConsumerID: c, WorkerID: "w", Occurrence: r.ID}, json.RawMessage(`{"result":"created","crm_id":"CRM-1"}`)); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"OccurrenceClaimPull", "SettlementLock", "OccurrenceComplete"} {
		found := false
		for _, b := range log.batches {
			i := slices.IndexFunc(b, func(sql string) bool { return strings.HasPrefix(sql, "-- name: "+name+" ") })
			if i < 0 {
				continue
			}
			found = true
			if !strings.HasSuffix(b[i], hotTag) {
				t.Errorf("%s sent without the hot tag", name)
			}
		}
		if !found {
			t.Errorf("%s was not seen", name)
		}
	}
	for _, b := range log.batches {
		for i, sql := range b {
			if strings.HasPrefix(sql, "-- name: OccurrenceClaimPull ") && (i == 0 || !strings.HasPrefix(b[i-1], HotPlans)) {
				t.Errorf("the claim sent alone without HotPlans just ahead: %q", b)
			}
			if strings.HasPrefix(sql, "-- name: SettlementLock ") && !slices.ContainsFunc(b[:i], func(s string) bool { return strings.HasPrefix(s, HotPlans) }) {
				t.Errorf("the settlement's lock sent without HotPlans in its transaction's first batch: %q", b)
			}
		}
	}
}
