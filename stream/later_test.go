package stream_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/relais/relais/engine"
	workerv1 "github.com/relais/relais/proto/relais/worker/v1"
	"github.com/relais/relais/stream"
)

// A retry announced for later while work due now is announced too (one
// settlement group's completion that creates the next step and failure
// that retries) is pushed when due: the stream's pending wake-up kept the
// sooner time only, its claim got the work due now, and the retry waited
// for the next keep-alive (Zeebe- and River-user QA: seconds late, on the
// heartbeat's tick). The stream's loop is held while both arrive, as a
// busy loop is.
func TestARetryAnnouncedWithWorkDueNowIsPushedWhenDue(t *testing.T) {
	f := setup(t, nil) // heartbeat (and keep-alive) 10s: far later
	c := newClient(t, "grpc", f.env.URL)
	s := open(t, c, f.consumer, subscribeRequest("w", 2))
	start(t, f.env, "Later")
	start(t, f.env, "Now")
	later, now := s.assignment(5*time.Second), s.assignment(5*time.Second)
	for _, a := range []*workerv1.Assignment{later, now} {
		if _, err := fail(c, f.consumer, &workerv1.FailRequest{OccurrenceId: a.GetOccurrenceId(), WorkerId: "w", ErrorCode: "PARKED",
			Retryable: true, RetryDelay: durationpb.New(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	// The loop, woken by a time far ahead, is held before it waits again.
	held, release := stream.HoldBeforeWait(t, "w")
	if _, err := f.env.Pool.Exec(ctx, `select pg_notify($1, $2)`, engine.ChannelOccurrence,
		engine.AvailabilityPayload(engine.ModePull, "add_company_to_crm", 1, time.Now().Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	select {
	case <-held:
	case <-time.After(5 * time.Second):
		t.Fatal("the stream's loop was not woken")
	}
	tx, err := f.env.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var due, at time.Time
	if err := tx.QueryRow(ctx, `update occurrences set available_at = now() + interval '1500 milliseconds' where id = $1 returning available_at, now()`,
		later.GetOccurrenceId()).Scan(&due, &at); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `update occurrences set available_at = now() where id = $1`, now.GetOccurrenceId()); err != nil {
		t.Fatal(err)
	}
	for _, when := range []time.Time{due, at} {
		if _, err := tx.Exec(ctx, `select pg_notify($1, $2)`, engine.ChannelOccurrence,
			engine.AvailabilityPayload(engine.ModePull, "add_company_to_crm", 1, when)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// Both announcements reach the held stream's pending wake-up.
	time.Sleep(300 * time.Millisecond)
	release()
	if got := s.assignment(5 * time.Second); got.GetOccurrenceId() != now.GetOccurrenceId() {
		t.Fatalf("pushed %s first, want the work due now", got.GetOccurrenceId())
	}
	got := s.assignment(12 * time.Second)
	if late := time.Since(due); got.GetOccurrenceId() != later.GetOccurrenceId() || late > time.Second {
		t.Fatalf("the retry was pushed %v after it was due (%s), want at once", late, got.GetOccurrenceId())
	}
}
