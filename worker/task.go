package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"reflect"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"golang.org/x/text/unicode/norm"

	"github.com/relais/relais/internal/isoduration"
	"github.com/relais/relais/internal/jsontree"
)

// Task is one reserved occurrence, as fetch-and-lock delivered it.
type Task struct {
	// ID is the occurrence's id, the same for every attempt: key outside
	// effects by it (delivery is at least once).
	ID string `json:"id"`
	// Definition and Revision are the task contract the inputs follow.
	Definition string `json:"definition"`
	Revision   int    `json:"revision"`
	// Inputs are the validated inputs, secrets in clear: never log them.
	Inputs json.RawMessage `json:"inputs"`
	// Attempt is this attempt's number, from 1.
	Attempt int `json:"attempt"`
	// AttemptsLeft is how many attempts remain after this one (2 on the
	// first attempt of three): 0 means a retryable failure now fails the
	// occurrence for good.
	AttemptsLeft int `json:"attempts_left"`
	// LockExpiresAt is the lock's expiry at delivery, by the server's
	// clock. The worker extends the lock on its own; it does not update
	// this field.
	LockExpiresAt time.Time `json:"lock_expires_at"`
	// DeadlineAt is when the occurrence times out, if it has a deadline.
	DeadlineAt *time.Time `json:"deadline_at"`
	// InstanceID is the process instance the occurrence belongs to, and
	// Node the process node that made it.
	InstanceID string `json:"instance_id"`
	Node       string `json:"node"`
	// Priority is the node's policy priority, 0 to 9: higher is claimed
	// first.
	Priority int `json:"priority"`

	// wire reports the task's outcome: the REST routes for a fetched task,
	// the worker protocol for a streamed one.
	wire wire
	// held says until when the task's lock lasts, as far as the worker
	// can tell: a fetched task's as the worker extends it, a started
	// streamed task's as its stream keeps it (nil for a streamed task not
	// started). An outcome is retried through an outage until then.
	held lockBound
	// ctl is set once a handler has the task (see Defer); a pointer, so
	// that a Task copied by value stays a plain value.
	ctl *taskControl
}

// taskControl is what Defer needs of a task a handler runs.
type taskControl struct {
	run *run
	// deferTo replaces Relais in a unit test's Task (see WithDefer).
	deferTo func(ctx context.Context, reason string) (Deferral, error)
	// stopKeeping stops extending a fetched task's lock; forget makes a
	// streamed task's stream let go of it (its Cancellations and its end
	// no longer cancel the handler). Either may be nil.
	stopKeeping, forget func()

	mu    sync.Mutex
	state deferState
	// inFlight is set while a Defer is in flight, and closed when it ends.
	inFlight chan struct{}

	// returned is set once the handler returned: a lock lost after it
	// loses an outcome being reported, not a handler's work.
	returned atomic.Bool

	// end is what became of the task, as Config.OnTaskEnd is told: set
	// by whatever settles it last, on the task's own goroutine; told once
	// it was.
	end  TaskEnd
	told bool
}

// ended records the task's outcome for Config.OnTaskEnd.
func (t *Task) ended(o TaskOutcome, code string, err error) {
	if t.ctl != nil {
		t.ctl.end.Outcome, t.ctl.end.ErrorCode, t.ctl.end.Err = o, code, err
	}
}

// deferState is where a task stands with Defer.
type deferState int

const (
	notDeferred  deferState = iota // the handler has it (a Defer may be in flight)
	deferDone                      // deferred: the worker reports nothing for it
	deferTooLate                   // the handler returned: too late to defer
)

// deferred waits for a Defer in flight, if any, and reports whether the
// task is deferred: the lock keeping, the handler timeout and the outcome
// decide on what the Defer did, not on its being tried. With final (the
// handler returned), no Defer may start after.
func (c *taskControl) deferred(final bool) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.inFlight != nil {
		wait := c.inFlight
		c.mu.Unlock()
		<-wait
		c.mu.Lock()
	}
	if final && c.state != deferDone {
		c.state = deferTooLate
	}
	return c.state == deferDone
}

// Decode decodes the task's inputs into v, as json.Unmarshal does.
func (t *Task) Decode(v any) error {
	if err := json.Unmarshal(t.Inputs, v); err != nil {
		return fmt.Errorf("worker: decoding the inputs of %s: %w", t.ID, err)
	}
	return nil
}

// Typed adapts a handler of typed inputs and outputs to a Handler: the
// task's inputs are decoded into an In (as Task.Decode does), and the Out
// it returns is the task's outputs (encoded as JSON, checked by Relais
// against the contract).
//
// Inputs that do not decode into an In (a string where In has an int)
// fail the task at once, without retry, with code inputs_undecodable:
// Relais validated them against the definition's contract, so In
// disagrees with that contract, and running the handler again on the same
// inputs would only spend the remaining attempts on the same mistake (as
// outputs Relais refuses do). Fields of the inputs that In lacks are
// ignored, so that a handler keeps working when a revision adds fields.
// The other way round is silent too: a field of In that the inputs lack
// (a revision removed or renamed it) decodes as its zero value. A handler
// registered for every revision takes a breaking revision the moment an
// instance reaches it: give Handle the revisions In was written for, or
// read such fields as pointers and check them.
func Typed[In, Out any](h func(ctx context.Context, t *Task, in In) (Out, error)) Handler {
	return func(ctx context.Context, t *Task) (any, error) {
		var in In
		if len(bytes.TrimSpace(t.Inputs)) == 0 {
			// A Task built by hand in a unit test, most likely (Go SDK
			// QA: told a field did not parse, where there was none).
			return nil, &BusinessError{Code: codeInputsUndecodable, Message: "the task has no inputs to decode into " + reflect.TypeFor[In]().String() + " (Task.Inputs is empty: a Task built by hand needs them, the JSON document)"}
		}
		if err := json.Unmarshal(t.Inputs, &in); err != nil {
			return nil, &BusinessError{Code: codeInputsUndecodable, Message: undecodable[In](t.Inputs, err)}
		}
		out, err := h(ctx, t, in)
		if err != nil {
			return nil, err
		}
		if t.ctl.deferred(false) && reflect.ValueOf(&out).Elem().IsZero() {
			// A typed handler that deferred its task has no outcome to
			// give but its type's zero value, which is not one.
			return nil, nil
		}
		return out, nil
	}
}

// undecodable says why inputs did not decode into a T, naming the field
// and the types but never the value: encoding/json quotes some values in
// its errors (a number that does not fit, a time that does not parse), and
// the message is stored and shown where the value itself may be masked.
func undecodable[T any](inputs json.RawMessage, err error) string {
	msg := "the inputs do not decode into " + reflect.TypeFor[T]().String()
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		field := te.Field
		if p, _ := failingField(inputs, reflect.TypeFor[T](), ""); p != "" {
			// With a list's index, which encoding/json leaves out
			// (lines.qty for lines.1.qty: Go SDK QA).
			field = p
		}
		if field == "" {
			field = "the document"
		}
		// Value is the JSON kind, followed by the number itself for one.
		kind, _, _ := strings.Cut(te.Value, " ")
		return msg + ": " + field + " is a JSON " + kind + ", which " + te.Type.String() + " cannot hold"
	}
	// A type's own UnmarshalJSON (time.Time's) refused a value, and
	// encoding/json names no field for it: found by decoding each alone
	// (Go SDK QA: a date read into time.Time failed every task, unnamed).
	field, typ := failingField(inputs, reflect.TypeFor[T](), "")
	if field == "" {
		return msg + " (a field's value does not parse as its Go type)"
	}
	msg += ": " + field + " does not parse as " + typ.String()
	if typ == reflect.TypeFor[time.Time]() {
		msg += " (time.Time reads RFC 3339 date-times; a contract date, without a time, is read into worker.Date)"
	}
	return msg
}

// failingField finds the member of doc that does not decode into its Go
// field of t, by decoding each alone, and returns its path (address.city,
// lines.2.qty, as encoding/json names a field) and the Go type that
// refused it; "" when none does alone. It reads no value into the answer.
func failingField(doc json.RawMessage, t reflect.Type, path string) (string, reflect.Type) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	try := func(raw json.RawMessage, ft reflect.Type, p string) (string, reflect.Type) {
		if json.Unmarshal(raw, reflect.New(ft).Interface()) == nil {
			return "", nil
		}
		if deeper, dt := failingField(raw, ft, p); deeper != "" {
			return deeper, dt
		}
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem() // an optional field's type is its value's
		}
		return p, ft
	}
	join := func(name string) string {
		if path == "" {
			return name
		}
		return path + "." + name
	}
	switch t.Kind() {
	case reflect.Struct:
		if t.Implements(reflect.TypeFor[json.Unmarshaler]()) || reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]()) {
			return "", nil // decoded whole, by its own method
		}
		var members map[string]json.RawMessage
		if json.Unmarshal(doc, &members) != nil {
			return "", nil
		}
		for _, f := range reflect.VisibleFields(t) {
			if !f.IsExported() || f.Anonymous && f.Type.Kind() == reflect.Struct {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			raw, ok := members[name]
			if !ok {
				// encoding/json matches a member case-insensitively too.
				for k, v := range members {
					if strings.EqualFold(k, name) {
						raw, ok = v, true
						break
					}
				}
			}
			if !ok {
				continue
			}
			if p, ft := try(raw, f.Type, join(name)); p != "" {
				return p, ft
			}
		}
	case reflect.Slice, reflect.Array:
		var items []json.RawMessage
		if json.Unmarshal(doc, &items) != nil {
			return "", nil
		}
		for i, item := range items {
			if p, ft := try(item, t.Elem(), join(strconv.Itoa(i))); p != "" {
				return p, ft
			}
		}
	case reflect.Map:
		var members map[string]json.RawMessage
		if json.Unmarshal(doc, &members) != nil {
			return "", nil
		}
		for _, k := range slices.Sorted(maps.Keys(members)) {
			if p, ft := try(members[k], t.Elem(), join(k)); p != "" {
				return p, ft
			}
		}
	}
	return "", nil
}

func taskAttrs(t *Task) []any {
	return []any{"occurrence", t.ID, "definition", t.Definition, "revision", t.Revision, "attempt", t.Attempt}
}

// Error codes the worker itself reports.
const (
	codeHandlerError   = "handler_error"
	codeHandlerPanic   = "handler_panic"
	codeInvalidOutputs = "invalid_outputs"
	// codeInputsUndecodable reports inputs a Typed handler's type cannot
	// hold.
	codeInputsUndecodable = "inputs_undecodable"
	// codeOutputsTooLarge: Relais refused the outputs' size.
	codeOutputsTooLarge = "outputs_too_large"
	codeWorkerShutdown  = "worker_shutdown"
	codeHandlerTimeout  = "handler_timeout"
	// codeBusinessError stands for an empty business failure code.
	codeBusinessError = "business_error"
	// codeInvalidFailure reports a failure Relais refused as it was sent.
	codeInvalidFailure = "invalid_failure"
)

// A settlement's Attempt, the task's, binds the report to its attempt: a
// report retried after a lost answer never settles a later attempt this
// worker holds (a retryable failure's report, retried through a proxy's
// 502 after it landed, failed the next attempt the same worker had
// fetched meanwhile). Zero, for a task settled by id, leaves it out; so
// does a Relais that refuses the member (see Worker.post).
type completeRequest struct {
	WorkerID string          `json:"worker_id"`
	Outputs  json.RawMessage `json:"outputs"`
	Attempt  int32           `json:"attempt,omitempty"`
}

type failRequest struct {
	WorkerID   string `json:"worker_id"`
	ErrorCode  string `json:"error_code"`
	Message    string `json:"message"`
	Retryable  bool   `json:"retryable"`
	RetryDelay string `json:"retry_delay,omitempty"`
	Attempt    int32  `json:"attempt,omitempty"`
	// AttemptsLeft, when above zero, lowers the budget (RetryableError).
	AttemptsLeft int32 `json:"attempts_left,omitempty"`
}

type extendRequest struct {
	WorkerID     string `json:"worker_id"`
	LockDuration string `json:"lock_duration"`
	Attempt      int32  `json:"attempt,omitempty"` // see completeRequest
}

// process runs the handler for t in ctx, which keep (when set) keeps
// alive by extending the lock, then settles. cancel ends ctx: the lock
// keeping, a stream's Cancellation and the handler timeout call it with
// their cause.
func (r *run) process(t *Task, rt route, ctx context.Context, cancel context.CancelCauseFunc, keep func(context.Context, context.CancelCauseFunc)) {
	log := r.w.log.With(taskAttrs(t)...)
	defer cancel(nil)
	if t.ctl == nil {
		t.ctl = &taskControl{}
	}
	t.ctl.run = r
	// stopKeep stops keeping the lock and waits for the keeper to return.
	stopKeep := func() {}
	if keep != nil {
		// The lock is kept until the outcome is reported, not only while
		// the handler's context lives: a report retried through a Relais
		// outage, or the failure of a handler that ignored the handler
		// timeout, must not outlive the lock it settles. The keeper
		// cancels the handler's context itself when the lock is lost.
		keepCtx, stopKeeping := context.WithCancel(context.WithoutCancel(ctx))
		t.ctl.stopKeeping = stopKeeping
		kept := make(chan struct{})
		go func() {
			defer close(kept)
			keep(keepCtx, cancel)
		}()
		stopKeep = func() {
			stopKeeping()
			<-kept
		}
		defer stopKeep()
	}
	// The handler timeout cancels the context first, then fails the task.
	timeout := time.AfterFunc(rt.timeout, func() { cancel(ErrHandlerTimeout) })
	defer timeout.Stop()
	finished, ok := r.waitEarlierAttempt(t, ctx, log)
	if !ok {
		return
	}
	defer finished()
	log.Debug("task started")
	r.taskStarted(t, log)
	r.handling.Add(1)
	var outputs any
	var err error
	returned := make(chan struct{})
	began := time.Now()
	var took atomic.Int64
	defer r.taskEnded(t, began, &took, log)
	go func() {
		defer close(returned)
		defer r.handling.Add(-1)
		// runtime.Goexit (t.FailNow's way out, in a helper shared with
		// tests) unwinds the goroutine without a return or a panic to
		// recover: without this, the task would be reported completed
		// with no outputs, the work never done.
		exited := true
		defer func() {
			if exited {
				log.Error("handler's goroutine exited (runtime.Goexit) without returning; failing the task, retryable")
				outputs, err = nil, &RetryableError{Code: codeHandlerPanic, Err: errors.New("the handler's goroutine exited (runtime.Goexit) without returning")}
				took.Store(int64(time.Since(began)))
				t.ctl.returned.Store(true)
			}
		}()
		outputs, err = invoke(ctx, rt.h, t, log)
		exited = false
		took.Store(int64(time.Since(began)))
		t.ctl.returned.Store(true)
	}()
	select {
	case <-returned:
	case <-ctx.Done():
		if !errors.Is(context.Cause(ctx), ErrHandlerTimeout) {
			// Cancelled for good (a shutdown past its timeout, a lost
			// lock, a cancellation): the lock is not kept for a handler
			// that may never return; Run abandons such handlers and their
			// locks expire.
			stopKeep()
			<-returned
			break
		}
		grace := time.NewTimer(r.w.shutdownGrace)
		select {
		case <-returned:
			grace.Stop()
		case <-grace.C:
			// The handler ignores its cancelled context: report the
			// timeout now, so that the task is retried elsewhere instead
			// of held, and wait for the handler (it keeps its slot: the
			// concurrency bound holds).
			if t.ctl.deferred(false) {
				// Deferred, the task is no longer this worker's to fail.
				log.Error("handler ignored the handler timeout after deferring its task; waiting for the handler to return")
				t.ended(OutcomeDeferred, "", nil)
				<-returned
				return
			}
			log.Error("handler ignored the handler timeout; failing the task and waiting for the handler to return")
			r.settleFail(t, timeoutFailure(rt.timeout), log)
			// Reported: told now, not once a handler that may never
			// return does.
			r.taskEnded(t, began, &took, log)
			// Reported: the lock is no longer this worker's to keep.
			stopKeep()
			<-returned
			return
		}
	}

	if t.ctl != nil {
		// Whatever becomes of its report: a handler cut short (stopped,
		// timed out, released at shutdown) returned its own error too
		// (River-user QA: a hook saw nil for those).
		t.ctl.end.HandlerErr = err
	}
	if t.ctl.deferred(true) {
		// Whoever settles it later, by id, reports its outcome.
		t.ended(OutcomeDeferred, "", nil)
		if outputs != nil || err != nil {
			log.Warn("the handler returned an outcome after deferring its task; it is not reported: the task stays deferred until settled by id")
		}
		return
	}
	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, errStreamEnded):
		// The stream ended and no stream resumed the task (a replica
		// that saw the stream end handed it back; one that died may have
		// left the lock held, or no stream came in time): see
		// afterStreamEnded.
		r.afterStreamEnded(t, outputs, err, cause, log)
	case errors.Is(cause, ErrCancelled):
		// An operator stopped the instance, or its deadline passed: not
		// the worker's trouble, and Relais would refuse any outcome now.
		log.Info("task cancelled by Relais; its outcome is not reported", "cause", cause)
		t.ended(OutcomeCancelled, "", nil)
		return
	case errors.Is(cause, ErrLockLost):
		// Relais would refuse any outcome now, and another worker may
		// hold the task: settling could only mislead.
		log.Warn("task abandoned without settling", "cause", cause)
		t.ended(OutcomeLockLost, "", nil)
		return
	case errors.Is(cause, ErrHandlerTimeout):
		// Whatever it returned once cut short is not the work asked for.
		log.Warn("handler timed out; failing the task", "timeout", rt.timeout.String())
		r.settleFail(t, timeoutFailure(rt.timeout), log)
	case err == nil:
		r.complete(t, outputs, log)
	case errors.Is(cause, ErrShutdownTimeout):
		// The handler was cut short, not wrong: hand the task back at
		// once, without spending an attempt.
		r.handBack(t, log)
	default:
		r.settleFail(t, failureOf(err), log)
	}
}

// waitEarlierAttempt registers t as running on this worker and, when a
// handler of an earlier attempt of the same occurrence still runs here
// (one that ignored its timeout or its lost lock, whose task came back to
// this worker), waits for it to return before t's handler starts: two
// attempts of one task never run side by side in one worker, whatever the
// handler does with its context. The wait is bounded as a handler is, by
// t's context; cut short, t is settled as its cause asks without its
// handler ever starting, and ok is false. Otherwise finished must be
// called once t's handler returned.
func (r *run) waitEarlierAttempt(t *Task, ctx context.Context, log *slog.Logger) (finished func(), ok bool) {
	mine := make(chan struct{})
	r.runningMu.Lock()
	if r.running == nil {
		r.running = make(map[string]chan struct{})
	}
	earlier := r.running[t.ID]
	r.running[t.ID] = mine
	r.runningMu.Unlock()
	done := func() {
		close(mine)
		r.runningMu.Lock()
		if r.running[t.ID] == mine {
			delete(r.running, t.ID)
		}
		r.runningMu.Unlock()
	}
	if earlier == nil {
		return done, true
	}
	log.Warn("an earlier attempt of this task still runs its handler on this worker; waiting for it to return")
	select {
	case <-earlier:
		return done, true
	case <-ctx.Done():
	}
	// A later attempt waits on this one's channel: it must not open before
	// the handler this one waited for returns.
	go func() {
		<-earlier
		done()
	}()
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, ErrHandlerTimeout):
		r.settleFail(t, failRequest{ErrorCode: codeHandlerTimeout, Retryable: true,
			Message: "not started: the handler of an earlier attempt still runs on this worker"}, log)
	case errors.Is(cause, ErrShutdownTimeout):
		r.handBack(t, log)
	default:
		// Lost, cancelled, or its stream ended: no outcome to report.
		log.Warn("task abandoned before its handler started", "cause", cause)
	}
	return nil, false
}

func timeoutFailure(d time.Duration) failRequest {
	return failRequest{ErrorCode: codeHandlerTimeout, Message: "the handler did not finish within " + d.String(), Retryable: true}
}

// invoke calls h, turning a panic into a retryable failure. Relais gets
// the panic value (it scrubs protected values from messages); the log
// gets the stack, which locates the bug, but not the value, which may
// quote inputs. The error h returns is read here, where a panic of its
// Error method (a typed nil pointer returned as an error, the usual slip)
// is the handler's too: read later, it crashed the worker process (Go
// SDK QA).
func invoke(ctx context.Context, h Handler, t *Task, log *slog.Logger) (outputs any, err error) {
	defer func() {
		if v := recover(); v != nil {
			log.Error("handler panicked", "stack", string(debug.Stack()))
			outputs, err = nil, &RetryableError{Code: codeHandlerPanic, Err: fmt.Errorf("panic: %v", v)}
		}
	}()
	outputs, err = h(ctx, t)
	if err != nil {
		_ = err.Error()
	}
	return outputs, err
}

// failureOf maps a handler error to the failure reported.
func failureOf(err error) failRequest {
	var be *BusinessError
	var re *RetryableError
	switch {
	case errors.As(err, &be):
		return failRequest{ErrorCode: be.Code, Message: be.Message}
	case errors.As(err, &re):
		f := failRequest{ErrorCode: re.code(), Message: err.Error(), Retryable: true}
		if err == error(re) {
			// The code is a field of its own: do not repeat it.
			f.Message = re.code()
			if re.Err != nil {
				f.Message = re.Err.Error()
			}
		}
		if re.Delay > 0 {
			f.RetryDelay = isoduration.Format(re.Delay)
		}
		if re.AttemptsLeft > 0 {
			f.AttemptsLeft = int32(min(re.AttemptsLeft, math.MaxInt32))
		}
		return f
	default:
		return failRequest{ErrorCode: codeHandlerError, Message: err.Error(), Retryable: true}
	}
}

// keepLock extends the lock each time half of it is left, until ctx
// ends, and tells held each new expiry. When the lock is lost or the
// occurrence cancelled, it cancels the handler's context through lose,
// with the reason as cause.
func (r *run) keepLock(ctx context.Context, lose context.CancelCauseFunc, t *Task, lock lockState, held *heldLock, log *slog.Logger) {
	half := r.w.cfg.LockDuration / 2
	expiry := lock.expiry
	first := time.Until(expiry.Add(-half))
	if lock.extendNow {
		first = 0
	}
	timer := time.NewTimer(first)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		next, err := r.extend(ctx, t.ID, t.Attempt, expiry, log)
		if err != nil {
			if t.ctl.deferred(false) {
				// Relais refuses to extend a deferred occurrence's lock:
				// there is none left to keep. (A Defer that failed leaves
				// the lock lost, said below.)
				return
			}
			if ctx.Err() == nil {
				switch {
				case t.ctl.returned.Load():
					log.Warn("lock lost while the outcome was being reported; it is given up", "cause", err)
				case errors.Is(err, ErrCancelled):
					log.Info("task cancelled by Relais; cancelling the handler", "cause", err)
				default:
					log.Warn("lock lost; cancelling the handler", "cause", err)
				}
				lose(err)
			}
			return
		}
		expiry = next
		held.extended(next)
		timer.Reset(time.Until(expiry.Add(-half)))
	}
}

// extend prolongs the lock that ends at expiry, retrying transient
// errors until then, and returns the new expiry.
//
// Expiries are measured on the local clock from when a request was sent,
// which is never later than the server's own reckoning: comparing the
// server's timestamps with the local clock would trust two clocks to
// agree.
func (r *run) extend(ctx context.Context, id string, attempt int, expiry time.Time, log *slog.Logger) (time.Time, error) {
	w := r.w
	body := extendRequest{WorkerID: w.cfg.WorkerID, LockDuration: isoduration.Format(w.cfg.LockDuration), Attempt: int32(attempt)}
	// A second at most between tries: a replica restarting takes a few,
	// and an eighth of a minute's lock would leave the lock unextended
	// for seconds after it is back.
	retryEvery := min(max(w.cfg.LockDuration/8, 10*time.Millisecond), time.Second)
	// The last try before the expiry keeps time for an answer.
	lastTry := min(300*time.Millisecond, w.cfg.LockDuration/8)
	warned := false
	for {
		sent := time.Now()
		// A request still pending when the lock expires is moot; and one
		// stuck on a dead connection must leave time for another try.
		left := time.Until(expiry)
		rctx, cancel := context.WithTimeout(ctx, max(left/3, min(left, time.Second)))
		err := w.post(rctx, occurrencePath(id, "extend"), body, nil)
		cancel()
		switch {
		case err == nil:
			w.reached()
			return sent.Add(w.cfg.LockDuration), nil
		case ctx.Err() != nil:
			return time.Time{}, ctx.Err()
		case cancelledBy(err):
			return time.Time{}, fmt.Errorf("%w: %w", ErrCancelled, err)
		case !w.transient(err):
			return time.Time{}, fmt.Errorf("%w: %w", ErrLockLost, err)
		case !time.Now().Before(expiry):
			return time.Time{}, fmt.Errorf("%w: %w: %w", ErrLockLost, errUnextended, err)
		}
		// Warned once per extension, its tries at debug level: an outage
		// of seconds would write a line per second and task.
		if !warned {
			log.Warn("extending the lock failed; retrying until it expires", "err", err, "lock_left", time.Until(expiry).Round(time.Millisecond).String())
			warned = true
		} else {
			log.Debug("extending the lock failed; retrying", "err", err)
		}
		// The last try before the expiry keeps time for an answer: woken
		// at the expiry itself, it had none, and a Relais back by then
		// was never asked (QA).
		wait := min(max(retryEvery, retryAfter(err)), time.Until(expiry)-lastTry)
		if wait <= 0 {
			return time.Time{}, fmt.Errorf("%w: %w: %w", ErrLockLost, errUnextended, err)
		}
		if !sleepCtx(ctx, wait) {
			return time.Time{}, ctx.Err()
		}
	}
}

// complete reports the handler's outputs, failing the occurrence without
// retry when Relais refuses them (see Handler for why).
func (r *run) complete(t *Task, outputs any, log *slog.Logger) {
	body, err := encodeOutputs(outputs)
	if err != nil {
		attrs := []any{"err_type", fmt.Sprintf("%T", err), "reason", encodingReason(err)}
		message := "the handler's outputs cannot be encoded as JSON"
		if mp, ok := errors.AsType[*marshalPanic](err); ok {
			attrs = []any{"outputs_type", fmt.Sprintf("%T", outputs), "reason", encodingReason(err), "stack", string(mp.stack)}
			message += ": " + encodingReason(err)
		}
		log.Error("outputs cannot be encoded as JSON; failing the task", attrs...)
		r.settleFail(t, failRequest{ErrorCode: codeInvalidOutputs, Message: message}, log)
		return
	}
	var res completeResult
	err = r.settle(t, "complete", func(ctx context.Context) (err error) {
		res, err = t.wire.complete(ctx, t.ID, completeRequest{WorkerID: r.w.cfg.WorkerID, Outputs: body, Attempt: int32(t.Attempt)})
		return err
	}, log)
	var ae *APIError
	switch {
	case err == nil:
		route := ""
		if res.Route != nil {
			route = *res.Route
		}
		// Debug: a worker busy at a few thousand tasks a second would
		// write as many lines; what went wrong is logged above it.
		if route != "" {
			log.Debug("task completed", "route", route)
		} else {
			// A definition without a routing output has no route to say.
			log.Debug("task completed")
		}
		t.ended(OutcomeCompleted, "", nil)
	case errors.As(err, &ae) && ae.Status == http.StatusUnprocessableEntity && ae.Code == codeInvalidOutputs:
		// The problem's pointers and messages describe the contract,
		// never the values, so they are safe to log.
		log.Error("outputs violate the contract; failing the task without retry", "errors", ae.Errors)
		r.settleFail(t, failRequest{ErrorCode: codeInvalidOutputs, Message: violations(ae.Errors)}, log)
	case errors.As(err, &ae) && ae.Status == http.StatusBadRequest && aboutOutputs(ae.Errors):
		// Outputs Relais cannot store as they are (a duplicate key, an
		// escaped lone surrogate in a json.RawMessage): left alone, the
		// task would be held until its lock lapsed (on a stream, for as
		// long as the stream lives) and then run again to the same outputs.
		log.Error("outputs refused as JSON; failing the task without retry", "code", ae.Code, "errors", ae.Errors)
		r.settleFail(t, failRequest{ErrorCode: codeInvalidOutputs, Message: "Relais refused the outputs: " + problemList(ae.Errors)}, log)
	case errors.As(err, &ae) && ae.Status == http.StatusRequestEntityTooLarge:
		// Left alone, the task would be held until its lock lapsed (on a
		// stream, for as long as the stream lives) and then run again to
		// the same outputs.
		log.Error("outputs larger than Relais accepts; failing the task without retry", "bytes", len(body), "detail", ae.Detail)
		r.settleFail(t, failRequest{ErrorCode: codeOutputsTooLarge,
			Message: fmt.Sprintf("the handler's outputs (%d bytes of JSON) are larger than Relais accepts", len(body))}, log)
	default:
		r.logSettleError(log, "complete", err)
		t.ended(unreported(err))
	}
}

// unreported is the outcome of a task whose report failed with err:
// cancelled or lock lost when Relais says why the task is no longer this
// worker's.
func unreported(err error) (TaskOutcome, string, error) {
	switch code := apiCode(err); {
	case errors.Is(err, ErrCancelled), cancelledBy(err):
		return OutcomeCancelled, "", err
	case errors.Is(err, ErrLockLost), errors.Is(err, errReassigned), code == "lock_expired", code == "locked_by_other_worker", code == "not_reserved":
		return OutcomeLockLost, "", err
	}
	return OutcomeUnreported, "", err
}

// cancelledBy reports whether err is Relais refusing a call because the
// occurrence was cancelled: its instance stopped, or its deadline passed.
func cancelledBy(err error) bool {
	code := apiCode(err)
	return code == "occurrence_cancelled" || code == "deadline_exceeded"
}

// taskStarted tells Config.OnTaskStart that t's handler starts.
func (r *run) taskStarted(t *Task, log *slog.Logger) {
	hook := r.w.cfg.OnTaskStart
	if hook == nil {
		return
	}
	defer func() {
		if p := recover(); p != nil {
			log.Error("Config.OnTaskStart panicked", "panic", fmt.Sprint(p))
		}
	}()
	hook(TaskStart{Definition: t.Definition, Revision: t.Revision, OccurrenceID: t.ID, Attempt: t.Attempt})
}

// taskEnded tells Config.OnTaskEnd what became of t, whose handler began
// at began and ran for took (zero: it had not returned when the task was
// given up for it).
func (r *run) taskEnded(t *Task, began time.Time, took *atomic.Int64, log *slog.Logger) {
	hook := r.w.cfg.OnTaskEnd
	if hook == nil || t.ctl == nil || t.ctl.end.Outcome == "" || t.ctl.told {
		return
	}
	t.ctl.told = true
	e := t.ctl.end
	e.Definition, e.Revision, e.OccurrenceID, e.Attempt = t.Definition, t.Revision, t.ID, t.Attempt
	e.Handler = time.Duration(took.Load())
	if e.Handler == 0 {
		e.Handler = time.Since(began)
	}
	defer func() {
		if p := recover(); p != nil {
			log.Error("Config.OnTaskEnd panicked", "panic", fmt.Sprint(p))
		}
	}()
	hook(e)
}

// maxOutputDepth is the deepest JSON Relais reads (its request bodies).
const maxOutputDepth = 10_000

// encodingReason says why outputs could not be encoded, in what is safe
// to log: a type (a channel, a function), a value JSON has no number for
// (NaN, ±Inf), the type whose MarshalJSON failed; never that method's own
// error, which may quote the values.
func encodingReason(err error) string {
	var ute *json.UnsupportedTypeError
	var uve *json.UnsupportedValueError
	var me *json.MarshalerError
	var mp *marshalPanic
	switch {
	case errors.As(err, &ute):
		return "unsupported type " + ute.Type.String()
	case errors.As(err, &uve):
		return "unsupported value " + uve.Str
	case errors.As(err, &me):
		return "MarshalJSON of " + me.Type.String() + " failed"
	case errors.As(err, &mp):
		return "a MarshalJSON or MarshalText method panicked"
	}
	return "unknown"
}

// marshalPanic is a handler's outputs whose MarshalJSON (or MarshalText)
// panicked: the task fails invalid_outputs, where the panic crashed the
// worker process (Go SDK QA). The stack locates the method (for the log,
// never the value, which may quote inputs).
type marshalPanic struct{ stack []byte }

func (p *marshalPanic) Error() string {
	return "a MarshalJSON or MarshalText method of the outputs panicked"
}

func encodeOutputs(outputs any) (_ json.RawMessage, err error) {
	if outputs == nil {
		return json.RawMessage("{}"), nil
	}
	defer func() {
		if recover() != nil {
			err = &marshalPanic{stack: debug.Stack()}
		}
	}()
	b, err := json.Marshal(outputs)
	if err != nil {
		return nil, err
	}
	if string(b) == "null" {
		return json.RawMessage("{}"), nil
	}
	if bytes.Contains(b, []byte("null")) && jsontree.CheckText(b, maxOutputDepth) == nil {
		return withoutNulls(b)
	}
	// Outputs with a duplicate key or an escaped lone surrogate (from a
	// json.RawMessage) go as they are, for Relais to refuse: decoding
	// them to drop nulls would keep one of the keys, or store U+FFFD.
	return b, nil
}

// withoutNulls drops the object members whose value is null, at any
// depth: no Relais type takes null, so a member a Go struct marshals as
// null (a nil slice, map or pointer without omitempty) is left out, which
// an optional field takes as absent, where null would fail the task for
// good (invalid_outputs). A required one is then reported missing.
func withoutNulls(b []byte) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	var drop func(v any)
	drop = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, m := range v {
				if m == nil {
					delete(v, k)
					continue
				}
				drop(m)
			}
		case []any:
			for _, m := range v {
				drop(m)
			}
		}
	}
	drop(v)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func violations(errs []FieldError) string {
	return "the outputs violate the contract: " + problemList(errs)
}

// problemList joins a problem's pointers and messages, which describe the
// contract or the JSON's form, never the values: safe to log and store.
func problemList(errs []FieldError) string {
	parts := make([]string, len(errs))
	for i, e := range errs {
		parts[i] = e.Path + ": " + e.Message
	}
	return strings.Join(parts, "; ")
}

// aboutOutputs reports whether a refusal's pointers all lie in the
// outputs: the handler's doing, which no retry of the report can mend.
func aboutOutputs(errs []FieldError) bool {
	for _, e := range errs {
		if e.Path != "/outputs" && !strings.HasPrefix(e.Path, "/outputs/") {
			return false
		}
	}
	return len(errs) > 0
}

// workerRequest is a body that names the worker only (a release, a
// settle token).
type workerRequest struct {
	WorkerID string `json:"worker_id"`
	Attempt  int32  `json:"attempt,omitempty"` // see completeRequest
}

// handBack hands t back at once without spending an attempt (a graceful
// shutdown). A Relais without the release route (before DESIGN §11)
// answers 404 or 405: it gets a retryable worker_shutdown failure without
// delay instead, which spends one. (An occurrence unknown to a newer Relais
// is 404 too; its fail is then refused alike, at no cost.)
func (r *run) handBack(t *Task, log *slog.Logger) {
	r.assigned.CompareAndDelete(t.ID, t)
	err := r.settle(t, "release", func(ctx context.Context) error {
		return t.wire.release(ctx, t.ID, workerRequest{WorkerID: r.w.cfg.WorkerID, Attempt: int32(t.Attempt)})
	}, log)
	var ae *APIError
	if errors.As(err, &ae) && (ae.Status == http.StatusNotFound || ae.Status == http.StatusMethodNotAllowed) {
		r.settleFail(t, failRequest{ErrorCode: codeWorkerShutdown, Message: "the worker shut down before the handler finished",
			Retryable: true, RetryDelay: isoduration.Format(0)}, log)
		return
	}
	if err != nil {
		r.logSettleError(log, "release", err)
		t.ended(unreported(err))
		return
	}
	log.Info("task released (the worker is shutting down)")
	t.ended(OutcomeReleased, "", nil)
}

// afterStreamEnded reports the outcome of a streamed task whose stream
// ended while its handler ran, if it succeeded and its task was not
// assigned again since (to this worker: its new attempt reports, and an
// outcome sent by worker id alone would settle it). A handler that failed
// or was cut short reports nothing: its task is handed back by the live
// replica that saw the stream end, or by its lock's expiry, the attempt
// spent, so that a task that kills its replica still ends. A refusal (the
// replica handed the task back, another worker may hold it) is logged as
// any refused outcome is; one Relais gave already, to the extension that
// tried to keep the lock, spares the report.
func (r *run) afterStreamEnded(t *Task, outputs any, err, cause error, log *slog.Logger) {
	if latest, ok := r.assigned.Load(t.ID); ok && latest.(*Task) != t {
		log.Info("the stream ended while the handler ran, and the task was assigned again since: its new attempt reports")
		t.ended(OutcomeLockLost, "", nil)
		return
	}
	if errors.Is(cause, errNotResumed) {
		// The next stream asked for it and Relais did not give it back:
		// it is Relais's again, or another worker's. Said when the handler
		// was cancelled (one line per event, not two); which of this and
		// the refused extension below came first was a race (a flaky
		// test).
		log.Debug("the handler of a task the next stream could not resume returned: its outcome is not reported")
		t.ended(OutcomeLockLost, "", nil)
		return
	}
	if err != nil {
		log.Info("the stream ended while the handler ran, which failed or was cut short: nothing reported (the task is handed back, or its lock expires)")
		t.ended(OutcomeLockLost, "", nil)
		return
	}
	if ae := (*APIError)(nil); errors.As(cause, &ae) && ae.Status == http.StatusConflict {
		// A live replica already said the lock is gone (the stream's end
		// handed the task back): a report could only be refused, three
		// more lines per task (verifier QA).
		log.Info("the stream ended while the handler ran, and Relais said the task is no longer this worker's: its outcome is not reported", "code", ae.Code)
		t.ended(OutcomeLockLost, "", nil)
		return
	}
	log.Info("the stream ended while the handler ran; reporting its outcome (its replica may have died with the lock held)")
	r.complete(t, outputs, log)
}

// settleFail reports a failure. The message goes to Relais, which scrubs
// protected values before storing it; it is not logged, because a
// handler's error text may quote its inputs.
func (r *run) settleFail(t *Task, f failRequest, log *slog.Logger) {
	// A failure must land whatever the handler's error holds: a refused
	// report would leave the task locked until its lock expires and then
	// run it again, although it failed, and maybe for good.
	f = f.repaired(r.w.cfg.WorkerID)
	f.Attempt = int32(t.Attempt)
	// "At most" is met by a budget that holds no more: Relais refuses
	// an attempts_left above it.
	f.AttemptsLeft = min(f.AttemptsLeft, int32(max(t.AttemptsLeft, 0)))
	var res failResult
	send := func(ctx context.Context) (err error) {
		res, err = t.wire.fail(ctx, t.ID, f)
		return err
	}
	err := r.settle(t, "fail", send, log)
	var ae *APIError
	if errors.As(err, &ae) && (ae.Status == http.StatusBadRequest || ae.Status == http.StatusUnprocessableEntity) {
		// What is left to refuse is the delay (above Relais's ceiling),
		// attempts_left (the budget lowered meanwhile below it: "at most"
		// is met) or something this SDK does not foresee: report the
		// failure plainly.
		switch {
		case boundOn(ae, "attempts_left"):
			f.AttemptsLeft = 0
		case ae.Code == "bound_exceeded":
			f.RetryDelay = ceilingOf(ae)
			log.Warn("failure's retry delay is above Relais's ceiling; reporting it with the ceiling", "detail", ae.Detail, "retry_delay", f.RetryDelay)
		default:
			f.RetryDelay = ""
			log.Warn("failure refused; reporting it without its delay", "code", ae.Code, "detail", ae.Detail)
			f.ErrorCode, f.Message = codeInvalidFailure, "the worker's failure report was refused ("+ae.Code+"): "+f.Message
		}
		err = r.settle(t, "fail", send, log)
	}
	if err != nil {
		r.logSettleError(log, "fail", err)
		t.ended(unreported(err))
		return
	}
	t.ended(OutcomeFailed, f.ErrorCode, nil)
	attrs := []any{"error_code", f.ErrorCode, "retryable", f.Retryable, "status", res.Status}
	if res.Status != "failed" {
		// Left for the retries to come: on a task that ended, "2 left"
		// would read as a retry that never comes.
		attrs = append(attrs, "attempts_left", res.AttemptsLeft)
	}
	if f.ErrorCode == codeInputsUndecodable {
		// The worker's own types are at fault, and every task of the
		// revision will fail alike: say why here, not only in Relais.
		// The message names fields and types, never a value.
		log.Error("task failed: its inputs do not decode into the handler's type", append(attrs, "detail", f.Message)...)
		return
	}
	log.Info("task failed", attrs...)
}

// repaired is f as workerID sends it: its code and message made what
// Relais accepts (see wireCode and wireMessage).
func (f failRequest) repaired(workerID string) failRequest {
	f.WorkerID = workerID
	f.ErrorCode, f.Message = wireCode(f.ErrorCode, f.Retryable), wireMessage(f.Message)
	return f
}

// maxWireMessage bounds a failure message sent to Relais, which keeps
// 2,000 bytes of it anyway: an error quoting a whole response body must not
// make the report too large to be accepted.
const maxWireMessage = 8 << 10

// wireMessage makes a handler's error text acceptable to Relais: without
// the NUL character it refuses, and bounded, cut on a character boundary.
func wireMessage(m string) string {
	m = storable(m)
	if len(m) > maxWireMessage {
		m = cutBytes(m, maxWireMessage) + "…"
	}
	return m
}

// storable is s without what Relais cannot store as text: NUL characters
// and bytes that are not UTF-8 become '?'.
func storable(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "?"), "\x00", "?")
}

// wireCode makes a handler's error code one Relais accepts (1 to 64
// letters, digits or _ . : -, starting with a letter or digit): accents
// are dropped, other characters become _ (one per character), and an
// empty code is the default for the kind of failure. A code is for
// routing and dashboards, so it is repaired rather than refused.
func wireCode(code string, retryable bool) string {
	var b strings.Builder
	// Decomposed, an accented letter is its letter and a mark: the mark
	// goes, the letter stays (ÉCHEC is ECHEC, not _CHEC).
	for _, c := range norm.NFD.String(code) {
		switch {
		case unicode.Is(unicode.Mn, c):
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == ':' || c == '-':
			b.WriteRune(c)
		default:
			b.WriteByte('_')
		}
	}
	code = strings.TrimLeft(b.String(), "_.:-")
	if len(code) > 64 {
		code = code[:64]
	}
	if code == "" {
		if retryable {
			return codeHandlerError
		}
		return codeBusinessError
	}
	return code
}

// settleRetried marks a refusal that followed earlier tries; lost is set
// when one of them went without an answer (the connection failed, a
// proxy's 502 or 504), so that it may well have settled the task already.
type settleRetried struct {
	err  error
	lost bool
}

// errReassigned stops retrying an outcome once its task was assigned to
// this worker again (its stream ended, and a new one got the next
// attempt): naming its attempt, the old outcome can only be refused now,
// and a Relais before the attempt member, which tells attempts apart by
// worker id alone, would take it for the new attempt, whose handler then
// runs anyway.
var errReassigned = errors.New("the task was assigned to this worker again; its new attempt reports")

// errUnextended says a lock expired while Relais could not be reached to
// extend it: Relais did not refuse it.
var errUnextended = errors.New("it expired without a successful extension")

// reassigned reports whether a newer attempt of t's occurrence was
// assigned to this worker since t.
func (r *run) reassigned(t *Task) bool {
	latest, ok := r.assigned.Load(t.ID)
	return ok && latest.(*Task) != t
}

func (e *settleRetried) Error() string { return e.err.Error() }
func (e *settleRetried) Unwrap() error { return e.err }

// settle sends an outcome with send, retrying network errors, 5xx and 429
// with backoff: Relais answers a replayed identical completion the same
// way, so resending is safe. The outcome is retried for as long as the
// task's lock lasts, streamed or fetched, so that finished work is not
// done again after an outage (a replica restarted, say); past the lock (or
// once it is lost) Relais would refuse it and may have handed the task to
// another worker, so the worker stops. A streamed task released before
// it started has no lock to go by: it is tried settleAttempts times. Any
// other answer is final.
func (r *run) settle(t *Task, action string, send func(ctx context.Context) error, log *slog.Logger) error {
	return r.settleIn(r.settleCtx, t, action, send, log)
}

// settleIn is settle within base: it gives up once base ends.
func (r *run) settleIn(base context.Context, t *Task, action string, send func(ctx context.Context) error, log *slog.Logger) error {
	w := r.w
	bo := w.settleBackoff
	held := t.held
	since := time.Now()
	lost := false
	for attempt := 1; ; attempt++ {
		if attempt > 1 && r.reassigned(t) {
			return errReassigned
		}
		timeout := settleTimeout
		if held != nil {
			// A request stuck on a dead connection must leave time for
			// another try before the lock ends; the first one is sent
			// even if the lock seems gone, to learn what Relais says.
			timeout = min(settleTimeout, max(time.Until(held.expiry(since))/3, time.Second))
		}
		ctx, cancel := context.WithTimeout(base, timeout)
		err := send(ctx)
		cancel()
		if err == nil {
			w.reached()
			if attempt > 1 {
				log.Info("reported to Relais after retrying", "action", action, "tries", attempt, "after", time.Since(since).Round(time.Millisecond).String())
			}
			return nil
		}
		if !r.w.transient(err) {
			if attempt > 1 {
				return &settleRetried{err: err, lost: lost}
			}
			return err
		}
		lost = lost || answerLost(err)
		d := max(bo.next(), retryAfter(err))
		if held != nil {
			left := time.Until(held.expiry(since))
			if left <= 0 || held.lost() {
				return err
			}
			d = min(d, left)
			log.Log(base, retryLevel(attempt), "reporting to Relais failed; retrying until the lock expires", "action", action, "err", err, "delay", d.String(), "lock_left", left.Round(time.Millisecond).String())
		} else {
			if attempt == settleAttempts {
				return err
			}
			log.Log(base, retryLevel(attempt), "reporting to Relais failed; retrying", "action", action, "err", err, "delay", d.String())
		}
		if !w.sleep(base, d) {
			return err
		}
	}
}

// retryLevel is the level a failed try is logged at: a warning for the
// first, debug for those after (an outage of a few seconds would write a
// line per try and outcome), the report that lands saying how many it took.
func retryLevel(try int) slog.Level {
	if try > 1 {
		return slog.LevelDebug
	}
	return slog.LevelWarn
}

// lockBound is what settle needs to know of a task's lock: until when, by
// the local clock, it lasts as far as the worker can tell (for an outcome
// reported since then), and whether it is lost.
type lockBound interface {
	expiry(since time.Time) time.Time
	lost() bool
}

// heldLock is a fetched task's lock: the latest extension keeps it.
type heldLock struct {
	taskCtx context.Context // the handler's: its cause says the lock was lost
	until   atomic.Int64    // unix nanoseconds
}

func newHeldLock(taskCtx context.Context, expiry time.Time) *heldLock {
	h := &heldLock{taskCtx: taskCtx}
	h.until.Store(expiry.UnixNano())
	return h
}

func (h *heldLock) extended(expiry time.Time) { h.until.Store(expiry.UnixNano()) }

// expiry is the latest extension's: it is known to hold, since.
func (h *heldLock) expiry(time.Time) time.Time { return time.Unix(0, h.until.Load()) }

// lost reports whether the lock was lost or the occurrence cancelled.
func (h *heldLock) lost() bool {
	cause := context.Cause(h.taskCtx)
	return errors.Is(cause, ErrLockLost) || errors.Is(cause, ErrCancelled)
}

func (r *run) logSettleError(log *slog.Logger, action string, err error) {
	var ae *APIError
	var retried *settleRetried
	switch {
	case errors.Is(err, errReassigned):
		log.Info("outcome not reported: the task was assigned to this worker again meanwhile, and its new attempt reports", "action", action)
	case errors.As(err, &retried) && retried.lost && errors.As(err, &ae) && ae.Status == http.StatusConflict:
		log.Info("outcome refused after a lost answer; the earlier request probably settled it", "action", action, "code", ae.Code)
	case errors.As(err, &ae) && ae.Status == http.StatusConflict:
		// Final: the lock is gone or the occurrence settled or cancelled
		// meanwhile; Relais has moved on without this outcome.
		log.Warn("outcome refused", "action", action, "code", ae.Code, "detail", ae.Detail)
	case errors.As(err, &ae) && !r.w.transient(err):
		log.Error("outcome refused", "action", action, "err", err)
	default:
		log.Error("outcome not reported; the lock will expire and the task run again", "action", action, "err", err)
		// A release lost loses no work: the handler never finished.
		if r.draining.Load() && action != "release" {
			r.unreported.Add(1)
		}
	}
}
