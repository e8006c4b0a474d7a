package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/relais/relais/internal/isoduration"
)

// Deferral is what Relais answered a Defer: the occurrence waits, without
// a lock, to be settled by id before its deadline. DeadlineAt is nil when
// the node's policy has no deadline.
type Deferral struct {
	DeferredAt time.Time  `json:"deferred_at"`
	DeadlineAt *time.Time `json:"deadline_at"`
}

type deferRequest struct {
	WorkerID string `json:"worker_id"`
	Reason   string `json:"reason"`
	Attempt  int32  `json:"attempt,omitempty"` // see completeRequest
}

// Defer hands the task over to be settled later (DESIGN §11): for work
// that ends elsewhere, a person's decision or a partner's callback. The
// occurrence is deferred at once, its lock given up: no attempt runs out
// and nothing retries it; the policy's deadline still applies and a stop
// still cancels it. Any worker of the same consumer then settles it by id
// with CompleteDeferred or FailDeferred, and IssueSettleToken gives a
// front end the right to settle this occurrence and nothing else.
//
// Call it from the task's handler, before it returns; once it returned,
// Defer is refused (its outcome was reported). What the handler returns
// after a successful Defer is not reported (a warning is logged if it is
// an outcome), and the task no longer depends on its lock: on a stream,
// neither a Cancellation of its lock nor the stream's end cancels the
// handler's context after it. The call is retried through an outage for
// as long as the task's lock lasts or until ctx ends. On an error the task
// is still the handler's, which returns its outcome as usual (and if the
// lock was lost meanwhile, the handler's context says so and nothing is
// reported). The reason (at most 500 bytes: a longer one is cut on a
// character) is shown to operators, protected values scrubbed.
func (t *Task) Defer(ctx context.Context, reason string) (Deferral, error) {
	c := t.ctl
	if c == nil || c.run == nil && c.deferTo == nil {
		return Deferral{}, errors.New("worker: Defer is for the handler running the task (a unit test's Task takes WithDefer)")
	}
	c.mu.Lock()
	switch {
	case c.inFlight != nil:
		c.mu.Unlock()
		return Deferral{}, deferRefusal(ErrAlreadyDeferred, t, "another call is deferring it")
	case c.state == deferDone:
		c.mu.Unlock()
		return Deferral{}, deferRefusal(ErrAlreadyDeferred, t, "")
	case c.state == deferTooLate:
		c.mu.Unlock()
		return Deferral{}, deferRefusal(ErrTooLateToDefer, t, "")
	}
	c.inFlight = make(chan struct{})
	c.mu.Unlock()

	reason = cutBytes(storable(reason), maxDeferReason)
	var d Deferral
	var err error
	var log *slog.Logger
	if c.deferTo != nil {
		d, err = c.deferTo(ctx, reason)
	} else {
		r := c.run
		log = r.w.log.With(taskAttrs(t)...)
		err = r.settleIn(ctx, t, "defer", func(ctx context.Context) (err error) {
			d, err = t.wire.deferTask(ctx, t.ID, deferRequest{WorkerID: r.w.cfg.WorkerID, Reason: reason, Attempt: int32(t.Attempt)})
			return err
		}, log)
	}
	c.mu.Lock()
	if err == nil {
		c.state = deferDone
	}
	close(c.inFlight)
	c.inFlight = nil
	c.mu.Unlock()
	if err != nil {
		return Deferral{}, err
	}
	if c.deferTo != nil {
		return d, nil // a unit test's: no lock to let go of
	}
	if c.stopKeeping != nil {
		c.stopKeeping()
	}
	if c.forget != nil {
		c.forget()
	}
	log.Info("task deferred", "deadline_at", d.DeadlineAt)
	return d, nil
}

// deferRefusal is err about t, with why: "(task 0193…: why)", the task
// left out for a unit test's Task without an id.
func deferRefusal(err error, t *Task, why string) error {
	var said []string
	if t.ID != "" {
		said = append(said, "task "+t.ID)
	}
	if why != "" {
		said = append(said, why)
	}
	if len(said) == 0 {
		return err
	}
	return fmt.Errorf("%w (%s)", err, strings.Join(said, ": "))
}

// WithDefer makes t, a Task a unit test built by hand, take Defer
// without a server: fn is called in Relais's place with the reason cut to
// 500 bytes as Relais cuts it (Relais also scrubs protected values from
// it, which a double cannot), and answers the Deferral, or
// the error to test (an *APIError, ErrLockLost). As on a worker, a
// second Defer after one that succeeded is refused (ErrAlreadyDeferred).
// It returns t; a Task the worker delivers ignores it.
func (t *Task) WithDefer(fn func(ctx context.Context, reason string) (Deferral, error)) *Task {
	if t.ctl == nil {
		t.ctl = &taskControl{}
	}
	if t.ctl.run == nil {
		t.ctl.deferTo = fn
	}
	return t
}

// CompleteDeferred completes a deferred occurrence by id with outputs
// (encoded as the handler's are), as worker WorkerID+"~deferred" (not
// WorkerID: an outcome resent after a lost answer could otherwise land on
// a later attempt this very worker took, and Relais would take it for
// that attempt's). Relais answers a repeated identical completion as it
// answered the first, so the call retries network errors, 5xx and 429 with
// backoff until ctx ends (then the error wraps ErrUnanswered and ctx's
// error: it may have landed). A refusal is an *APIError: 422 invalid_outputs
// with every pointer, 409 already_settled when it was settled otherwise,
// 409 deadline_exceeded past its deadline, 409 locked_by_other_worker or
// not_reserved when it is not deferred (a worker holds it, or it waits to
// be offered), 404 for an id Relais does not know.
//
// A Go front end holding a settle token (IssueSettleToken) uses it the
// same way: a Worker made with that token as Config.Token, never Run,
// completes or fails the one occurrence the token is for.
func (w *Worker) CompleteDeferred(ctx context.Context, occurrenceID string, outputs any) error {
	body, err := encodeOutputs(outputs)
	if err != nil {
		return fmt.Errorf("worker: encoding the outputs of %s: %w", occurrenceID, err)
	}
	req := completeRequest{WorkerID: w.settlerID(), Outputs: body}
	return w.retried(ctx, "complete", func(ctx context.Context) error {
		return w.post(ctx, occurrencePath(occurrenceID, "complete"), req, nil)
	})
}

// FailDeferred fails a deferred occurrence by id with err, read as a
// handler's error is: a Fail error is a business failure (not retried), a
// Retry error is retried after its delay (reported without it if Relais
// refuses the delay), any other error is retried. It retries and refuses
// as CompleteDeferred does.
func (w *Worker) FailDeferred(ctx context.Context, occurrenceID string, err error) error {
	if err == nil {
		return errors.New("worker: FailDeferred needs the failure's error")
	}
	f := failureOf(err).repaired(w.settlerID())
	send := func(ctx context.Context) error { return w.post(ctx, occurrencePath(occurrenceID, "fail"), f, nil) }
	err = w.retried(ctx, "fail", send)
	var ae *APIError
	if errors.As(err, &ae) && boundOn(ae, "attempts_left") {
		// The budget holds fewer already: "at most" is met.
		f.AttemptsLeft = 0
		err = w.retried(ctx, "fail", send)
	}
	if errors.As(err, &ae) && ae.Code == "bound_exceeded" && f.RetryDelay != "" {
		// A delay above Relais's ceiling: the failure is reported with
		// the ceiling, as a handler's is.
		f.RetryDelay = ceilingOf(ae)
		w.log.Warn("failure's retry delay is above Relais's ceiling; reporting it with the ceiling", "occurrence", occurrenceID, "detail", ae.Detail, "retry_delay", f.RetryDelay)
		err = w.retried(ctx, "fail", send)
	}
	return err
}

// ceilingOf is the ceiling a bound_exceeded refusal names, as a retry
// delay: its ceiling member (REST's PT24H, a stream's 86400s), or the end
// of its detail from a server whose stream problem had no ceiling member
// ("... above the ceiling 86400s"). A delay is clamped to it rather than
// dropped: the occurrence's policy delay may be seconds where a day was
// asked for, and a worker backing off a rate-limited service would hammer
// it. It is "" (the policy's delay) when the refusal names none.
func ceilingOf(ae *APIError) string {
	s, _ := ae.Extra["ceiling"].(string)
	if s == "" {
		if i := strings.LastIndex(ae.Detail, "ceiling "); i >= 0 {
			s, _, _ = strings.Cut(ae.Detail[i+len("ceiling "):], " ")
		}
	}
	d, err := isoduration.Parse(s)
	if err != nil {
		if d, err = time.ParseDuration(s); err != nil {
			return ""
		}
	}
	if d <= 0 {
		return ""
	}
	return isoduration.Format(d)
}

// settlerID is the worker id a Worker settles deferred occurrences with:
// its own, marked. With its own alone, an outcome resent after a lost
// answer could land after this very worker took the occurrence again (a
// retried failure), and Relais would take it for that new attempt's
// outcome; and CompleteDeferred could settle a task its own handler holds.
func (w *Worker) settlerID() string {
	const mark = "~deferred"
	return cutBytes(w.cfg.WorkerID, maxWorkerID-len(mark)) + mark
}

// Bounds of what Relais accepts, in bytes.
const (
	maxWorkerID    = 200
	maxDeferReason = 500
)

// cutBytes cuts s to at most n bytes, on a character boundary.
func cutBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// SettleToken is a token that settles one deferred occurrence, and
// nothing else, until it expires (its deadline, or 30 days at most): for a
// front end that must not hold the consumer's token. Relais shows it once.
type SettleToken struct {
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
}

// IssueSettleToken issues a settle token for a deferred occurrence. One
// that is not deferred is a 409: not_deferred while this worker holds it,
// locked_by_other_worker while another does, not_reserved while it waits
// to be offered, already_settled once settled; deadline_exceeded past its
// deadline. Each call issues a new
// token; network errors, 5xx and 429 are retried until ctx ends (then the
// error wraps ErrUnanswered).
func (w *Worker) IssueSettleToken(ctx context.Context, occurrenceID string) (SettleToken, error) {
	var tok SettleToken
	err := w.retried(ctx, "settle-token", func(ctx context.Context) error {
		return w.post(ctx, occurrencePath(occurrenceID, "settle-token"), workerRequest{WorkerID: w.cfg.WorkerID}, &tok)
	})
	return tok, err
}

// retried sends with send until it is answered, retrying network errors,
// 5xx and 429 with backoff, each request bounded by settleTimeout, until
// ctx ends.
func (w *Worker) retried(ctx context.Context, action string, send func(ctx context.Context) error) error {
	bo := w.settleBackoff
	for try := 1; ; try++ {
		rctx, cancel := context.WithTimeout(ctx, settleTimeout)
		err := send(rctx)
		cancel()
		if err == nil || !w.transient(err) {
			return err
		}
		if ctx.Err() != nil {
			return unanswered(ctx, action, err)
		}
		d := max(bo.next(), retryAfter(err))
		w.log.Log(ctx, retryLevel(try), "a request about a deferred occurrence failed; retrying", "action", action, "err", err, "delay", d.String())
		if !w.sleep(ctx, d) {
			return unanswered(ctx, action, err)
		}
	}
}

// unanswered is what retried returns when ctx ends before an answer:
// ErrUnanswered, ctx's error and the last attempt's, so that a caller
// tells "no answer" from a refusal (an *APIError alone).
func unanswered(ctx context.Context, action string, last error) error {
	return fmt.Errorf("%w (%s): %w; last attempt: %w", ErrUnanswered, action, context.Cause(ctx), last)
}
