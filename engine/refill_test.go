package engine

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
)

// refillEngine is an engine whose statements log records, with one
// settlement lane, and a consumer c holding one reservation r of the
// first of n started instances.
func refillEngine(t *testing.T, n int) (e *Engine, log *sqlLog, c int64, r Reservation) {
	t.Helper()
	e, _, log = tracedEngine(t)
	e.group = newGroupCommit(e, 1)
	for range n {
		if _, err := start(e, "Acme"); err != nil {
			t.Fatal(err)
		}
	}
	c = consumer(t, e)
	return e, log, c, claimOne(t, e, c, "w")
}

func refillOf(c int64) *ClaimRequest {
	return &ClaimRequest{ConsumerID: c, WorkerID: "w", Pairs: Pairs{Keys: []string{"crm"}, Revisions: []int32{1}}, LockDuration: time.Minute}
}

var crmOutputs = json.RawMessage(`{"result":"created","crm_id":"C"}`)

// TestACompletionClaimsTheNextTaskWithItsCommit: the claim a completion
// asks for commits in its transaction, sent in the round trip of its
// COMMIT.
func TestACompletionClaimsTheNextTaskWithItsCommit(t *testing.T) {
	t.Parallel()
	e, log, c, r := refillEngine(t, 2)
	st, got, err := e.CompleteAndClaim(context.Background(), WorkerRef{ConsumerID: c, WorkerID: "w", Occurrence: r.ID}, crmOutputs, refillOf(c))
	if err != nil || st.Status != StatusCompleted || st.Attempt != 1 {
		t.Fatalf("completion: %+v, %v", st, err)
	}
	if len(got) != 1 || got[0].ID == r.ID || got[0].Attempt != 1 {
		t.Fatalf("claimed %+v; want one other occurrence, attempt 1", got)
	}
	if a, b := xactOf(t, e, "occurrences", r.ID), xactOf(t, e, "occurrences", got[0].ID); a != b {
		t.Errorf("completed in transaction %s, next claimed in %s; want one transaction", a, b)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	last := log.batches[len(log.batches)-1]
	if n := len(last); n < 2 || !strings.Contains(last[n-2], "name: OccurrenceClaimPull") || !strings.HasPrefix(last[n-1], "commit") {
		t.Errorf("last round trip %q; want the claim, then COMMIT", last)
	}
}

// TestARefusedOrReplayedCompletionClaimsNothing: the claim shares the
// completion's fate, and a replay settles no attempt, so claims nothing.
func TestARefusedOrReplayedCompletionClaimsNothing(t *testing.T) {
	t.Parallel()
	e, _, c, r := refillEngine(t, 3)
	ref := WorkerRef{ConsumerID: c, WorkerID: "w", Occurrence: r.ID}
	if _, got, err := e.CompleteAndClaim(context.Background(), ref, json.RawMessage(`{"result":"maybe"}`), refillOf(c)); err == nil || len(got) != 0 {
		t.Fatalf("invalid outputs: claimed %v, %v; want a refusal and nothing claimed", got, err)
	}
	if _, got, err := e.CompleteAndClaim(context.Background(), ref, crmOutputs, refillOf(c)); err != nil || len(got) != 1 {
		t.Fatalf("completion: claimed %v, %v; want one", got, err)
	}
	if st, got, err := e.CompleteAndClaim(context.Background(), ref, crmOutputs, refillOf(c)); err != nil || !st.Replayed || len(got) != 0 {
		t.Fatalf("replay: %+v, claimed %v, %v; want a replayed answer and nothing claimed", st, got, err)
	}
	var reserved int
	if err := e.pool.QueryRow(context.Background(), "select count(*) from occurrences where status = 'reserved'").Scan(&reserved); err != nil || reserved != 1 {
		t.Fatalf("%d occurrences reserved (%v); want the one the completion claimed", reserved, err)
	}
}

// TestAGroupsCompletionsShareOneClaim: completions grouped in one
// transaction that ask with the same request share one claim, of as many
// tasks as they settled, one each.
func TestAGroupsCompletionsShareOneClaim(t *testing.T) {
	t.Parallel()
	e, log, c, _ := refillEngine(t, 6)
	var held []Reservation
	for range 3 {
		held = append(held, claimOne(t, e, c, "w"))
	}
	next := refillOf(c)
	claimsBefore := log.sent("-- name: OccurrenceClaimPull")
	release := holdLane(t, e)
	var wg sync.WaitGroup
	got := make([][]Reservation, len(held))
	for i, r := range held {
		wg.Go(func() {
			var err error
			if _, got[i], err = e.CompleteAndClaim(context.Background(), WorkerRef{ConsumerID: c, WorkerID: "w", Occurrence: r.ID}, crmOutputs, next); err != nil {
				t.Error(err)
			}
		})
	}
	waitQueued(t, e, len(held))
	release()
	wg.Wait()
	seen := map[uuid.UUID]bool{}
	for i, g := range got {
		if len(g) != 1 || seen[g[0].ID] {
			t.Fatalf("completion %d claimed %v; want one task of its own", i, g)
		}
		seen[g[0].ID] = true
	}
	if n := log.sent("-- name: OccurrenceClaimPull") - claimsBefore; n != 1 {
		t.Errorf("%d claims for a group of %d completions; want one", n, len(held))
	}
}

// TestAFailureClaimsTheNextTaskWithItsCommit: a failure frees its slot as
// a completion does, and claims for it the same way.
func TestAFailureClaimsTheNextTaskWithItsCommit(t *testing.T) {
	t.Parallel()
	e, _, c, r := refillEngine(t, 2)
	st, got, err := e.FailAndClaim(context.Background(), WorkerRef{ConsumerID: c, WorkerID: "w", Occurrence: r.ID}, Failure{ErrorCode: "CRM_DOWN", Message: "down"}, refillOf(c))
	if err != nil || st.Attempt != 1 {
		t.Fatalf("failure: %+v, %v", st, err)
	}
	if len(got) != 1 || got[0].ID == r.ID {
		t.Fatalf("claimed %+v; want one other occurrence", got)
	}
	if a, b := xactOf(t, e, "occurrences", r.ID), xactOf(t, e, "occurrences", got[0].ID); a != b {
		t.Errorf("failed in transaction %s, next claimed in %s; want one transaction", a, b)
	}
	if _, _, err := e.FailAndClaim(context.Background(), WorkerRef{ConsumerID: c, WorkerID: "w", Occurrence: got[0].ID}, Failure{}, refillOf(c)); err == nil {
		t.Error("a failure without an error code was accepted")
	}
}
