package engine

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relais/relais/internal/dbtest"
	"github.com/relais/relais/internal/fault"
)

// TestHealthAndNodeCounts: the health snapshot reports the oldest claimable
// occurrence (an available one, or a lapsed lock), the last hour's
// completions and failures in 5-minute buckets, and held instances by
// definition; node counts follow the process version and count a lapsed
// lock as available.
func TestHealthAndNodeCounts(t *testing.T) {
	t.Parallel()
	clk := &testClock{}
	e := New(dbtest.Pool(t), clk.options(t))
	ctx := context.Background()
	prepare(t, e, `"policy":{"max_attempts":3},`)
	c := consumer(t, e)

	start := func() uuid.UUID {
		inst, _, err := e.StartInstance(ctx, StartRequest{ProcessKey: "two_step", Inputs: []byte(`{"name":"Acme"}`)})
		if err != nil {
			t.Fatal(err)
		}
		return inst.ID
	}
	a, b, fail := start(), start(), start()

	// a completes crm: one completion now, and its check node waits.
	r := claimOne(t, e, c, "w")
	if _, err := e.Complete(ctx, WorkerRef{ConsumerID: c, WorkerID: "w", Occurrence: r.ID}, []byte(`{"result":"created","crm_id":"C1"}`)); err != nil {
		t.Fatal(err)
	}
	// b's crm is reserved, and its lock lapses.
	claimOne(t, e, c, "w")
	// fail's crm fails for good.
	rf := claimOne(t, e, c, "w")
	zero := 0
	if _, err := e.Fail(ctx, WorkerRef{ConsumerID: c, WorkerID: "w", Occurrence: rf.ID}, Failure{ErrorCode: "DOWN", Message: "down", AttemptsLeft: &zero}); err != nil {
		t.Fatal(err)
	}
	clk.advance(2 * time.Minute) // past b's one-minute lock

	// Both settlements land in the last two buckets (the clock moved two
	// minutes, which may cross one boundary).
	h, err := e.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d := h.Definitions["crm"]
	if d == nil || d.ClaimableSince == nil {
		t.Fatalf("health of crm: %+v; want a claimable occurrence", d)
	}
	// The oldest claimable is b's lapsed lock or a's check node, both about
	// two minutes old, never more than the test's age.
	if lag := h.At.Sub(*d.ClaimableSince); lag < time.Minute || lag > 3*time.Minute {
		t.Errorf("queue lag %v, want about a minute or two", lag)
	}
	// The buckets are cut at whole minutes, the latest ending at the next.
	if end := h.BucketsEnd; end.Truncate(time.Minute) != end || end.Before(h.At) || !end.Before(h.At.Add(time.Minute)) {
		t.Errorf("buckets end at %v, read at %v; want the next whole minute", end, h.At)
	}
	var completed, failed int64
	for _, bk := range d.Buckets {
		completed += bk.Completed
		failed += bk.Failed
	}
	for _, bk := range d.Buckets[:HealthBuckets-2] {
		if bk != (HealthBucket{}) {
			t.Errorf("settlements of the last two minutes in an older bucket: %+v", d.Buckets)
			break
		}
	}
	if completed != 1 || failed != 1 {
		t.Errorf("last hour: %d completed, %d failed; want 1 and 1 (buckets %+v)", completed, failed, d.Buckets)
	}

	counts, err := e.CountOccurrencesByNode(ctx, "two_step", 1)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, n := range counts {
		got[n.Node+"/"+n.Status] = n.Count
	}
	want := map[string]int64{"crm/completed": 1, "crm/available": 1, "crm/failed": 1, "check/available": 1}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("node counts %v: %s = %d, want %d", got, k, got[k], v)
		}
	}
	if got["crm/reserved"] != 0 {
		t.Errorf("a lapsed lock counted as reserved: %v", got)
	}

	// Newest first, and the page before a cursor is the next newer ids.
	all, err := e.ListOccurrences(ctx, OccurrenceFilter{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 4 {
		t.Fatalf("%d occurrences, want 4", len(all))
	}
	before, err := e.ListOccurrences(ctx, OccurrenceFilter{After: &all[3].ID, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if ids := []uuid.UUID{before[0].ID, before[1].ID}; !slices.Equal(ids, []uuid.UUID{all[1].ID, all[2].ID}) {
		t.Errorf("page above the last: %v, want %v", ids, []uuid.UUID{all[1].ID, all[2].ID})
	}
	if all[0].ProcessKey != "two_step" || all[0].ProcessVersion != 1 {
		t.Errorf("occurrence's process: %q v%d", all[0].ProcessKey, all[0].ProcessVersion)
	}
	insts, err := e.ListInstances(ctx, InstanceFilter{After: &a, Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	if len(insts) != 2 || insts[0].ID != fail || insts[1].ID != b {
		t.Errorf("instances above the first: %v, want [%s %s]", insts, fail, b)
	}
}

// TestHealthCountsWaitingRetries: an occurrence whose attempt failed with
// attempts left waits out its retry delay, neither held nor failed: the
// health snapshot counts it by definition with when the soonest is due,
// and stops counting it once it is due (claimable, the queue lag's) or
// brought forward.
func TestHealthCountsWaitingRetries(t *testing.T) {
	t.Parallel()
	e, clk, fail := bringForwardFixture(t, 3)
	ctx := context.Background()
	later, sooner := fail(10*time.Minute), fail(4*time.Minute)
	// The third is claimable, never tried: not a retry.
	h, err := e.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d := h.Definitions["crm"]
	if d == nil || d.Retrying != 2 || d.RetryDue == nil || d.RetryDue.Sub(h.At).Round(time.Minute) != 4*time.Minute {
		t.Fatalf("health of crm: %+v; want 2 waiting a retry, the soonest due in 4 minutes", d)
	}
	if d.ClaimableSince == nil {
		t.Errorf("the untried occurrence is not claimable: %+v", d)
	}

	clk.advance(5 * time.Minute)
	if h, err = e.Health(ctx); err != nil {
		t.Fatal(err)
	}
	if d := h.Definitions["crm"]; d.Retrying != 1 || d.RetryDue.Sub(h.At).Round(time.Minute) != 5*time.Minute {
		t.Fatalf("health of crm 5 minutes on: %+v; want 1 waiting, due in 5 minutes (the other is due)", d)
	}
	// An operator brings the one waiting forward (the other, due, has
	// nothing to bring forward): none waits.
	if _, err := e.Act(ctx, Actor{Name: "ops"}, ActionRetry, later, "CRM is back"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Act(ctx, Actor{Name: "ops"}, ActionRetry, sooner, "CRM is back"); !fault.HasCode(err, "not_held") {
		t.Errorf("retry of an instance whose retry is due: %v; want not_held", err)
	}
	if h, err = e.Health(ctx); err != nil {
		t.Fatal(err)
	}
	if d := h.Definitions["crm"]; d.Retrying != 0 || d.RetryDue != nil {
		t.Errorf("health of crm after the retry now: %+v; want none waiting", d)
	}
}
