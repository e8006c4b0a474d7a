package engine

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/relais/relais/internal/dbtest"
	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/queries"
)

// bringForwardFixture starts n instances of two_step and returns a fail
// function: it claims the next crm occurrence and fails it retryably with
// the delay given, returning its instance.
func bringForwardFixture(t *testing.T, n int) (*Engine, *testClock, func(time.Duration) uuid.UUID) {
	t.Helper()
	clk := &testClock{}
	e := New(dbtest.Pool(t), clk.options(t))
	ctx := context.Background()
	prepare(t, e, `"policy":{"max_attempts":5},`)
	c := consumer(t, e)
	for range n {
		if _, _, err := e.StartInstance(ctx, StartRequest{ProcessKey: "two_step", Inputs: []byte(`{"name":"Acme"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	return e, clk, func(delay time.Duration) uuid.UUID {
		t.Helper()
		r := claimOne(t, e, c, "w")
		if _, err := e.Fail(ctx, WorkerRef{ConsumerID: c, WorkerID: "w", Occurrence: r.ID}, Failure{ErrorCode: "CRM_DOWN", Message: "down", Retryable: true, RetryDelay: &delay}); err != nil {
			t.Fatal(err)
		}
		return r.InstanceID
	}
}

// A bulk retry bringing waiting retries forward, its count pinned to its
// moment (the console's matched_before), counts the retries that waited
// then and still wait: one that came due meanwhile makes it smaller (the
// console then confirms the new count itself), one that began waiting
// after the count is left for the next action.
func TestBringForwardKeepsToItsCount(t *testing.T) {
	t.Parallel()
	e, clk, fail := bringForwardFixture(t, 4)
	ctx := context.Background()
	a, b := fail(10*time.Minute), fail(10*time.Minute)
	fail(2 * time.Minute)

	f := InstanceFilter{Status: InstanceRunning}
	f.PinMatched(e.Now())
	n, err := e.CountForAction(ctx, ActionRetry, f)
	if err != nil || n != 3 {
		t.Fatalf("count = %d, %v; want the 3 waiting", n, err)
	}
	clk.advance(5 * time.Minute)
	// The fourth fails after the count: it waits, but not since then.
	late := fail(10 * time.Minute)

	// The count shrank (one came due), never grew (one began waiting since).
	_, err = e.ActOnFilter(ctx, Actor{Name: "ops"}, ActionRetry, f, "CRM is back", 3, uuid.Nil)
	fe, ok := fault.As(err)
	if !ok || fe.Code != "count_changed" || fe.Extra["count"] != int64(2) {
		t.Fatalf("bring forward of a count that shrank: %v; want count_changed with 2", err)
	}
	res, err := e.ActOnFilter(ctx, Actor{Name: "ops"}, ActionRetry, f, "CRM is back", 2, uuid.Nil)
	if err != nil {
		t.Fatalf("bring forward: %v", err)
	}
	if res.Applied != 2 || res.Skipped != 0 {
		t.Errorf("applied %d, skipped %d; want a and b", res.Applied, res.Skipped)
	}
	for id, waits := range map[uuid.UUID]bool{a: false, b: false, late: true} {
		var waiting bool
		for _, o := range occurrences(t, e, id)["crm"] {
			waiting = waiting || o.Status == StatusAvailable && o.AvailableAt.After(e.Now())
		}
		if waiting != waits {
			t.Errorf("instance %s waits a retry: %v, want %v", id, waiting, waits)
		}
	}
}

// A bulk stop over retrying_at re-checks, under the instance's lock, that
// its retry still waits there: one whose retry came due since the ids were
// read (its service back, it moved on) left the filter and is skipped.
func TestBulkStopOverRetryingAtSkipsWhatMovedOn(t *testing.T) {
	t.Parallel()
	e, clk, fail := bringForwardFixture(t, 1)
	ctx := context.Background()
	id := fail(2 * time.Minute)
	clk.advance(5 * time.Minute)
	bulk := uuid.Must(uuid.NewV7())
	var applied bool
	err := e.tx(ctx, func(q *queries.Queries, _ pgx.Tx) error {
		var err error
		applied, err = e.actIn(ctx, q, Actor{Name: "ops"}, ActionStop, id, "stop what waits", &bulk, InstanceFilter{RetryingAt: "crm"}, nil, "")
		return err
	})
	if err != nil || applied {
		t.Fatalf("stop of an instance whose retry came due: applied %v, %v; want skipped", applied, err)
	}
	inst, err := e.GetInstance(ctx, id)
	if err != nil || inst.Status != InstanceRunning {
		t.Errorf("instance %v, %v; want running", inst.Status, err)
	}
}
