package worker

// Deferral through the SDK, against a real Relais, on both protocols: a
// handler defers its task, the worker reports nothing for it, and the
// occurrence is settled later by id, or by a front end with a settle
// token.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relais/relais/internal/relaistest"
	"github.com/relais/relais/internal/testlog"
)

// deferring is a handler that defers its task, sends its id on ids, and
// then does what after says (nil: returns no outcome).
func deferring(ids chan<- string, after func(ctx context.Context, t *Task) (any, error)) Handler {
	return func(ctx context.Context, t *Task) (any, error) {
		if _, err := t.Defer(ctx, "waiting for the sales team"); err != nil {
			return nil, err
		}
		ids <- t.ID
		if after != nil {
			return after(ctx, t)
		}
		return nil, nil
	}
}

// sideWorker is a Worker of r's consumer that never runs: what a web
// handler settling deferred occurrences would hold.
func (r *relais) sideWorker(t *testing.T) *Worker {
	t.Helper()
	w, err := New(Config{URL: r.env.URL, Token: r.consumer, WorkerID: "front-desk",
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func receive(t *testing.T, ids <-chan string) string {
	t.Helper()
	select {
	case id := <-ids:
		return id
	case <-time.After(10 * time.Second):
		t.Fatal("no task was deferred")
		return ""
	}
}

func waitStatus(t *testing.T, r *relais, inst, want string) map[string]any {
	t.Helper()
	var occ map[string]any
	relaistest.WaitFor(t, 10*time.Second, "the occurrence is "+want, func() (bool, string) {
		occ = r.occurrenceOf(t, inst)
		return occ["status"] == want, fmt.Sprint(occ["status"])
	})
	return occ
}

func TestDeferredTaskIsCompletedByID(t *testing.T) {
	for _, protocol := range []Protocol{ProtocolStream, ProtocolLongPoll} {
		t.Run(string(protocol), func(t *testing.T) {
			r := newRelais(t, nil)
			ids := make(chan string, 1)
			run := r.run(t, Config{Protocol: protocol}, deferring(ids, nil))
			inst := r.start(t, "Acme")
			id := receive(t, ids)
			occ := waitStatus(t, r, inst, "deferred")
			if occ["deferred_reason"] != "waiting for the sales team" && !strings.Contains(fmt.Sprint(occ), "waiting for the sales team") {
				t.Errorf("the reason is not shown: %v", occ)
			}
			// The worker reports nothing for a deferred task: it stays
			// deferred while the worker runs on.
			time.Sleep(300 * time.Millisecond)
			if got := r.occurrenceOf(t, inst)["status"]; got != "deferred" {
				t.Fatalf("the worker settled its deferred task: %v", got)
			}
			w := r.sideWorker(t)
			if err := w.CompleteDeferred(context.Background(), id, map[string]any{"result": "created", "crm_id": "CRM-7"}); err != nil {
				t.Fatal(err)
			}
			// A repeated identical completion is answered as the first.
			if err := w.CompleteDeferred(context.Background(), id, map[string]any{"result": "created", "crm_id": "CRM-7"}); err != nil {
				t.Fatalf("replay: %v", err)
			}
			if got := r.env.WaitEnded(inst, 10*time.Second)["status"]; got != "completed" {
				t.Errorf("instance %v", got)
			}
			if err := run.stop(t); err != nil {
				t.Fatal(err)
			}
			logs := r.env.Logs.String()
			wantPath := "path=/api/v1/pull/occurrences/" + id + "/defer"
			if protocol == ProtocolStream {
				wantPath = "path=/relais.worker.v1.WorkerService/Defer"
			}
			if !strings.Contains(logs, wantPath) {
				t.Errorf("the deferral did not go through %s", wantPath)
			}
		})
	}
}

// A deferred fetched task's lock is no longer kept: the handler that goes
// on after Defer (to hand the task to a person, say) is not cancelled as if
// its lock were lost when the next extension is due.
func TestDeferStopsKeepingTheLock(t *testing.T) {
	r := newRelais(t, nil)
	ids := make(chan string, 1)
	ctxErr := make(chan error, 1)
	r.run(t, Config{Protocol: ProtocolLongPoll, LockDuration: time.Second}, deferring(ids, func(ctx context.Context, _ *Task) (any, error) {
		// Past half the lock, when it would have been extended.
		select {
		case <-ctx.Done():
		case <-time.After(1500 * time.Millisecond):
		}
		ctxErr <- context.Cause(ctx)
		return nil, nil
	}))
	inst := r.start(t, "Acme")
	receive(t, ids)
	select {
	case err := <-ctxErr:
		if err != nil {
			t.Fatalf("the handler was cancelled after deferring: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the handler did not return")
	}
	waitStatus(t, r, inst, "deferred")
}

// A typed handler that defers and returns its type's zero value returned
// no outcome: nothing is logged about an outcome after Defer (it used to
// warn every time, Typed boxing the zero value).
func TestTypedHandlerThatDefersReturnsNoOutcome(t *testing.T) {
	r := newRelais(t, nil)
	logs := &testlog.Buffer{}
	ids := make(chan string, 1)
	returned := make(chan struct{})
	type out struct {
		Result string `json:"result"`
	}
	r.run(t, Config{Logger: slog.New(slog.NewTextHandler(logs, nil))}, Typed(func(ctx context.Context, t *Task, _ struct{}) (out, error) {
		defer close(returned)
		if _, err := t.Defer(ctx, "waiting for the sales team"); err != nil {
			return out{}, err
		}
		if _, err := t.Defer(ctx, "again"); !errors.Is(err, ErrAlreadyDeferred) {
			return out{}, fmt.Errorf("a second Defer: %v, want ErrAlreadyDeferred", err)
		}
		ids <- t.ID
		return out{}, nil
	}))
	inst := r.start(t, "Acme")
	receive(t, ids)
	<-returned
	waitStatus(t, r, inst, "deferred")
	time.Sleep(200 * time.Millisecond)
	if strings.Contains(logs.String(), "outcome after deferring") {
		t.Errorf("a typed handler returning its zero value after Defer was warned about: %s", logs.String())
	}
}

// What a handler returns after deferring is not reported.
func TestOutcomeAfterDeferIsNotReported(t *testing.T) {
	r := newRelais(t, nil)
	ids := make(chan string, 1)
	returned := make(chan struct{})
	r.run(t, Config{}, deferring(ids, func(context.Context, *Task) (any, error) {
		defer close(returned)
		return nil, Fail("rejected", "no")
	}))
	inst := r.start(t, "Acme")
	receive(t, ids)
	<-returned
	time.Sleep(300 * time.Millisecond)
	if got := r.occurrenceOf(t, inst)["status"]; got != "deferred" {
		t.Fatalf("the outcome returned after Defer was reported: %v", got)
	}
}

func TestDeferredTaskIsFailedByID(t *testing.T) {
	r := newRelais(t, nil)
	ids := make(chan string, 1)
	r.run(t, Config{}, deferring(ids, nil))
	inst := r.start(t, "Acme")
	id := receive(t, ids)
	waitStatus(t, r, inst, "deferred")
	w := r.sideWorker(t)
	if err := w.FailDeferred(context.Background(), id, Fail("rejected", "the sales team said no")); err != nil {
		t.Fatal(err)
	}
	occ := waitStatus(t, r, inst, "failed")
	if !strings.Contains(fmt.Sprint(occ), "rejected") {
		t.Errorf("the failure's code is not recorded: %v", occ)
	}
	// Settled, it refuses another outcome, and says so.
	err := w.CompleteDeferred(context.Background(), id, map[string]any{"result": "created", "crm_id": "CRM-7"})
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != 409 {
		t.Errorf("a completion after the failure: %v, want a 409", err)
	}
	if err := w.FailDeferred(context.Background(), id, nil); err == nil {
		t.Error("FailDeferred without an error was accepted")
	}
}

// A settle token lets a front end settle that occurrence, and only it.
func TestSettleTokenSettlesTheDeferredOccurrence(t *testing.T) {
	r := newRelais(t, nil)
	ids := make(chan string, 2)
	r.run(t, Config{Concurrency: 2}, deferring(ids, nil))
	inst := r.start(t, "Acme")
	other := r.start(t, "Globex")
	first, second := receive(t, ids), receive(t, ids)
	w := r.sideWorker(t)
	id := first
	if r.occurrenceOf(t, inst)["id"] != first {
		id = second
	}
	tok, err := w.IssueSettleToken(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if tok.Token == "" || !tok.ExpiresAt.After(time.Now()) {
		t.Fatalf("token %+v", tok)
	}
	otherID := first
	if id == first {
		otherID = second
	}
	r.env.Must(401, "POST", "/api/v1/pull/occurrences/"+otherID+"/complete", tok.Token,
		map[string]any{"outputs": map[string]any{"result": "created", "crm_id": "CRM-1"}})
	r.env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/complete", tok.Token,
		map[string]any{"outputs": map[string]any{"result": "created", "crm_id": "CRM-1"}})
	if got := r.env.WaitEnded(inst, 10*time.Second)["status"]; got != "completed" {
		t.Errorf("instance %v", got)
	}
	if got := r.occurrenceOf(t, other)["status"]; got != "deferred" {
		t.Errorf("the other occurrence is %v", got)
	}
	// A token for an occurrence that is not deferred is refused.
	_, err = w.IssueSettleToken(context.Background(), id)
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != 409 {
		t.Errorf("a token for a settled occurrence: %v, want a 409", err)
	}
}

func TestDeferOutsideAHandler(t *testing.T) {
	var task Task
	if _, err := task.Defer(context.Background(), "no"); err == nil {
		t.Error("Defer outside a handler was accepted")
	}
}

// Once its handler returned, a task's outcome was reported: a Defer made
// afterwards (by a goroutine the handler left behind) is refused, not sent
// to race the outcome.
func TestDeferAfterTheHandlerReturnedIsRefused(t *testing.T) {
	r := newRelais(t, nil)
	tasks := make(chan *Task, 1)
	r.run(t, Config{}, func(ctx context.Context, task *Task) (any, error) {
		tasks <- task
		return created(ctx, task)
	})
	inst := r.start(t, "Acme")
	task := <-tasks
	if got := r.env.WaitEnded(inst, 10*time.Second)["status"]; got != "completed" {
		t.Fatalf("instance %v", got)
	}
	if _, err := task.Defer(context.Background(), "too late"); !errors.Is(err, ErrTooLateToDefer) {
		t.Errorf("Defer after the handler returned: %v, want ErrTooLateToDefer", err)
	}
}

// An outcome by id is sent as WorkerID~deferred: resent after a lost
// answer once this very worker took the occurrence again (a retried
// failure), it is answered as a replay, not taken for the new attempt's
// failure; and it cannot settle a task the worker's own handler holds.
func TestDeferredOutcomesAreNotTheRunningWorkers(t *testing.T) {
	for _, protocol := range []Protocol{ProtocolStream, ProtocolLongPoll} {
		t.Run(string(protocol), func(t *testing.T) {
			r := newRelais(t, map[string]any{"retry_delay": "PT0S"})
			ids := make(chan string, 1)
			second := make(chan *Task, 1)
			release := make(chan struct{})
			defer close(release) // before the worker stops (a cleanup)
			r.run(t, Config{Protocol: protocol, WorkerID: "crm-1"}, func(ctx context.Context, task *Task) (any, error) {
				if task.Attempt == 1 {
					return deferring(ids, nil)(ctx, task)
				}
				second <- task
				<-release // holds attempt 2 until the test ends
				return created(ctx, task)
			})
			r.start(t, "Acme")
			id := receive(t, ids)
			// The same worker id, as the README's example uses the running
			// Worker.
			same, err := New(Config{URL: r.env.URL, Token: r.consumer, WorkerID: "crm-1", Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
			if err != nil {
				t.Fatal(err)
			}
			fail := Retry("MANAGER_AWAY", 0, errors.New("away"))
			if err := same.FailDeferred(context.Background(), id, fail); err != nil {
				t.Fatal(err)
			}
			var held *Task
			select {
			case held = <-second:
			case <-time.After(10 * time.Second):
				t.Fatal("the worker did not take attempt 2")
			}
			// The resend of the same failure is a replay: attempt 2 stays
			// the worker's.
			if err := same.FailDeferred(context.Background(), id, fail); err != nil {
				t.Fatalf("resent failure: %v", err)
			}
			occ := r.env.Must(200, "GET", "/api/v1/occurrences/"+id, r.env.Operator, nil).JSON(t)
			if occ["status"] != "reserved" || occ["attempts"].([]any)[1].(map[string]any)["outcome"] != nil {
				t.Errorf("after the resent failure: %v, attempts %v; want attempt 2 still reserved", occ["status"], occ["attempts"])
			}
			// Nor can it complete the task its own handler holds.
			err = same.CompleteDeferred(context.Background(), held.ID, map[string]any{"result": "created", "crm_id": "C"})
			var ae *APIError
			if !errors.As(err, &ae) || ae.Status != 409 {
				t.Errorf("CompleteDeferred of a task its handler holds: %v, want a 409", err)
			}
		})
	}
}

// A reason longer than Relais keeps is cut, on a character, rather than
// refused (the handler would then fail its task for a note to operators).
func TestDeferReasonIsCut(t *testing.T) {
	r := newRelais(t, nil)
	ids := make(chan string, 1)
	errs := make(chan error, 1)
	r.run(t, Config{}, func(ctx context.Context, task *Task) (any, error) {
		_, err := task.Defer(ctx, strings.Repeat("é", 300)) // 600 bytes
		errs <- err
		ids <- task.ID
		return nil, nil
	})
	inst := r.start(t, "Acme")
	if err := <-errs; err != nil {
		t.Fatalf("Defer with a 600-byte reason: %v", err)
	}
	<-ids
	occ := waitStatus(t, r, inst, "deferred")
	if reason, _ := occ["defer_reason"].(string); reason != strings.Repeat("é", 250) {
		t.Errorf("reason %q (%d bytes), want the first 250 characters", reason, len(reason))
	}
}

// CompleteDeferred, FailDeferred and IssueSettleToken that give up when
// their context ends without an answer (Relais unreachable, or answering
// 503) say so with ErrUnanswered and the context's error, never as a
// bare refusal: the caller sends the same outcome again later.
func TestDeferredCallsThatGetNoAnswerSaySo(t *testing.T) {
	t.Parallel()
	busy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"status":503,"code":"database_unavailable","title":"Service Unavailable"}`))
	}))
	defer busy.Close()
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	for name, url := range map[string]string{"503": busy.URL, "unreachable": gone.URL} {
		w, err := New(Config{URL: url, Token: "t", WorkerID: "w", Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		for call, f := range map[string]func(ctx context.Context) error{
			"CompleteDeferred": func(ctx context.Context) error { return w.CompleteDeferred(ctx, "0193", map[string]any{"a": 1}) },
			"FailDeferred":     func(ctx context.Context) error { return w.FailDeferred(ctx, "0193", errors.New("x")) },
			"IssueSettleToken": func(ctx context.Context) error { _, err := w.IssueSettleToken(ctx, "0193"); return err },
		} {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			err := f(ctx)
			cancel()
			if !errors.Is(err, ErrUnanswered) || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s, %s: %v, want ErrUnanswered and the context's deadline", name, call, err)
			}
			var ae *APIError
			if got := errors.As(err, &ae); got != (name == "503") {
				t.Errorf("%s, %s: an *APIError in %v is %v, want it only for the 503", name, call, err, got)
			}
		}
	}
}

// A service that lost the ids it deferred finds them again with
// Deferred, page after page (smaller pages than the default here), and
// settles them by id; a request left unanswered reaches the loop as its
// error.
func TestDeferredListsWhatTheConsumerDeferred(t *testing.T) {
	r := newRelais(t, nil)
	ids := make(chan string, 8)
	run := r.run(t, Config{Protocol: ProtocolLongPoll}, deferring(ids, nil))
	want := map[string]bool{}
	for i := range 3 {
		inst := r.start(t, fmt.Sprint("Acme ", i))
		want[receive(t, ids)] = true
		waitStatus(t, r, inst, "deferred")
	}
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}
	w := r.sideWorker(t)
	defer func(n int) { deferredPageSize = n }(deferredPageSize)
	deferredPageSize = 2
	var got []DeferredOccurrence
	for o, err := range w.Deferred(context.Background(), DeferredFilter{}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, o)
	}
	if len(got) != 3 {
		t.Fatalf("listed %d deferred occurrences, want 3: %+v", len(got), got)
	}
	for i, o := range got {
		if !want[o.ID] || o.DeferReason == nil || *o.DeferReason != "waiting for the sales team" || o.DeferredAt.IsZero() || o.WorkerID == "" || o.Attempt != 1 {
			t.Errorf("item %d: %+v, want one of the deferred occurrences %v with its reason, date, worker and attempt", i, o, want)
		}
		if i > 0 && o.ID >= got[i-1].ID {
			t.Errorf("item %d (%s) listed after %s: want newest first", i, o.ID, got[i-1].ID)
		}
	}
	if err := w.CompleteDeferred(context.Background(), got[0].ID, map[string]any{"result": "created", "crm_id": "CRM-7"}); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, err := range w.Deferred(context.Background(), DeferredFilter{WorkerID: got[1].WorkerID}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 2 {
		t.Errorf("after one was completed, %d listed, want 2", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var errs []error
	for _, err := range w.Deferred(ctx, DeferredFilter{}) {
		errs = append(errs, err)
	}
	if len(errs) != 1 || !errors.Is(errs[0], ErrUnanswered) {
		t.Errorf("listing with its context ended: %v, want one error wrapping ErrUnanswered", errs)
	}
}

// Close lets a Worker that never runs (a front end settling by id) leave
// no connection behind: its idle connections are closed, the server sees
// them go (Go SDK QA: two goroutines lingered until the idle timeout).
func TestCloseReleasesTheConnectionsOfAWorkerThatNeverRuns(t *testing.T) {
	var closed atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"items":[]}`))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			closed.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	w, err := New(Config{URL: srv.URL, Token: "rls_front_end", WorkerID: "front-desk", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range w.Deferred(context.Background(), DeferredFilter{}) {
		if err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(50 * time.Millisecond)
	if n := closed.Load(); n != 0 {
		t.Fatalf("%d connections closed before Close", n)
	}
	w.Close()
	waitFor(t, "the idle connection closed", func() bool { return closed.Load() == 1 })
}

func TestWithDeferStandsInForRelais(t *testing.T) {
	calls := 0
	task := (&Task{ID: "t1"}).WithDefer(func(_ context.Context, reason string) (Deferral, error) {
		calls++
		if len(reason) > maxDeferReason {
			t.Errorf("reason of %d bytes reached the double; Relais stores at most %d", len(reason), maxDeferReason)
		}
		if calls == 1 {
			return Deferral{}, &APIError{Status: 409, Code: "lock_expired"}
		}
		return Deferral{DeferredAt: time.Unix(1, 0)}, nil
	})
	long := strings.Repeat("é", maxDeferReason)
	if _, err := task.Defer(context.Background(), long); err == nil {
		t.Fatal("the double's refusal was not returned")
	}
	// A refused Defer leaves the task the handler's: it may try again.
	if d, err := task.Defer(context.Background(), long); err != nil || !d.DeferredAt.Equal(time.Unix(1, 0)) {
		t.Fatalf("Defer = %+v, %v; want the double's answer", d, err)
	}
	if _, err := task.Defer(context.Background(), "again"); !errors.Is(err, ErrAlreadyDeferred) {
		t.Errorf("second Defer = %v; want ErrAlreadyDeferred", err)
	}
	if calls != 2 {
		t.Errorf("double called %d times; want 2 (the one after success refused by the SDK)", calls)
	}
	if _, err := (&Task{}).Defer(context.Background(), "x"); err == nil || !strings.Contains(err.Error(), "WithDefer") {
		t.Errorf("Defer on a bare Task = %v; want it to point at WithDefer", err)
	}
}
