package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relais/relais/internal/isoduration"
	"github.com/relais/relais/internal/testlog"
)

const def = "add_company_to_crm"

// harness runs a Worker against a fakeServer and records the delays the
// worker chose, without sleeping them: behaviour is asserted on what was
// asked for, not on wall-clock tolerances.
type harness struct {
	t      *testing.T
	s      *fakeServer
	w      *Worker
	mu     sync.Mutex
	sleeps []time.Duration
	cancel context.CancelFunc
	done   chan error
}

func newHarness(t *testing.T, s *fakeServer, cfg Config) *harness {
	t.Helper()
	cfg.URL = s.srv.URL
	if cfg.Token == "" && cfg.TokenFunc == nil {
		cfg.Token = s.token
	}
	cfg.WorkerID = cmpOrString(cfg.WorkerID, "test-worker")
	cfg.Wait = cmpOrDuration(cfg.Wait, 5*time.Second)
	cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	// The fake takes locks under Relais's floor of a second, which New
	// refuses, so that lapses take milliseconds.
	lock := cfg.LockDuration
	cfg.LockDuration = 0
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if lock > 0 {
		w.cfg.LockDuration = lock
	}
	h := &harness{t: t, s: s, w: w}
	w.fetchBackoff = backoff{min: 2 * time.Millisecond, max: 16 * time.Millisecond}
	w.settleBackoff = backoff{min: time.Millisecond, max: 4 * time.Millisecond}
	w.sleep = func(ctx context.Context, d time.Duration) bool {
		h.mu.Lock()
		h.sleeps = append(h.sleeps, d)
		h.mu.Unlock()
		return sleepCtx(ctx, time.Millisecond)
	}
	return h
}

func cmpOrString(v, d string) string {
	if v == "" {
		return d
	}
	return v
}

func cmpOrDuration(v, d time.Duration) time.Duration {
	if v == 0 {
		return d
	}
	return v
}

func (h *harness) start() {
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	h.done = make(chan error, 1)
	go func() { h.done <- h.w.Run(ctx) }()
	// A test that fails early must not leave its worker running.
	h.t.Cleanup(func() {
		cancel()
		select {
		case <-h.done:
		case <-time.After(10 * time.Second):
		}
	})
}

// stop ends Run and returns its error.
func (h *harness) stop() error {
	h.t.Helper()
	h.cancel()
	select {
	case err := <-h.done:
		h.done <- err // for the cleanup
		return err
	case <-time.After(10 * time.Second):
		h.t.Fatal("Run did not return")
		return nil
	}
}

func (h *harness) recordedSleeps() []time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]time.Duration(nil), h.sleeps...)
}

type crmInputs struct {
	CompanyName string `json:"company_name"`
}

func created(_ context.Context, t *Task) (any, error) {
	var in crmInputs
	if err := t.Decode(&in); err != nil {
		return nil, err
	}
	return map[string]any{"result": "created", "crm_id": "CRM-" + in.CompanyName}, nil
}

func TestCompletesTasks(t *testing.T) {
	s := newFake(t)
	s.maxAttempts = 3
	ids := make([]string, 5)
	for i := range ids {
		ids[i] = s.add(def, 2, fmt.Sprintf(`{"company_name":"acme-%d"}`, i))
	}
	h := newHarness(t, s, Config{})
	var mu sync.Mutex
	seen := map[string]Task{}
	h.w.Handle(def, []int{2, 3}, func(ctx context.Context, task *Task) (any, error) {
		mu.Lock()
		seen[task.ID] = *task
		mu.Unlock()
		return created(ctx, task)
	})
	h.start()
	waitFor(t, "5 completions", func() bool { return s.countStatus("completed") == 5 })
	if err := h.stop(); err != nil {
		t.Fatalf("Run = %v", err)
	}
	fetches, completes, fails, _ := s.snapshot()
	if len(fails) != 0 || len(completes) != 5 {
		t.Fatalf("completes %d, fails %d; want 5, 0", len(completes), len(fails))
	}
	for i, id := range ids {
		if got, want := s.task(id).outputs, fmt.Sprintf(`{"crm_id":"CRM-acme-%d","result":"created"}`, i); got != want {
			t.Errorf("outputs of %s = %s; want %s", id, got, want)
		}
		task := seen[id]
		if task.Definition != def || task.Revision != 2 || task.Attempt != 1 || task.AttemptsLeft != 2 || task.LockExpiresAt.IsZero() ||
			task.InstanceID == "" || task.Node != "crm" || task.Priority != 5 || task.DeadlineAt != nil {
			t.Errorf("task %s delivered as %+v", id, task)
		}
	}
	f := fetches[0]
	if f.WorkerID != "test-worker" || f.MaxTasks != DefaultConcurrency || f.LockDuration != "PT1M" || f.Wait != "PT5S" || f.RequestID == "" ||
		len(f.Subscriptions) != 1 || f.Subscriptions[0].Definition != def || fmt.Sprint(f.Subscriptions[0].Revisions) != "[2 3]" {
		t.Errorf("first fetch = %+v", f)
	}
	for _, c := range completes {
		if c.WorkerID != "test-worker" || c.Status != 200 {
			t.Errorf("complete = %+v", c)
		}
	}
}

func TestFailures(t *testing.T) {
	ptr := func(s string) *string { return &s }
	tests := []struct {
		name    string
		handler Handler
		want    failRecord
		refused int // completions refused before the failure
	}{
		{"business", func(context.Context, *Task) (any, error) {
			return nil, Fail("INVALID_COUNTRY", "country %q is not ISO", "France")
		},
			failRecord{ErrorCode: "INVALID_COUNTRY", Message: `country "France" is not ISO`, Retryable: false}, 0},
		{"wrapped business", func(context.Context, *Task) (any, error) {
			return nil, fmt.Errorf("checking: %w", Fail("DUPLICATE", "seen"))
		}, failRecord{ErrorCode: "DUPLICATE", Message: "seen", Retryable: false}, 0},
		{"plain error", func(context.Context, *Task) (any, error) { return nil, errors.New("crm down") },
			failRecord{ErrorCode: "handler_error", Message: "crm down", Retryable: true}, 0},
		{"message holding NUL", func(context.Context, *Task) (any, error) { return nil, errors.New("crm\x00down") },
			failRecord{ErrorCode: "handler_error", Message: "crm?down", Retryable: true}, 0},
		// Codes are repaired into what Relais accepts, not refused.
		{"code with spaces", func(context.Context, *Task) (any, error) { return nil, Fail(" CRM down/é", "no") },
			failRecord{ErrorCode: "CRM_down_e", Message: "no", Retryable: false}, 0},
		{"accented code", func(context.Context, *Task) (any, error) { return nil, Fail("ÉCHEC_PAIEMENT", "no") },
			failRecord{ErrorCode: "ECHEC_PAIEMENT", Message: "no", Retryable: false}, 0},
		{"code of no latin letter", func(context.Context, *Task) (any, error) { return nil, Fail("失敗", "no") },
			failRecord{ErrorCode: "business_error", Message: "no", Retryable: false}, 0},
		{"empty business code", func(context.Context, *Task) (any, error) { return nil, Fail("", "no") },
			failRecord{ErrorCode: "business_error", Message: "no", Retryable: false}, 0},
		{"long code", func(context.Context, *Task) (any, error) { return nil, Fail(strings.Repeat("X", 70), "no") },
			failRecord{ErrorCode: strings.Repeat("X", 64), Message: "no", Retryable: false}, 0},
		{"retryable with code and delay", func(context.Context, *Task) (any, error) {
			return nil, Retry("CRM_DOWN", 1500*time.Millisecond, errors.New("timeout"))
		}, failRecord{ErrorCode: "CRM_DOWN", Message: "timeout", Retryable: true, RetryDelay: ptr("PT1.5S")}, 0},
		{"wrapped retryable", func(context.Context, *Task) (any, error) {
			return nil, fmt.Errorf("calling crm: %w", Retry("CRM_DOWN", 2*time.Minute, errors.New("timeout")))
		}, failRecord{ErrorCode: "CRM_DOWN", Message: "calling crm: CRM_DOWN: timeout", Retryable: true, RetryDelay: ptr("PT2M")}, 0},
		{"panic", func(context.Context, *Task) (any, error) { panic("boom") },
			failRecord{ErrorCode: "handler_panic", Message: "panic: boom", Retryable: true}, 0},
		// t.FailNow's way out, in a helper shared with tests: it used to be
		// reported completed with no outputs, the work never done.
		{"goroutine exited", func(context.Context, *Task) (any, error) { runtime.Goexit(); return nil, nil },
			failRecord{ErrorCode: "handler_panic", Message: "the handler's goroutine exited (runtime.Goexit) without returning", Retryable: true}, 0},
		{"invalid outputs", func(context.Context, *Task) (any, error) { return map[string]string{"result": "created"}, nil },
			failRecord{ErrorCode: "invalid_outputs", Message: `the outputs violate the contract: /outputs/crm_id: is required`, Retryable: false}, 1},
		{"unencodable outputs", func(context.Context, *Task) (any, error) { return map[string]any{"crm_id": make(chan int)}, nil },
			failRecord{ErrorCode: "invalid_outputs", Message: "the handler's outputs cannot be encoded as JSON", Retryable: false}, 0},
		// A handler's mistakes that panic where the SDK reads what it
		// returned fail the task; they crashed the worker process (Go SDK
		// QA), and the task every worker that took it again.
		{"typed nil error", func(context.Context, *Task) (any, error) {
			var e *panickyError
			return nil, e
		}, failRecord{ErrorCode: "handler_panic", Message: "panic: runtime error: invalid memory address or nil pointer dereference", Retryable: true}, 0},
		{"outputs whose MarshalJSON panics", func(context.Context, *Task) (any, error) {
			return map[string]any{"crm_id": &panickyOutput{}}, nil
		}, failRecord{ErrorCode: "invalid_outputs", Message: "the handler's outputs cannot be encoded as JSON: a MarshalJSON or MarshalText method panicked", Retryable: false}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newFake(t)
			id := s.add(def, 1, `{"company_name":"acme"}`)
			h := newHarness(t, s, Config{})
			h.w.Handle(def, nil, tt.handler)
			h.start()
			waitFor(t, "the failure", func() bool { return s.status(id) == "failed" })
			if err := h.stop(); err != nil {
				t.Fatalf("Run = %v", err)
			}
			_, completes, fails, _ := s.snapshot()
			if len(fails) != 1 {
				t.Fatalf("fails = %+v", fails)
			}
			got := fails[0]
			want := tt.want
			want.ID, want.WorkerID, want.Status = id, "test-worker", 200
			if deref(got.RetryDelay) != deref(want.RetryDelay) {
				t.Errorf("retry_delay = %v; want %v", deref(got.RetryDelay), deref(want.RetryDelay))
			}
			got.RetryDelay, want.RetryDelay = nil, nil
			if got != want {
				t.Errorf("fail = %+v\nwant   %+v", got, want)
			}
			if len(completes) != tt.refused {
				t.Errorf("completes = %+v; want %d", completes, tt.refused)
			}
			for _, c := range completes {
				if c.Status != 422 || c.Code != "invalid_outputs" {
					t.Errorf("complete = %+v; want 422 invalid_outputs", c)
				}
			}
		})
	}
}

// A failure Relais refuses as sent is reported again rather than left to
// the lock's expiry: without its delay when that was above the ceiling,
// else under invalid_failure.
func TestRefusedFailureIsReportedAgain(t *testing.T) {
	day := isoduration.Format(24 * time.Hour)
	for _, tc := range []struct {
		name             string
		refusal          fault
		code, messageHas string
		delay            string // the delay reported after the refusal
	}{
		// A delay above the ceiling is clamped to it, as REST and the
		// stream name it, not dropped for a policy delay of seconds.
		{"ceiling member", fault{status: 400, code: "bound_exceeded", extra: map[string]any{"field": "retry_delay", "ceiling": "P1D"}}, "CRM_DOWN", "timeout", day},
		{"ceiling in the detail", fault{status: 400, code: "bound_exceeded", detail: "retry_delay is above the ceiling 86400s"}, "CRM_DOWN", "timeout", day},
		{"no ceiling named", fault{status: 400, code: "bound_exceeded"}, "CRM_DOWN", "timeout", "<nil>"},
		{"another refusal", fault{status: 400, code: "invalid_request"}, "invalid_failure", "refused (invalid_request): timeout", "<nil>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newFake(t)
			s.inject("fail", tc.refusal)
			s.add(def, 1, `{"company_name":"acme"}`)
			h := newHarness(t, s, Config{})
			h.w.Handle(def, nil, func(context.Context, *Task) (any, error) {
				return nil, Retry("CRM_DOWN", 48*time.Hour, errors.New("timeout"))
			})
			h.start()
			waitFor(t, "the failure", func() bool { return len(failsOf(s)) > 0 })
			if err := h.stop(); err != nil {
				t.Fatal(err)
			}
			fails := failsOf(s)
			if len(fails) != 1 {
				t.Fatalf("fails = %+v, want the one report after the refusal", fails)
			}
			if f := fails[0]; f.ErrorCode != tc.code || !strings.Contains(f.Message, tc.messageHas) || deref(f.RetryDelay) != tc.delay || !f.Retryable {
				t.Errorf("report = %+v (retry_delay %s), want code %s, message with %q, delay %q, retryable", f, deref(f.RetryDelay), tc.code, tc.messageHas, tc.delay)
			}
		})
	}
}

// The lock is kept while the outcome is reported: a completion retried
// through a slow outage still lands, since the lock did not lapse meanwhile.
func TestLockKeptWhileReporting(t *testing.T) {
	s := newFake(t)
	s.inject("complete", fault{status: 503, code: "unavailable", delay: 300 * time.Millisecond},
		fault{status: 503, code: "unavailable", delay: 300 * time.Millisecond})
	id := s.add(def, 1, `{"company_name":"acme"}`)
	h := newHarness(t, s, Config{LockDuration: 200 * time.Millisecond})
	h.w.Handle(def, nil, created)
	h.start()
	waitFor(t, "completion", func() bool { return s.status(id) == "completed" })
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	_, _, _, extends := s.snapshot()
	if len(extends) == 0 {
		t.Error("no extension while the completion was retried for longer than the lock")
	}
}

func failsOf(s *fakeServer) []failRecord {
	_, _, fails, _ := s.snapshot()
	return fails
}

func deref(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

func TestNilOutputsCompleteWithEmptyObject(t *testing.T) {
	s := newFake(t)
	s.required = "" // this contract has no required output
	id := s.add(def, 1, `{}`)
	h := newHarness(t, s, Config{})
	h.w.Handle(def, nil, func(context.Context, *Task) (any, error) { return nil, nil })
	h.start()
	waitFor(t, "completion", func() bool { return s.status(id) == "completed" })
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	if _, completes, _, _ := s.snapshot(); completes[0].Outputs != "{}" {
		t.Errorf("outputs = %s; want {}", completes[0].Outputs)
	}
}

// A Typed handler gets its inputs decoded and its outputs encoded; inputs
// its type cannot hold fail the task at once, not retried.
func TestTypedHandler(t *testing.T) {
	s := newFake(t)
	s.maxAttempts = 3
	good := s.add(def, 1, `{"company_name":"acme","extra":"a later revision's field"}`)
	bad := s.add(def, 1, `{"company_name":42}`)
	h := newHarness(t, s, Config{})
	type outputs struct {
		Result string `json:"result"`
		CRMID  string `json:"crm_id"`
	}
	h.w.Handle(def, nil, Typed(func(_ context.Context, _ *Task, in crmInputs) (outputs, error) {
		return outputs{Result: "created", CRMID: "CRM-" + in.CompanyName}, nil
	}))
	h.start()
	waitFor(t, "both settled", func() bool { return s.status(good) == "completed" && len(failsOf(s)) == 1 })
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	if got := s.task(good).outputs; got != `{"crm_id":"CRM-acme","result":"created"}` {
		t.Errorf("outputs = %s", got)
	}
	f := failsOf(s)[0]
	if f.ID != bad || f.ErrorCode != "inputs_undecodable" || f.Retryable || !strings.Contains(f.Message, "worker.crmInputs") || strings.Contains(f.Message, "42") {
		t.Errorf("failure = %+v; want a final inputs_undecodable naming the type, not the value", f)
	}
}

// What Typed says of inputs that do not decode names the field and the
// types, never the value (encoding/json quotes numbers and times).
func TestTypedNamesNoValue(t *testing.T) {
	type line struct {
		On  *time.Time `json:"on"`
		Qty int        `json:"qty"`
	}
	type in struct {
		Count int            `json:"count"`
		Since time.Time      `json:"since"`
		Lines []line         `json:"lines"`
		Meta  map[string]any `json:"meta"`
	}
	h := Typed(func(context.Context, *Task, in) (any, error) { return nil, nil })
	for inputs, want := range map[string]string{
		`{"count":123456.5}`: "count is a JSON number, which int cannot hold",
		// A type's own method refused it: the field is named all the
		// same (Go SDK QA), with the way to read a date.
		`{"since":"1984-03-07"}`: "since does not parse as time.Time (time.Time reads RFC 3339 date-times; a contract date, without a time, is read into worker.Date)",
		`{"count":1,"lines":[{"qty":1},{"on":"1984-03-07","qty":2}]}`: "lines.1.on does not parse as time.Time",
		// A type error in a list names the item too (Go SDK QA: lines.qty).
		`{"lines":[{"qty":1},{"qty":2.5}]}`: "lines.1.qty is a JSON number, which int cannot hold",
		// No inputs at all: a Task built by hand (Go SDK QA).
		``: "the task has no inputs to decode into worker.in",
	} {
		_, err := h(context.Background(), &Task{Inputs: json.RawMessage(inputs)})
		var be *BusinessError
		if !errors.As(err, &be) || be.Code != "inputs_undecodable" || !strings.Contains(be.Message, want) ||
			strings.Contains(be.Message, "123456") || strings.Contains(be.Message, "1984") {
			t.Errorf("%s: %v; want inputs_undecodable saying %q and quoting no value", inputs, err, want)
		}
	}
}

func TestConcurrencyBound(t *testing.T) {
	const limit = 3
	s := newFake(t)
	for i := range 30 {
		s.add(def, 1, fmt.Sprintf(`{"company_name":"c%d"}`, i))
	}
	h := newHarness(t, s, Config{Concurrency: limit})
	var inFlight, peak atomic.Int32
	h.w.Handle(def, nil, func(ctx context.Context, task *Task) (any, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(3 * time.Millisecond)
		return created(ctx, task)
	})
	h.start()
	waitFor(t, "30 completions", func() bool { return s.countStatus("completed") == 30 })
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	if p := peak.Load(); p > limit || p < 1 {
		t.Errorf("peak in flight = %d; limit %d", p, limit)
	}
	fetches, _, _, _ := s.snapshot()
	if fetches[0].MaxTasks != limit {
		t.Errorf("first fetch max_tasks = %d; want %d", fetches[0].MaxTasks, limit)
	}
	for i, f := range fetches {
		if f.MaxTasks < 1 || f.HeldBefore+f.MaxTasks > limit {
			t.Errorf("fetch %d asked %d tasks while holding %d; limit %d", i, f.MaxTasks, f.HeldBefore, limit)
		}
	}
}

func TestLockExtendedDuringLongHandler(t *testing.T) {
	s := newFake(t)
	id := s.add(def, 1, `{"company_name":"slow"}`)
	s.inject("extend", fault{status: 503, code: "unavailable"}) // one transient refusal is retried
	h := newHarness(t, s, Config{LockDuration: 200 * time.Millisecond})
	var ctxErr error
	h.w.Handle(def, nil, func(ctx context.Context, task *Task) (any, error) {
		select {
		case <-ctx.Done():
		case <-time.After(700 * time.Millisecond):
		}
		ctxErr = context.Cause(ctx)
		return created(ctx, task)
	})
	h.start()
	waitFor(t, "completion", func() bool { return s.status(id) == "completed" })
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	if ctxErr != nil {
		t.Errorf("handler context ended: %v", ctxErr)
	}
	// The fake enforces lock expiry: the completion succeeding proves the
	// lock was kept alive past its initial 200ms.
	_, completes, _, extends := s.snapshot()
	if len(completes) != 1 || completes[0].Status != 200 {
		t.Errorf("completes = %+v", completes)
	}
	ok := 0
	for _, e := range extends {
		if e.LockDuration != "PT0.2S" || e.WorkerID != "test-worker" || e.ID != id {
			t.Errorf("extend = %+v", e)
		}
		if e.Status == 200 {
			ok++
		}
	}
	if ok < 2 {
		t.Errorf("successful extensions = %d (%+v); want at least 2", ok, extends)
	}
}

func TestTaskClaimedLateInLongPoll(t *testing.T) {
	s := newFake(t)
	h := newHarness(t, s, Config{LockDuration: 100 * time.Millisecond})
	h.w.Handle(def, nil, func(ctx context.Context, task *Task) (any, error) {
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-time.After(250 * time.Millisecond):
		}
		return created(ctx, task)
	})
	h.start()
	waitFor(t, "a pending long poll", func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.waiting == 1 })
	// Claimed more than a lock duration after the fetch was sent: the
	// lock runs from the claim, and the worker must not think it lost.
	time.Sleep(150 * time.Millisecond)
	id := s.add(def, 1, `{"company_name":"late"}`)
	waitFor(t, "settlement", func() bool { return s.status(id) != "reserved" && s.status(id) != "available" })
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	if st := s.status(id); st != "completed" {
		t.Errorf("status = %s; want completed", st)
	}
	if _, _, _, extends := s.snapshot(); len(extends) < 2 || extends[0].Status != 200 {
		t.Errorf("extends = %+v; want an immediate one, then more", extends)
	}
}

func TestAnswerHeldPastTheLockStartsNoHandler(t *testing.T) {
	s := newFake(t)
	s.maxAttempts = 2
	id := s.add(def, 1, `{"company_name":"acme"}`)
	// The claim's answer reaches the worker after its lock lapsed, as
	// for a worker frozen (SIGSTOP, a VM paused) with it in its socket.
	s.inject("fetch", fault{late: 300 * time.Millisecond})
	h := newHarness(t, s, Config{LockDuration: 200 * time.Millisecond, Concurrency: 1})
	var mu sync.Mutex
	var attempts []int
	h.w.Handle(def, nil, func(ctx context.Context, task *Task) (any, error) {
		mu.Lock()
		attempts = append(attempts, task.Attempt)
		mu.Unlock()
		return created(ctx, task)
	})
	h.start()
	waitFor(t, "completion", func() bool { return s.status(id) == "completed" })
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(attempts, []int{2}) {
		t.Errorf("handler ran for attempts %v; want only 2 (the first one's lock had lapsed when it was received)", attempts)
	}
	if _, _, _, extends := s.snapshot(); len(extends) == 0 || extends[0].Code != "lock_expired" {
		t.Errorf("extends = %+v; want the lapsed lock checked first", extends)
	}
}

// blockingHandler runs until its context ends, then reports the cause and
// returns valid outputs, which must be dropped.
func blockingHandler(started chan<- string, causes chan<- error) Handler {
	return func(ctx context.Context, task *Task) (any, error) {
		started <- task.ID
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return created(ctx, task)
	}
}

func TestLostLockCancelsHandler(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(s *fakeServer)
		act     func(s *fakeServer, id string)
		want    error
		detail  string
	}{
		{"occurrence cancelled", nil, (*fakeServer).cancel, ErrCancelled, "occurrence_cancelled"},
		{"locked by another worker", nil, (*fakeServer).steal, ErrLockLost, "locked_by_other_worker"},
		{"deadline passed", func(s *fakeServer) {
			s.inject("extend", fault{status: http.StatusConflict, code: "deadline_exceeded"})
		}, nil, ErrCancelled, "deadline_exceeded"},
		{"expired without extension", func(s *fakeServer) {
			s.inject("extend", fault{hang: true}, fault{hang: true}, fault{hang: true})
		}, nil, ErrLockLost, "expired without a successful extension"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newFake(t)
			id := s.add(def, 1, `{"company_name":"acme"}`)
			if tt.prepare != nil {
				tt.prepare(s)
			}
			h := newHarness(t, s, Config{LockDuration: 200 * time.Millisecond})
			started, causes := make(chan string, 1), make(chan error, 1)
			h.w.Handle(def, nil, blockingHandler(started, causes))
			h.start()
			<-started
			if tt.act != nil {
				tt.act(s, id)
			}
			cause := <-causes
			if err := h.stop(); err != nil {
				t.Fatal(err)
			}
			if !errors.Is(cause, tt.want) || !strings.Contains(cause.Error(), tt.detail) {
				t.Errorf("cause = %v; want %v (%s)", cause, tt.want, tt.detail)
			}
			if _, completes, fails, _ := s.snapshot(); len(completes)+len(fails) != 0 {
				t.Errorf("settled after losing the lock: completes %+v, fails %+v", completes, fails)
			}
		})
	}
}

func TestGracefulShutdownWaitsForHandler(t *testing.T) {
	s := newFake(t)
	id := s.add(def, 1, `{"company_name":"acme"}`)
	h := newHarness(t, s, Config{Concurrency: 2})
	started, release := make(chan struct{}), make(chan struct{})
	var ctxErr error
	h.w.Handle(def, nil, func(ctx context.Context, task *Task) (any, error) {
		close(started)
		<-release
		ctxErr = ctx.Err()
		return created(ctx, task)
	})
	h.start()
	<-started
	// With one slot free, the worker is long-polling for more.
	waitFor(t, "a pending long poll", func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.waiting == 1 })
	h.cancel()
	waitFor(t, "the long poll to be abandoned", func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.aborted == 1 })
	select {
	case err := <-h.done:
		t.Fatalf("Run returned %v with a handler in flight", err)
	default:
	}
	close(release)
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	if ctxErr != nil {
		t.Errorf("shutdown cancelled the handler: %v", ctxErr)
	}
	if st := s.status(id); st != "completed" {
		t.Errorf("status = %s; want completed", st)
	}
	// The first, the abandoned one, and the same again without a wait,
	// which asks what the abandoned one held (nothing, here). The fake
	// records the abandoned one when it sees the client go, which may be
	// after the replay arrived: the two are in either order.
	f, _, _, _ := s.snapshot()
	if len(f) != 3 || f[2].RequestID != f[1].RequestID || f[1].Wait == f[2].Wait || (f[1].Wait != "PT0S" && f[2].Wait != "PT0S") {
		t.Errorf("fetches = %+v; want the first, the abandoned one, and its replay without a wait", f)
	}
}

func TestShutdownTimeoutCancelsHandler(t *testing.T) {
	s := newFake(t)
	s.maxAttempts = 2
	id := s.add(def, 1, `{"company_name":"acme"}`)
	h := newHarness(t, s, Config{ShutdownTimeout: 50 * time.Millisecond})
	started, causes := make(chan string, 1), make(chan error, 1)
	h.w.Handle(def, nil, func(ctx context.Context, task *Task) (any, error) {
		started <- task.ID
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return nil, ctx.Err()
	})
	h.start()
	<-started
	if err := h.stop(); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if cause := <-causes; !errors.Is(cause, ErrShutdownTimeout) {
		t.Errorf("cause = %v; want ErrShutdownTimeout", cause)
	}
	if rs, fails := releasesOf(s), failsOf(s); len(rs) != 1 || rs[0].ID != id || rs[0].Status != 200 || len(fails) != 0 {
		t.Errorf("releases = %+v, fails = %+v; want one release and no failure", rs, fails)
	}
	if st := s.status(id); st != "available" {
		t.Errorf("status = %s; want available again", st)
	}
}

// With TokenFunc, a rotated token is taken up without a restart: a 401
// is retried, the token read again, and the outcome of a task fetched
// with the old token lands with the new one.
func TestTokenFuncTakesUpARotatedToken(t *testing.T) {
	s := newFake(t)
	s.maxAttempts = 2
	id := s.add(def, 1, `{"company_name":"acme"}`)
	var current atomic.Value
	current.Store(s.token)
	reads := atomic.Int64{}
	h := newHarness(t, s, Config{TokenFunc: func(context.Context) (string, error) {
		reads.Add(1)
		return current.Load().(string), nil
	}})
	started, release := make(chan struct{}, 1), make(chan struct{})
	h.w.Handle(def, nil, func(ctx context.Context, task *Task) (any, error) {
		started <- struct{}{}
		<-release
		return created(ctx, task)
	})
	h.start()
	<-started
	// The token is rotated: the server takes only the new one, which the
	// worker's source gives a moment later.
	s.mu.Lock()
	s.token = "rotated-token"
	s.mu.Unlock()
	close(release)
	time.Sleep(50 * time.Millisecond) // some refusals meanwhile
	current.Store("rotated-token")
	waitFor(t, "the completion with the new token", func() bool { return s.status(id) == "completed" })
	if err := h.stop(); err != nil {
		t.Fatalf("Run = %v; want nil (a 401 with TokenFunc is retried)", err)
	}
	if reads.Load() < 3 {
		t.Errorf("the token was read %d times, want it read for each request", reads.Load())
	}
}

// A long poll that went with the token a rotation's overlap then ended
// (401 at its wake) is sent again at once with TokenFunc's token, said at
// info level: a clean rotation logged a warning (Go SDK QA).
func TestARotatedLongPollIsFetchedAgainAtOnce(t *testing.T) {
	s := newFake(t)
	// The tokens TokenFunc gives and the server takes change together, and
	// only while the worker's fetch waits at the server: no read of the
	// token is then in flight. stale makes the next read give the old one,
	// as the fetch that waited through the overlap's end was sent with it.
	var mu sync.Mutex
	old, current, stale := s.token, s.token, false
	h := newHarness(t, s, Config{Wait: time.Second, TokenFunc: func(context.Context) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		if stale {
			stale = false
			return old, nil
		}
		return current, nil
	}})
	logs := &testlog.Buffer{}
	h.w.log = slog.New(slog.NewTextHandler(logs, nil))
	h.w.Handle(def, nil, created)
	h.start()
	// Switched under the fake's lock while a fetch waits there: that
	// fetch cannot end meanwhile, and the worker reads no token.
	waitFor(t, "the tokens switched while a fetch waits at the server", func() bool {
		mu.Lock()
		defer mu.Unlock()
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.waiting == 0 {
			return false
		}
		s.token, current, stale = "rotated-token", "rotated-token", true
		return true
	})
	// The task once the waiting fetch ended: taken by the fetch sent
	// again, it proves that fetch carried the new token.
	waitFor(t, "the fetch sent again", func() bool { return strings.Contains(logs.String(), "fetching again at once") })
	id := s.add(def, 1, `{"company_name":"acme"}`)
	waitFor(t, "the task completed with the new token", func() bool { return s.status(id) == "completed" })
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	if got := logs.String(); !strings.Contains(got, "fetching again at once") || strings.Contains(got, "fetch failed") {
		t.Errorf("logs:\n%s\nwant the refetch said at info level, no fetch failure", got)
	}
}

// Token and TokenFunc: one of them.
func TestTokenOrTokenFunc(t *testing.T) {
	f := func(context.Context) (string, error) { return "t", nil }
	for _, cfg := range []Config{{URL: "http://relais.example"}, {URL: "http://relais.example", Token: "t", TokenFunc: f}} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(Token %q, TokenFunc set %v) accepted", cfg.Token, cfg.TokenFunc != nil)
		}
	}
	if _, err := New(Config{URL: "http://relais.example", TokenFunc: f}); err != nil {
		t.Errorf("New with TokenFunc alone: %v", err)
	}
	// What TokenFunc gives is cleaned as Token is: trimmed, or refused
	// with the reason (retried, as the next read may give a good one).
	for tok, want := range map[string]string{"rls_abc\n": "rls_abc", "rls_a\rb": "", "": ""} {
		w, err := New(Config{URL: "http://relais.example", TokenFunc: func(context.Context) (string, error) { return tok, nil }})
		if err != nil {
			t.Fatal(err)
		}
		got, err := w.token(context.Background())
		if got != want || (want == "" && (err == nil || !strings.Contains(err.Error(), "TokenFunc"))) {
			t.Errorf("TokenFunc giving %q: token %q, %v; want %q", tok, got, err, want)
		}
	}
}

// A bound of Relais's exceeded by what the program configured names the
// Config field, not the wire's member.
func TestRunNamesTheConfigBehindABound(t *testing.T) {
	w, err := New(Config{URL: "http://relais.example", Token: "t", Concurrency: 200, LockDuration: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		refusal *APIError
		want    string
	}{
		{&APIError{Status: 400, Code: "bound_exceeded", Detail: "max_in_flight is above the ceiling 100"}, "Concurrency 200"},
		{&APIError{Status: 400, Code: "bound_exceeded", Detail: "max_tasks is above the ceiling PT10M", Extra: map[string]any{"field": "max_tasks"}}, "Concurrency 200"},
		{&APIError{Status: 400, Code: "bound_exceeded", Detail: "lock_duration is above the ceiling 600s"}, "LockDuration 1h0m0s"},
	} {
		err := w.configBound(tc.refusal)
		var ae *APIError
		if !strings.Contains(fmt.Sprint(err), tc.want) || !errors.As(err, &ae) {
			t.Errorf("%s: %v; want it to name %s and wrap the refusal", tc.refusal.Detail, err, tc.want)
		}
	}
	other := &APIError{Status: 403, Code: "not_granted"}
	if err := w.configBound(other); err != other {
		t.Errorf("another refusal: %v", err)
	}
}

// A handler that ignores the cancellation of a shutdown is abandoned by
// Run, and its lock with it: nothing extends it once Run returned.
func TestAbandonedHandlerLockIsNotKept(t *testing.T) {
	s := newFake(t)
	s.add(def, 1, `{"company_name":"acme"}`)
	h := newHarness(t, s, Config{ShutdownTimeout: 50 * time.Millisecond, LockDuration: 200 * time.Millisecond})
	h.w.shutdownGrace = 50 * time.Millisecond
	// The abandoned handler reports (refused) after the test's checks.
	h.w.log = slog.New(slog.DiscardHandler)
	started, release := make(chan struct{}, 1), make(chan struct{})
	h.w.Handle(def, nil, func(ctx context.Context, task *Task) (any, error) {
		started <- struct{}{}
		<-release // ignores its context
		return nil, nil
	})
	h.start()
	<-started
	if err := h.stop(); !errors.Is(err, ErrShutdownTimeout) {
		t.Fatalf("Run = %v; want ErrShutdownTimeout", err)
	}
	_, _, _, before := s.snapshot()
	time.Sleep(500 * time.Millisecond) // more than two extensions' worth
	if _, _, _, after := s.snapshot(); len(after) != len(before) {
		t.Errorf("extensions after Run returned: %d, then %d; want none (the abandoned handler's lock expires)", len(before), len(after))
	}
	close(release)
	waitFor(t, "the abandoned handler's outcome", func() bool {
		_, completes, _, _ := s.snapshot()
		return len(completes) == 1
	})
}

// Against a Relais without the release route, a shutdown hands the task
// back with a retryable worker_shutdown failure without delay.
func TestShutdownFallsBackToFailWithoutRelease(t *testing.T) {
	s := newFake(t)
	s.maxAttempts = 2
	s.noRelease = true
	id := s.add(def, 1, `{"company_name":"acme"}`)
	h := newHarness(t, s, Config{ShutdownTimeout: 50 * time.Millisecond})
	started := make(chan struct{}, 1)
	h.w.Handle(def, nil, func(ctx context.Context, task *Task) (any, error) {
		started <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	h.start()
	<-started
	if err := h.stop(); err != nil {
		t.Fatalf("Run = %v", err)
	}
	fails := failsOf(s)
	if len(fails) != 1 || fails[0].ErrorCode != "worker_shutdown" || !fails[0].Retryable || deref(fails[0].RetryDelay) != "PT0S" || fails[0].Status != 200 {
		t.Errorf("fails = %+v; want one retryable worker_shutdown with retry_delay PT0S", fails)
	}
	if st := s.status(id); st != "available" {
		t.Errorf("status = %s; want available again", st)
	}
}

func releasesOf(s *fakeServer) []settleRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.releases)
}

// Past the shutdown timeout and its grace, a worker whose handlers all
// returned still waits for their outcomes to be reported, rather than
// leave finished work to be done again.
func TestShutdownWaitsForOutcomesBeingReported(t *testing.T) {
	s := newFake(t)
	s.maxAttempts = 2
	s.inject("release", fault{status: 503, code: "unavailable", delay: 300 * time.Millisecond})
	s.add(def, 1, `{"company_name":"acme"}`)
	h := newHarness(t, s, Config{ShutdownTimeout: 50 * time.Millisecond})
	h.w.shutdownGrace = 50 * time.Millisecond
	started := make(chan struct{}, 1)
	h.w.Handle(def, nil, func(ctx context.Context, task *Task) (any, error) {
		started <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	h.start()
	<-started
	if err := h.stop(); err != nil {
		t.Fatalf("Run = %v, want nil: every handler returned and its outcome was reported", err)
	}
	if rs := releasesOf(s); len(rs) != 1 || rs[0].Status != 200 {
		t.Errorf("releases = %+v; want the release, accepted after the 503", rs)
	}
}

func TestBackoffOnServerErrors(t *testing.T) {
	s := newFake(t)
	s.inject("fetch", fault{status: 503, code: "unavailable"}, fault{status: 500, code: "internal"}, fault{status: 503, code: "unavailable"})
	id := s.add(def, 1, `{"company_name":"acme"}`)
	h := newHarness(t, s, Config{Wait: 100 * time.Millisecond})
	logs := &testlog.Buffer{}
	h.w.log = slog.New(slog.NewJSONHandler(logs, nil))
	defer func() {
		// Durations as text, in JSON as in text logs (Go SDK QA: JSON
		// logs read "delay":705095099).
		if got := logs.String(); !regexp.MustCompile(`"msg":"fetch failed; retrying".*"delay":"[0-9.]+(ms|µs|s)"`).MatchString(got) {
			t.Errorf("logs:\n%s\nwant the retry's delay written as a duration", got)
		}
	}()
	h.w.Handle(def, nil, created)
	h.start()
	waitFor(t, "completion", func() bool { return s.status(id) == "completed" })
	s.inject("fetch", fault{status: 502, code: "bad_gateway"})
	waitFor(t, "a fourth backoff", func() bool { return len(h.recordedSleeps()) == 4 })
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	sleeps := h.recordedSleeps()
	// Each delay lies in [d/2, d] with d doubling from 2ms, and success
	// resets it.
	bounds := [][2]time.Duration{{1, 2}, {2, 4}, {4, 8}, {1, 2}}
	for i, b := range bounds {
		if lo, hi := b[0]*time.Millisecond, b[1]*time.Millisecond; sleeps[i] < lo || sleeps[i] > hi {
			t.Errorf("backoff %d = %v; want within [%v, %v]", i, sleeps[i], lo, hi)
		}
	}
	fetches, _, _, _ := s.snapshot()
	// Injected answers are not recorded: at least the fetch that got the
	// task is; a long poll between completion and the last fault may be too.
	if len(fetches) == 0 {
		t.Errorf("fetches = %d, want the one that got the task", len(fetches))
	}
}

func TestBackoffHonoursRetryAfter(t *testing.T) {
	s := newFake(t)
	s.inject("fetch", fault{status: 429, code: "too_many_waiters", retryAfter: "7"})
	id := s.add(def, 1, `{"company_name":"acme"}`)
	h := newHarness(t, s, Config{})
	h.w.Handle(def, nil, created)
	h.start()
	waitFor(t, "completion", func() bool { return s.status(id) == "completed" })
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	sleeps := h.recordedSleeps()
	if len(sleeps) != 1 || sleeps[0] < 7*time.Second || sleeps[0] > 7*time.Second+h.w.fetchBackoff.max {
		t.Errorf("sleeps = %v; want one of about 7s", sleeps)
	}
}

func TestFetchNetworkErrorReplaysRequestID(t *testing.T) {
	s := newFake(t)
	s.inject("fetch", fault{drop: true})
	id := s.add(def, 1, `{"company_name":"acme"}`)
	h := newHarness(t, s, Config{})
	h.w.Handle(def, nil, created)
	h.start()
	waitFor(t, "completion", func() bool { return s.status(id) == "completed" })
	waitFor(t, "the next fetch", func() bool { f, _, _, _ := s.snapshot(); return len(f) >= 2 })
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	fetches, _, _, _ := s.snapshot()
	if fetches[0].RequestID != fetches[1].RequestID || fetches[0].Replayed || !fetches[1].Replayed {
		t.Errorf("the dropped fetch was not replayed with its request_id: %+v", fetches[:2])
	}
	if len(fetches) > 2 && fetches[2].RequestID == fetches[0].RequestID {
		t.Error("a new fetch reused the request_id")
	}
	// Replayed, not re-claimed once its lock expired: still attempt 1.
	if task := s.task(id); task.attempt != 1 {
		t.Errorf("attempt = %d; want 1", task.attempt)
	}
	if len(h.recordedSleeps()) != 0 {
		t.Errorf("backed off before replaying: %v", h.recordedSleeps())
	}
}

func TestFetchReplayedOnlyOnce(t *testing.T) {
	s := newFake(t)
	s.maxAttempts = 2
	s.inject("fetch", fault{drop: true}, fault{drop: true})
	id := s.add(def, 1, `{"company_name":"acme"}`)
	h := newHarness(t, s, Config{LockDuration: 100 * time.Millisecond})
	h.w.Handle(def, nil, created)
	h.start()
	// The stranded reservation comes back when its lock expires.
	waitFor(t, "completion", func() bool { return s.status(id) == "completed" })
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	fetches, _, _, _ := s.snapshot()
	if fetches[0].RequestID != fetches[1].RequestID || fetches[2].RequestID == fetches[0].RequestID {
		t.Errorf("request ids = %s %s %s; want a, a, b", fetches[0].RequestID, fetches[1].RequestID, fetches[2].RequestID)
	}
	if n := len(h.recordedSleeps()); n != 1 {
		t.Errorf("backoffs = %d; want 1 after the replay failed", n)
	}
	if task := s.task(id); task.attempt != 2 {
		t.Errorf("attempt = %d; want 2", task.attempt)
	}
}

func TestSettlementRetried(t *testing.T) {
	s := newFake(t)
	// A 503, then a completion whose answer is lost: the identical
	// completion is replayed and answered the same.
	s.inject("complete", fault{status: 503, code: "unavailable"}, fault{drop: true})
	id := s.add(def, 1, `{"company_name":"acme"}`)
	h := newHarness(t, s, Config{})
	h.w.Handle(def, nil, created)
	h.start()
	waitFor(t, "two recorded completions", func() bool { _, c, _, _ := s.snapshot(); return len(c) == 2 })
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	_, completes, _, _ := s.snapshot()
	if completes[0].Status != 200 || completes[1].Status != 200 || completes[0].Outputs != completes[1].Outputs {
		t.Errorf("completes = %+v", completes)
	}
	if s.status(id) != "completed" || len(h.recordedSleeps()) != 2 {
		t.Errorf("status %s, backoffs %v", s.status(id), h.recordedSleeps())
	}
}

func TestOverdeliveredTaskGivenBack(t *testing.T) {
	s := newFake(t)
	s.maxAttempts = 2
	s.overdeliver = 1
	a := s.add(def, 1, `{"company_name":"a"}`)
	b := s.add(def, 1, `{"company_name":"b"}`)
	h := newHarness(t, s, Config{Concurrency: 1})
	h.w.Handle(def, nil, created)
	h.start()
	waitFor(t, "both completed", func() bool { return s.status(a) == "completed" && s.status(b) == "completed" })
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	_, _, fails, _ := s.snapshot()
	if len(fails) != 1 || fails[0].ID != b || fails[0].ErrorCode != "worker_at_capacity" || !fails[0].Retryable || deref(fails[0].RetryDelay) != "PT0S" {
		t.Errorf("fails = %+v", fails)
	}
}

func TestFatalFetchErrorsEndRun(t *testing.T) {
	t.Run("bad token", func(t *testing.T) {
		s := newFake(t)
		h := newHarness(t, s, Config{Token: "wrong"})
		logs := &testlog.Buffer{}
		h.w.log = slog.New(slog.NewTextHandler(logs, nil))
		h.w.Handle(def, nil, created)
		err := h.w.Run(context.Background())
		if ae, ok := errorsAsAPI(err); !ok || ae.Status != 401 || ae.Code != "unauthorized" {
			t.Errorf("Run = %v; want a 401 *APIError", err)
		}
		// The stop says it is no clean one (newcomer QA: it read as a
		// shutdown).
		if got := logs.String(); !strings.Contains(got, `level=ERROR msg="worker stopping: Relais refused it`) || strings.Count(got, "level=ERROR") != 1 {
			t.Errorf("logs:\n%s\nwant the stop said at error level, once (evaluator QA: the refusal logged twice)", got)
		}
	})
	t.Run("not Relais", func(t *testing.T) {
		// A server that is not Relais answers 501 to every try: retried,
		// Run waited forever, warning each time.
		notRelais := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "<html><body>Not Implemented</body></html>", http.StatusNotImplemented)
		}))
		t.Cleanup(notRelais.Close)
		// Over a stream too, where connect calls a 501 Unknown (a call
		// that may have acted), and the default protocol.
		for _, p := range []Protocol{ProtocolLongPoll, ProtocolStream, ProtocolAuto} {
			w, err := New(Config{URL: notRelais.URL, Token: "t", Protocol: p, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			w.Handle(def, nil, created)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err = w.Run(ctx)
			if ae, ok := errorsAsAPI(err); !ok || ae.Status != http.StatusNotImplemented || ctx.Err() != nil {
				t.Errorf("%q: Run against a server answering 501: %v (context %v); want the 501 at once", p, err, ctx.Err())
			}
			cancel()
		}
	})
	t.Run("bound exceeded", func(t *testing.T) {
		s := newFake(t)
		h := newHarness(t, s, Config{Concurrency: 101})
		h.w.Handle(def, nil, created)
		err := h.w.Run(context.Background())
		ae, ok := errorsAsAPI(err)
		if !ok || ae.Code != "bound_exceeded" || ae.Extra["field"] != "max_tasks" || ae.Extra["ceiling"] != float64(100) ||
			len(ae.Errors) != 1 || ae.Errors[0].Path != "/max_tasks" {
			t.Errorf("Run = %#v", err)
		}
		if len(h.recordedSleeps()) != 0 {
			t.Error("retried a refusal that cannot change")
		}
	})
}

func TestNewValidates(t *testing.T) {
	for _, cfg := range []Config{
		{Token: "t"},
		{URL: "relais:8080", Token: "t"},
		{URL: "http://relais"},
		{URL: "http://relais", Token: "t", Concurrency: -1},
		{URL: "http://relais", Token: "t", WorkerID: strings.Repeat("x", 201)},
		{URL: "http://relais", Token: "t", HTTPClient: &httpClientWithTimeout},
		// The API's path is the worker's to add.
		{URL: "http://relais/api/v1", Token: "t"},
		{URL: "http://relais/api/v1/", Token: "t"},
		{URL: "http://relais/relais/api/v1/pull", Token: "t"},
		{URL: "http://relais/?a=b", Token: "t"},
		{URL: "http://relais/#top", Token: "t"},
		{URL: "http://user:secret@relais", Token: "t"},
		{URL: "http://relais?", Token: "t"},
		{URL: "http://relais/#", Token: "t"},
		// What Relais would refuse at the first fetch, said by New.
		{URL: "http://relais", Token: "t", WorkerID: " w "},
		{URL: "http://relais", Token: "t", WorkerID: "w\n1"},
		{URL: "http://relais", Token: "t", LockDuration: 100 * time.Millisecond},
		// A header cannot carry it: every request would fail as if Relais
		// were down.
		{URL: "http://relais", Token: "rls_a\x00b"},
		{URL: "http://relais", Token: " \n"},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
	if _, err := New(Config{URL: "http://user:secret@relais", Token: "t"}); err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("a URL with credentials: %v; want it refused without the password", err)
	}
	if _, err := New(Config{URL: "http://relais", Token: "t", Wait: -time.Second}); err == nil || !strings.Contains(err.Error(), "Wait") {
		t.Errorf("a negative Wait: %v; want it named", err)
	}
	// A token read from a file keeps its last newline: trimmed.
	if w, err := New(Config{URL: "http://relais", Token: "rls_abc\n"}); err != nil || w.cfg.Token != "rls_abc" {
		t.Errorf("a token with its file's newline: %v", err)
	}
	w, err := New(Config{URL: "http://relais", Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if w.cfg.WorkerID == "" || w.cfg.Concurrency != 4 || w.cfg.LockDuration != time.Minute || w.cfg.Wait != 20*time.Second ||
		w.cfg.ShutdownTimeout != 30*time.Second || w.cfg.HTTPClient.Timeout <= w.cfg.Wait {
		t.Errorf("defaults = %+v", w.cfg)
	}
	if err := w.Run(context.Background()); err == nil {
		t.Error("Run without handlers accepted")
	}
	// Behind a proxy's path prefix.
	if w, err := New(Config{URL: "https://gateway.example/relais/", Token: "t"}); err != nil {
		t.Errorf("a base URL with a path prefix: %v", err)
	} else if w.base != "https://gateway.example/relais" {
		t.Errorf("a base URL with a path prefix: base %q, want it without its final slash", w.base)
	}
}

var httpClientWithTimeout = http.Client{Timeout: time.Second}

func TestHandleMisuse(t *testing.T) {
	w, err := New(Config{URL: "http://relais", Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	w.Handle(def, nil, created)
	// Empty revisions mean every revision, as nil does, patterns included.
	w.Handle("crm.*", []int{}, created)
	defer func() {
		if recover() == nil {
			t.Error("a second handler for one definition was accepted")
		}
	}()
	w.Handle(def, nil, created)
}

func TestTaskDecode(t *testing.T) {
	task := &Task{ID: "x", Inputs: json.RawMessage(`{"company_name":"acme"}`)}
	var in crmInputs
	if err := task.Decode(&in); err != nil || in.CompanyName != "acme" {
		t.Errorf("Decode = %+v, %v", in, err)
	}
	if err := task.Decode(&[]int{}); err == nil {
		t.Error("Decode into the wrong type succeeded")
	}
}

// TestDurationsOnTheWire checks the durations the worker sends read back
// exactly (isoduration is what both the worker and Relais use).
func TestDurationsOnTheWire(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "PT0S", time.Minute: "PT1M", 500 * time.Millisecond: "PT0.5S", 90 * time.Minute: "PT1H30M",
		time.Hour + 2*time.Second + 250*time.Millisecond: "PT1H2.25S", 200 * time.Millisecond: "PT0.2S", time.Nanosecond: "PT0.000000001S",
	} {
		if got := isoduration.Format(d); got != want {
			t.Errorf("isoduration.Format(%v) = %s; want %s", d, got, want)
		}
		if back, err := isoduration.Parse(want); err != nil || back != d {
			t.Errorf("isoduration.Parse(%s) = %v, %v", want, back, err)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"": 0, "3": 3 * time.Second, "-1": 0, "soon": 0,
		now.Add(90 * time.Second).Format(http.TimeFormat): 90 * time.Second,
	} {
		if got := parseRetryAfter(v, now); got != want {
			t.Errorf("parseRetryAfter(%q) = %v; want %v", v, got, want)
		}
	}
}

func TestErrorsText(t *testing.T) {
	ae := &APIError{Status: 409, Code: "lock_expired", Detail: "gone"}
	if got := ae.Error(); got != "relais: 409 lock_expired: gone" {
		t.Errorf("APIError = %q", got)
	}
	if got := Fail("X", "y %d", 1).Error(); got != "X: y 1" {
		t.Errorf("BusinessError = %q", got)
	}
	if be := Fail("X", "y %d", 1); errors.Unwrap(be) != nil {
		t.Errorf("Fail without %%w wraps %v", errors.Unwrap(be))
	}
	inner := errors.New("inner")
	if be := Fail("NO_SUCH_CUSTOMER", "customer %s: %w", "c1", inner); !errors.Is(be, inner) || be.Error() != "NO_SUCH_CUSTOMER: customer c1: inner" {
		t.Errorf("Fail with %%w = %q, Is(inner) %v", be, errors.Is(be, inner))
	}
	if be := Fail("TWO", "%w and %w", inner, io.EOF); !errors.Is(be, inner) || !errors.Is(be, io.EOF) {
		t.Errorf("Fail with two %%w = %q: does not wrap both", be)
	}
	re := Retry("", 0, inner)
	if !errors.Is(re, inner) || re.Error() != "handler_error: inner" {
		t.Errorf("RetryableError = %q", re)
	}
}

// A handler running past HandlerTimeout has its context cancelled first
// (cause ErrHandlerTimeout), then its task failed, retryable, as
// handler_timeout; one that ignores the cancellation is failed after a
// grace while it keeps its slot.
func TestHandlerTimeout(t *testing.T) {
	for _, ignores := range []bool{false, true} {
		t.Run(fmt.Sprintf("ignores the context %v", ignores), func(t *testing.T) {
			s := newFake(t)
			s.maxAttempts = 2
			id := s.add(def, 1, `{"company_name":"acme"}`)
			ends := make(chan TaskEnd, 1)
			h := newHarness(t, s, Config{HandlerTimeout: 100 * time.Millisecond, Concurrency: 1, OnTaskEnd: func(e TaskEnd) { ends <- e }})
			h.w.shutdownGrace = 50 * time.Millisecond
			causes, release := make(chan error, 1), make(chan struct{})
			h.w.Handle(def, nil, func(ctx context.Context, task *Task) (any, error) {
				<-ctx.Done()
				causes <- context.Cause(ctx)
				if ignores {
					<-release
					return created(ctx, task)
				}
				return nil, context.Cause(ctx)
			})
			h.start()
			if cause := <-causes; !errors.Is(cause, ErrHandlerTimeout) {
				t.Errorf("cause = %v; want ErrHandlerTimeout", cause)
			}
			waitFor(t, "the timeout reported", func() bool { return len(failsOf(s)) == 1 })
			f := failsOf(s)[0]
			if f.ID != id || f.ErrorCode != "handler_timeout" || !f.Retryable {
				t.Errorf("failure = %+v; want a retryable handler_timeout of %s", f, id)
			}
			// Told once the failure is reported, the handler returned or not.
			select {
			case e := <-ends:
				if e.Outcome != OutcomeFailed || e.ErrorCode != "handler_timeout" || e.Handler < 100*time.Millisecond {
					t.Errorf("OnTaskEnd told %+v, want failed handler_timeout after at least the timeout", e)
				}
				// The error the handler returned once cut short, for a hook
				// to log (River-user QA: nil); none from one still running.
				if got := e.HandlerErr; ignores && got != nil || !ignores && !errors.Is(got, ErrHandlerTimeout) {
					t.Errorf("OnTaskEnd's HandlerErr = %v, want the handler's own (ErrHandlerTimeout) once it returned", got)
				}
			case <-time.After(5 * time.Second):
				t.Error("OnTaskEnd not told once the timeout was reported")
			}
			if ignores {
				// The handler still runs: its slot is not given to another task.
				s.add(def, 1, `{"company_name":"next"}`)
				time.Sleep(100 * time.Millisecond)
				if fetches, _, _, _ := s.snapshot(); len(fetches) != 1 {
					t.Errorf("fetches while the handler still ran = %d, want 1 (its slot is held)", len(fetches))
				}
				close(release)
			}
			if err := h.stop(); err != nil {
				t.Fatal(err)
			}
			_, completes, _, _ := s.snapshot()
			for _, c := range completes {
				if c.ID == id {
					t.Errorf("the timed-out task was completed too: %+v", c)
				}
			}
		})
	}
}

// A task failed for a handler that ignored its timeout may come back to
// the same worker while that handler still runs: the new attempt's
// handler starts only once the earlier one returned, and if that takes
// longer than the new attempt's own timeout, the new attempt is failed
// without its handler ever starting.
func TestRetriedTaskWaitsForItsStuckHandler(t *testing.T) {
	for _, returns := range []bool{true, false} {
		t.Run(fmt.Sprintf("the stuck handler returns in time %v", returns), func(t *testing.T) {
			t.Parallel()
			s := newFake(t)
			s.maxAttempts = 2
			s.retryDelay = 0
			id := s.add(def, 1, `{"company_name":"acme"}`)
			timeout := 300 * time.Millisecond
			if returns {
				timeout = 2 * time.Second
			}
			h := newHarness(t, s, Config{HandlerTimeout: timeout, Concurrency: 2})
			h.w.shutdownGrace = 50 * time.Millisecond
			release := make(chan struct{})
			var running, most, runs atomic.Int32
			h.w.Handle(def, nil, func(ctx context.Context, task *Task) (any, error) {
				n := running.Add(1)
				defer running.Add(-1)
				if n > most.Load() {
					most.Store(n)
				}
				if runs.Add(1) == 1 {
					<-release // ignores its context
				}
				return created(ctx, task)
			})
			h.start()
			waitFor(t, "the first attempt's timeout reported", func() bool { return len(failsOf(s)) == 1 })
			waitFor(t, "the second attempt fetched", func() bool {
				s.mu.Lock()
				defer s.mu.Unlock()
				return s.tasks[id].attempt == 2 && s.tasks[id].status == "reserved"
			})
			if returns {
				time.Sleep(300 * time.Millisecond)
				if got := runs.Load(); got != 1 {
					t.Errorf("handler runs while the first still ran = %d, want 1", got)
				}
				close(release)
				waitFor(t, "the second attempt completed", func() bool {
					_, completes, _, _ := s.snapshot()
					return len(completes) == 1
				})
			} else {
				waitFor(t, "the second attempt failed", func() bool { return len(failsOf(s)) == 2 })
				if f := failsOf(s)[1]; f.ID != id || f.ErrorCode != "handler_timeout" || !strings.Contains(f.Message, "earlier attempt") {
					t.Errorf("second failure = %+v; want handler_timeout naming the earlier attempt", f)
				}
				if got := runs.Load(); got != 1 {
					t.Errorf("handler runs = %d, want 1 (the second attempt never started)", got)
				}
				close(release)
			}
			if got := most.Load(); got != 1 {
				t.Errorf("handlers of one task running at once = %d, want 1", got)
			}
			if err := h.stop(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A handler that ignores the handler timeout keeps its task's lock through
// the grace that follows: the timeout's failure is reported while the lock
// is held, not refused as expired (or, worse, recorded against the next
// attempt).
func TestHandlerTimeoutKeepsTheLockThroughTheGrace(t *testing.T) {
	t.Parallel()
	s := newFake(t)
	s.maxAttempts = 2
	id := s.add(def, 1, `{"company_name":"acme"}`)
	h := newHarness(t, s, Config{HandlerTimeout: 100 * time.Millisecond, LockDuration: 300 * time.Millisecond, Concurrency: 1})
	h.w.shutdownGrace = 700 * time.Millisecond // past the lock left when the timeout fires
	release := make(chan struct{})
	h.w.Handle(def, nil, func(ctx context.Context, task *Task) (any, error) {
		<-release
		return created(ctx, task)
	})
	h.start()
	waitFor(t, "the timeout reported", func() bool { return len(failsOf(s)) == 1 })
	if f := failsOf(s)[0]; f.ID != id || f.ErrorCode != "handler_timeout" || f.Status != http.StatusOK {
		t.Errorf("failure = %+v; want handler_timeout of %s accepted (the lock kept)", f, id)
	}
	close(release)
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
}

// TestOutcomeOutlastsAnOutage: a handler that finishes as the server goes
// away for 5 s has its outcome retried, with backoff, until the server is
// back (the lock is still held): the task is done once, not again after
// its lock expires.
func TestOutcomeOutlastsAnOutage(t *testing.T) {
	t.Parallel()
	s := newFake(t)
	s.maxAttempts = 3 // room for the second run a lost outcome would cause
	id := s.add(def, 1, `{"company_name":"acme"}`)
	h := newHarness(t, s, Config{LockDuration: 8 * time.Second, Wait: time.Second})
	// Real waits, with the SDK's own backoff ranges: the outage is real time.
	h.w.sleep = sleepCtx
	h.w.settleBackoff = backoff{min: 200 * time.Millisecond, max: 5 * time.Second}
	h.w.fetchBackoff = backoff{min: 100 * time.Millisecond, max: time.Second}
	var runs atomic.Int32
	h.w.Handle(def, nil, func(ctx context.Context, t *Task) (any, error) {
		runs.Add(1)
		s.outage(5 * time.Second)
		return created(ctx, t)
	})
	began := time.Now()
	h.start()
	deadline := time.Now().Add(20 * time.Second)
	for s.status(id) != "completed" {
		if time.Now().After(deadline) {
			t.Fatalf("not completed within 20s; status %s, %d runs", s.status(id), runs.Load())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the handler ran %d times; want once", n)
	}
	if took := time.Since(began); took < 5*time.Second {
		t.Errorf("completed after %v, within the outage?", took)
	}
	s.mu.Lock()
	dropped := s.dropped
	s.mu.Unlock()
	if dropped < 2 {
		t.Errorf("%d requests lost to the outage; want the outcome retried through it", dropped)
	}
}

// TestShutdownSaysAnOutcomeWasLost: a handler finishing while the worker
// shuts down and Relais cannot be reached has its outcome retried until its
// lock expires, then Run says the outcome was lost (the task will run
// again) instead of returning nil as if all went well.
func TestShutdownSaysAnOutcomeWasLost(t *testing.T) {
	t.Parallel()
	s := newFake(t)
	s.add(def, 1, `{"company_name":"acme"}`)
	h := newHarness(t, s, Config{LockDuration: 300 * time.Millisecond, ShutdownTimeout: 5 * time.Second})
	h.w.sleep = sleepCtx
	started, finish := make(chan struct{}), make(chan struct{})
	h.w.Handle(def, nil, func(ctx context.Context, t *Task) (any, error) {
		close(started)
		<-finish
		return created(ctx, t)
	})
	h.start()
	<-started
	stopped := make(chan error, 1)
	go func() { stopped <- h.stop() }()
	time.Sleep(50 * time.Millisecond) // the drain has begun
	s.outage(time.Minute)
	close(finish)
	select {
	case err := <-stopped:
		if !errors.Is(err, ErrOutcomesUnreported) {
			t.Errorf("Run = %v, want ErrOutcomesUnreported", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return")
	}
}

// A fetch whose connection could not be made is not replayed: nothing was
// sent, so no reservation waits for its answer (and "interrupted" would
// send the reader looking for one).
func TestFetchNeverSentIsNotReplayed(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: connections are refused
	var logs strings.Builder
	var mu sync.Mutex
	w, err := New(Config{URL: "http://" + addr, Token: "t", Protocol: ProtocolLongPoll,
		Logger: slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return logs.Write(p) }), nil))})
	if err != nil {
		t.Fatal(err)
	}
	w.Handle(def, nil, created)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logs.String(), "fetch failed; retrying") || strings.Contains(logs.String(), "replaying") {
		t.Errorf("logs:\n%s\nwant the failure retried, never replayed", logs.String())
	}
	_, err = http.Get("http://" + addr)
	if !neverSent(err) {
		t.Errorf("neverSent(%v) = false for a refused connection", err)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// A fetch the shutdown cuts short as the server claims tasks for it (its
// answer written into a connection the worker was closing) leaves nothing
// locked to nobody: the worker asks again with the same request_id and
// gives back what it held, instead of leaving each task to wait for its
// lock to lapse, an attempt spent.
func TestShutdownGivesBackWhatACutFetchClaimed(t *testing.T) {
	s := newFake(t)
	s.maxAttempts = 3
	s.loseAnswer = true
	h := newHarness(t, s, Config{})
	h.w.Handle(def, []int{2}, func(ctx context.Context, task *Task) (any, error) {
		t.Errorf("handler ran for %s: the lost answer's task must not run", task.ID)
		return created(ctx, task)
	})
	h.start()
	id := s.add(def, 2, `{"company_name":"acme"}`)
	waitFor(t, "the claim whose answer is lost", func() bool { return s.countStatus("reserved") == 1 })
	if err := h.stop(); err != nil {
		t.Fatalf("Run = %v", err)
	}
	s.mu.Lock()
	status, attempt, releases := s.tasks[id].status, s.tasks[id].attempt, len(s.releases)
	s.mu.Unlock()
	if status != "available" || attempt != 0 || releases != 1 {
		t.Errorf("after the shutdown: task %s at attempt %d, %d releases; want available again, its attempt given back", status, attempt, releases)
	}
}

// Without a Logger the worker logs to the program's default logger: a
// refused outcome is told only in the logs, and discarding them by
// default hid it from every newcomer.
func TestTheDefaultLoggerIsTheProgramsOwn(t *testing.T) {
	var buf testlog.Buffer
	was := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	defer slog.SetDefault(was)
	w, err := New(Config{URL: "http://127.0.0.1:1", Token: "rls_x", WorkerID: "w-default"})
	if err != nil {
		t.Fatal(err)
	}
	w.log.Info("outcome refused")
	if !strings.Contains(buf.String(), "outcome refused") || !strings.Contains(buf.String(), "worker_id=w-default") {
		t.Errorf("a worker without a Logger logged %q to the default logger, want its line", buf.String())
	}
}

// At info level a worker logs what a person should see (a failure
// reported), not each task started and completed: thousands a second
// would bury the rest.
func TestInfoLogsNoRoutineTask(t *testing.T) {
	s := newFake(t)
	s.maxAttempts = 3
	s.add(def, 2, `{"company_name":"acme"}`)
	s.add(def, 2, `{"company_name":"nowhere"}`)
	h := newHarness(t, s, Config{})
	var buf testlog.Buffer
	h.w.log = slog.New(slog.NewTextHandler(&buf, nil))
	h.w.Handle(def, []int{2}, func(ctx context.Context, task *Task) (any, error) {
		if strings.Contains(string(task.Inputs), "nowhere") {
			return nil, Fail("NO_SUCH_COMPANY", "no company named nowhere")
		}
		return created(ctx, task)
	})
	h.start()
	waitFor(t, "both settled", func() bool { return s.countStatus("completed") == 1 && s.countStatus("failed") == 1 })
	if err := h.stop(); err != nil {
		t.Fatalf("Run = %v", err)
	}
	logs := buf.String()
	if strings.Contains(logs, "task completed") || strings.Contains(logs, "task started") {
		t.Errorf("info-level logs:\n%s\nwant no line for a task started or completed", logs)
	}
	if !strings.Contains(logs, "task failed") || !strings.Contains(logs, "error_code=NO_SUCH_COMPANY") {
		t.Errorf("info-level logs:\n%s\nwant the failure reported", logs)
	}
}

// OnTaskEnd is told once what became of each task whose handler ran, with
// the code a failure was reported with; a hook that panics is logged, and
// the worker goes on.
func TestOnTaskEnd(t *testing.T) {
	s := newFake(t)
	ok := s.add(def, 1, `{"company_name":"ok"}`)
	biz := s.add(def, 1, `{"company_name":"biz"}`)
	bad := s.add(def, 1, `{"company_name":"bad"}`)
	var mu sync.Mutex
	ends := map[string]TaskEnd{}
	starts := map[string]TaskStart{}
	h := newHarness(t, s, Config{OnTaskEnd: func(e TaskEnd) {
		mu.Lock()
		_, again := ends[e.OccurrenceID]
		_, started := starts[e.OccurrenceID]
		ends[e.OccurrenceID] = e
		mu.Unlock()
		if again {
			t.Errorf("OnTaskEnd called twice for %s", e.OccurrenceID)
		}
		if !started {
			t.Errorf("OnTaskEnd called for %s before OnTaskStart", e.OccurrenceID)
		}
		panic("a hook that panics")
	}, OnTaskStart: func(s TaskStart) {
		mu.Lock()
		_, again := starts[s.OccurrenceID]
		starts[s.OccurrenceID] = s
		mu.Unlock()
		if again {
			t.Errorf("OnTaskStart called twice for %s", s.OccurrenceID)
		}
		panic("a hook that panics")
	}})
	h.w.Handle(def, nil, func(ctx context.Context, task *Task) (any, error) {
		var in crmInputs
		if err := task.Decode(&in); err != nil {
			return nil, err
		}
		time.Sleep(5 * time.Millisecond)
		switch in.CompanyName {
		case "biz":
			return nil, Fail("DUPLICATE", "seen")
		case "bad":
			return map[string]string{"result": "created"}, nil // no crm_id
		}
		return created(ctx, task)
	})
	h.start()
	waitFor(t, "three ends", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(ends) == 3
	})
	if err := h.stop(); err != nil {
		t.Fatalf("Run = %v", err)
	}
	for id, want := range map[string]TaskEnd{ok: {Outcome: OutcomeCompleted}, biz: {Outcome: OutcomeFailed, ErrorCode: "DUPLICATE"},
		bad: {Outcome: OutcomeFailed, ErrorCode: "invalid_outputs"}} {
		got := ends[id]
		if got.Outcome != want.Outcome || got.ErrorCode != want.ErrorCode || got.Definition != def || got.Revision != 1 || got.Attempt != 1 ||
			got.Handler < 5*time.Millisecond || got.Err != nil {
			t.Errorf("%s ended %+v, want %s %q after the handler's 5ms", id, got, want.Outcome, want.ErrorCode)
		}
		if got := starts[id]; got != (TaskStart{Definition: def, Revision: 1, OccurrenceID: id, Attempt: 1}) {
			t.Errorf("%s started %+v", id, got)
		}
	}
	// The handler's own error, for a hook to log (Go SDK QA); none for
	// outputs Relais refused.
	var be *BusinessError
	if e := ends[biz].HandlerErr; !errors.As(e, &be) || be.Code != "DUPLICATE" {
		t.Errorf("biz's HandlerErr = %v, want the handler's DUPLICATE", e)
	}
	if e := ends[bad].HandlerErr; e != nil {
		t.Errorf("bad's HandlerErr = %v, want none (the handler returned outputs)", e)
	}
}

// A report Relais refuses because the task is no longer this worker's is
// told as lock_lost, with the refusal; one it refuses as cancelled, as
// cancelled.
func TestOnTaskEndOfARefusedReport(t *testing.T) {
	for code, want := range map[string]TaskOutcome{"lock_expired": OutcomeLockLost, "occurrence_cancelled": OutcomeCancelled} {
		t.Run(code, func(t *testing.T) {
			s := newFake(t)
			s.inject("complete", fault{status: 409, code: code})
			s.add(def, 1, `{"company_name":"acme"}`)
			got := make(chan TaskEnd, 1)
			h := newHarness(t, s, Config{OnTaskEnd: func(e TaskEnd) { got <- e }})
			h.w.Handle(def, nil, created)
			h.start()
			select {
			case e := <-got:
				if e.Outcome != want || apiCode(e.Err) != code {
					t.Errorf("ended %+v, want %s with the refusal", e, want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("OnTaskEnd was not called")
			}
			if err := h.stop(); err != nil {
				t.Fatalf("Run = %v", err)
			}
		})
	}
}

// A refusal after retries is blamed on a lost answer only when one was
// lost (no answer, or a proxy's 502/504): retries that Relais refused
// (401 while a token rotated, 503) applied nothing, and the worker was
// told "the earlier request probably settled it" while none had and the
// task ran again.
func TestRefusalAfterRetriesSaysWhetherAnAnswerWasLost(t *testing.T) {
	conflict := &APIError{Status: http.StatusConflict, Code: "lock_expired"}
	for _, tt := range []struct {
		name string
		err  error
		want string
	}{
		{"an answer lost", &settleRetried{err: conflict, lost: true}, "probably settled it"},
		{"every try refused", &settleRetried{err: conflict}, "level=WARN msg=\"outcome refused\""},
		{"reassigned", errReassigned, "assigned to this worker again meanwhile"},
	} {
		var logs testlog.Buffer
		r := &run{w: &Worker{}}
		r.logSettleError(slog.New(slog.NewTextHandler(&logs, nil)), "complete", tt.err)
		if !strings.Contains(logs.String(), tt.want) {
			t.Errorf("%s: logged %q, want %q in it", tt.name, logs.String(), tt.want)
		}
	}
	for _, tt := range []struct {
		err  error
		lost bool
	}{
		{errors.New("connection reset"), true},
		{&APIError{Status: http.StatusBadGateway}, true},
		{&APIError{Status: http.StatusGatewayTimeout}, true},
		{&APIError{Status: http.StatusServiceUnavailable}, false},
		{&APIError{Status: http.StatusUnauthorized}, false},
		{&APIError{Status: http.StatusTooManyRequests}, false},
	} {
		if got := answerLost(tt.err); got != tt.lost {
			t.Errorf("answerLost(%v) = %v, want %v", tt.err, got, tt.lost)
		}
	}
}

// secretMarshaler fails to encode, quoting what it holds.
type secretMarshaler struct{}

func (secretMarshaler) MarshalJSON() ([]byte, error) {
	return nil, errors.New("cannot encode 4111-1111")
}

// Outputs that cannot be encoded are logged with the reason, which names
// types and JSON's missing numbers but never a value a MarshalJSON quoted.
func TestEncodingReasonNamesNoValue(t *testing.T) {
	for _, tt := range []struct {
		outputs any
		want    string
	}{
		{map[string]any{"c": make(chan int)}, "unsupported type chan int"},
		{map[string]any{"n": math.NaN()}, "unsupported value NaN"},
		{map[string]any{"s": secretMarshaler{}}, "MarshalJSON of worker.secretMarshaler failed"},
	} {
		_, err := encodeOutputs(tt.outputs)
		if got := encodingReason(err); got != tt.want {
			t.Errorf("encodingReason(%v) = %q, want %q", err, got, tt.want)
		}
	}
}

// panickyError's Error dereferences its message: a typed nil one panics.
type panickyError struct{ msg *string }

func (e *panickyError) Error() string { return *e.msg }

// panickyOutput's MarshalJSON dereferences a nil field.
type panickyOutput struct{ pages *[]int }

func (p *panickyOutput) MarshalJSON() ([]byte, error) { return json.Marshal(len(*p.pages)) }

// A contract date reads into Date and is written back as one; a value
// that is no date is refused without quoting it.
func TestDate(t *testing.T) {
	var in struct {
		On  Date  `json:"on"`
		Opt *Date `json:"opt"`
	}
	if err := json.Unmarshal([]byte(`{"on":"2026-12-01","opt":null}`), &in); err != nil {
		t.Fatal(err)
	}
	if in.On.String() != "2026-12-01" || !in.On.Equal(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)) || in.Opt != nil {
		t.Errorf("decoded %v %v", in.On, in.Opt)
	}
	out, err := json.Marshal(map[string]any{"due": DateOf(time.Date(2026, 12, 24, 23, 30, 0, 0, time.FixedZone("", -5*3600)))})
	if err != nil || string(out) != `{"due":"2026-12-24"}` {
		t.Errorf("encoded %s, %v; want the date in its own location", out, err)
	}
	var d Date
	for _, bad := range []string{`"2026-12-01T10:00:00Z"`, `"1984-13-40"`, `20261201`} {
		if err := json.Unmarshal([]byte(bad), &d); err == nil || strings.Contains(err.Error(), "1984") || strings.Contains(err.Error(), "2026") {
			t.Errorf("%s: %v; want a refusal quoting no value", bad, err)
		}
	}
	h := Typed(func(context.Context, *Task, struct {
		On Date `json:"on"`
	}) (any, error) {
		return nil, nil
	})
	if _, err := h(context.Background(), &Task{Inputs: json.RawMessage(`{"on":"1984-03-07T10:00:00Z"}`)}); err == nil || !strings.Contains(err.Error(), "on does not parse as worker.Date") {
		t.Errorf("a date-time into a Date: %v; want the field named", err)
	}
}

// A TokenFunc that fails is retried until it gives a token, said as the
// worker's own failure, never as Relais's answer (Go SDK QA: "relais:
// worker: TokenFunc: open …" read as the server's).
func TestAFailingTokenFuncIsRetriedAndSaidAsSuch(t *testing.T) {
	s := newFake(t)
	id := s.add(def, 1, `{"company_name":"acme"}`)
	var ready atomic.Bool
	h := newHarness(t, s, Config{TokenFunc: func(context.Context) (string, error) {
		if !ready.Load() {
			return "", errors.New("open /run/secrets/relais: no such file or directory")
		}
		return s.token, nil
	}})
	logs := &testlog.Buffer{}
	h.w.log = slog.New(slog.NewTextHandler(logs, nil))
	h.w.Handle(def, nil, created)
	h.start()
	waitFor(t, "the failure logged", func() bool { return strings.Contains(logs.String(), "TokenFunc gave no token") })
	if strings.Contains(logs.String(), "relais: worker: TokenFunc") {
		t.Errorf("the token's failure is said as Relais's:\n%s", logs.String())
	}
	ready.Store(true)
	waitFor(t, "the task completed once the token is there", func() bool { return s.status(id) == "completed" })
	if err := h.stop(); err != nil {
		t.Fatalf("Run = %v; want nil", err)
	}
}
