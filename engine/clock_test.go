package engine

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

func TestDBClockFollowsItsLatestTightReading(t *testing.T) {
	var c dbClock
	local := time.Now()
	db := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	if _, ok := c.now(local); ok {
		t.Fatal("an estimate before any reading")
	}
	c.observe(db, local.Add(-time.Millisecond), local)
	if got, ok := c.now(local.Add(5 * time.Millisecond)); !ok || !got.Equal(db.Add(5*time.Millisecond)) {
		t.Fatalf("5 ms later: %v %v, want %v", got, ok, db.Add(5*time.Millisecond))
	}
	// An instant taken just before the reading arrived.
	if got, ok := c.now(local.Add(-time.Millisecond)); !ok || !got.Equal(db.Add(-time.Millisecond)) {
		t.Fatalf("1 ms before the reading: %v %v, want %v", got, ok, db.Add(-time.Millisecond))
	}
	// A reading whose round trip took longer than readingLag may be far
	// behind the database (its transaction began at the start of it):
	// ignored.
	c.observe(db.Add(time.Millisecond), local, local.Add(readingLag+time.Millisecond))
	if got, _ := c.now(local.Add(100 * time.Millisecond)); !got.Equal(db.Add(100 * time.Millisecond)) {
		t.Fatalf("after a slow reading: %v, want %v (the slow one ignored)", got, db.Add(100*time.Millisecond))
	}
	// Every tight reading replaces the last, even one behind the estimate
	// (the database's clock stepped back, or this one ran fast): the
	// estimate is never carried further than clockFresh from a reading.
	c.observe(db.Add(50*time.Millisecond), local.Add(199*time.Millisecond), local.Add(200*time.Millisecond))
	if got, _ := c.now(local.Add(200 * time.Millisecond)); !got.Equal(db.Add(50 * time.Millisecond)) {
		t.Fatalf("after a reading behind the estimate: %v, want %v", got, db.Add(50*time.Millisecond))
	}
	if got, ok := c.now(local.Add(200*time.Millisecond + clockFresh)); !ok || !got.Equal(db.Add(50*time.Millisecond+clockFresh)) {
		t.Fatalf("clockFresh after it: %v %v", got, ok)
	}
	if _, ok := c.now(local.Add(200*time.Millisecond + clockFresh + time.Millisecond)); ok {
		t.Fatal("an estimate from a reading older than clockFresh")
	}
}

// TestAStartFollowsTheDatabaseClock: a start while a reading of the
// database's clock is fresh is dated from it without reading the clock
// (a round trip), never ahead of the database (its occurrence is
// claimable as soon as it commits); with no fresh reading it reads it.
func TestAStartFollowsTheDatabaseClock(t *testing.T) {
	ctx := context.Background()
	e, base, log := tracedEngine(t)
	reads := func() int { return log.sent("-- name: Clock ") }
	// The rule on slow readings is TestDBClockFollowsItsLatestTightReading's;
	// here every reading counts, however loaded the machine.
	e.clock.lag = time.Minute
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
	if n := reads(); n != 1 {
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
	if n := reads(); n != 1 {
		t.Fatalf("the clock was read %d times in all, want 1: starts within %v of a reading follow it", n, clockFresh)
	}
	time.Sleep(clockFresh + 50*time.Millisecond)
	if _, err := start(e, "later"); err != nil {
		t.Fatal(err)
	}
	if n := reads(); n != 2 {
		t.Fatalf("a start %v after the last reading read the clock %d times in all, want 2", clockFresh, n)
	}

	// A settlement's lock reads the clock too: a start after it follows
	// that reading.
	time.Sleep(clockFresh + 50*time.Millisecond)
	c := consumer(t, e)
	r := claimOne(t, e, c, "w")
	if _, err := e.Complete(ctx, WorkerRef{ConsumerID: c, WorkerID: "w", Occurrence: r.ID}, json.RawMessage(`{"result":"created","crm_id":"CRM-1"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := start(e, "after a settlement"); err != nil {
		t.Fatal(err)
	}
	if n := reads(); n != 2 {
		t.Fatalf("a start right after a settlement read the clock (%d reads in all, want 2)", n)
	}
}
