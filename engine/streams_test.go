package engine

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relais/relais/internal/fault"
)

func TestCancelPayloadRoundTrip(t *testing.T) {
	t.Parallel()
	id := uuid.Must(uuid.NewV7())
	for _, reason := range []string{CancelInstanceStopped, CancelDeadlineExceeded} {
		got, r, ok := ParseCancelPayload(CancelPayload(id, reason))
		if !ok || got != id || r != reason {
			t.Errorf("ParseCancelPayload(CancelPayload(%s, %s)) = %s, %s, %v", id, reason, got, r, ok)
		}
	}
	if got, r, ok := ParseCancelPayload(id.String()); !ok || got != id || r != CancelInstanceStopped {
		t.Errorf("a bare id (the older form) = %s, %s, %v; want a stop", got, r, ok)
	}
	if _, _, ok := ParseCancelPayload("nope|instance_stopped"); ok {
		t.Error("a payload without an id parsed")
	}
}

func TestWorkerSignalRoundTrip(t *testing.T) {
	t.Parallel()
	s := WorkerSignal{Kind: SignalSettled, Stream: uuid.Must(uuid.NewV7()), ConsumerID: 42, WorkerID: "odd|worker|id",
		Occurrence: uuid.Must(uuid.NewV7()), Attempt: 3, Sequence: 9}
	got, ok := ParseWorkerSignal(s.payload())
	if !ok || got != s {
		t.Errorf("ParseWorkerSignal(payload) = %+v, %v; want %+v", got, ok, s)
	}
	for _, bad := range []string{"", "ack|x", "ack|" + s.Stream.String() + "|x|" + s.Occurrence.String() + "|1|2|w"} {
		if _, ok := ParseWorkerSignal(bad); ok {
			t.Errorf("ParseWorkerSignal(%q) parsed", bad)
		}
	}
}

func TestGoneReason(t *testing.T) {
	t.Parallel()
	tests := []struct {
		status, code, outcome, want string
	}{
		{StatusCompleted, "", OutcomeCompleted, ""},
		{StatusAvailable, "CRM_DOWN", OutcomeFailed, ""},
		{StatusFailed, "CRM_DOWN", OutcomeFailed, ""},
		{StatusAvailable, "", OutcomeReleased, ""},
		{StatusDeferred, "", "", ""},
		{StatusCancelled, "", OutcomeCancelled, CancelInstanceStopped},
		{StatusFailed, "deadline_exceeded", OutcomeExpired, CancelDeadlineExceeded},
		{StatusReserved, "", OutcomeExpired, CancelLockLost},
		{StatusReserved, "", "", CancelLockLost},
		{StatusFailed, "attempts_exhausted", OutcomeExpired, CancelLockLost},
	}
	for _, tt := range tests {
		if got := goneReason(tt.status, tt.code, tt.outcome); got != tt.want {
			t.Errorf("goneReason(%s, %s, %s) = %q, want %q", tt.status, tt.code, tt.outcome, got, tt.want)
		}
	}
}

// TestHandBackEndsOnlyTheAttemptHeld holds HandBack and KeepAlive to the
// attempt a stream was assigned: a disconnect counts the attempt and makes
// the occurrence claimable at once; a release gives the attempt back; and
// a stale hand-back (the same occurrence re-claimed since) changes nothing.
func TestHandBackEndsOnlyTheAttemptHeld(t *testing.T) {
	t.Parallel()
	e := setup(t)
	prepare(t, e, `"policy":{"max_attempts":2},`)
	ctx := context.Background()
	c := consumer(t, e)
	if _, _, err := e.StartInstance(ctx, StartRequest{ProcessKey: "two_step", Inputs: json.RawMessage(`{"name":"Acme"}`)}); err != nil {
		t.Fatal(err)
	}
	first := claimOne(t, e, c, "w")
	held := []Held{{Occurrence: first.ID, Attempt: first.Attempt}}
	states, err := e.KeepAlive(ctx, c, "w", held, 5*time.Minute)
	if err != nil || len(states) != 1 || !states[0].Kept {
		t.Fatalf("KeepAlive of a live lock = %+v, %v; want it kept", states, err)
	}
	// A keep-alive never pulls a lock in: an Extend (answered so) may have
	// set it further out than the stream's own duration.
	far, _ := e.GetOccurrence(ctx, first.ID)
	if again, err := e.KeepAlive(ctx, c, "w", held, time.Minute); err != nil || len(again) != 1 || !again[0].Kept {
		t.Fatalf("a second KeepAlive = %+v, %v; want it kept", again, err)
	}
	if o, _ := e.GetOccurrence(ctx, first.ID); far.LockExpiresAt == nil || o.LockExpiresAt == nil || o.LockExpiresAt.Before(*far.LockExpiresAt) {
		t.Errorf("a 1 min keep-alive moved the lock from %v to %v", far.LockExpiresAt, o.LockExpiresAt)
	}
	if other, _ := e.KeepAlive(ctx, c, "someone-else", held, time.Minute); len(other) != 1 || other[0].Kept || other[0].Gone != CancelLockLost {
		t.Errorf("KeepAlive by another worker = %+v; want not kept, lock_lost", other)
	}

	handed, err := e.HandBack(ctx, c, "w", held, false)
	if err != nil || len(handed) != 1 {
		t.Fatalf("HandBack (disconnected) = %v, %v", handed, err)
	}
	o, _ := e.GetOccurrence(ctx, first.ID)
	if o.Status != StatusAvailable || deref(o.AttemptList[0].Outcome) != OutcomeDisconnected || o.AttemptsLeft != 1 {
		t.Fatalf("after a disconnect: status %s, outcome %s, attempts left %d; want available, disconnected, 1 (it counts)",
			o.Status, deref(o.AttemptList[0].Outcome), o.AttemptsLeft)
	}
	// Claimable at once, by anyone.
	second := claimOne(t, e, c, "w")
	if second.ID != first.ID || second.Attempt != 2 {
		t.Fatalf("re-claim = %s attempt %d; want %s attempt 2", second.ID, second.Attempt, first.ID)
	}
	// The first stream's state is stale: nothing it does touches attempt 2.
	if again, _ := e.HandBack(ctx, c, "w", held, false); len(again) != 0 {
		t.Errorf("a stale hand-back handed back %v", again)
	}
	if stale, _ := e.KeepAlive(ctx, c, "w", held, time.Minute); len(stale) != 1 || stale[0].Kept {
		t.Errorf("a stale keep-alive = %+v; want not kept", stale)
	}
	o, _ = e.GetOccurrence(ctx, first.ID)
	if o.Status != StatusReserved || o.AttemptList[1].Outcome != nil {
		t.Fatalf("attempt 2 after stale calls: status %s, outcome %v; want reserved and open", o.Status, o.AttemptList[1].Outcome)
	}

	// A release (a replica shutting down) gives the attempt back.
	handed, err = e.HandBack(ctx, c, "w", []Held{{Occurrence: second.ID, Attempt: second.Attempt}}, true)
	if err != nil || len(handed) != 1 {
		t.Fatalf("HandBack (release) = %v, %v", handed, err)
	}
	o, _ = e.GetOccurrence(ctx, first.ID)
	if o.Status != StatusAvailable || deref(o.AttemptList[1].Outcome) != OutcomeReleased || o.AttemptsLeft != 1 {
		t.Fatalf("after a release: status %s, outcome %s, attempts left %d; want available, released, 1",
			o.Status, deref(o.AttemptList[1].Outcome), o.AttemptsLeft)
	}
}

// TestDisconnectOfTheLastAttemptFailsTheOccurrence: a disconnect counts,
// so a task whose workers keep dying still ends.
func TestDisconnectOfTheLastAttemptFailsTheOccurrence(t *testing.T) {
	t.Parallel()
	e := setup(t)
	prepare(t, e, `"policy":{"max_attempts":1},`)
	ctx := context.Background()
	c := consumer(t, e)
	inst, _, err := e.StartInstance(ctx, StartRequest{ProcessKey: "two_step", Inputs: json.RawMessage(`{"name":"Acme"}`)})
	if err != nil {
		t.Fatal(err)
	}
	r := claimOne(t, e, c, "w")
	if _, err := e.HandBack(ctx, c, "w", []Held{{Occurrence: r.ID, Attempt: r.Attempt}}, false); err != nil {
		t.Fatal(err)
	}
	if got, err := e.Claim(ctx, ClaimRequest{ConsumerID: c, WorkerID: "w2", Pairs: Pairs{Keys: []string{"crm"}, Revisions: []int32{1}},
		MaxTasks: 1, LockDuration: time.Minute}); err != nil || len(got) != 0 {
		t.Fatalf("claim after the last attempt disconnected = %v, %v; want nothing", got, err)
	}
	if n, err := e.RunTimers(ctx); err != nil || n != 1 {
		t.Fatalf("RunTimers = %d, %v; want the occurrence failed", n, err)
	}
	o, _ := e.GetOccurrence(ctx, r.ID)
	if o.Status != StatusFailed || deref(o.ErrorCode) != "attempts_exhausted" || deref(o.AttemptList[0].Outcome) != OutcomeDisconnected {
		t.Errorf("occurrence = %s %s, attempt %s; want failed attempts_exhausted, disconnected", o.Status, deref(o.ErrorCode), deref(o.AttemptList[0].Outcome))
	}
	// Said as it happened: the stream ended, no lock expired (QA).
	if msg := deref(o.ErrorMessage); !strings.Contains(msg, "the worker stream holding it ended") || strings.Contains(msg, "expired") {
		t.Errorf("error message %q, want the stream's end named", msg)
	}
	got, _ := e.GetInstance(ctx, inst.ID)
	if got.Status != InstanceFailed {
		t.Errorf("instance %s, want failed (on_error)", got.Status)
	}
}

// A hand-back that commits while KeepAlive waits for the occurrence's lock
// (another stream of the worker ending, disconnected, as a new one resumes
// its tasks) ends the lock at its own clock, later than the keep-alive
// statement's: the attempt it ended says the lock is gone. The keep-alive
// used to extend it, leaving the occurrence reserved, its attempt ended:
// settled by no one, offered to no one, while the stream lived (QA).
func TestKeepAliveDoesNotReviveALockHandedBackWhileItWaited(t *testing.T) {
	t.Parallel()
	e, c, got := oneClaimed(t)
	ctx := context.Background()
	held := []Held{{Occurrence: got.ID, Attempt: got.Attempt}}
	var states []HeldState
	handBackWhileWaiting(t, e, got, "OccurrenceKeepAlive", func() (err error) {
		states, err = e.KeepAlive(ctx, c, "w", held, time.Minute)
		return err
	})
	if len(states) != 1 || states[0].Kept || states[0].Gone != CancelLockLost {
		t.Fatalf("KeepAlive = %+v; want not kept, lock_lost", states)
	}
	// Offered again, by anyone.
	if again := claimOne(t, e, c, "w2"); again.ID != got.ID || again.Attempt != 2 {
		t.Errorf("re-claim = %s attempt %d; want %s attempt 2", again.ID, again.Attempt, got.ID)
	}
}

// An Extend (the Go SDK keeping the lock of a task whose stream ended)
// that waited for the occurrence's lock while the stream's hand-back
// committed is refused: it used to revive the lock, the attempt ended
// disconnected, and the worker's completion then settled the occurrence
// with its attempt still reading disconnected (QA).
func TestExtendDoesNotReviveALockHandedBackWhileItWaited(t *testing.T) {
	t.Parallel()
	e, c, got := oneClaimed(t)
	ctx := context.Background()
	err := handBackWhileWaiting(t, e, got, "OccurrenceLock", func() error {
		_, err := e.Extend(ctx, WorkerRef{ConsumerID: c, WorkerID: "w", Occurrence: got.ID, Attempt: int32(got.Attempt)}, time.Minute)
		return err
	})
	if !fault.HasCode(err, "lock_expired") {
		t.Fatalf("Extend = %v; want lock_expired", err)
	}
	if again := claimOne(t, e, c, "w2"); again.ID != got.ID || again.Attempt != 2 {
		t.Errorf("re-claim = %s attempt %d; want %s attempt 2", again.ID, again.Attempt, got.ID)
	}
}

// A settlement that waited for the occurrence's lock while a stream's
// hand-back committed is refused, the worker told its stream ended: it
// used to compare the lock's new expiry (the hand-back's clock) with its
// own transaction's older clock, find it live, and complete the
// occurrence while its attempt read disconnected.
func TestSettlementDoesNotSettleALockHandedBackWhileItWaited(t *testing.T) {
	t.Parallel()
	for _, settle := range []struct {
		name string
		call func(e *Engine, ref WorkerRef) error
	}{
		{"complete", func(e *Engine, ref WorkerRef) error {
			_, err := e.Complete(context.Background(), ref, json.RawMessage(`{"result":"created","crm_id":"C1"}`))
			return err
		}},
		{"fail", func(e *Engine, ref WorkerRef) error {
			_, err := e.Fail(context.Background(), ref, Failure{ErrorCode: "crm_down", Message: "no", Retryable: true})
			return err
		}},
	} {
		t.Run(settle.name, func(t *testing.T) {
			t.Parallel()
			e, c, got := oneClaimed(t)
			ref := WorkerRef{ConsumerID: c, WorkerID: "w", Occurrence: got.ID, Attempt: int32(got.Attempt)}
			err := handBackWhileWaiting(t, e, got, "SettlementLock", func() error { return settle.call(e, ref) })
			if !fault.HasCode(err, "lock_expired") || !strings.Contains(err.Error(), "worker stream holding it ended") {
				t.Fatalf("%s = %v; want lock_expired saying the stream ended", settle.name, err)
			}
			var status, outcome string
			if err := e.pool.QueryRow(context.Background(), `select o.status, a.outcome from occurrences o
				join attempts a on a.occurrence_id = o.id and a.number = 1 where o.id = $1`, got.ID).Scan(&status, &outcome); err != nil {
				t.Fatal(err)
			}
			if status != StatusReserved || outcome != OutcomeDisconnected {
				t.Errorf("occurrence %s, attempt 1 %s; want reserved (its lock lapsed), disconnected", status, outcome)
			}
			if again := claimOne(t, e, c, "w2"); again.ID != got.ID || again.Attempt != 2 {
				t.Errorf("re-claim = %s attempt %d; want %s attempt 2", again.ID, again.Attempt, got.ID)
			}
		})
	}
}

// oneClaimed starts an instance of two_step and claims its occurrence as
// worker w of the consumer it returns.
func oneClaimed(t *testing.T) (*Engine, int64, Reservation) {
	t.Helper()
	e := setup(t)
	prepare(t, e, "")
	c := consumer(t, e)
	if _, _, err := e.StartInstance(context.Background(), StartRequest{ProcessKey: "two_step", Inputs: json.RawMessage(`{"name":"Acme"}`)}); err != nil {
		t.Fatal(err)
	}
	return e, c, claimOne(t, e, c, "w")
}

// handBackWhileWaiting runs call while a transaction holds the row of
// got's occurrence; once call's statement named waiting waits for it, the
// transaction hands the occurrence back as a stream's disconnect does (the
// lock's expiry and the attempt's end one instant), at a clock later than
// call's own, and commits. It returns call's error.
func handBackWhileWaiting(t *testing.T, e *Engine, got Reservation, waiting string, call func() error) error {
	t.Helper()
	if got.Attempt != 1 {
		t.Fatalf("attempt %d; the hand-back below ends attempt 1", got.Attempt)
	}
	return commitWhileWaiting(t, e, got.ID, waiting, call,
		`update occurrences set lock_expires_at = clock_timestamp(), claimable_at = clock_timestamp() where id = $1`,
		`update attempts set outcome = 'disconnected', ended_at = (select lock_expires_at from occurrences where id = $1)
		 where occurrence_id = $1 and number = 1`)
}

// commitWhileWaiting runs call while a transaction holds the row of
// occurrence id; once call's statement named waiting waits for it, the
// transaction runs writes (each given id) and commits. It returns call's
// error.
func commitWhileWaiting(t *testing.T, e *Engine, id uuid.UUID, waiting string, call func() error, writes ...string) error {
	t.Helper()
	ctx := context.Background()
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `select 1 from occurrences where id = $1 for update`, id); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- call() }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		if err := e.pool.QueryRow(ctx, `select count(*) from pg_stat_activity
			where datname = current_database() and wait_event_type = 'Lock' and query like '%' || $1 || '%'`, waiting).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never waited for the row's lock", waiting)
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, w := range writes {
		if _, err := tx.Exec(ctx, w, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return <-done
}

// A settlement that commits while KeepAlive waits for the occurrence's lock
// (a completion sent to another replica) is a settlement, not a lost lock:
// the keep-alive statement's own snapshot still shows the occurrence
// reserved and its attempt open.
func TestKeepAliveDoesNotTakeASettlementItWaitedForAsALostLock(t *testing.T) {
	t.Parallel()
	e, c, got := oneClaimed(t)
	ctx := context.Background()
	held := []Held{{Occurrence: got.ID, Attempt: got.Attempt}}

	// The settlement commits once the keep-alive waits for the row.
	var states []HeldState
	err := commitWhileWaiting(t, e, got.ID, "OccurrenceKeepAlive", func() (err error) {
		states, err = e.KeepAlive(ctx, c, "w", held, time.Minute)
		return err
	},
		`update occurrences set status = 'completed', settled_at = now(), claimable_at = null where id = $1`,
		`update attempts set outcome = 'completed', ended_at = now() where occurrence_id = $1 and number = 1`)
	if err != nil || len(states) != 1 {
		t.Fatalf("KeepAlive = %+v, %v", states, err)
	}
	if s := states[0]; s.Kept || s.Gone != "" {
		t.Errorf("KeepAlive after a settlement it waited for = %+v; want not kept and gone for no reason to cancel (settled)", s)
	}
}
