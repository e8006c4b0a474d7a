package worker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Causes of a handler's context cancellation, read with context.Cause.
var (
	// ErrLockLost means the worker no longer holds the occurrence: Relais
	// refused an extension (lock_expired, locked_by_other_worker,
	// not_reserved, already_settled, or the occurrence became invisible),
	// or the lock's expiry passed without a successful extension. Another
	// worker may already be working on it, so the handler must stop and
	// nothing is settled.
	ErrLockLost = errors.New("worker: lock on the occurrence lost")
	// ErrCancelled means the occurrence was cancelled (its process
	// instance was stopped) or its deadline passed: the work is no longer
	// wanted. On a stream it is learned at once; when long polling, at the
	// next extension.
	ErrCancelled = errors.New("worker: occurrence cancelled")
	// ErrAlreadyDeferred is the refusal of a Task.Defer of a task that is
	// deferred already, or being deferred by another call.
	ErrAlreadyDeferred = errors.New("worker: the task is already deferred")
	// ErrTooLateToDefer is the refusal of a Task.Defer made once the
	// task's handler returned: its outcome was reported.
	ErrTooLateToDefer = errors.New("worker: the task's outcome was reported when its handler returned: too late to defer it")
	// ErrShutdownTimeout means Run's context ended and the handler was
	// still running after Config.ShutdownTimeout.
	ErrShutdownTimeout = errors.New("worker: shutdown timeout")
	// ErrOutcomesUnreported means Run shut down after some handler's
	// outcome could not be reported (Relais unreachable until the task's
	// lock expired): the task will run again.
	ErrOutcomesUnreported = errors.New("worker: outcomes not reported")
	// ErrHandlerTimeout means the handler ran longer than
	// Config.HandlerTimeout; the task is failed (retryable) with code
	// handler_timeout.
	ErrHandlerTimeout = errors.New("worker: handler timeout")
	// ErrUnanswered means a CompleteDeferred, FailDeferred or
	// IssueSettleToken gave up when its context ended while Relais could
	// not be reached or answered 5xx or 429: the request may or may not
	// have landed. The error also wraps the context's error and the last
	// attempt's (an *APIError for a 5xx). Sending the same outcome again
	// is safe: Relais answers a repeat as it answered the first.
	ErrUnanswered = errors.New("worker: no answer from Relais before the context ended")
)

// BusinessError is a non-retryable failure with a business code (for
// example INVALID_COUNTRY): retrying the same inputs cannot succeed, so
// the occurrence fails terminally and the process's error handling takes
// over. Relais may route on Code, so keep it stable; Message is for
// people. Codes are 1 to 64 letters, digits or _ . : - beginning with a
// letter or digit; others are repaired before they are sent, so that the
// failure always lands: accents are dropped (ÉCHEC becomes ECHEC), other
// characters become _, those before the first letter or digit are
// removed, and the rest is cut at 64. An empty code is sent as
// business_error.
type BusinessError struct {
	Code    string
	Message string
	// Err is the error the message wraps, if any (see Fail); it is not
	// sent, Message is.
	Err error
}

// Fail returns a *BusinessError with the code and a message formatted as
// fmt.Errorf does: a %w verb wraps its error, which errors.Is and
// errors.As then find through the *BusinessError (Fail("NO_SUCH_CUSTOMER",
// "customer %s: %w", id, err) with err a sql.ErrNoRows).
func Fail(code, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	be := &BusinessError{Code: code, Message: err.Error()}
	switch w := err.(type) {
	case interface{ Unwrap() error }:
		be.Err = w.Unwrap()
	case interface{ Unwrap() []error }:
		be.Err = errors.Join(w.Unwrap()...)
	}
	return be
}

func (e *BusinessError) Error() string { return e.Code + ": " + e.Message }

// Unwrap returns the error Fail's format wrapped (%w), if any.
func (e *BusinessError) Unwrap() error { return e.Err }

// RetryableError is a retryable failure with its own error code and,
// when Delay is positive, the time to wait before the next attempt (zero
// keeps the occurrence's retry_delay policy). Any other error a handler
// returns is retryable too, with code handler_error and the policy delay.
type RetryableError struct {
	Code  string
	Delay time.Duration
	// AttemptsLeft, when positive, lowers the attempts the occurrence
	// has left after this one to at most it ("try once more at most":
	// 1); it never raises them, and zero keeps the budget (return Fail
	// for none).
	AttemptsLeft int
	Err          error
}

// Retry returns a *RetryableError. An empty code means handler_error; a
// delay of zero or less keeps the occurrence's retry_delay policy. A
// delay above Relais's ceiling (RELAIS_PULL_MAX_RETRY_DELAY, a day by
// default) is refused by Relais, and the failure is then reported with
// the ceiling instead (the occurrence's policy delay if the refusal names
// none).
func Retry(code string, delay time.Duration, err error) error {
	return &RetryableError{Code: code, Delay: delay, Err: err}
}

func (e *RetryableError) Error() string {
	if e.Err == nil {
		return e.code()
	}
	return e.code() + ": " + e.Err.Error()
}

// Unwrap returns the underlying error.
func (e *RetryableError) Unwrap() error { return e.Err }

func (e *RetryableError) code() string {
	if e.Code == "" {
		return codeHandlerError
	}
	return e.Code
}

// FieldError is one problem at a JSON pointer, as Relais reports it.
type FieldError struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// String is the problem as a log line shows it: its pointer, then what
// is wrong there (a log showed Go's {Path:… Message:…}).
func (f FieldError) String() string { return f.Path + ": " + f.Message }

// APIError is an error answer from Relais (a problem+json document, or
// any other non-2xx response, whose Code is then empty). Use errors.As to
// get it from the errors this package returns.
type APIError struct {
	// Status is the HTTP status (a worker stream's refusal is given the
	// status its REST route answers).
	Status int
	// Code is the problem's stable code (docs/api.md, Problem codes):
	// lock_expired, already_settled, not_granted, … Match it, not Detail.
	Code string
	// Detail says what happened, in words meant for a person.
	Detail string
	// Errors point at the members of the request that were refused.
	Errors []FieldError
	// RetryAfter is the server's Retry-After, when it sent one.
	RetryAfter time.Duration
	// Extra holds the problem's non-standard members, such as the field
	// and ceiling of bound_exceeded.
	Extra map[string]any
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "relais: %d", e.Status)
	if e.Code != "" {
		b.WriteString(" " + e.Code)
	} else {
		b.WriteString(" " + http.StatusText(e.Status))
	}
	if e.Detail != "" {
		b.WriteString(": " + e.Detail)
	}
	for i, fe := range e.Errors {
		if i == 3 {
			fmt.Fprintf(&b, " (and %d more)", len(e.Errors)-i)
			break
		}
		fmt.Fprintf(&b, "; %s: %s", fe.Path, fe.Message)
	}
	return b.String()
}

// transient is the package's transient, and a 401 too when the token is
// read for each request (Config.TokenFunc): the next read may give the
// rotated token.
func (w *Worker) transient(err error) bool {
	if w.cfg.TokenFunc != nil {
		var ae *APIError
		if errors.As(err, &ae) && ae.Status == http.StatusUnauthorized {
			return true
		}
	}
	return transient(err)
}

// token is the token for a request.
func (w *Worker) token(ctx context.Context) (string, error) {
	if w.cfg.TokenFunc == nil {
		return w.cfg.Token, nil
	}
	tok, err := w.cfg.TokenFunc(ctx)
	if err == nil {
		tok, err = cleanToken(tok)
	}
	if err != nil {
		return "", &tokenError{err}
	}
	return tok, nil
}

// tokenError is TokenFunc's failure: retried as a network error is, but
// said as the worker's own (Go SDK QA: prefixed "relais:", it read as
// the server's answer, which was never asked).
type tokenError struct{ err error }

func (e *tokenError) Error() string {
	return "worker: TokenFunc gave no token (retried, with backoff, until it does): " + e.err.Error()
}
func (e *tokenError) Unwrap() error { return e.err }

// cleanToken trims the white space around a token (a file's last newline:
// no token has any) and refuses one that is empty or holds a character an
// HTTP header cannot carry, which net/http would refuse on every request
// as if Relais could not be reached.
func cleanToken(tok string) (string, error) {
	tok = strings.TrimSpace(tok)
	if tok == "" {
		return "", errors.New("the token is empty")
	}
	if i := strings.IndexFunc(tok, func(r rune) bool { return r <= ' ' || r >= 0x7f }); i >= 0 {
		r, _ := utf8.DecodeRuneInString(tok[i:])
		return "", fmt.Errorf("the token holds %q at byte %d, which no token has and an HTTP header cannot carry", r, i)
	}
	return tok, nil
}

// transient reports whether a request that failed with err may succeed
// if sent again: network trouble, server errors and explicit throttling.
// Anything else is the server's final word on that request.
func transient(err error) bool {
	var ae *APIError
	if !errors.As(err, &ae) {
		return true
	}
	if ae.Status == http.StatusNotImplemented || ae.Status == http.StatusHTTPVersionNotSupported {
		// Relais never answers them: a server that is not Relais (a
		// wrong URL) will answer the same to every try.
		return false
	}
	return ae.Status >= 500 || ae.Status == http.StatusTooManyRequests || ae.Status == http.StatusRequestTimeout
}

// answerLost reports whether a failed try of a settlement may have
// reached Relais and been applied: no answer came back (the connection
// failed or timed out), or a proxy answered for it (502, 504). Relais's
// own refusals (401, 429, 503 and its other answers) applied nothing.
func answerLost(err error) bool {
	var ae *APIError
	if !errors.As(err, &ae) {
		return true
	}
	return ae.Status == http.StatusBadGateway || ae.Status == http.StatusGatewayTimeout
}

func retryAfter(err error) time.Duration {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.RetryAfter
	}
	return 0
}

func apiCode(err error) string {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Code
	}
	return ""
}

// boundOn reports whether ae is a bound_exceeded refusal of the member
// field.
func boundOn(ae *APIError, field string) bool {
	if ae.Code != "bound_exceeded" {
		return false
	}
	return slices.ContainsFunc(ae.Errors, func(f FieldError) bool { return f.Path == "/"+field }) || ae.Extra["field"] == field
}
