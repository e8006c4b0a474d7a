package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/queries"
)

// setupLanes is setup with lanes group-commit lanes shared by every
// write, starts included, so that a test can hold them all and put a start
// and settlements in one group.
func setupLanes(t testing.TB, lanes int) *Engine {
	t.Helper()
	e := setup(t)
	e.group = newGroupCommit(e, lanes)
	e.starts = e.group
	return e
}

// xactOf is the transaction that last wrote the row id of table
// (instances or occurrences): writes grouped together share it.
func xactOf(t testing.TB, e *Engine, table string, id uuid.UUID) string {
	t.Helper()
	var x string
	if err := e.pool.QueryRow(context.Background(), "select xmin::text from "+table+" where id = $1", id).Scan(&x); err != nil {
		t.Fatal(err)
	}
	return x
}

// holdLane occupies e's only lane until the returned release is called,
// so that writes made meanwhile queue into one group.
func holdLane(t testing.TB, e *Engine) (release func()) {
	t.Helper()
	held, free := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- e.group.write(context.Background(), uuid.Nil, func(context.Context, *queries.Queries) error {
			close(held)
			<-free
			return nil
		})
	}()
	<-held
	return func() {
		close(free)
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

// waitLanes waits until cond holds of e's settlement lanes (how many are
// busy, how many writes queue), failing the test after 10 s.
func waitLanes(t testing.TB, e *Engine, what string, cond func(busy, queued int) bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		e.group.mu.Lock()
		busy, queued := e.group.busy, len(e.group.queue)
		e.group.mu.Unlock()
		if cond(busy, queued) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d lanes busy, %d writes queued", what, busy, queued)
		}
	}
}

// waitQueued waits until n writes queue behind the held lane.
func waitQueued(t testing.TB, e *Engine, n int) {
	t.Helper()
	waitLanes(t, e, fmt.Sprintf("%d writes never queued", n), func(_, queued int) bool { return queued == n })
}

// waitIdle waits until every lane is free and nothing queues: a lane is
// freed just after its group's writes are answered.
func waitIdle(t testing.TB, e *Engine) {
	t.Helper()
	waitLanes(t, e, "lanes still busy after everything ended", func(busy, queued int) bool { return busy == 0 && queued == 0 })
}

func start(e *Engine, name string) (Instance, error) {
	inst, _, err := e.StartInstance(context.Background(), StartRequest{ProcessKey: "two_step", Inputs: json.RawMessage(`{"name":"` + name + `"}`)})
	return inst, err
}

func TestConcurrentWritesShareATransaction(t *testing.T) {
	t.Parallel()
	e := setupLanes(t, 1)
	prepare(t, e, "")
	var wg sync.WaitGroup
	ids := make([]uuid.UUID, 40)
	for i := range ids {
		wg.Go(func() {
			inst, err := start(e, fmt.Sprint("Acme ", i))
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = inst.ID
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	xacts := map[string]bool{}
	for _, id := range ids {
		xacts[xactOf(t, e, "instances", id)] = true
		if occs := occurrences(t, e, id); len(occs["crm"]) != 1 {
			t.Fatalf("instance %s has occurrences %v, want one of crm", id, occs)
		}
	}
	// One lane: while one transaction commits, every start that arrives
	// waits for the next.
	if len(xacts) >= len(ids) {
		t.Fatalf("40 concurrent starts took %d transactions; want them grouped", len(xacts))
	}
}

func TestGroupedWritesKeepTheirOwnOutcomes(t *testing.T) {
	t.Parallel()
	e := setupLanes(t, 1)
	prepare(t, e, "")
	ctx := context.Background()
	c := consumer(t, e)
	var resv []Reservation
	for i := range 2 {
		if _, err := start(e, fmt.Sprint("Acme ", i)); err != nil {
			t.Fatal(err)
		}
		resv = append(resv, claimOne(t, e, c, "w"))
	}

	t.Run("a refused write changes nothing and the others stand", func(t *testing.T) {
		release := holdLane(t, e)
		var wg sync.WaitGroup
		var good, bad error
		var startErr error
		wg.Go(func() {
			_, good = e.Complete(ctx, WorkerRef{ConsumerID: c, WorkerID: "w", Occurrence: resv[0].ID}, json.RawMessage(`{"result":"created","crm_id":"C-1"}`))
		})
		wg.Go(func() {
			_, bad = e.Complete(ctx, WorkerRef{ConsumerID: c, WorkerID: "w", Occurrence: resv[1].ID}, json.RawMessage(`{"result":"nope"}`))
		})
		wg.Go(func() { _, startErr = start(e, "Globex") })
		waitQueued(t, e, 3)
		release()
		wg.Wait()
		if good != nil || startErr != nil {
			t.Fatalf("accepted writes failed: complete %v, start %v", good, startErr)
		}
		if !fault.HasCode(bad, "invalid_outputs") {
			t.Fatalf("invalid outputs answered %v, want invalid_outputs", bad)
		}
		o, err := e.q.OccurrenceGet(ctx, resv[1].ID)
		if err != nil || o.Status != StatusReserved {
			t.Fatalf("the refused completion's occurrence is %q (%v), want still reserved", o.Status, err)
		}
		o, err = e.q.OccurrenceGet(ctx, resv[0].ID)
		if err != nil || o.Status != StatusCompleted {
			t.Fatalf("the accepted completion's occurrence is %q (%v), want completed", o.Status, err)
		}
	})

	t.Run("a write the database refuses does not fail the others", func(t *testing.T) {
		release := holdLane(t, e)
		var wg sync.WaitGroup
		var startErr, broken error
		wg.Go(func() { _, startErr = start(e, "Initech") })
		wg.Go(func() {
			broken = e.group.write(ctx, uuid.Nil, func(ctx context.Context, q *queries.Queries) error {
				// A statement the server rejects (a foreign key) aborts
				// the whole group's transaction.
				_, err := q.InstanceInsert(ctx, queries.InstanceInsertParams{ID: uuid.Must(uuid.NewV7()), ProcessKey: "no_such_process", Version: 1, Inputs: json.RawMessage(`{}`)})
				return fmt.Errorf("broken write: %w", err)
			})
		})
		waitQueued(t, e, 2)
		release()
		wg.Wait()
		if startErr != nil {
			t.Fatalf("the start failed with its group: %v", startErr)
		}
		if broken == nil {
			t.Fatal("the broken write succeeded")
		}
	})
}

func TestAWriteQueuedPastItsDeadlineNeverRuns(t *testing.T) {
	t.Parallel()
	e := setupLanes(t, 1)
	release := holdLane(t, e)
	ctx, cancel := context.WithCancel(context.Background())
	ran := false
	errc := make(chan error, 1)
	go func() {
		errc <- e.group.write(ctx, uuid.Nil, func(context.Context, *queries.Queries) error { ran = true; return nil })
	}()
	waitQueued(t, e, 1)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled queued write answered %v, want context.Canceled", err)
	}
	release()
	if ran {
		t.Fatal("a write whose caller gave up while queued ran")
	}
	waitIdle(t, e)
}

func TestAWriteTakenIntoAGroupOutlivesItsCaller(t *testing.T) {
	t.Parallel()
	e := setupLanes(t, 1)
	prepare(t, e, "")
	release := holdLane(t, e)
	ctx, cancel := context.WithCancel(context.Background())
	var id uuid.UUID
	errc := make(chan error, 1)
	go func() {
		errc <- e.group.write(ctx, uuid.Nil, func(ctx context.Context, q *queries.Queries) error {
			// The caller gives up once its write runs: the group's
			// context, not the caller's, carries its statements.
			cancel()
			p, err := e.prepareStart(ctx, StartRequest{ProcessKey: "two_step", Inputs: json.RawMessage(`{"name":"Umbrella"}`)})
			if err != nil {
				return err
			}
			id = p.id
			_, _, _, err = e.insertStart(ctx, q, p)
			return err
		})
	}()
	waitQueued(t, e, 1)
	release()
	if err := <-errc; err != nil {
		t.Fatalf("a write whose caller left after it was taken answered %v, want its own outcome", err)
	}
	if _, err := e.GetInstance(context.Background(), id); err != nil {
		t.Fatalf("its instance: %v", err)
	}
}

// TestAStartAnswersTheRowsItWrote holds insertNew to the database: the
// occurrences a start answers, built in Go rather than read back, equal
// what the database stored, in every shape a first node can take.
func TestAStartAnswersTheRowsItWrote(t *testing.T) {
	t.Parallel()
	e := setup(t)
	prepare(t, e, `"policy":{"max_attempts":3,"retry_delay":"PT1.5S","deadline":"PT90M","priority":7},`)
	ctx := context.Background()
	check := func(t *testing.T, process, inputs string, business *string, expect func(t *testing.T, inst queries.Instance, o queries.Occurrence)) {
		t.Helper()
		p, err := e.prepareStart(ctx, StartRequest{ProcessKey: process, Inputs: json.RawMessage(inputs), BusinessKey: business})
		if err != nil {
			t.Fatal(err)
		}
		var path []queries.Occurrence
		var inst queries.Instance
		// As a start runs: in a transaction with its state (the instance
		// built at the transaction's clock, not read back either).
		if err := e.stateTx(ctx, nil, func(ctx context.Context, q *queries.Queries, _ pgx.Tx) error {
			inst, path, _, err = e.insertStart(ctx, q, p)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		storedInst, err := e.q.InstanceGet(ctx, inst.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !jsonEqual(inst.Inputs, storedInst.Inputs) {
			t.Fatalf("instance inputs: answered %s, stored %s", inst.Inputs, storedInst.Inputs)
		}
		if !storedInst.CreatedAt.Equal(inst.CreatedAt) || storedInst.Status != InstanceRunning || deref(storedInst.BusinessKey) != deref(business) ||
			storedInst.ProcessKey != process || storedInst.IdempotencyKey != nil || storedInst.EndedAt != nil {
			t.Fatalf("stored instance %+v for a start of %s", storedInst, process)
		}
		a, b := inst, storedInst
		a.Inputs, b.Inputs, a.CreatedAt, b.CreatedAt = nil, nil, time.Time{}, time.Time{}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("answered instance %+v, stored %+v", a, b)
		}
		if len(path) == 0 {
			t.Fatal("the start created no occurrence")
		}
		for _, built := range path {
			stored, err := e.q.OccurrenceGet(ctx, built.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(built.Inputs, stored.Inputs) {
				t.Fatalf("inputs: answered %s, stored %s", built.Inputs, stored.Inputs)
			}
			// What the row must say, so that a mistake in building it
			// (which the database would store as built) shows.
			expect(t, inst, stored)
			built.Inputs, stored.Inputs = nil, nil
			if diff := cmpRows(built, stored); diff != "" {
				t.Fatalf("answered row differs from the stored one: %s", diff)
			}
		}
	}
	bk := "ACME-1"
	t.Run("available, with a deadline, a policy and a business key", func(t *testing.T) {
		check(t, "two_step", `{"name":"Acme"}`, &bk, func(t *testing.T, inst queries.Instance, o queries.Occurrence) {
			at := inst.CreatedAt
			if o.Status != StatusAvailable || o.Node != "crm" || o.Mode != "pull" || o.DefinitionKey != "crm" || o.Revision != 1 || o.Attempts != 0 ||
				o.Priority != 7 || o.MaxAttempts != 3 || o.RetryDelay != 1500*time.Millisecond || o.Deadline == nil || *o.Deadline != 90*time.Minute ||
				!o.CreatedAt.Equal(at) || !o.AvailableAt.Equal(at) || o.ClaimableAt == nil || !o.ClaimableAt.Equal(at) ||
				o.DeadlineAt == nil || !o.DeadlineAt.Equal(at.Add(90*time.Minute)) || o.SettledAt != nil || o.ErrorCode != nil ||
				deref(o.ProcessKey) != "two_step" || deref(o.BusinessKey) != bk || o.ProcessVersion == nil || *o.ProcessVersion != inst.Version ||
				o.InstanceID != inst.ID || o.Destination != nil || o.Timeout != nil {
				t.Fatalf("stored %+v for an available first node of instance %+v", o, inst)
			}
		})
	})

	// The first node fails from birth (its inputs break the revision) and
	// its error path enters a second node in the same start.
	publishBornFailing(t, e, "birth")
	t.Run("failed from birth, then its error path", func(t *testing.T) {
		check(t, "birth", `{"name":"Acme Corporation"}`, nil, func(t *testing.T, inst queries.Instance, o queries.Occurrence) {
			at := inst.CreatedAt
			switch o.Node {
			case "strict":
				if o.Status != StatusFailed || deref(o.ErrorCode) != "invalid_inputs" || o.ErrorMessage == nil || o.ClaimableAt != nil ||
					o.SettledAt == nil || !o.SettledAt.Equal(at) || !o.CreatedAt.Equal(at) {
					t.Fatalf("stored %+v for a node failed from birth", o)
				}
			case "notify":
				if o.Status != StatusAvailable || o.SettledAt != nil || o.ClaimableAt == nil || !o.CreatedAt.Equal(at) || o.DeadlineAt != nil {
					t.Fatalf("stored %+v for the node of its error path", o)
				}
			default:
				t.Fatalf("unexpected node %q", o.Node)
			}
		})
	})
}

func jsonEqual(x, y json.RawMessage) bool {
	var a, b any
	return json.Unmarshal(x, &a) == nil && json.Unmarshal(y, &b) == nil && reflect.DeepEqual(a, b)
}

// cmpRows names the first field where two occurrence rows differ.
func cmpRows(a, b queries.Occurrence) string {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	for i := range va.NumField() {
		x, y := va.Field(i).Interface(), vb.Field(i).Interface()
		if tx, ok := deref2time(x); ok {
			ty, _ := deref2time(y)
			if !tx.Equal(ty) {
				return fmt.Sprintf("%s: %v vs %v", va.Type().Field(i).Name, x, y)
			}
			continue
		}
		if !reflect.DeepEqual(x, y) {
			return fmt.Sprintf("%s: %#v vs %#v", va.Type().Field(i).Name, x, y)
		}
	}
	return ""
}

func deref2time(v any) (time.Time, bool) {
	switch t := v.(type) {
	case time.Time:
		return t, true
	case *time.Time:
		if t == nil {
			return time.Time{}, true
		}
		return *t, true
	}
	return time.Time{}, false
}

// TestGroupedSettlementsOfOneOccurrenceSeeEachOther: rows locked up front
// for a group are true for its first write only; a second settlement of
// the same occurrence in the group reads what the first did.
func TestGroupedSettlementsOfOneOccurrenceSeeEachOther(t *testing.T) {
	t.Parallel()
	e := setupLanes(t, 1)
	prepare(t, e, "")
	ctx := context.Background()
	c := consumer(t, e)
	inst, err := start(e, "Acme")
	if err != nil {
		t.Fatal(err)
	}
	res := claimOne(t, e, c, "w")
	release := holdLane(t, e)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = e.Complete(ctx, WorkerRef{ConsumerID: c, WorkerID: "w", Occurrence: res.ID}, json.RawMessage(fmt.Sprintf(`{"result":"created","crm_id":"C-%d"}`, i)))
		})
	}
	waitQueued(t, e, 2)
	release()
	wg.Wait()
	ok, settled := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case fault.HasCode(err, "already_settled"):
			settled++
		default:
			t.Fatalf("unexpected answer %v", err)
		}
	}
	if ok != 1 || settled != 1 {
		t.Fatalf("two completions of one occurrence in one group: %v; want one accepted, one already_settled", errs)
	}
	if occs := occurrences(t, e, inst.ID); len(occs["check"]) != 1 {
		t.Fatalf("the instance advanced to %v; want one occurrence of check", occs)
	}
}

// TestBatchesLockingTheSameInstancesDoNotDeadlock: two batch settlements
// over the same occurrences in opposite orders lock them in one order.
func TestBatchesLockingTheSameInstancesDoNotDeadlock(t *testing.T) {
	t.Parallel()
	e := setup(t)
	prepare(t, e, "")
	ctx := context.Background()
	c := consumer(t, e)
	var items []BatchSettlement
	for i := range 30 {
		if _, err := start(e, fmt.Sprint("Acme ", i)); err != nil {
			t.Fatal(err)
		}
		items = append(items, BatchSettlement{Occurrence: claimOne(t, e, c, "w").ID, Outputs: json.RawMessage(`{"result":"created","crm_id":"C"}`)})
	}
	reversed := slices.Clone(items)
	slices.Reverse(reversed)
	var wg sync.WaitGroup
	results := make([][]SettleResult, 2)
	for i, batch := range [][]BatchSettlement{items, reversed} {
		wg.Go(func() {
			var err error
			if results[i], err = e.SettleBatch(ctx, c, "w", batch); err != nil {
				t.Errorf("batch %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for j := range items {
		a, b := results[0][j].Err, results[1][len(items)-1-j].Err
		// Both completed it identically: the later one is a replay.
		if a != nil || b != nil {
			t.Fatalf("occurrence %d: %v and %v; want both answered as completed (the second a replay)", j, a, b)
		}
	}
}

// TestAClaimSharesItsGroupsCommit: a claim arriving while the lanes are
// busy joins the next group, and sees what the writes before it in the
// group did: here it claims the occurrence a start queued before it
// created, and both commit together.
func TestAClaimSharesItsGroupsCommit(t *testing.T) {
	t.Parallel()
	e := setupLanes(t, 1)
	prepare(t, e, "")
	c := consumer(t, e)
	release := holdLane(t, e)
	var inst Instance
	var startErr, claimErr error
	var got []Reservation
	var wg sync.WaitGroup
	wg.Go(func() { inst, startErr = start(e, "Acme") })
	waitQueued(t, e, 1)
	wg.Go(func() {
		got, claimErr = e.Claim(context.Background(), ClaimRequest{ConsumerID: c, WorkerID: "w", Pairs: Pairs{Keys: []string{"crm"}, Revisions: []int32{1}},
			MaxTasks: 5, LockDuration: time.Minute})
	})
	waitQueued(t, e, 2)
	release()
	wg.Wait()
	if startErr != nil || claimErr != nil {
		t.Fatalf("start %v, claim %v", startErr, claimErr)
	}
	if len(got) != 1 || got[0].InstanceID != inst.ID {
		t.Fatalf("the claim got %v; want the occurrence the start before it in its group created", got)
	}
	if startedIn, claimedIn := xactOf(t, e, "instances", inst.ID), xactOf(t, e, "occurrences", got[0].ID); startedIn != claimedIn {
		t.Fatalf("the start (xact %s) and the claim (xact %s) were not committed together", startedIn, claimedIn)
	}
}

// startPastAHeldLane starts an instance while e's settlement lane is held,
// failing with what unless it commits within 10 s.
func startPastAHeldLane(t *testing.T, e *Engine, what string) {
	t.Helper()
	release := holdLane(t, e)
	defer release()
	done := make(chan error, 1)
	go func() {
		_, err := start(e, "Acme")
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal(what)
	}
}

// TestAStartDoesNotQueueBehindSettlements: starts have lanes of their
// own, so a start commits while every lane of the settlements is busy.
func TestAStartDoesNotQueueBehindSettlements(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.group = newGroupCommit(e, 1)
	prepare(t, e, "")
	startPastAHeldLane(t, e, "a start waited for the settlements' lane")
}

// TestACallerGoneBeforeItsTurnTakesNoLane: a write whose caller gave up
// between submitting and taking a free lane leaves the lane free.
func TestACallerGoneBeforeItsTurnTakesNoLane(t *testing.T) {
	t.Parallel()
	e := setupLanes(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	// Hold the committer's lock so that the write passes its first check,
	// then waits for the lock while its caller gives up.
	e.group.mu.Lock()
	errc := make(chan error, 1)
	go func() {
		errc <- e.group.write(ctx, uuid.Nil, func(context.Context, *queries.Queries) error { return nil })
	}()
	time.Sleep(50 * time.Millisecond)
	cancel()
	e.group.mu.Unlock()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("answered %v, want context.Canceled", err)
	}
	e.group.mu.Lock()
	busy := e.group.busy
	e.group.mu.Unlock()
	if busy != 0 {
		t.Fatalf("%d lanes busy after the write left; want 0 (a lane leaked)", busy)
	}
	// And the lane still serves.
	if err := e.group.write(context.Background(), uuid.Nil, func(context.Context, *queries.Queries) error { return nil }); err != nil {
		t.Fatal(err)
	}
}

// TestAPanickingWriteFailsAlone: a write that panics answers an error; the
// others of its group commit and the lane lives on.
func TestAPanickingWriteFailsAlone(t *testing.T) {
	t.Parallel()
	e := setupLanes(t, 1)
	prepare(t, e, "")
	release := holdLane(t, e)
	var wg sync.WaitGroup
	var startErr, panicked error
	wg.Go(func() { _, startErr = start(e, "Acme") })
	wg.Go(func() {
		panicked = e.group.write(context.Background(), uuid.Nil, func(context.Context, *queries.Queries) error { panic("boom") })
	})
	waitQueued(t, e, 2)
	release()
	wg.Wait()
	if startErr != nil {
		t.Fatalf("the start failed with the panicking write: %v", startErr)
	}
	if panicked == nil || !strings.Contains(panicked.Error(), "boom") {
		t.Fatalf("the panicking write answered %v, want its panic as an error", panicked)
	}
	waitIdle(t, e)
}

// TestQuickGroupsKeepOneLane: while a group runs, writes queue for the
// next group instead of opening another lane (groups half as big for
// nothing), as long as they have waited less than spill.
func TestQuickGroupsKeepOneLane(t *testing.T) {
	t.Parallel()
	e := setupLanes(t, 2)
	e.group.spill = time.Hour
	release := holdLane(t, e)
	done := make(chan error, 2)
	for range 2 {
		go func() {
			done <- e.group.write(context.Background(), uuid.Nil, func(context.Context, *queries.Queries) error { return nil })
		}()
	}
	waitQueued(t, e, 2)
	time.Sleep(20 * time.Millisecond) // what a second lane would have needed to take them
	e.group.mu.Lock()
	busy, queued := e.group.busy, len(e.group.queue)
	e.group.mu.Unlock()
	if busy != 1 || queued != 2 {
		t.Fatalf("%d lanes busy, %d writes queued behind a running group; want 1 and 2", busy, queued)
	}
	release()
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	waitIdle(t, e)
}

// TestAStuckGroupDoesNotStallTheWritesBehindIt: writes queued behind a
// group that does not end open another lane once they have waited spill,
// and commit while it is still stuck.
func TestAStuckGroupDoesNotStallTheWritesBehindIt(t *testing.T) {
	t.Parallel()
	e := setupLanes(t, 2)
	e.group.spill = 5 * time.Millisecond
	prepare(t, e, "")
	startPastAHeldLane(t, e, "a start waited for a stuck group")
	// With one lane, the writes wait for the stuck one, however long.
	one := setupLanes(t, 1)
	one.group.spill = time.Millisecond
	releaseOne := holdLane(t, one)
	waited := make(chan error, 1)
	go func() {
		waited <- one.group.write(context.Background(), uuid.Nil, func(context.Context, *queries.Queries) error { return nil })
	}()
	waitQueued(t, one, 1)
	time.Sleep(20 * time.Millisecond)
	select {
	case err := <-waited:
		t.Fatalf("a write ran past the only lane's stuck group (%v)", err)
	default:
	}
	releaseOne()
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
}

// TestAReplayedCompletionSaysSo: the answer replayed for an identical
// second report says it is a replay (it settles nothing, claims no refill)
// and names the attempt the first ended: a worker stream that never heard
// the first answer (lost) frees that slot, and only that attempt's.
func TestAReplayedCompletionSaysSo(t *testing.T) {
	t.Parallel()
	e := setup(t)
	prepare(t, e, "")
	c := consumer(t, e)
	if _, err := start(e, "Acme"); err != nil {
		t.Fatal(err)
	}
	o := claimOne(t, e, c, "w")
	ref := WorkerRef{ConsumerID: c, WorkerID: "w", Occurrence: o.ID}
	outputs := json.RawMessage(`{"result":"created","crm_id":"C"}`)
	first, err := e.Complete(context.Background(), ref, outputs)
	if err != nil || first.Attempt != 1 {
		t.Fatalf("completion: attempt %d, %v; want attempt 1", first.Attempt, err)
	}
	again, err := e.Complete(context.Background(), ref, outputs)
	if err != nil || again.Status != StatusCompleted || !again.Replayed || again.Attempt != 1 {
		t.Fatalf("replay: %+v, %v; want completed, replayed, naming attempt 1 (a stream that missed the first answer frees it)", again, err)
	}
	if _, err := start(e, "Beta"); err != nil {
		t.Fatal(err)
	}
	o = claimOne(t, e, c, "w")
	ref.Occurrence = o.ID
	failure := Failure{ErrorCode: "CRM_DOWN", Message: "down", Retryable: true}
	if first, err := e.Fail(context.Background(), ref, failure); err != nil || first.Attempt != 1 || first.Replayed {
		t.Fatalf("failure: %+v, %v; want attempt 1 settled", first, err)
	}
	if again, err := e.Fail(context.Background(), ref, failure); err != nil || !again.Replayed || again.Attempt != 1 {
		t.Fatalf("failure replay: %+v, %v; want replayed, naming attempt 1", again, err)
	}
}

// TestALaneWaitsForTheWritersItAnswered: after a group, a free lane waits
// for as many writes as that group held (plus those already queued)
// before it runs the next, rather than running the first to come alone
// while the others queue behind it; the wait ends as soon as they are
// there.
func TestALaneWaitsForTheWritersItAnswered(t *testing.T) {
	t.Parallel()
	e := setupLanes(t, 1)
	e.group.gather = time.Hour // bounded by the group's own time instead
	prepare(t, e, "")
	// A group of three that takes a while: the lane then waits that long
	// at most for three writes, long enough for them to come however
	// loaded the machine (a CI run under -race lapsed a 300 ms wait).
	runGroup(t, e, 3, 2*time.Second)
	before := e.GroupCommits()[1]
	var wg sync.WaitGroup

	first := make(chan Instance, 1)
	go func() {
		inst, err := start(e, "Acme 1")
		if err != nil {
			t.Error(err)
		}
		first <- inst
	}()
	waitQueued(t, e, 1)
	time.Sleep(20 * time.Millisecond)
	select {
	case <-first:
		t.Fatal("the first write after a group of three ran alone; want it to wait for the other two")
	default:
	}
	var others [2]Instance
	for i := range others {
		wg.Go(func() {
			var err error
			if others[i], err = start(e, fmt.Sprint("Acme ", i+2)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	inst := <-first
	after := e.GroupCommits()[1]
	if t.Failed() {
		t.FailNow()
	}
	x := xactOf(t, e, "instances", inst.ID)
	for _, o := range others {
		if got := xactOf(t, e, "instances", o.ID); got != x {
			t.Fatalf("the three writes after a group of three took transactions %s and %s; want one", x, got)
		}
	}
	if filled, lapsed := after.GathersFilled-before.GathersFilled, after.GathersLapsed-before.GathersLapsed; filled < 1 || lapsed != 0 {
		t.Fatalf("%d waits for company filled, %d lapsed; want one filled at least, none lapsed (all three came)", filled, lapsed)
	}
}

// TestALanesWaitForCompanyLapses: the writers a group answered may not
// come back; the lane then runs what came once it has waited as long as
// that group took.
func TestALanesWaitForCompanyLapses(t *testing.T) {
	t.Parallel()
	e := setupLanes(t, 1)
	e.group.gather = time.Hour // bounded by the group's own time instead
	prepare(t, e, "")
	runGroup(t, e, 3, 300*time.Millisecond)
	before := e.GroupCommits()[1]
	// One write of the three awaited: it runs when the wait lapses.
	if _, err := start(e, "Acme alone"); err != nil {
		t.Fatal(err)
	}
	after := e.GroupCommits()[1]
	if filled, lapsed := after.GathersFilled-before.GathersFilled, after.GathersLapsed-before.GathersLapsed; filled != 0 || lapsed != 1 {
		t.Fatalf("%d waits for company filled, %d lapsed; want the one the lone write waited in lapsed", filled, lapsed)
	}

	// The lapse taught the lane that its writers come back too late: after
	// the next group of three it does not wait, but for a probe every
	// gatherProbe groups.
	lateAgain(t, e)
	waitIdle(t, e)
	again := e.GroupCommits()[1]
	if waits := waitsSince(after, again); waits != 0 {
		t.Fatalf("%d waits after a lapse; want none until a probe", waits)
	}
	for range gatherProbe {
		runGroup(t, e, 2, 0)
		waitIdle(t, e)
	}
	probed := e.GroupCommits()[1]
	if waits := waitsSince(again, probed); waits != 1 {
		t.Fatalf("%d waits in %d groups of two after a lapse; want the one probe", waits, gatherProbe)
	}
}

// runGroup runs a group of n writes on e's one lane, the first of which
// takes slow: the lane holds them back until all n have queued.
func runGroup(t *testing.T, e *Engine, n int, slow time.Duration) {
	t.Helper()
	release := holdLane(t, e)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			err := e.group.write(context.Background(), uuid.Nil, func(context.Context, *queries.Queries) error {
				if i == 0 {
					time.Sleep(slow)
				}
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	waitQueued(t, e, n)
	release()
	wg.Wait()
}

// lateAgain runs a slow group of three on e's one lane, then a write that
// comes alone.
func lateAgain(t *testing.T, e *Engine) {
	t.Helper()
	runGroup(t, e, 3, 100*time.Millisecond)
	if err := e.group.write(context.Background(), uuid.Nil, func(context.Context, *queries.Queries) error { return nil }); err != nil {
		t.Fatal(err)
	}
}

// waitsSince counts the waits for company that ended between before and
// after, however they ended.
func waitsSince(before, after GroupCommitStats) uint64 {
	return after.GathersFilled + after.GathersLapsed + after.GathersIdle - before.GathersFilled - before.GathersLapsed - before.GathersIdle
}

// TestALoneWriteRunsAtOnce: on an idle engine a write runs without
// waiting, and the lane does not wait after it either: the first write to
// come would end the wait as it takes a free lane.
func TestALoneWriteRunsAtOnce(t *testing.T) {
	t.Parallel()
	e := setupLanes(t, 1)
	before := e.GroupCommits()[1]
	for range 3 {
		if err := e.group.write(context.Background(), uuid.Nil, func(context.Context, *queries.Queries) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	waitIdle(t, e)
	after := e.GroupCommits()[1]
	if waits := waitsSince(before, after); waits != 0 {
		t.Fatalf("%d waits after lone writes; want none", waits)
	}
	if groups := after.Groups - before.Groups; groups != 3 {
		t.Fatalf("%d groups for three lone writes; want 3", groups)
	}
}

// TestRepeatingWritersShareTransactions: four writers that each write
// again as soon as they are answered (producers starting instances) end up
// in one group per round, not in groups of one and three.
func TestRepeatingWritersShareTransactions(t *testing.T) {
	t.Parallel()
	e := setupLanes(t, 1)
	// Bounded by the group's own time only, and groups that take a few
	// milliseconds, so that a slow machine (the race detector) does not
	// make the writers late.
	e.group.gather = time.Hour
	const writers, rounds = 4, 25
	before := e.GroupCommits()[1]
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for range rounds {
				err := e.group.write(context.Background(), uuid.Nil, func(context.Context, *queries.Queries) error {
					time.Sleep(2 * time.Millisecond)
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	after := e.GroupCommits()[1]
	groups, writes := after.Groups-before.Groups, after.Writes-before.Writes
	if writes != writers*rounds {
		t.Fatalf("%d writes counted, want %d", writes, writers*rounds)
	}
	if per := float64(writes) / float64(groups); per < 3 {
		t.Fatalf("%d writes in %d groups (%.2f a group); want three or more a group from four writers", writes, groups, per)
	}
}
