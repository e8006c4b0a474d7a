package worker

// The SDK on a worker stream, against a real Relais (relaistest): the
// default protocol, cancellations, graceful shutdown and the handler
// timeout.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/relais/relais/internal/config"
	"github.com/relais/relais/internal/relaistest"
	"github.com/relais/relais/internal/testlog"
)

type relais struct {
	env      *relaistest.Env
	consumer string
}

func newRelais(t *testing.T, policy map[string]any, opts ...relaistest.Option) *relais {
	t.Helper()
	env := relaistest.New(t, opts...)
	env.Definition("add_company_to_crm.yaml")
	env.Process("crm_only", relaistest.CRMProcess(policy))
	return &relais{env: env, consumer: env.Consumer("crm-sync", def)}
}

func (r *relais) start(t *testing.T, name string) string {
	t.Helper()
	return r.env.Must(201, "POST", "/api/v1/processes/crm_only/instances", r.env.Operator,
		map[string]any{"inputs": map[string]any{"name": name}}).JSON(t)["id"].(string)
}

// occurrenceOf returns the occurrence of an instance, as an operator sees it.
func (r *relais) occurrenceOf(t *testing.T, inst string) map[string]any {
	t.Helper()
	path := r.env.Must(200, "GET", "/api/v1/instances/"+inst, r.env.Operator, nil).JSON(t)["path"].([]any)
	id := path[0].(map[string]any)["occurrence_id"].(string)
	return r.env.Must(200, "GET", "/api/v1/occurrences/"+id, r.env.Operator, nil).JSON(t)
}

type running struct {
	cancel context.CancelFunc
	done   chan error
}

func (r *relais) run(t *testing.T, cfg Config, h Handler, configure ...func(*Worker)) *running {
	t.Helper()
	cfg.URL, cfg.Token = r.env.URL, r.consumer
	cfg.WorkerID = cmpOrString(cfg.WorkerID, "stream-worker")
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w.Handle(def, nil, h)
	for _, c := range configure {
		c(w)
	}
	run := runUntilCleanup(t, w)
	// Connected once the catalog lists the stream (a poller, once it
	// fetched).
	protocol := "stream"
	if cfg.Protocol == ProtocolLongPoll {
		protocol = "long_poll"
	}
	relaistest.WaitFor(t, 10*time.Second, "the worker connects", func() (bool, string) {
		items := r.env.Must(200, "GET", "/api/v1/workers", r.env.Operator, nil).JSON(t)["items"].([]any)
		for _, it := range items {
			if w := it.(map[string]any); w["worker_id"] == cfg.WorkerID && w["protocol"] == protocol {
				return true, ""
			}
		}
		return false, fmt.Sprint(items)
	})
	return run
}

// runUntilCleanup runs w until stopped or the test ends.
func runUntilCleanup(t *testing.T, w *Worker) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	run := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { run.done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-run.done:
		case <-time.After(20 * time.Second):
			t.Error("Run did not return")
		}
	})
	return run
}

func (run *running) stop(t *testing.T) error {
	t.Helper()
	run.cancel()
	select {
	case err := <-run.done:
		run.done <- err
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return")
		return nil
	}
}

// By default the worker takes its tasks from a stream, and settles them
// through the worker protocol: no fetch-and-lock is made.
func TestStreamIsTheDefault(t *testing.T) {
	r := newRelais(t, nil)
	run := r.run(t, Config{Concurrency: 2}, created)
	var insts []string
	for i := range 5 {
		insts = append(insts, r.start(t, fmt.Sprint("Acme", i)))
	}
	for _, id := range insts {
		if got := r.env.WaitEnded(id, 10*time.Second)["status"]; got != "completed" {
			t.Errorf("instance %s %v", id, got)
		}
	}
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}
	logs := r.env.Logs.String()
	if strings.Contains(logs, "/pull/fetch-and-lock") || strings.Contains(logs, "/pull/occurrences/") {
		t.Error("the worker used the REST pull routes although the server has a stream")
	}
	if !strings.Contains(logs, "path=/relais.worker.v1.WorkerService/Complete") {
		t.Error("no completion went through the worker protocol")
	}
}

// A stop reaches the handler at once, as ErrCancelled; nothing is settled.
func TestStreamCancellationEndsTheHandler(t *testing.T) {
	r := newRelais(t, nil)
	started, causes := make(chan string, 1), make(chan error, 1)
	run := r.run(t, Config{}, blockingHandler(started, causes))
	inst := r.start(t, "Acme")
	<-started
	stopped := time.Now()
	r.env.Must(200, "POST", "/api/v1/instances/"+inst+"/stop", r.env.Operator, map[string]any{"reason": "test"})
	cause := <-causes
	if !errors.Is(cause, ErrCancelled) {
		t.Errorf("cause = %v, want ErrCancelled", cause)
	}
	if d := time.Since(stopped); d > time.Second {
		t.Errorf("the handler learned of the stop after %v", d)
	}
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}
	if o := r.occurrenceOf(t, inst); o["status"] != "cancelled" {
		t.Errorf("occurrence %v", o["status"])
	}
}

// A graceful shutdown asks the stream for no more tasks, lets the handler
// in flight finish (its lock kept alive), and leaves new work to others.
func TestStreamGracefulShutdownFinishesInFlightWork(t *testing.T) {
	r := newRelais(t, nil)
	started, finish := make(chan string, 2), make(chan struct{})
	run := r.run(t, Config{Concurrency: 2, LockDuration: time.Second}, func(ctx context.Context, task *Task) (any, error) {
		started <- task.ID
		<-finish
		return created(ctx, task)
	})
	first := r.start(t, "Acme")
	<-started
	run.cancel()
	time.Sleep(200 * time.Millisecond) // the drain reaches the server
	second := r.start(t, "Beta")
	time.Sleep(1500 * time.Millisecond) // past the lock duration
	select {
	case id := <-started:
		t.Fatalf("task %s started during the shutdown", id)
	default:
	}
	close(finish)
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}
	if got := r.env.WaitEnded(first, 5*time.Second)["status"]; got != "completed" {
		t.Errorf("the task in flight: instance %v, want completed", got)
	}
	if o := r.occurrenceOf(t, second); o["status"] != "available" || o["attempt_count"] != 0.0 {
		t.Errorf("the task started meanwhile: %v, %v attempts; want available, untouched", o["status"], o["attempt_count"])
	}
}

// Past the shutdown timeout, the handler is cancelled and its task
// released: handed back without spending an attempt.
func TestStreamShutdownTimeoutReleases(t *testing.T) {
	r := newRelais(t, nil)
	started, causes := make(chan string, 1), make(chan error, 1)
	run := r.run(t, Config{ShutdownTimeout: 100 * time.Millisecond}, func(ctx context.Context, task *Task) (any, error) {
		started <- task.ID
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return nil, ctx.Err()
	})
	inst := r.start(t, "Acme")
	<-started
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}
	if cause := <-causes; !errors.Is(cause, ErrShutdownTimeout) {
		t.Errorf("cause = %v, want ErrShutdownTimeout", cause)
	}
	o := r.occurrenceOf(t, inst)
	attempts := o["attempts"].([]any)
	if o["status"] != "available" || o["attempts_left"] != 3.0 || attempts[0].(map[string]any)["outcome"] != "released" {
		t.Errorf("occurrence %v, %v attempts left, attempt %v; want available, 3, released", o["status"], o["attempts_left"], attempts[0])
	}
}

// A handler past its timeout is cancelled, then its task failed as
// handler_timeout.
func TestStreamHandlerTimeout(t *testing.T) {
	r := newRelais(t, map[string]any{"max_attempts": 1})
	started, causes := make(chan string, 1), make(chan error, 1)
	run := r.run(t, Config{HandlerTimeout: 200 * time.Millisecond}, blockingHandler(started, causes))
	inst := r.start(t, "Acme")
	if cause := <-causes; !errors.Is(cause, ErrHandlerTimeout) {
		t.Errorf("cause = %v, want ErrHandlerTimeout", cause)
	}
	if got := r.env.WaitEnded(inst, 5*time.Second)["status"]; got != "failed" {
		t.Errorf("instance %v, want failed", got)
	}
	if o := r.occurrenceOf(t, inst); o["error_code"] != "handler_timeout" {
		t.Errorf("error_code %v, want handler_timeout", o["error_code"])
	}
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}
}

// A definition's own HandlerTimeout bounds its handler instead of
// Config.HandlerTimeout, longer or shorter.
func TestHandlerTimeoutOfADefinition(t *testing.T) {
	r := newRelais(t, map[string]any{"max_attempts": 1})
	started, causes := make(chan string, 1), make(chan error, 1)
	run := r.run(t, Config{HandlerTimeout: time.Hour}, blockingHandler(started, causes), func(w *Worker) {
		w.HandlerTimeout(def, 200*time.Millisecond)
	})
	inst := r.start(t, "Acme")
	select {
	case cause := <-causes:
		if !errors.Is(cause, ErrHandlerTimeout) {
			t.Errorf("cause = %v, want ErrHandlerTimeout", cause)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the definition's 200ms timeout did not end its handler (Config's is an hour)")
	}
	if got := r.env.WaitEnded(inst, 5*time.Second)["status"]; got != "failed" {
		t.Errorf("instance %v, want failed", got)
	}
	if o := r.occurrenceOf(t, inst); o["status"] != "failed" || o["error_code"] != "handler_timeout" ||
		!strings.Contains(fmt.Sprint(o["error_message"]), "200ms") {
		t.Errorf("occurrence %v %v %q, want failed handler_timeout naming 200ms", o["status"], o["error_code"], o["error_message"])
	}
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}
	w, err := New(Config{URL: r.env.URL, Token: r.consumer})
	if err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func(){
		"no handler": func() { w.HandlerTimeout("other", time.Second) },
		"zero":       func() { w.Handle(def, nil, created); w.HandlerTimeout(def, 0) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: HandlerTimeout did not panic", name)
				}
			}()
			call()
		}()
	}
}

// A long-polling handler's context ends at its occurrence's deadline, not
// at the next lock extension (half a lock later), when Relais would say so.
func TestLongPollHandlerEndsAtTheDeadline(t *testing.T) {
	r := newRelais(t, map[string]any{"deadline": "PT2S"})
	started, causes := make(chan string, 1), make(chan error, 1)
	run := r.run(t, Config{Protocol: ProtocolLongPoll, LockDuration: time.Minute}, blockingHandler(started, causes))
	inst := r.start(t, "Acme")
	<-started
	began := time.Now()
	select {
	case cause := <-causes:
		if !errors.Is(cause, ErrCancelled) || !strings.Contains(cause.Error(), "deadline") {
			t.Errorf("cause = %v, want ErrCancelled (deadline exceeded)", cause)
		}
		if d := time.Since(began); d > 5*time.Second {
			t.Errorf("the handler ended %v after it started, past its 2 s deadline", d)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the handler ran on past its deadline (the lock's next extension is 30 s away)")
	}
	if got := r.env.WaitEnded(inst, 10*time.Second)["error_code"]; got != "deadline_exceeded" {
		t.Errorf("instance error_code %v, want deadline_exceeded", got)
	}
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}
}

// With ProtocolStream, a server without streams is an error; by default
// the worker falls back to long polling (the fake has no stream: every
// other test of this package runs so).
func TestStreamOnlyAgainstAServerWithoutStreams(t *testing.T) {
	s := newFake(t)
	h := newHarness(t, s, Config{Protocol: ProtocolStream})
	h.w.Handle(def, nil, created)
	h.start()
	select {
	case err := <-h.done:
		h.done <- err
		if err == nil || !strings.Contains(err.Error(), "no worker stream") {
			t.Errorf("Run = %v, want an error naming the missing stream", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not give up")
	}
	if _, err := New(Config{URL: s.srv.URL, Token: "t", Protocol: "carrier-pigeon"}); err == nil {
		t.Error("New accepted an unknown protocol")
	}
}

// slowAnswers delays the answers of one worker-protocol procedure, as a
// congested network would: the server has committed by then.
type slowAnswers struct {
	procedure string
	delay     time.Duration
	base      http.RoundTripper
}

func (s slowAnswers) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := s.base.RoundTrip(req)
	if err == nil && strings.HasSuffix(req.URL.Path, "/"+s.procedure) {
		time.Sleep(s.delay)
	}
	return resp, err
}

// A settlement frees its slot's credit when it commits, and the server
// pushes the next task at once (DESIGN §10): that task can arrive before
// the outcome's answer has freed the slot here. It waits for the slot
// instead of being released as one too many.
func TestStreamTaskPushedBeforeTheOutcomesAnswerWaitsForItsSlot(t *testing.T) {
	r := newRelais(t, nil)
	var insts []string
	for i := range 3 {
		insts = append(insts, r.start(t, fmt.Sprint("Acme", i)))
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	client := &http.Client{Transport: slowAnswers{procedure: "Complete", delay: 300 * time.Millisecond, base: tr}}
	run := r.run(t, Config{Concurrency: 1, HTTPClient: client}, created)
	for _, id := range insts {
		if got := r.env.WaitEnded(id, 10*time.Second)["status"]; got != "completed" {
			t.Errorf("instance %s %v", id, got)
		}
	}
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}
	if logs := r.env.Logs.String(); strings.Contains(logs, "path=/relais.worker.v1.WorkerService/Release") {
		t.Error("a task pushed while the slot waited for its outcome's answer was released")
	}
	for _, id := range insts {
		if a := r.occurrenceOf(t, id)["attempts"].([]any); len(a) != 1 {
			t.Errorf("instance %s: attempts %v, want one", id, a)
		}
	}
}

// outage fails every call of one worker-protocol procedure for a while
// from the first, as a replica being restarted would (connection refused).
type outage struct {
	procedure string
	lasts     time.Duration
	base      http.RoundTripper

	mu    sync.Mutex
	from  time.Time
	calls int
}

func (o *outage) RoundTrip(req *http.Request) (*http.Response, error) {
	if strings.HasSuffix(req.URL.Path, "/"+o.procedure) {
		o.mu.Lock()
		if o.from.IsZero() {
			o.from = time.Now()
		}
		o.calls++
		down := time.Since(o.from) < o.lasts
		o.mu.Unlock()
		if down {
			return nil, errors.New("connection refused (the test's outage)")
		}
	}
	return o.base.RoundTrip(req)
}

// A streamed task's outcome is retried through an outage for as long as
// its lock lasts, as a fetched task's is, not a fixed number of times: a
// replica back within the lock's time takes the outcome, and the finished
// work is not done again. The outage here outlasts the five tries the SDK
// used to give a streamed outcome (their backoff sums to 3 s at most).
func TestStreamOutcomeOutlastsAnOutage(t *testing.T) {
	r := newRelais(t, nil)
	down := &outage{procedure: "Complete", lasts: 3500 * time.Millisecond, base: http.DefaultTransport.(*http.Transport).Clone()}
	completedOnceThrough(t, r, down, Config{Concurrency: 1})
	down.mu.Lock()
	calls := down.calls
	down.mu.Unlock()
	if calls <= settleAttempts {
		t.Errorf("the outcome was sent %d times; the outage should have taken more than %d", calls, settleAttempts)
	}
}

// completedOnceThrough runs a stream worker with cfg whose outcomes pass
// through down, and checks that an instance started then completes with
// its handler run once, in one attempt: the outcome outlasted the outage.
func completedOnceThrough(t *testing.T, r *relais, down *outage, cfg Config) {
	t.Helper()
	cfg.HTTPClient = &http.Client{Transport: down}
	var handled atomic.Int32
	run := r.run(t, cfg, func(ctx context.Context, task *Task) (any, error) {
		handled.Add(1)
		return created(ctx, task)
	})
	inst := r.start(t, "Acme")
	if got := r.env.WaitEnded(inst, 20*time.Second)["status"]; got != "completed" {
		t.Fatalf("instance %v, want completed once the outcome could be reported", got)
	}
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}
	if n := handled.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want once", n)
	}
	if a := r.occurrenceOf(t, inst)["attempts"].([]any); len(a) != 1 {
		t.Errorf("attempts %v, want one", a)
	}
}

// An outcome the replica cannot take for longer than a lock duration,
// while the stream lives and the replica extends the lock (a database
// outage the stream's heartbeats outlive), is reported once it can: the
// worker used to give up after a lock duration, leaving the task held by
// the stream, neither settled nor offered again, until the stream ended.
func TestStreamOutcomeOutlastsTheLockWhileTheStreamLives(t *testing.T) {
	r := newRelais(t, nil, func(c *config.Config) { c.Stream.Heartbeat = time.Second })
	down := &outage{procedure: "Complete", lasts: 5 * time.Second, base: http.DefaultTransport.(*http.Transport).Clone()}
	completedOnceThrough(t, r, down, Config{Concurrency: 1, LockDuration: 2 * time.Second})
}

// A task pushed on a new stream while the only slot is still held by a
// task of the stream that ended (the replica took it back as the
// connection was cut, so the new stream did not resume it, and its
// handler ignores the cancellation) waits for that slot, and runs once the
// old handler returns: slots are the run's, whatever stream the waiting
// task came on.
func TestStreamTaskWaitsForASlotAcrossAReconnect(t *testing.T) {
	started := make(chan struct{}, 4)
	unblock := make(chan struct{})
	var calls atomic.Int32
	r, _, inst, logs := cutWhileHandling(t, 1, true, func(ctx context.Context, task *Task) (any, error) {
		started <- struct{}{}
		if calls.Add(1) == 1 {
			<-unblock // ignores its context: keeps the slot after its stream ended
		}
		return created(context.WithoutCancel(ctx), task)
	}, started)
	// The task, handed back, is pushed again on the new stream while the
	// first handler still holds the only slot.
	relaistest.WaitFor(t, 10*time.Second, "the task assigned again", func() (bool, string) {
		a := r.occurrenceOf(t, inst)["attempts"].([]any)
		return len(a) == 2, fmt.Sprint(a)
	})
	time.Sleep(200 * time.Millisecond) // the task pushed meanwhile waits
	if calls.Load() != 1 {
		t.Fatalf("the handler ran %d times while the only slot was held, want once", calls.Load())
	}
	close(unblock)
	if got := r.env.WaitEnded(inst, 10*time.Second)["status"]; got != "completed" {
		t.Fatalf("instance %v; want completed once the slot freed\n%s", got, logs.String())
	}
}

// A rolling restart does not interrupt a long handler: the stopping
// replica ends the worker's stream at once, its task left locked rather
// than handed back, and the worker's next stream (to the other replica)
// resumes it while the handler runs on; its outcome settles it there, in
// its first attempt. The stopping replica used to keep the stream for its
// grace, then hand the task back, the handler cancelled and run again
// from the start (QA measured a 5-minute handler cut at 2 min 53 s).
func TestStreamTaskRidesOutARollingRestart(t *testing.T) {
	r := newRelais(t, nil, func(c *config.Config) { c.ShutdownTimeout = 40 * time.Second })
	other := r.env.Replica()
	var serving atomic.Pointer[relaistest.Env]
	serving.Store(r.env)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		serving.Load().Handler.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)

	inst := r.start(t, "Acme")
	started := make(chan struct{}, 4)
	finish := make(chan struct{})
	var handled atomic.Int32
	var cancelled atomic.Bool
	logs := &testlog.Buffer{}
	w, err := New(Config{URL: srv.URL, Token: r.consumer, WorkerID: "restarted-under", Concurrency: 1,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	w.Handle(def, nil, func(ctx context.Context, task *Task) (any, error) {
		handled.Add(1)
		started <- struct{}{}
		<-finish
		cancelled.Store(ctx.Err() != nil)
		return created(ctx, task)
	})
	runUntilCleanup(t, w)
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the task never started")
	}
	serving.Store(other)
	began := time.Now()
	r.env.Drain()
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("the replica took %v to stop: it waited for its stream's grace instead of leaving the task to be resumed", took)
	}
	relaistest.WaitFor(t, 10*time.Second, "the other replica's stream resumes the task", func() (bool, string) {
		return strings.Contains(logs.String(), "task resumed on the new stream"), logs.String()
	})
	close(finish)
	if got := other.WaitEnded(inst, 10*time.Second)["status"]; got != "completed" {
		t.Fatalf("instance %v, want completed by the resumed handler\n%s", got, logs.String())
	}
	if n := handled.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want once", n)
	}
	if cancelled.Load() {
		t.Error("the handler's context was cancelled by the restart")
	}
	if a := r.occurrenceOf(t, inst)["attempts"].([]any); len(a) != 1 || a[0].(map[string]any)["outcome"] != "completed" {
		t.Errorf("attempts %v, want one, completed", a)
	}
}

// stoppedReplica runs a stream worker of one slot and handler h through a
// proxy to a replica, starts an instance, and once started says h began,
// stops that replica (the task left locked to the worker); from then on
// subscriptions are refused (503) while every other call goes to a second
// replica: no stream resumes the task. It returns the instance, the second
// replica, the worker's logs and its run.
func stoppedReplica(t *testing.T, cfg Config, h Handler, started <-chan struct{}) (string, *relaistest.Env, *testlog.Buffer, *running) {
	t.Helper()
	r := newRelais(t, nil, func(c *config.Config) { c.ShutdownTimeout = 40 * time.Second })
	other := r.env.Replica()
	var stopped atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !stopped.Load() {
			r.env.Handler.ServeHTTP(w, req)
			return
		}
		if strings.HasSuffix(req.URL.Path, "/Subscribe") {
			http.Error(w, "no stream for now", http.StatusServiceUnavailable)
			return
		}
		other.Handler.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	logs := &testlog.Buffer{}
	cfg.URL, cfg.Token, cfg.WorkerID, cfg.Concurrency = srv.URL, r.consumer, "orphaned", 1
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w.Handle(def, nil, h)
	run := runUntilCleanup(t, w)
	inst := r.start(t, "Acme")
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the task never started")
	}
	stopped.Store(true)
	r.env.Drain()
	return inst, other, logs, run
}

// A task whose stream ended keeps its lock while no stream resumes it: the
// worker extends it itself, so a handler longer than the lock, with Relais
// out of streams for longer than that (a replica restarting slowly), still
// settles its task in its first attempt. The worker used to give it up
// half a lock duration after the stream's last event, its attempt spent.
func TestStreamTaskKeepsItsLockWithoutAStream(t *testing.T) {
	started := make(chan struct{}, 4)
	finish := make(chan struct{})
	var cancelled atomic.Bool
	inst, other, logs, _ := stoppedReplica(t, Config{LockDuration: 2 * time.Second}, func(ctx context.Context, task *Task) (any, error) {
		started <- struct{}{}
		<-finish
		cancelled.Store(ctx.Err() != nil)
		return created(ctx, task)
	}, started)
	time.Sleep(5 * time.Second) // two and a half lock durations, no stream
	close(finish)
	if got := other.WaitEnded(inst, 10*time.Second)["status"]; got != "completed" {
		t.Fatalf("instance %v, want completed in its first attempt\n%s", got, logs.String())
	}
	if cancelled.Load() {
		t.Errorf("the handler was cancelled\n%s", logs.String())
	}
	path := other.Must(200, "GET", "/api/v1/instances/"+inst, other.Operator, nil).JSON(t)["path"].([]any)
	occ := other.Must(200, "GET", "/api/v1/occurrences/"+path[0].(map[string]any)["occurrence_id"].(string), other.Operator, nil).JSON(t)
	if a := occ["attempts"].([]any); len(a) != 1 || a[0].(map[string]any)["outcome"] != "completed" {
		t.Errorf("attempts %v, want one, completed", a)
	}
}

// lostAnswers lets an outcome's request through to Relais but loses its
// answer for a while (a connection cut as the answer came back): Relais
// settled the task, the worker does not know it yet and tries again.
type lostAnswers struct {
	lasts time.Duration
	base  http.RoundTripper

	mu   sync.Mutex
	from time.Time
}

func (l *lostAnswers) RoundTrip(req *http.Request) (*http.Response, error) {
	if !strings.HasSuffix(strings.ToLower(req.URL.Path), "/complete") {
		return l.base.RoundTrip(req)
	}
	l.mu.Lock()
	if l.from.IsZero() {
		l.from = time.Now()
	}
	lost := time.Since(l.from) < l.lasts
	l.mu.Unlock()
	res, err := l.base.RoundTrip(req)
	if err != nil || !lost {
		return res, err
	}
	res.Body.Close()
	return nil, errors.New("connection reset (the test lost the answer)")
}

// An orphaned task whose handler returned, and whose outcome landed while
// its answers were lost, is settled: the extension that meanwhile learns
// so (already_settled) is no lock lost, nor work lost (chaos QA: a Warn
// said the outcome was not reported, then the retry reported it).
func TestOrphanSettledByItsOwnOutcomeIsNoLostLock(t *testing.T) {
	started := make(chan struct{}, 4)
	finish := make(chan struct{})
	var ends []TaskEnd
	var mu sync.Mutex
	cfg := Config{LockDuration: 2 * time.Second, HTTPClient: &http.Client{Transport: &lostAnswers{lasts: 1500 * time.Millisecond, base: http.DefaultTransport.(*http.Transport).Clone()}},
		OnTaskEnd: func(e TaskEnd) {
			mu.Lock()
			ends = append(ends, e)
			mu.Unlock()
		}}
	inst, other, logs, _ := stoppedReplica(t, cfg, func(ctx context.Context, task *Task) (any, error) {
		started <- struct{}{}
		<-finish
		return created(ctx, task)
	}, started)
	close(finish)
	if got := other.WaitEnded(inst, 10*time.Second)["status"]; got != "completed" {
		t.Fatalf("instance %v, want completed\n%s", got, logs.String())
	}
	relaistest.WaitFor(t, 10*time.Second, "the task's end told to OnTaskEnd", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(ends) == 1, fmt.Sprint(ends)
	})
	if ends[0].Outcome != OutcomeCompleted {
		t.Errorf("OnTaskEnd %+v, want completed", ends[0])
	}
	if !strings.Contains(logs.String(), "already_settled") {
		t.Fatalf("no extension met the settled task: the test did not run as meant\n%s", logs.String())
	}
	if strings.Contains(logs.String(), "lock could not be kept") || strings.Contains(logs.String(), "level=WARN") && strings.Contains(logs.String(), "not reported") {
		t.Errorf("a settled task reads as lost\n%s", logs.String())
	}
}

// A worker stopped while no stream resumed its task (a rolling restart
// under way) releases it past its ShutdownTimeout, as it would with a
// stream: no attempt spent. Its lock used to lapse, the attempt expired
// (QA).
func TestStreamShutdownWithoutAStreamReleases(t *testing.T) {
	started := make(chan struct{}, 4)
	inst, other, logs, run := stoppedReplica(t, Config{LockDuration: 2 * time.Second, ShutdownTimeout: 3 * time.Second}, func(ctx context.Context, task *Task) (any, error) {
		started <- struct{}{}
		<-ctx.Done()
		return nil, context.Cause(ctx)
	}, started)
	time.Sleep(200 * time.Millisecond)
	if err := run.stop(t); err != nil {
		t.Fatalf("Run: %v\n%s", err, logs.String())
	}
	path := other.Must(200, "GET", "/api/v1/instances/"+inst, other.Operator, nil).JSON(t)["path"].([]any)
	occ := other.Must(200, "GET", "/api/v1/occurrences/"+path[0].(map[string]any)["occurrence_id"].(string), other.Operator, nil).JSON(t)
	if a := occ["attempts"].([]any); len(a) != 1 || a[0].(map[string]any)["outcome"] != "released" || occ["status"] != "available" {
		t.Errorf("status %v, attempts %v; want available, the attempt released\n%s", occ["status"], a, logs.String())
	}
}

// The credit holds while completions refill their slots and the stream
// claims on its own: at no point does the worker hold more reservations
// than its Concurrency (sampled from the database while 60 tasks run).
func TestStreamNeverHoldsMoreThanItsConcurrency(t *testing.T) {
	r := newRelais(t, nil)
	const concurrency, n = 3, 60
	var insts []string
	for i := range n {
		insts = append(insts, r.start(t, fmt.Sprint("Acme", i)))
	}
	sampled := make(chan int, 1)
	stop := make(chan struct{})
	go func() {
		most := 0
		defer func() { sampled <- most }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			var held int
			if err := r.env.Pool.QueryRow(context.Background(),
				"select count(*) from occurrences where worker_id = 'stream-worker' and status = 'reserved'").Scan(&held); err == nil {
				most = max(most, held)
			}
		}
	}()
	run := r.run(t, Config{Concurrency: concurrency}, func(ctx context.Context, task *Task) (any, error) {
		time.Sleep(time.Millisecond)
		return created(ctx, task)
	})
	for _, id := range insts {
		if got := r.env.WaitEnded(id, 20*time.Second)["status"]; got != "completed" {
			t.Errorf("instance %s %v", id, got)
		}
	}
	close(stop)
	if most := <-sampled; most > concurrency || most == 0 {
		t.Errorf("the worker held up to %d reservations at once; want between 1 and %d", most, concurrency)
	}
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}
}

// A started streamed task's outcome is retried while its stream lives
// (the replica extends the lock meanwhile: giving up left the task held by
// the stream, neither settled nor offered again, after a database outage);
// once the stream ended, or the worker drains, for half a lock duration
// past the stream's last event; and no longer once Relais took the task
// back. A stream that ended says nothing of its lock (its replica may have
// died holding it).
func TestStreamLockBound(t *testing.T) {
	r := &run{w: &Worker{cfg: Config{LockDuration: time.Minute}}}
	live := &streamSession{r: r, ended: make(chan struct{})}
	live.lastEvent.Store(time.Now().Add(-10 * time.Minute).UnixNano())
	l := &streamLock{taskCtx: context.Background()}
	l.s.Store(live)
	if left := time.Until(l.expiry(time.Now().Add(-time.Hour))); left < 50*time.Second {
		t.Errorf("a live stream's task: %v left to report its outcome, want a lock duration from now whatever the last event", left)
	}
	r.draining.Store(true)
	if left := time.Until(l.expiry(time.Now().Add(-time.Hour))); left > 0 {
		t.Errorf("a draining worker's task: %v left, want the bound of its last event", left)
	}
	r.draining.Store(false)

	s := &streamSession{r: r, ended: make(chan struct{}), interval: 10 * time.Second}
	close(s.ended)
	last := time.Now().Add(-10 * time.Second)
	s.lastEvent.Store(last.UnixNano())
	for _, c := range []struct {
		cause error
		lost  bool
	}{
		{nil, false},
		{fmt.Errorf("%w: %w", ErrLockLost, errStreamEnded), false},
		{fmt.Errorf("%w: the lock was lost (lock lost)", ErrLockLost), true},
		{fmt.Errorf("%w: assigned again", ErrLockLost), true},
		{fmt.Errorf("%w (instance stopped)", ErrCancelled), true},
	} {
		ctx, cancel := context.WithCancelCause(context.Background())
		if c.cause != nil {
			cancel(c.cause)
		}
		l := &streamLock{taskCtx: ctx}
		l.s.Store(s)
		if got := l.lost(); got != c.lost {
			t.Errorf("cause %v: lost %v, want %v", c.cause, got, c.lost)
		}
		// A minute's lock, extended every 10 s heartbeat: 60 - 10 - 2 s
		// for the network.
		if got, want := l.expiry(last), last.Add(48*time.Second); !got.Equal(want) {
			t.Errorf("expiry %v, want %v (the last event and what the keep-alives leave at least)", got, want)
		}
		// Reported since long before: one lock duration from then.
		if got, want := l.expiry(last.Add(-50*time.Second)), last.Add(10*time.Second); !got.Equal(want) {
			t.Errorf("expiry %v, want %v (a lock duration past since)", got, want)
		}
		cancel(nil)
	}
}

// Outputs larger than Relais accepts fail their task at once, without
// retry, on a stream (where connect refuses the message) as by long
// polling (413, alone or in a batch of outcomes, which is then sent one by
// one): retried, the outcome could never land, and the task would be held
// (on a stream, for as long as the stream lives) or run again to the same
// outputs.
func TestOutputsTooLargeFailTheTask(t *testing.T) {
	for _, protocol := range []Protocol{ProtocolStream, ProtocolLongPoll} {
		t.Run(string(protocol), func(t *testing.T) {
			r := newRelais(t, map[string]any{"max_attempts": 3})
			run := r.run(t, Config{Protocol: protocol, Concurrency: 2, SettleWindow: 50 * time.Millisecond, WorkerID: "big-" + string(protocol)},
				func(ctx context.Context, task *Task) (any, error) {
					var in struct {
						CompanyName string `json:"company_name"`
					}
					if err := task.Decode(&in); err != nil {
						return nil, err
					}
					if in.CompanyName == "Big" {
						return map[string]any{"result": "created", "crm_id": strings.Repeat("x", 2<<20)}, nil
					}
					return map[string]any{"result": "created", "crm_id": "C-1"}, nil
				})
			big, small := r.start(t, "Big"), r.start(t, "Small")
			if got := r.env.WaitEnded(small, 15*time.Second)["status"]; got != "completed" {
				t.Errorf("the small outputs' instance %v, want completed", got)
			}
			if got := r.env.WaitEnded(big, 15*time.Second)["status"]; got != "failed" {
				t.Fatalf("the large outputs' instance %v, want failed", got)
			}
			o := r.occurrenceOf(t, big)
			if o["error_code"] != "outputs_too_large" || len(o["attempts"].([]any)) != 1 {
				t.Errorf("occurrence %v with %d attempts, want failed outputs_too_large after one", o["error_code"], len(o["attempts"].([]any)))
			}
			if err := run.stop(t); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Outputs Relais refuses as JSON (a json.RawMessage holding an escaped
// lone surrogate or a duplicate key) fail the task without retry, on a
// stream as by long polling: left alone, it was held for as long as the
// stream lived. The word null anywhere in them changes nothing: dropping
// null members must not decode them into something Relais would take
// (U+FFFD, the last of the duplicates).
func TestOutputsRefusedAsJSONFailTheTask(t *testing.T) {
	outputs := map[string]string{
		"Surrogate":          `{"result":"created","crm_id":"x \ud800"}`,
		"Surrogate and null": `{"result":"created","crm_id":"nullable \ud800"}`,
		"Duplicate and null": `{"result":"created","crm_id":"first","crm_id":"nullable"}`,
	}
	for _, protocol := range []Protocol{ProtocolStream, ProtocolLongPoll} {
		t.Run(string(protocol), func(t *testing.T) {
			r := newRelais(t, map[string]any{"max_attempts": 3})
			run := r.run(t, Config{Protocol: protocol, Concurrency: 3, SettleWindow: 50 * time.Millisecond, WorkerID: "raw-" + string(protocol)},
				func(ctx context.Context, task *Task) (any, error) {
					var in struct {
						CompanyName string `json:"company_name"`
					}
					if err := task.Decode(&in); err != nil {
						return nil, err
					}
					return json.RawMessage(outputs[in.CompanyName]), nil
				})
			for name := range outputs {
				inst := r.start(t, name)
				if got := r.env.WaitEnded(inst, 15*time.Second)["status"]; got != "failed" {
					t.Errorf("%s: instance %v, want failed", name, got)
					continue
				}
				o := r.occurrenceOf(t, inst)
				if o["error_code"] != "invalid_outputs" || len(o["attempts"].([]any)) != 1 || !strings.Contains(fmt.Sprint(o["error_message"]), "/outputs/crm_id") {
					t.Errorf("%s: occurrence failed %v (%v) after %d attempts, want invalid_outputs at /outputs/crm_id after one",
						name, o["error_code"], o["error_message"], len(o["attempts"].([]any)))
				}
			}
			if err := run.stop(t); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A ResourceExhausted the client made itself (an answer over its own
// limit, an HTTP/2 reset) says nothing of the outcome: retried as a
// network error, never read as the server refusing the outputs' size.
func TestLocalResourceExhaustedIsRetried(t *testing.T) {
	err := wireError(connect.NewError(connect.CodeResourceExhausted, errors.New("message size 70000000 is larger than configured max 67108864")))
	var ae *APIError
	if errors.As(err, &ae) || !transient(err) {
		t.Errorf("wireError = %#v (transient %v), want a network error, retried", err, transient(err))
	}
}

// However long a stream keeps its lock, an outcome is retried for one lock
// duration at most: a worker shutting down during an outage that only the
// outcomes meet (the stream's heartbeats going on) stops within it instead
// of waiting for the outage's end.
func TestStreamOutcomeRetriesEndWithinALockDuration(t *testing.T) {
	// Heartbeats far more often than a lock duration: the stream's last
	// event alone would keep the retries going.
	r := newRelais(t, nil, func(c *config.Config) { c.Stream.Heartbeat = 100 * time.Millisecond })
	tr := http.DefaultTransport.(*http.Transport).Clone()
	down := &outage{procedure: "Complete", lasts: time.Hour, base: tr}
	run := r.run(t, Config{Concurrency: 1, LockDuration: 2 * time.Second, HTTPClient: &http.Client{Transport: down}}, created)
	r.start(t, "Acme")
	relaistest.WaitFor(t, 10*time.Second, "the outcome's first report", func() (bool, string) {
		down.mu.Lock()
		defer down.mu.Unlock()
		return down.calls > 0, ""
	})
	began := time.Now()
	// The outcome never landed: Run says so.
	if err := run.stop(t); !errors.Is(err, ErrOutcomesUnreported) {
		t.Fatalf("Run = %v, want ErrOutcomesUnreported", err)
	}
	if d := time.Since(began); d > 5*time.Second {
		t.Errorf("Run returned %s after shutdown began, want within the lock duration (2 s) and a retry", d)
	}
}

// A handler registered for a pattern takes the tasks of the keys it
// matches, on both protocols (each was failed no_handler before); revisions
// with a pattern are a programming error.
func TestPatternHandlerTakesItsKeys(t *testing.T) {
	r := newRelais(t, nil)
	for _, protocol := range []Protocol{ProtocolStream, ProtocolLongPoll} {
		w, err := New(Config{URL: r.env.URL, Token: r.consumer, WorkerID: "pattern-" + string(protocol), Protocol: protocol, Wait: time.Second,
			Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
		if err != nil {
			t.Fatal(err)
		}
		w.Handle("*", nil, created)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		inst := r.start(t, "Acme "+string(protocol))
		ended := r.env.WaitEnded(inst, 10*time.Second)
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if ended["status"] != "completed" {
			t.Errorf("%s: instance %v, want completed by the pattern's handler (occurrence %v)", protocol, ended["status"], r.occurrenceOf(t, inst)["error_code"])
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("a pattern with revisions was accepted")
		}
	}()
	w, _ := New(Config{URL: r.env.URL, Token: r.consumer})
	w.Handle("crm.*", []int{1}, created)
}

// A server that accepts a subscription and never answers (a broken proxy,
// a wrong port) is given up on after the subscribe timeout and tried again
// with backoff, instead of Run waiting for ever without a word.
func TestSubscribeGivesUpOnASilentServer(t *testing.T) {
	var subscribes atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/Subscribe") {
			subscribes.Add(1)
		}
		// Read whole, so that the server notices the client leaving.
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}))
	defer srv.Close()
	w, err := New(Config{URL: srv.URL, Token: "rls_x", Protocol: ProtocolStream, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	w.subscribeTimeout = 200 * time.Millisecond
	w.Handle(def, nil, created)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	relaistest.WaitFor(t, 10*time.Second, "a second subscription after the first went unanswered", func() (bool, string) {
		return subscribes.Load() >= 2, fmt.Sprint(subscribes.Load(), " subscriptions")
	})
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
}

// freezer stops the first Subscribe's answer once told to, as a half-open
// connection would: its body neither yields bytes nor ends until the
// client closes it. Other requests, later subscriptions included, pass.
type freezer struct {
	base       http.RoundTripper
	frozen     chan struct{}
	subscribes atomic.Int32
}

func (f *freezer) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := f.base.RoundTrip(req)
	if err != nil || !strings.HasSuffix(req.URL.Path, "/Subscribe") || f.subscribes.Add(1) > 1 {
		return res, err
	}
	res.Body = &frozenBody{ReadCloser: res.Body, ctx: req.Context(), frozen: f.frozen, closed: make(chan struct{})}
	return res, nil
}

type frozenBody struct {
	io.ReadCloser
	ctx       context.Context // the request's: the client giving up ends a read
	frozen    chan struct{}
	closed    chan struct{}
	closeOnce sync.Once
}

func (b *frozenBody) Read(p []byte) (int, error) {
	select {
	case <-b.frozen:
		select {
		case <-b.closed:
		case <-b.ctx.Done():
		}
		return 0, io.ErrUnexpectedEOF
	default:
		return b.ReadCloser.Read(p)
	}
}

func (b *frozenBody) Close() error {
	b.closeOnce.Do(func() { close(b.closed) })
	return b.ReadCloser.Close()
}

// A stream that falls silent (a half-open connection, a frozen replica) is
// dropped once three heartbeat intervals and a second pass without an
// event, and the worker subscribes again and takes work.
func TestASilentStreamIsDroppedInTime(t *testing.T) {
	r := newRelais(t, nil, func(c *config.Config) { c.Stream.Heartbeat = time.Second })
	f := &freezer{base: http.DefaultTransport.(*http.Transport).Clone(), frozen: make(chan struct{})}
	r.run(t, Config{Concurrency: 1, HTTPClient: &http.Client{Transport: f}}, created)
	close(f.frozen)
	froze := time.Now()
	relaistest.WaitFor(t, 10*time.Second, "a new subscription after the silence", func() (bool, string) {
		return f.subscribes.Load() >= 2, fmt.Sprint(f.subscribes.Load(), " subscriptions")
	})
	// Silent for 3 s and a second (from the last heartbeat, up to a second
	// before the freeze), caught within the second after; a loaded
	// machine's scheduling aside.
	if d := time.Since(froze); d > 8*time.Second {
		t.Errorf("subscribed again %v after the stream fell silent, want within 3 heartbeats, a second, and the second it is checked in", d)
	}
	inst := r.start(t, "Acme")
	if got := r.env.WaitEnded(inst, 10*time.Second)["status"]; got != "completed" {
		t.Errorf("an instance started after the new subscription: %v, want completed", got)
	}
}

// A clean shutdown under load spends no attempt on work that never ran
// (six shutdowns: without the draining heartbeat, about one in three
// loses some):
// tasks still on their way when the worker drains are released as they
// come, and the stream closes only once the server's draining heartbeat
// says none is left (each used to be handed back disconnected, an attempt
// spent; with max_attempts 1 the task failed without ever running).
func TestStreamShutdownUnderLoadSpendsNoAttempt(t *testing.T) {
	r := newRelais(t, map[string]any{"max_attempts": 1})
	for round := range 6 {
		r.env.Must(200, "POST", "/api/v1/processes/crm_only/instances/batch", r.env.Operator, map[string]any{"items": batchOf(round, 300)})
		var handled atomic.Int32
		run := r.run(t, Config{Concurrency: 16, WorkerID: fmt.Sprint("loaded-", round)}, func(ctx context.Context, task *Task) (any, error) {
			handled.Add(1)
			return created(ctx, task)
		})
		relaistest.WaitFor(t, 10*time.Second, "the worker under load", func() (bool, string) {
			return handled.Load() >= 50, fmt.Sprint(handled.Load(), " handled")
		})
		if err := run.stop(t); err != nil {
			t.Fatal(err)
		}
		var spent int
		if err := r.env.Pool.QueryRow(context.Background(),
			`select count(*) from attempts where outcome in ('disconnected', 'expired')`).Scan(&spent); err != nil {
			t.Fatal(err)
		}
		if spent != 0 {
			t.Fatalf("round %d: %d attempts handed back disconnected or expired by a clean shutdown", round, spent)
		}
	}
}

// batchOf is n batch start items of crm_only.
func batchOf(round, n int) []any {
	items := make([]any, n)
	for i := range items {
		items[i] = map[string]any{"inputs": map[string]any{"name": fmt.Sprint("Load ", round, " ", i)}}
	}
	return items
}

// A connection that could not be made is a network error, retried and
// logged as such, not a 503 the server never sent.
func TestRefusedConnectionIsNoServerAnswer(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	err := wireError(connect.NewError(connect.CodeUnavailable, dial))
	var ae *APIError
	if errors.As(err, &ae) || !transient(err) || strings.Contains(err.Error(), "503") {
		t.Errorf("wireError = %v (%#v), want a network error without a status", err, err)
	}
	// A connection that broke under the call (the replica killed).
	err = wireError(connect.NewError(connect.CodeUnavailable, io.ErrUnexpectedEOF))
	if errors.As(err, &ae) || !transient(err) || strings.Contains(err.Error(), "503") {
		t.Errorf("wireError of a broken connection = %v (%#v), want a network error without a status", err, err)
	}
	// A proxy's own 503 is an answer, as REST reads it.
	err = wireError(connect.NewError(connect.CodeUnavailable, errors.New("HTTP status 503 Service Unavailable")))
	if !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable || !transient(err) {
		t.Errorf("wireError of a proxy's 503 = %v (%#v), want a 503", err, err)
	}
}

// A refusal of one of several subscriptions names the definition whose
// handler it is about, on both protocols: the worker sorts its
// subscriptions, so the pointer's index alone would not say.
func TestARefusedSubscriptionIsNamed(t *testing.T) {
	r := newRelais(t, nil)
	for _, protocol := range []Protocol{ProtocolStream, ProtocolLongPoll} {
		w, err := New(Config{URL: r.env.URL, Token: r.consumer, Protocol: protocol, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
		if err != nil {
			t.Fatal(err)
		}
		w.Handle(def, nil, created)
		w.Handle("zz_not_granted", nil, created)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err = w.Run(ctx)
		cancel()
		if err == nil || !strings.Contains(err.Error(), `/subscriptions/1/definition`) || !strings.Contains(err.Error(), `(the handler for "zz_not_granted")`) {
			t.Errorf("%s: Run = %v, want the refusal naming zz_not_granted", protocol, err)
		}
	}
}

// A bound of Relais's that the configuration exceeds comes with its
// member and ceiling on both protocols, as REST's problem has them.
func TestABoundRefusalCarriesItsCeiling(t *testing.T) {
	r := newRelais(t, nil)
	for _, protocol := range []Protocol{ProtocolStream, ProtocolLongPoll} {
		w, err := New(Config{URL: r.env.URL, Token: r.consumer, Protocol: protocol, Concurrency: 150, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
		if err != nil {
			t.Fatal(err)
		}
		w.Handle(def, nil, created)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err = w.Run(ctx)
		cancel()
		var ae *APIError
		if !errors.As(err, &ae) || ae.Code != "bound_exceeded" || !strings.Contains(err.Error(), "Concurrency 150") {
			t.Fatalf("%s: Run = %v, want bound_exceeded naming Concurrency 150", protocol, err)
		}
		if field := ae.Extra["field"]; field != "max_in_flight" && field != "max_tasks" {
			t.Errorf("%s: field %v", protocol, field)
		}
		if c := ae.Extra["ceiling"]; c != 100.0 {
			t.Errorf("%s: ceiling %#v, want the number 100 on either transport", protocol, c)
		}
	}
}

// A handler declared with Fields receives only those inputs, on either
// protocol.
func TestDeclaredFields(t *testing.T) {
	for _, protocol := range []Protocol{ProtocolStream, ProtocolLongPoll} {
		t.Run(string(protocol), func(t *testing.T) {
			r := newRelais(t, nil)
			got := make(chan json.RawMessage, 1)
			run := r.run(t, Config{Protocol: protocol, WorkerID: "minimal-" + string(protocol)},
				func(ctx context.Context, task *Task) (any, error) {
					got <- task.Inputs
					return map[string]any{"result": "created", "crm_id": "C-1"}, nil
				},
				func(w *Worker) { w.Fields(def, "/company_name") })
			r.start(t, "Acme")
			select {
			case in := <-got:
				var m map[string]any
				if err := json.Unmarshal(in, &m); err != nil || len(m) != 1 || m["company_name"] != "Acme" {
					t.Errorf("inputs %s, want only company_name (declared)", in)
				}
			case <-time.After(15 * time.Second):
				t.Fatal("no task")
			}
			if err := run.stop(t); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// cutter plays a replica that dies with its streams' locks held: once cut,
// the first subscription's events stop and its body reads as a connection
// cut mid-stream, while the connection to the replica is left open (closed
// at the test's end), so that the replica neither sees the stream end nor
// hands its tasks back, as a dead one would not. With a gate (see
// handBack), it plays a connection cut that the replica saw instead.
type cutter struct {
	base     http.RoundTripper
	cut      chan struct{}
	releases atomic.Int32
	// gate, when set, holds the subscriptions after the first until it is
	// closed.
	gate chan struct{}

	mu     sync.Mutex
	first  bool
	bodies []io.ReadCloser
}

func (c *cutter) RoundTrip(req *http.Request) (*http.Response, error) {
	if strings.HasSuffix(req.URL.Path, "/Release") {
		c.releases.Add(1)
	}
	if !strings.HasSuffix(req.URL.Path, "/Subscribe") {
		return c.base.RoundTrip(req)
	}
	select {
	case <-c.cut:
		if c.gate != nil {
			select {
			case <-c.gate:
			case <-req.Context().Done():
				return nil, req.Context().Err()
			}
		}
	default:
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.first {
		return c.base.RoundTrip(req)
	}
	c.first = true
	// The worker cancelling its stream must not reach the replica either.
	res, err := c.base.RoundTrip(req.WithContext(context.WithoutCancel(req.Context())))
	if err != nil {
		return res, err
	}
	c.bodies = append(c.bodies, res.Body)
	res.Body = &cutBody{rc: res.Body, cut: c.cut}
	return res, nil
}

// handBack cuts the stream as a connection cut the replica saw: the
// replica hands the task of instance inst back (its first attempt ends
// disconnected) before the worker's next subscription goes through. The
// cutter must have been made with a gate.
func (c *cutter) handBack(t *testing.T, r *relais, inst string) {
	t.Helper()
	close(c.cut)
	c.close()
	relaistest.WaitFor(t, 10*time.Second, "the replica hands the task back", func() (bool, string) {
		a := r.occurrenceOf(t, inst)["attempts"].([]any)
		return a[0].(map[string]any)["outcome"] == "disconnected", fmt.Sprint(a)
	})
	close(c.gate)
}

func (c *cutter) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, b := range c.bodies {
		_ = b.Close()
	}
}

type cutBody struct {
	rc  io.ReadCloser
	cut chan struct{}
}

func (b *cutBody) Read(p []byte) (int, error) {
	select {
	case <-b.cut:
		return 0, io.ErrUnexpectedEOF
	default:
	}
	n, err := b.rc.Read(p)
	select {
	case <-b.cut:
		return 0, io.ErrUnexpectedEOF
	default:
		return n, err
	}
}

// Left open: closing it would tell the replica the stream ended.
func (b *cutBody) Close() error { return nil }

// A handler whose stream ended without Relais saying the task was lost
// (its replica died, the lock held on) runs on: the worker's next stream
// resumes its task, and its outcome settles it. The finished work is
// neither lost nor done again. It used to be cancelled, its outcome
// reported only if it had finished regardless.
func TestStreamEndedTaskIsResumed(t *testing.T) {
	var handled atomic.Int32
	started := make(chan struct{}, 4)
	var logsOf atomic.Pointer[testlog.Buffer]
	var cancelled atomic.Bool
	r, _, inst, logs := cutWhileHandling(t, 1, false, func(ctx context.Context, task *Task) (any, error) {
		handled.Add(1)
		started <- struct{}{}
		// Works on until a new stream resumed its task.
		for l := logsOf.Load(); l == nil || !strings.Contains(l.String(), "task resumed on the new stream"); l = logsOf.Load() {
			time.Sleep(10 * time.Millisecond)
		}
		cancelled.Store(ctx.Err() != nil)
		return created(ctx, task)
	}, started)
	logsOf.Store(logs)
	if got := r.env.WaitEnded(inst, 20*time.Second)["status"]; got != "completed" {
		t.Fatalf("instance %v, want completed by the resumed task's outcome\n%s", got, logs.String())
	}
	if n := handled.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want once", n)
	}
	if cancelled.Load() {
		t.Error("the handler's context was cancelled although its task was resumed")
	}
	if a := r.occurrenceOf(t, inst)["attempts"].([]any); len(a) != 1 {
		t.Errorf("attempts %v, want one", a)
	}
}

// Connected says whether tasks can arrive: false before Run and after it
// returns, true once the stream connected (or a fetch was answered), and
// false all along against an address nothing answers at, where Run keeps
// retrying.
func TestConnectedSaysWhetherTasksCanArrive(t *testing.T) {
	r := newRelais(t, nil)
	for _, p := range []Protocol{ProtocolStream, ProtocolLongPoll} {
		var w *Worker
		run := r.run(t, Config{Protocol: p, WorkerID: "connected-" + string(p)}, created, func(x *Worker) {
			w = x
			if w.Connected() {
				t.Errorf("%s: connected before Run", p)
			}
		})
		r.env.WaitEnded(r.start(t, "Acme "+string(p)), 10*time.Second)
		relaistest.WaitFor(t, 5*time.Second, string(p)+" connected", func() (bool, string) { return w.Connected(), "" })
		if err := run.stop(t); err != nil {
			t.Fatal(err)
		}
		if w.Connected() {
			t.Errorf("%s: connected after Run returned", p)
		}
	}

	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	w, err := New(Config{URL: gone.URL, Token: "t", WorkerID: "nowhere", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	w.Handle(def, nil, created)
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	for ctx.Err() == nil {
		if w.Connected() {
			t.Fatal("connected to an address nothing answers at")
		}
		time.Sleep(50 * time.Millisecond)
	}
	<-done
}

// An outcome retried through an outage is warned about once, its retries
// at debug level, and its report after them is said at info level: an
// outage of seconds used to write a warning per try and task.
func TestOutcomeRetriesAreWarnedOnce(t *testing.T) {
	r := newRelais(t, nil)
	logs := &testlog.Buffer{}
	down := &outage{procedure: "Complete", lasts: 2 * time.Second, base: http.DefaultTransport.(*http.Transport).Clone()}
	completedOnceThrough(t, r, down, Config{Concurrency: 1, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if n := strings.Count(logs.String(), "reporting to Relais failed"); n != 1 {
		t.Errorf("%d warnings about the outcome's retries, want 1:\n%s", n, logs.String())
	}
	if n := strings.Count(logs.String(), "reported to Relais after retrying"); n != 1 {
		t.Errorf("%d lines saying the outcome was reported after retrying, want 1:\n%s", n, logs.String())
	}
}

// A handler cut short by its stream's end reports nothing: the replica
// hands its task back (here, a live one when the worker subscribes again),
// the attempt spent, and the task runs again. A release by worker id alone
// could hand back the new attempt this very worker was given meanwhile,
// and a task that kills its replica would never spend its attempts.
func TestStreamEndedHandlerCutShortReportsNothing(t *testing.T) {
	var handled atomic.Int32
	started := make(chan struct{}, 4)
	r, c, inst, logs := cutWhileHandling(t, 1, true, func(ctx context.Context, task *Task) (any, error) {
		if handled.Add(1) == 1 {
			started <- struct{}{}
			<-ctx.Done()
			return nil, context.Cause(ctx)
		}
		return created(ctx, task)
	}, started)
	if got := r.env.WaitEnded(inst, 20*time.Second)["status"]; got != "completed" {
		t.Fatalf("instance %v, want completed by the task's next attempt", got)
	}
	if n := c.releases.Load(); n != 0 {
		t.Errorf("%d releases sent after the stream ended, want none", n)
	}
	if a := r.occurrenceOf(t, inst)["attempts"].([]any); len(a) != 2 || a[0].(map[string]any)["outcome"] != "disconnected" {
		t.Errorf("attempts %v, want the first handed back disconnected (spent), then a second", a)
	}
	// Said as the handler is cancelled (the next stream did not resume
	// the task) or as it returns (an extension was refused first: which
	// comes first is a race).
	if !strings.Contains(logs.String(), "which failed or was cut short: nothing reported") &&
		!strings.Contains(logs.String(), "cancelling the handler, whose outcome is not reported") {
		t.Errorf("the cut-short handler's outcome is not said to be left unreported:\n%s", logs.String())
	}
}

// A handler that outlives its stream's end and succeeds sends no outcome
// once Relais said, to the extension that tried to keep its lock, that
// the task was handed back: the report could only be refused (verifier
// QA: three more lines a task, a refusal among them).
func TestStreamEndedOutcomeRelaisDisownedIsNotSent(t *testing.T) {
	var handled atomic.Int32
	started := make(chan struct{}, 4)
	r, _, inst, logs := cutWhileHandling(t, 1, true, func(ctx context.Context, task *Task) (any, error) {
		if handled.Add(1) == 1 {
			started <- struct{}{}
			<-ctx.Done() // ignored: it returns its outputs all the same
		}
		return created(ctx, task)
	}, started)
	if got := r.env.WaitEnded(inst, 20*time.Second)["status"]; got != "completed" {
		t.Fatalf("instance %v, want completed by the task's next attempt", got)
	}
	if a := r.occurrenceOf(t, inst)["attempts"].([]any); len(a) != 2 || a[0].(map[string]any)["refused_reports"] != nil {
		t.Errorf("attempts %v, want the first handed back with no report refused, then a second", a)
	}
	// Said once the first handler returned, which may come after the
	// second attempt completed the instance.
	deadline := time.Now().Add(5 * time.Second)
	// (Or said as the handler was cancelled, when the next stream could
	// not resume the task: "whose outcome is not reported".)
	for !strings.Contains(logs.String(), "outcome is not reported") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), "outcome is not reported") {
		t.Errorf("the disowned outcome not said to be left unreported:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), "outcome refused") {
		t.Errorf("the disowned outcome was sent:\n%s", logs.String())
	}
}

// A handler whose stream ended and whose task was assigned again since to
// this very worker (a live replica handed it back, and offered it to the
// worker's new stream) reports nothing: the new attempt does, and an
// outcome sent by worker id alone would settle that attempt instead. The
// new attempt's handler starts once the first returned.
func TestStreamEndedOutcomeOfATaskAssignedAgainIsNotSent(t *testing.T) {
	var handled atomic.Int32
	var logsOf atomic.Pointer[testlog.Buffer]
	first := make(chan struct{})
	r, _, inst, logs := cutWhileHandling(t, 2, true, func(ctx context.Context, task *Task) (any, error) {
		if handled.Add(1) == 1 {
			close(first)
			<-ctx.Done()
			// Returns once its task was assigned again, its new attempt
			// waiting for this handler.
			for l := logsOf.Load(); l == nil || !strings.Contains(l.String(), "an earlier attempt of this task still runs"); l = logsOf.Load() {
				time.Sleep(10 * time.Millisecond)
			}
			return created(context.WithoutCancel(ctx), task)
		}
		if handled.Load() != 2 {
			t.Error("the task's attempts ran more than twice")
		}
		return created(ctx, task)
	}, first)
	logsOf.Store(logs)
	if got := r.env.WaitEnded(inst, 20*time.Second)["status"]; got != "completed" {
		t.Fatalf("instance %v, want completed by the task's next attempt", got)
	}
	relaistest.WaitFor(t, 5*time.Second, "the first handler's outcome left unsent", func() (bool, string) {
		return strings.Contains(logs.String(), "the task was assigned again since: its new attempt reports"), logs.String()
	})
	if a := r.occurrenceOf(t, inst)["attempts"].([]any); len(a) != 2 || a[1].(map[string]any)["outcome"] != "completed" {
		t.Errorf("attempts %v, want the second completed by its own handler", a)
	}
}

// cutWhileHandling runs a stream worker of concurrency handlers through a
// cutter, starts an instance, and cuts the stream once started says h
// began on it, as a replica dying mid-task would (or, handBack, as a
// connection cut that the replica saw, handing the task back): it returns
// the instance (to wait for), the cutter (to count what was sent) and the
// worker's logs.
func cutWhileHandling(t *testing.T, concurrency int, handBack bool, h Handler, started <-chan struct{}) (*relais, *cutter, string, *testlog.Buffer) {
	t.Helper()
	r := newRelais(t, nil, func(c *config.Config) { c.Stream.Heartbeat = time.Second })
	c := &cutter{base: http.DefaultTransport.(*http.Transport).Clone(), cut: make(chan struct{})}
	if handBack {
		c.gate = make(chan struct{})
	}
	t.Cleanup(c.close)
	logs := &testlog.Buffer{}
	r.run(t, Config{Concurrency: concurrency, HTTPClient: &http.Client{Transport: c}, Logger: slog.New(slog.NewTextHandler(logs, nil))}, h)
	inst := r.start(t, "Acme")
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler did not start")
	}
	if handBack {
		c.handBack(t, r, inst)
	} else {
		close(c.cut)
	}
	return r, c, inst, logs
}

// Two Workers of one process left without a WorkerID (one per definition
// that keeps its slots, as the README suggests) get ids of their own:
// sharing the default, each stream replaced the other's and both Runs
// ended with stream_replaced.
func TestWorkersOfOneProcessGetTheirOwnDefaultIDs(t *testing.T) {
	r := newRelais(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var ids []string
	done := make(chan error, 2)
	for range 2 {
		w, err := New(Config{URL: r.env.URL, Token: r.consumer, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, w.cfg.WorkerID)
		w.Handle(def, nil, created)
		go func() { done <- w.Run(ctx) }()
	}
	if ids[0] == ids[1] {
		t.Fatalf("two Workers of one process share the default id %q", ids[0])
	}
	relaistest.WaitFor(t, 10*time.Second, "both workers connect", func() (bool, string) {
		items := r.env.Must(200, "GET", "/api/v1/workers", r.env.Operator, nil).JSON(t)["items"].([]any)
		return len(items) == 2, fmt.Sprint(items)
	})
	var insts []string
	for i := range 6 {
		insts = append(insts, r.start(t, fmt.Sprint("Acme", i)))
	}
	for _, id := range insts {
		if got := r.env.WaitEnded(id, 10*time.Second)["status"]; got != "completed" {
			t.Errorf("instance %s %v", id, got)
		}
	}
	select {
	case err := <-done:
		t.Fatalf("a Run ended while both should serve: %v", err)
	default:
	}
	cancel()
	for range 2 {
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
}

// An outcome whose report is retried while its stream ends, and whose task
// is meanwhile assigned to this worker's next stream, stops being retried
// there: sent by worker id alone, it would settle the new attempt, whose
// handler then ran anyway and was refused already_settled (found by QA
// behind a proxy answering Complete with 503 while it cut the stream).
// The new attempt reports its own outcome.
func TestOutcomeRetriesStopOnceTheTaskIsAssignedAgain(t *testing.T) {
	r := newRelais(t, nil, func(c *config.Config) { c.Stream.Heartbeat = time.Second })
	down := &outage{procedure: "Complete", lasts: 4 * time.Second, base: http.DefaultTransport.(*http.Transport).Clone()}
	c := &cutter{base: down, cut: make(chan struct{}), gate: make(chan struct{})}
	t.Cleanup(c.close)
	logs := &testlog.Buffer{}
	var mu sync.Mutex
	ends := map[int]TaskOutcome{}
	started := make(chan struct{}, 4)
	var handled atomic.Int32
	r.run(t, Config{Concurrency: 1, HTTPClient: &http.Client{Transport: c}, Logger: slog.New(slog.NewTextHandler(logs, nil)),
		OnTaskEnd: func(e TaskEnd) {
			mu.Lock()
			defer mu.Unlock()
			ends[e.Attempt] = e.Outcome
		}},
		func(ctx context.Context, task *Task) (any, error) {
			handled.Add(1)
			started <- struct{}{}
			return map[string]any{"result": "created", "crm_id": fmt.Sprint("CRM-attempt-", task.Attempt)}, nil
		})
	inst := r.start(t, "Acme")
	<-started
	// The first outcome meets the outage: the stream is cut while it is
	// retried (the replica hands the task back), and the task comes back
	// on the next stream.
	c.handBack(t, r, inst)
	if got := r.env.WaitEnded(inst, 20*time.Second)["status"]; got != "completed" {
		t.Fatalf("instance %v, want completed\n%s", got, logs.String())
	}
	occ := r.occurrenceOf(t, inst)
	if got := occ["outputs"].(map[string]any)["crm_id"]; got != "CRM-attempt-2" {
		t.Errorf("outputs recorded %v, want the second attempt's own (CRM-attempt-2)\n%s", got, logs.String())
	}
	if a := occ["attempts"].([]any); len(a) != 2 || a[0].(map[string]any)["outcome"] != "disconnected" || a[1].(map[string]any)["outcome"] != "completed" {
		t.Errorf("attempts %v, want the first disconnected, the second completed", a)
	}
	relaistest.WaitFor(t, 5*time.Second, "both attempts told to OnTaskEnd", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return ends[1] == OutcomeLockLost && ends[2] == OutcomeCompleted, fmt.Sprint(ends)
	})
	if !strings.Contains(logs.String(), "assigned to this worker again meanwhile") {
		t.Errorf("the first outcome's dropped retries are not said:\n%s", logs.String())
	}
	if n := handled.Load(); n != 2 {
		t.Errorf("the handler ran %d times, want twice (once per attempt)", n)
	}
}

// oldRelais answers a settlement naming its attempt as a Relais before
// the attempt member did: 400, unknown field at /attempt (or
// /items/N/attempt).
type oldRelais struct {
	base    http.RoundTripper
	refused atomic.Int32
}

func (o *oldRelais) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPost && strings.Contains(req.URL.Path, "/api/v1/pull/") && req.Body != nil {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"attempt"`)) {
			o.refused.Add(1)
			return &http.Response{StatusCode: http.StatusBadRequest, Header: http.Header{"Content-Type": {"application/problem+json"}}, Request: req,
				Body: io.NopCloser(strings.NewReader(`{"code":"unknown_field","detail":"unknown field(s): /attempt","status":400,"errors":[{"path":"/attempt","message":"unknown field"}]}`))}, nil
		}
	}
	return o.base.RoundTrip(req)
}

// Long polling names each settlement's attempt (a retryable failure
// resent through a proxy's 502 after it landed failed the next attempt
// the same worker held: found by QA), and against a Relais that refuses
// the member as unknown settles without it, once told.
func TestLongPollSettlementsNameTheirAttempt(t *testing.T) {
	r := newRelais(t, nil)
	old := &oldRelais{base: http.DefaultTransport.(*http.Transport).Clone()}
	logs := &testlog.Buffer{}
	r.run(t, Config{Protocol: ProtocolLongPoll, HTTPClient: &http.Client{Transport: old}, Logger: slog.New(slog.NewTextHandler(logs, nil))}, created)
	for i := range 3 {
		if got := r.env.WaitEnded(r.start(t, fmt.Sprint("Acme", i)), 10*time.Second)["status"]; got != "completed" {
			t.Fatalf("instance %d %v against a Relais refusing the attempt member\n%s", i, got, logs.String())
		}
	}
	if n := old.refused.Load(); n != 1 {
		t.Errorf("settlements refused for their attempt: %d, want 1 (the first; the next ones go without)", n)
	}
	if n := strings.Count(logs.String(), "takes no attempt in settlements"); n != 1 {
		t.Errorf("said %d times that Relais takes no attempt, want once\n%s", n, logs.String())
	}

	// Against this Relais, the attempt is sent and bound: seen in the body.
	seen := &bodies{base: http.DefaultTransport.(*http.Transport).Clone()}
	r2 := newRelais(t, nil)
	r2.run(t, Config{Protocol: ProtocolLongPoll, HTTPClient: &http.Client{Transport: seen}}, created)
	r2.env.WaitEnded(r2.start(t, "Initech"), 10*time.Second)
	if !seen.named(`"attempt":1`) {
		t.Errorf("no settlement named its attempt: %v", seen.all())
	}
}

// bodies records the pull routes' request bodies.
type bodies struct {
	base http.RoundTripper
	mu   sync.Mutex
	seen []string
}

func (b *bodies) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPost && strings.Contains(req.URL.Path, "/occurrences/") && req.Body != nil {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		b.mu.Lock()
		b.seen = append(b.seen, req.URL.Path+" "+string(body))
		b.mu.Unlock()
	}
	return b.base.RoundTrip(req)
}

func (b *bodies) named(s string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, x := range b.seen {
		if strings.Contains(x, s) {
			return true
		}
	}
	return false
}

func (b *bodies) all() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.seen)
}

// subscribeOutage refuses every Subscribe while down, as a replica being
// restarted would, and passes everything else through.
type subscribeOutage struct {
	base http.RoundTripper
	down atomic.Bool
}

func (o *subscribeOutage) RoundTrip(req *http.Request) (*http.Response, error) {
	if o.down.Load() && strings.HasSuffix(req.URL.Path, "/Subscribe") {
		return nil, errors.New("connection refused (the test's outage)")
	}
	return o.base.RoundTrip(req)
}

// A worker waiting to subscribe again, its backoff grown through an
// outage, subscribes as soon as one of its reports reaches Relais, not at
// the backoff's end (Go SDK QA: idle for 26 s after Relais was back,
// though its outcomes were being taken).
func TestAReportReachingRelaisEndsTheSubscribeBackoff(t *testing.T) {
	r := newRelais(t, nil, func(c *config.Config) { c.Stream.Heartbeat = time.Second })
	down := &subscribeOutage{base: http.DefaultTransport.(*http.Transport).Clone()}
	c := &cutter{base: down, cut: make(chan struct{})}
	t.Cleanup(c.close)
	started, release := make(chan struct{}, 4), make(chan struct{})
	var w *Worker
	var sleeps atomic.Int32
	r.run(t, Config{Concurrency: 2, HTTPClient: &http.Client{Transport: c}}, func(ctx context.Context, task *Task) (any, error) {
		started <- struct{}{}
		<-release
		return created(context.WithoutCancel(ctx), task)
	}, func(x *Worker) {
		w = x
		// Every wait but the reconnection's first is ten minutes: only
		// something else than the backoff's end can bring the stream back
		// within the test.
		x.fetchBackoff = backoff{min: 10 * time.Minute, max: 10 * time.Minute}
		x.sleep = func(ctx context.Context, d time.Duration) bool {
			if sleeps.Add(1) == 1 {
				d = 10 * time.Millisecond
			}
			return sleepCtx(ctx, d)
		}
	})
	inst := r.start(t, "Acme")
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler did not start")
	}
	down.down.Store(true)
	close(c.cut)
	relaistest.WaitFor(t, 10*time.Second, "the worker waits out its backoff", func() (bool, string) {
		return sleeps.Load() >= 2 && !w.Connected(), fmt.Sprint(sleeps.Load(), " sleeps")
	})
	down.down.Store(false)
	close(release) // its outcome reaches Relais
	if got := r.env.WaitEnded(inst, 10*time.Second)["status"]; got != "completed" {
		t.Fatalf("instance %v, want completed", got)
	}
	relaistest.WaitFor(t, 5*time.Second, "the worker subscribes again", func() (bool, string) { return w.Connected(), "" })
}

// A handler's RetryableError may lower the attempts left ("once more at
// most"), never raise them, on either protocol and in a batch: with three
// attempts and "at most one more" each time, the task runs twice (Go SDK
// QA: the SDK could not say it).
func TestRetryableErrorLowersTheAttemptsLeft(t *testing.T) {
	for _, p := range []Protocol{ProtocolStream, ProtocolLongPoll} {
		t.Run(string(p), func(t *testing.T) {
			r := newRelais(t, map[string]any{"max_attempts": 3, "retry_delay": "PT0S"})
			var runs atomic.Int32
			run := r.run(t, Config{Protocol: p, WorkerID: "w-" + string(p)}, func(ctx context.Context, task *Task) (any, error) {
				runs.Add(1)
				return nil, &RetryableError{Code: "CRM_BUSY", AttemptsLeft: 1, Err: errors.New("busy")}
			})
			inst := r.start(t, "Acme")
			if got := r.env.WaitEnded(inst, 20*time.Second)["status"]; got != "failed" {
				t.Fatalf("instance %v, want failed once its lowered budget is spent", got)
			}
			if err := run.stop(t); err != nil {
				t.Fatal(err)
			}
			if n := runs.Load(); n != 2 {
				t.Errorf("the handler ran %d times, want 2: three attempts, lowered to one more after the first", n)
			}
		})
	}
}

// A task whose stream ended and whose lock expired while Relais could not
// be reached is said so, without the advice to poll, which fits a lock
// Relais refused to keep (SDK QA: a Relais outage longer than the lock
// was told that Relais hands tasks back).
func TestOrphanLostSaysWhetherRelaisWasReached(t *testing.T) {
	unreached := fmt.Errorf("%w: %w: %w", ErrLockLost, errUnextended, errors.New("connection refused"))
	if msg := orphanLost(unreached); !strings.Contains(msg, "could not be reached") || strings.Contains(msg, "ProtocolLongPoll") {
		t.Errorf("out of reach: %q", msg)
	}
	refused := fmt.Errorf("%w: %w", ErrLockLost, &APIError{Status: 409, Code: "lock_expired"})
	if msg := orphanLost(refused); !strings.Contains(msg, "hands a stream's tasks back") {
		t.Errorf("refused: %q", msg)
	}
	if !strings.Contains(unreached.Error(), "it expired without a successful extension: connection refused") {
		t.Errorf("the error reads %q, want its cause said as before", unreached)
	}
}
