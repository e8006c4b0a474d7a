package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/relais/relais/internal/dbtest"
	"github.com/relais/relais/internal/testlog"
)

// Retention deletes ended instances older than the retention with their
// occurrences and attempts, once, across concurrent replicas; it keeps
// running and held instances, recent ones, and the audit logs.
func TestRetentionDeletesEndedHistoryOnce(t *testing.T) {
	t.Parallel()
	clock := &testClock{}
	pool := dbtest.Pool(t)
	a, b := New(pool, clock.options(t)), New(pool, clock.options(t))
	prepare(t, a, "")
	ctx := context.Background()
	start := func() uuid.UUID {
		inst, _, err := a.StartInstance(ctx, StartRequest{ProcessKey: "two_step", Inputs: json.RawMessage(`{"name":"Acme"}`)})
		if err != nil {
			t.Fatal(err)
		}
		return inst.ID
	}
	var old []uuid.UUID
	for range 30 {
		id := start()
		// Ended by a stop, with an attempt recorded first.
		c := consumer(t, a)
		claimOne(t, a, c, "w")
		if _, err := a.Act(ctx, Actor{Name: "ops"}, ActionStop, id, "cleanup"); err != nil {
			t.Fatal(err)
		}
		old = append(old, id)
	}
	running := start()
	clock.advance(40 * 24 * time.Hour)
	recent := start()
	if _, err := a.Act(ctx, Actor{Name: "ops"}, ActionStop, recent, "cleanup"); err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	var na, nb int64
	wg.Go(func() { na, _ = a.DeleteEnded(ctx, 30*24*time.Hour) })
	wg.Go(func() { nb, _ = b.DeleteEnded(ctx, 30*24*time.Hour) })
	wg.Wait()
	if na+nb != int64(len(old)) {
		t.Errorf("replicas deleted %d + %d instances, want %d in all", na, nb, len(old))
	}
	count := func(sql string, args ...any) int {
		var n int
		if err := pool.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count("select count(*) from instances where id = any($1)", old); n != 0 {
		t.Errorf("%d old ended instances left", n)
	}
	if n := count("select count(*) from occurrences o where not exists (select 1 from instances i where i.id = o.instance_id)"); n != 0 {
		t.Errorf("%d orphan occurrences", n)
	}
	if n := count("select count(*) from attempts a where not exists (select 1 from occurrences o where o.id = a.occurrence_id)"); n != 0 {
		t.Errorf("%d orphan attempts", n)
	}
	if n := count("select count(*) from instances where id = any($1)", []uuid.UUID{running, recent}); n != 2 {
		t.Errorf("the running and the recent instances: %d left, want 2", n)
	}
	if n := count("select count(*) from operator_actions"); n != len(old)+1 {
		t.Errorf("%d operator actions left, want %d: audit logs outlive retention", n, len(old)+1)
	}
	if n, err := a.DeleteEnded(ctx, 30*24*time.Hour); err != nil || n != 0 {
		t.Errorf("a second pass deleted %d (%v), want 0", n, err)
	}
}

// A replica's first retention pass comes within seconds of its start, not
// an interval later: one restarted more often than every interval would
// never delete anything.
func TestFirstRetentionPassComesSoon(t *testing.T) {
	t.Parallel()
	for range 100 {
		if d := firstPassDelay(time.Minute); d < 5*time.Second || d > 10*time.Second {
			t.Fatalf("first pass after %v with passes every minute, want 5 to 10 s", d)
		}
		if d := firstPassDelay(10 * time.Millisecond); d < 5*time.Millisecond || d > 10*time.Millisecond {
			t.Fatalf("first pass after %v with passes every 10 ms, want 5 to 10 ms", d)
		}
	}
}

// The retention loop tells its observer what each pass deleted (the
// replica's relais_retention_* metrics), a pass that deleted nothing
// included.
func TestRetentionLoopReportsItsPasses(t *testing.T) {
	t.Parallel()
	clock := &testClock{}
	pool := dbtest.Pool(t)
	e := New(pool, clock.options(t))
	prepare(t, e, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopInstances(t, e, 3)
	clock.advance(2 * time.Hour)
	passes := make(chan RetentionPass, 10)
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.RunRetentionLoop(ctx, time.Hour, 10*time.Millisecond, func(p RetentionPass) { passes <- p }, nil)
	}()
	first, second := <-passes, <-passes
	cancel()
	<-done
	if first.Deleted != 3 || first.Failed || first.Took <= 0 {
		t.Errorf("first pass %+v, want 3 deleted", first)
	}
	if second.Deleted != 0 || second.Failed {
		t.Errorf("second pass %+v, want nothing deleted", second)
	}
}

// History that ended before the database first ran a relais with retention
// (an upgrade from a version that kept everything) is kept a retention
// period from then: the first start after such an upgrade deleted it
// within seconds.
func TestRetentionKeepsHistoryFromBeforeItBegan(t *testing.T) {
	t.Parallel()
	clock := &testClock{}
	pool := dbtest.Pool(t)
	e := New(pool, clock.options(t))
	prepare(t, e, "")
	ctx := context.Background()
	stopInstances(t, e, 3)
	clock.advance(90 * 24 * time.Hour)
	since := func(ago time.Duration) {
		if _, err := pool.Exec(ctx, "update retention_since set since = $1", clock.now().Add(-ago)); err != nil {
			t.Fatal(err)
		}
	}
	since(29 * 24 * time.Hour) // upgraded 29 days ago; the instances ended 90 days ago
	if n, err := e.DeleteEnded(ctx, 30*24*time.Hour); err != nil || n != 0 {
		t.Errorf("within a retention period of the upgrade: %d deleted (%v), want 0", n, err)
	}
	since(31 * 24 * time.Hour)
	if n, err := e.DeleteEnded(ctx, 30*24*time.Hour); err != nil || n != 3 {
		t.Errorf("a retention period after the upgrade: %d deleted (%v), want 3", n, err)
	}
}

// stopInstances starts n instances of two_step and stops them: n ended
// instances for retention to delete.
func stopInstances(t *testing.T, e *Engine, n int) {
	t.Helper()
	ctx := context.Background()
	for range n {
		inst, _, err := e.StartInstance(ctx, StartRequest{ProcessKey: "two_step", Inputs: json.RawMessage(`{"name":"Acme"}`)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Act(ctx, Actor{Name: "ops"}, ActionStop, inst.ID, "cleanup"); err != nil {
			t.Fatal(err)
		}
	}
}

// A pass tells of each batch as it commits: a first purge of a long
// history, minutes in one pass, shows its progress as it goes.
func TestRetentionTellsEachBatch(t *testing.T) {
	clock := &testClock{}
	pool := dbtest.Pool(t)
	e := New(pool, clock.options(t))
	prepare(t, e, "")
	stopInstances(t, e, 5)
	clock.advance(2 * time.Hour)
	defer func(n int32) { retentionBatch = n }(retentionBatch)
	retentionBatch = 2
	var batches []int64
	n, err := e.deleteEnded(context.Background(), time.Hour, func(d int64) { batches = append(batches, d) })
	if err != nil || n != 5 || fmt.Sprint(batches) != "[2 2 1]" {
		t.Errorf("deleted %d (%v) in batches %v, want 5 told as 2, 2 and 1", n, err, batches)
	}
}

// Replicas configured with different retentions delete only past the
// longest of those noted within a day, and say so in their logs while
// they run: a PT1H replica beside a P30D one deleted, within seconds of
// its start, what the other keeps (SRE QA). A replica stopped (an outage,
// a deployment) still weighs for a day; one that keeps everything stops
// every deletion.
func TestRetentionTakesTheLongestOfTheReplicas(t *testing.T) {
	t.Parallel()
	clock := &testClock{}
	pool := dbtest.Pool(t)
	var logs testlog.Buffer
	replica := func(name string) *Engine {
		o := clock.options(t)
		o.Replica = name
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		return New(pool, o)
	}
	short, long, forever := replica("short"), replica("long"), replica("forever")
	prepare(t, short, "")
	stopInstances(t, short, 3)
	clock.advance(2 * time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	exec := func(sql string) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}

	if got, err := forever.noteRetention(ctx, 0, time.Minute); err != nil || got != 0 {
		t.Fatalf("forever alone: %v, %v; want forever", got, err)
	}
	if _, ok := short.Retention(); ok {
		t.Error("Retention known before any note")
	}
	if got, err := short.noteRetention(ctx, time.Hour, time.Minute); err != nil || got != 0 {
		t.Fatalf("PT1H beside a replica keeping everything: %v, %v; want forever", got, err)
	}
	// The console says what applies, and that it is not this replica's own.
	if r, ok := short.Retention(); !ok || r != (Retention{Configured: time.Hour, Applied: 0}) {
		t.Errorf("Retention after the note = %+v, %v; want PT1H configured, forever applied", r, ok)
	}
	exec("delete from retention_settings where replica = 'forever'")

	longCtx, stopLong := context.WithCancel(ctx)
	longDone := make(chan struct{})
	go func() {
		defer close(longDone)
		long.RunRetentionLoop(longCtx, 30*24*time.Hour, 10*time.Millisecond, nil, nil)
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var n int
		if err := pool.QueryRow(ctx, "select count(*) from retention_settings where replica = 'long'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the P30D replica noted nothing")
		}
	}
	passes := make(chan RetentionPass, 1000)
	go short.RunRetentionLoop(ctx, time.Hour, 10*time.Millisecond, func(p RetentionPass) { passes <- p }, nil)
	for range 5 {
		if p := <-passes; p.Deleted != 0 || p.Failed {
			t.Fatalf("beside a running P30D replica, a PT1H pass %+v; want nothing deleted", p)
		}
	}
	for _, want := range []string{"replicas disagree on RELAIS_RETENTION", "retention=PT1H other_replica=long other_retention=P30D", "retention=P30D other_replica=short other_retention=PT1H",
		"retention=PT1H other_replica=forever other_retention=forever"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack %q:\n%s", want, logs.String())
		}
	}
	if n := strings.Count(logs.String(), "other_replica=long"); n != 1 {
		t.Errorf("the disagreement with long was logged %d times, want once (hourly at most)", n)
	}
	// Stopped, the P30D replica still weighs: an outage or a deployment
	// must not let the shorter one delete what it keeps.
	stopLong()
	<-longDone
	exec("update retention_settings set noted_at = now() - interval '10 minutes' where replica = 'long'")
	for range 5 {
		if p := <-passes; p.Deleted != 0 || p.Failed || p.Applied != 30*24*time.Hour {
			t.Fatalf("10 minutes after the P30D replica stopped, a PT1H pass %+v; want nothing deleted, P30D applied", p)
		}
	}
	// And says so, once, with when it ends: the warning above stopped
	// with the other replica, and passes counted ok deleting nothing
	// (SRE QA).
	// The passes read above may have queued before the note aged: wait
	// for a pass that saw it.
	waitUntil(t, func() bool { return strings.Contains(logs.String(), "retention held back") })
	if n := strings.Count(logs.String(), "retention held back"); n != 1 || !strings.Contains(logs.String(), "applied=P30D other_replica=long weighs_until=") {
		t.Errorf("held back said %d times; want once, naming the replica, what it applies and until when:\n%s", n, logs.String())
	}
	// A day after its last note, it is forgotten.
	exec("update retention_settings set noted_at = now() - interval '25 hours' where replica = 'long'")
	for timeout := time.After(10 * time.Second); ; {
		select {
		case p := <-passes:
			if p.Deleted == 3 {
				return
			}
		case <-timeout:
			t.Fatal("the PT1H replica deleted nothing a day after the P30D one stopped")
		}
	}
}

// A replica notes its retention as its loop starts, not at its first
// pass 5 to 10 s later: replicas started together see each other's
// settings at their first passes (verifier QA: a PT1H replica started
// with a P30D one deleted at its first pass, before the other noted).
func TestRetentionIsNotedAtStart(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	o := (&testClock{}).options(t)
	o.Replica = "starting"
	e := New(pool, o)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.RunRetentionLoop(ctx, 30*24*time.Hour, time.Minute, nil, nil) }()
	defer func() { cancel(); <-done }()
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var seconds int64
		err := pool.QueryRow(ctx, "select retention_seconds from retention_settings where replica = 'starting'").Scan(&seconds)
		if err == nil && seconds == 30*24*3600 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("3 s after the loop started (its first pass 5 to 10 s later): %v, %d; want P30D noted", err, seconds)
		}
	}
}

// A replica stopped cleanly marks its note stopped: the next run of its
// host applies its own, shorter, retention from its first pass, where it
// was held back for three passes by its previous run, warned of as another
// replica (SRE QA).
func TestRetentionOfACleanStopIsNoLiveReplicas(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	replica := replicasOn(t, pool)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	first := replica("box-201")
	go func() { defer close(done); first.RunRetentionLoop(ctx, 30*24*time.Hour, time.Minute, nil, nil) }()
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var n int
		if err := pool.QueryRow(context.Background(), "select count(*) from retention_settings where replica = 'box-201'").Scan(&n); err == nil && n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first run never noted its retention")
		}
	}
	cancel()
	<-done
	if got, err := replica("box-202").noteRetention(context.Background(), time.Hour, time.Minute); err != nil || got != time.Hour {
		t.Errorf("the next run of the host, at once: %v, %v; want its own PT1H", got, err)
	}
	// Forgotten by the host's next run, it weighs for no one.
	if got, err := replica("other-8").noteRetention(context.Background(), time.Hour, time.Minute); err != nil || got != time.Hour {
		t.Errorf("another host beside the forgotten run: %v, %v; want PT1H (box-201's note forgotten by box-202)", got, err)
	}
}

// An earlier run of a replica's own host, stopped, is forgotten: a replica
// restarted takes a new name (host and pid), and a one-server Relais tried
// once with forever kept everything for a day after it was set back
// (verifier QA). Another host's stopped replica still weighs.
func TestRetentionForgetsEarlierRunsOfItsHost(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	replica := replicasOn(t, pool)
	ctx := context.Background()
	if _, err := replica("box-101").noteRetention(ctx, 0, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "update retention_settings set noted_at = now() - interval '10 minutes'"); err != nil {
		t.Fatal(err)
	}
	if got, err := replica("box-102").noteRetention(ctx, 30*24*time.Hour, time.Minute); err != nil || got != 30*24*time.Hour {
		t.Errorf("after its host's earlier forever run: %v, %v; want P30D", got, err)
	}
	if _, err := replica("other-7").noteRetention(ctx, 0, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "update retention_settings set noted_at = now() - interval '10 minutes' where replica = 'other-7'"); err != nil {
		t.Fatal(err)
	}
	if got, err := replica("box-103").noteRetention(ctx, 30*24*time.Hour, time.Minute); err != nil || got != 0 {
		t.Errorf("beside another host's stopped forever replica: %v, %v; want forever", got, err)
	}
	for name, want := range map[string]string{"box-7": "box", "box-1-9f3a": "box", "my-box-42": "my-box", "short": "", "box": ""} {
		if got := replicaHost(name); got != want {
			t.Errorf("replicaHost(%q) = %q, want %q", name, got, want)
		}
	}
}

// waitUntil polls cond for up to 10 s; the caller checks what it waited for.
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			return
		}
	}
}

// replicasOn makes replicas of one database, named as asked, sharing a
// test clock.
func replicasOn(t *testing.T, pool *pgxpool.Pool) func(name string) *Engine {
	clock := &testClock{}
	return func(name string) *Engine {
		o := clock.options(t)
		o.Replica = name
		return New(pool, o)
	}
}
