package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/queries"
)

// setupLanes is setup with lanes group-commit lanes.
func setupLanes(t testing.TB, lanes int) *Engine {
	t.Helper()
	e := setup(t)
	e.group = newGroupCommit(e, lanes)
	return e
}

// xactOf is the transaction that wrote an instance's row: writes grouped
// together share it.
func xactOf(t testing.TB, e *Engine, id uuid.UUID) string {
	t.Helper()
	var x string
	if err := e.pool.QueryRow(context.Background(), "select xmin::text from instances where id = $1", id).Scan(&x); err != nil {
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
		done <- e.group.write(context.Background(), func(context.Context, *queries.Queries) error {
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

// waitQueued waits until n writes queue behind the held lane.
func waitQueued(t testing.TB, e *Engine, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		e.group.mu.Lock()
		got := len(e.group.queue)
		e.group.mu.Unlock()
		if got == n {
			return
		}
	}
	t.Fatalf("%d writes never queued", n)
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
		xacts[xactOf(t, e, id)] = true
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
			broken = e.group.write(ctx, func(ctx context.Context, q *queries.Queries) error {
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
		errc <- e.group.write(ctx, func(context.Context, *queries.Queries) error { ran = true; return nil })
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
	e.group.mu.Lock()
	defer e.group.mu.Unlock()
	if len(e.group.queue) != 0 || e.group.busy != 0 {
		t.Fatalf("queue %d, busy lanes %d after everything ended; want 0, 0", len(e.group.queue), e.group.busy)
	}
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
		errc <- e.group.write(ctx, func(ctx context.Context, q *queries.Queries) error {
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
