package engine

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/relais/relais/internal/dbtest"
)

// A lock its worker let lapse counts against that worker id in the worker
// catalog, so that a worker crash-looping under one id (live: it keeps
// fetching) does not look healthy: from its expiry, recorded when a claim
// takes the lock back, when a stream ends holding it, and when the timers
// fail the occurrence whose last lock lapsed, each once. Only lapses within LapseWindow count, and
// Housekeep forgets older ones (and purges expired console sessions).
func TestLapsedLocksCountAgainstTheirWorker(t *testing.T) {
	t.Parallel()
	clock := &testClock{}
	e := New(dbtest.Pool(t), clock.options(t))
	prepare(t, e, `"policy":{"max_attempts":2},`)
	ctx := context.Background()
	c := consumer(t, e)
	for _, w := range []string{"crashy", "steady", "streamer"} {
		e.SeePoller(ctx, PollerSighting{ConsumerID: c, WorkerID: w, Subscriptions: []Subscription{{Definition: "crm"}},
			Pairs: Pairs{Keys: []string{"crm"}, Revisions: []int32{1}}, LiveFor: 24 * time.Hour})
	}
	type lapses struct {
		n    int
		last time.Time
	}
	catalog := func() map[string]lapses {
		t.Helper()
		ws, err := e.ListWorkers(ctx, WorkerFilter{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]lapses{}
		for _, w := range ws {
			out[w.WorkerID] = lapses{w.Lapsed, w.LastLapsedAt}
		}
		return out
	}
	expect := func(when string, want map[string]int) {
		t.Helper()
		got := catalog()
		for w, n := range want {
			if got[w].n != n {
				t.Errorf("%s: %s lapsed %d, want %d", when, w, got[w].n, n)
			}
			if (n == 0) != got[w].last.IsZero() {
				t.Errorf("%s: %s's last lapse %v with %d lapses", when, w, got[w].last, n)
			}
		}
	}
	if _, _, err := e.StartInstance(ctx, StartRequest{ProcessKey: "two_step", Inputs: json.RawMessage(`{"name":"Acme"}`)}); err != nil {
		t.Fatal(err)
	}
	expect("before any claim", map[string]int{"crashy": 0, "steady": 0, "streamer": 0})

	first := claimOne(t, e, c, "crashy")
	clock.advance(2 * time.Minute)
	// Counted before any claim takes it back (a worker alone on its
	// definition that died: nothing would), and once only after.
	expect("lapsed, not yet taken back", map[string]int{"crashy": 1})
	second := claimOne(t, e, c, "steady")
	if second.ID != first.ID || second.Attempt != 2 {
		t.Fatalf("the claim took %s attempt %d, want the lapsed %s again", second.ID, second.Attempt, first.ID)
	}
	expect("taken back", map[string]int{"crashy": 1, "steady": 0})
	if got := catalog()["crashy"].last; !got.Equal(first.LockExpiresAt) {
		t.Errorf("crashy's last lapse at %v, want its lock's expiry %v", got, first.LockExpiresAt)
	}

	// The last attempt lapses too: no claim takes it back, the timers
	// fail the occurrence and count the lapse.
	clock.advance(2 * time.Minute)
	expect("the last attempt lapsed, not yet failed", map[string]int{"crashy": 1, "steady": 1})
	pass, err := e.RunTimerPass(ctx)
	if err != nil || pass.Settled != 1 {
		t.Fatalf("timer pass: %+v, %v; want the occurrence failed", pass, err)
	}
	if _, err := e.RunTimerPass(ctx); err != nil {
		t.Fatal(err)
	}
	expect("failed by the timers", map[string]int{"crashy": 1, "steady": 1})

	// A stream ending with an assignment lets its lock lapse; the claim
	// that takes it back counts nothing more.
	if _, _, err := e.StartInstance(ctx, StartRequest{ProcessKey: "two_step", Inputs: json.RawMessage(`{"name":"Globex"}`)}); err != nil {
		t.Fatal(err)
	}
	held := claimOne(t, e, c, "streamer")
	if _, err := e.HandBack(ctx, c, "streamer", []Held{{Occurrence: held.ID, Attempt: held.Attempt}}, false); err != nil {
		t.Fatal(err)
	}
	expect("stream ended", map[string]int{"streamer": 1})
	if again := claimOne(t, e, c, "steady"); again.ID != held.ID {
		t.Fatalf("took %s, want the handed-back %s", again.ID, held.ID)
	}
	expect("taken back after the stream", map[string]int{"crashy": 1, "steady": 1, "streamer": 1})
	// The lapses by worker id, connected or not, of one definition or all.
	for _, definition := range []string{"", "crm", "elsewhere"} {
		rows, total, err := e.RecentLapses(ctx, definition, 2)
		want := 3
		if definition == "elsewhere" {
			want = 0
		}
		if err != nil || total != want || len(rows) != min(want, 2) {
			t.Fatalf("RecentLapses(%q): %d of %d, %v; want 2 of %d", definition, len(rows), total, err, want)
		}
		for _, r := range rows {
			if r.Lapsed != 1 || !r.Live || r.LastLapsedAt.IsZero() {
				t.Errorf("RecentLapses(%q): %+v, want one lapse of a live worker", definition, r)
			}
		}
	}

	// Released work (a replica stopping) is not a lapse.
	if _, err := e.HandBack(ctx, c, "steady", []Held{{Occurrence: held.ID, Attempt: 2}}, true); err != nil {
		t.Fatal(err)
	}
	expect("released", map[string]int{"steady": 1})

	clock.advance(LapseWindow)
	expect("an hour later", map[string]int{"crashy": 0, "steady": 0, "streamer": 0})
	var rows int
	if err := e.pool.QueryRow(ctx, "select count(*) from worker_lapses").Scan(&rows); err != nil || rows != 3 {
		t.Fatalf("before housekeeping: %d rows, %v; want 3", rows, err)
	}
	// Console sessions past their expiry go in the same housekeeping.
	now := e.Now()
	for i, expires := range []time.Time{now.Add(-time.Minute), now.Add(time.Hour)} {
		if err := e.CreateConsoleSession(ctx, []byte{byte(i)}, []byte("token"), "csrf", now.Add(-2*time.Hour), expires, now.Add(2*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Housekeep(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.pool.QueryRow(ctx, "select count(*) from worker_lapses").Scan(&rows); err != nil || rows != 0 {
		t.Errorf("after housekeeping: %d rows, %v; want none", rows, err)
	}
	if err := e.pool.QueryRow(ctx, "select count(*) from console_sessions").Scan(&rows); err != nil || rows != 1 {
		t.Errorf("after housekeeping: %d console sessions, %v; want the live one only", rows, err)
	}
}

// An occurrence failed when its last lock lapsed says how its budget was
// counted: attempts handed back, and those its worker gave up, are said
// apart ("attempt 3 of max_attempts 3" after an unlock and a lowered
// budget read as three runs spent: Camunda QA).
func TestExhaustedMessageCountsWhatWasGivenBackAndGivenUp(t *testing.T) {
	t.Parallel()
	clock := &testClock{}
	e := New(dbtest.Pool(t), clock.options(t))
	prepare(t, e, `"policy":{"max_attempts":3},`)
	ctx := context.Background()
	c := consumer(t, e)
	inst, _, err := e.StartInstance(ctx, StartRequest{ProcessKey: "two_step", Inputs: json.RawMessage(`{"name":"Acme"}`)})
	if err != nil {
		t.Fatal(err)
	}
	first := claimOne(t, e, c, "w")
	if _, err := e.Release(ctx, WorkerRef{ConsumerID: c, WorkerID: "w", Occurrence: first.ID}); err != nil {
		t.Fatal(err)
	}
	second := claimOne(t, e, c, "w")
	one, delay := 1, 10*time.Second
	if _, err := e.Fail(ctx, WorkerRef{ConsumerID: c, WorkerID: "w", Occurrence: second.ID},
		Failure{ErrorCode: "CRM_DOWN", Retryable: true, AttemptsLeft: &one, RetryDelay: &delay}); err != nil {
		t.Fatal(err)
	}
	clock.advance(time.Minute)
	if third := claimOne(t, e, c, "w"); third.Attempt != 3 {
		t.Fatalf("third claim: attempt %d, want 3", third.Attempt)
	}
	clock.advance(2 * time.Minute)
	if _, err := e.RunTimerPass(ctx); err != nil {
		t.Fatal(err)
	}
	o := occurrences(t, e, inst.ID)["crm"][0]
	want := "the last attempt (attempt 3: max_attempts 3, plus 1 given back (handed back unfinished, or an operator's retry), less 1 its worker gave up (a failure lowering the attempts left)) ended: its lock expired"
	if o.Status != StatusFailed || deref(o.ErrorMessage) != want {
		t.Errorf("%s: %q\nwant %q", o.Status, deref(o.ErrorMessage), want)
	}
}
