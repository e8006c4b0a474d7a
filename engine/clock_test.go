package engine

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

func TestDBClockCarriesItsLatestBoundForward(t *testing.T) {
	var c dbClock
	local := time.Now()
	db := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	if _, ok := c.now(local); ok {
		t.Fatal("an estimate before any reading")
	}
	c.observe(db, local)
	if got, ok := c.now(local.Add(5 * time.Millisecond)); !ok || !got.Equal(db.Add(5*time.Millisecond)) {
		t.Fatalf("5 ms later: %v %v, want %v", got, ok, db.Add(5*time.Millisecond))
	}
	// A reading older than the estimate (a transaction that began earlier)
	// must not move it back.
	c.observe(db.Add(time.Millisecond), local.Add(10*time.Millisecond))
	if got, _ := c.now(local.Add(10 * time.Millisecond)); !got.Equal(db.Add(10 * time.Millisecond)) {
		t.Fatalf("after an older reading: %v, want %v", got, db.Add(10*time.Millisecond))
	}
	// A reading ahead of it (the database's clock ran faster) is taken.
	c.observe(db.Add(50*time.Millisecond), local.Add(20*time.Millisecond))
	if got, _ := c.now(local.Add(20 * time.Millisecond)); !got.Equal(db.Add(50 * time.Millisecond)) {
		t.Fatalf("after a newer reading: %v, want %v", got, db.Add(50*time.Millisecond))
	}
	// An instant read just before the reading arrived.
	if got, ok := c.now(local.Add(19 * time.Millisecond)); !ok || !got.Equal(db.Add(49*time.Millisecond)) {
		t.Fatalf("1 ms before the reading: %v %v, want %v", got, ok, db.Add(49*time.Millisecond))
	}
	if _, ok := c.now(local.Add(20*time.Millisecond + clockFresh + time.Millisecond)); ok {
		t.Fatal("an estimate from a reading older than clockFresh")
	}
}

// clockReads counts the statements reading the database's clock alone.
type clockReads struct{ n atomic.Int32 }

func (c *clockReads) count(sql string) {
	if strings.HasPrefix(sql, "-- name: Clock ") {
		c.n.Add(1)
	}
}

func (c *clockReads) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.count(d.SQL)
	return ctx
}
func (c *clockReads) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *clockReads) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (c *clockReads) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	c.count(d.SQL)
}
func (c *clockReads) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// TestAStartFollowsTheDatabaseClock: a start while a reading of the
// database's clock is fresh is dated from it without reading the clock
// (a round trip), never ahead of the database (its occurrence is
// claimable as soon as it commits); with no fresh reading it reads it.
func TestAStartFollowsTheDatabaseClock(t *testing.T) {
	ctx := context.Background()
	base := setup(t)
	prepare(t, base, "")
	cfg := base.pool.Config()
	reads := &clockReads{}
	cfg.ConnConfig.Tracer = reads
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	e := New(pool, Options{Keys: base.keys})
	dbNow := func() time.Time {
		var now time.Time
		if err := base.pool.QueryRow(ctx, "select clock_timestamp()").Scan(&now); err != nil {
			t.Fatal(err)
		}
		return now
	}

	first, err := start(e, "first")
	if err != nil {
		t.Fatal(err)
	}
	if n := reads.n.Load(); n != 1 {
		t.Fatalf("the first start read the clock %d times, want 1 (no reading yet)", n)
	}
	read := time.Now()
	for i := range 20 {
		if time.Since(read) > clockFresh/2 {
			// A slow machine: later starts could find the reading stale.
			if i == 0 {
				t.Fatal("no start within half of clockFresh of the first")
			}
			break
		}
		inst, err := start(e, "next")
		if err != nil {
			t.Fatal(err)
		}
		after := dbNow()
		if inst.CreatedAt.After(after) {
			t.Fatalf("start %d dated %v, after the database's clock %v once it committed", i, inst.CreatedAt, after)
		}
		if inst.CreatedAt.Before(first.CreatedAt) || after.Sub(inst.CreatedAt) > clockFresh {
			t.Fatalf("start %d dated %v: before the first start (%v) or more than %v behind the database (%v)", i, inst.CreatedAt, first.CreatedAt, clockFresh, after)
		}
		occs := occurrences(t, e, inst.ID)["crm"]
		if len(occs) != 1 || occs[0].AvailableAt.After(after) {
			t.Fatalf("start %d: occurrence %+v not available by %v", i, occs, after)
		}
	}
	if n := reads.n.Load(); n != 1 {
		t.Fatalf("the clock was read %d times in all, want 1: starts within %v of a reading follow it", n, clockFresh)
	}
	time.Sleep(clockFresh + 50*time.Millisecond)
	if _, err := start(e, "later"); err != nil {
		t.Fatal(err)
	}
	if n := reads.n.Load(); n != 2 {
		t.Fatalf("a start %v after the last reading read the clock %d times in all, want 2", clockFresh, n)
	}
}
