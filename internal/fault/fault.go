// Package fault is the vocabulary of errors Relais shows its users: a stable
// machine-readable code, a kind that transports map to a status, a detail for
// people, and every field problem with its JSON pointer. Domain packages
// return *Error; the HTTP layer renders it as problem+json (DESIGN §8).
package fault

import (
	"errors"
	"fmt"
	"time"
)

// Kind classifies an error the way a client must react to it.
type Kind int

// Kinds, each mapped to one HTTP status by the transport.
const (
	Internal           Kind = iota // a bug or an unavailable dependency; details are logged, not shown
	BadRequest                     // malformed request or a bound exceeded
	Unauthorized                   // missing or unknown credentials
	Forbidden                      // authenticated without the right role or grant
	NotFound                       // unknown, or invisible to the caller
	MethodNotAllowed               // an immutable resource
	Conflict                       // the state forbids it (stale lock, duplicate name)
	TooLarge                       // request body above the limit
	Unprocessable                  // well-formed but invalid against a contract
	TooManyRequests                // a bounded resource is full; retry later
	Unavailable                    // temporarily unable to serve
	Timeout                        // the request did not arrive in time
	PreconditionFailed             // the resource is not as the request's If-Match expected
)

// FieldError is one problem at a JSON pointer of the request.
type FieldError struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// Error is a user-facing error with a stable code.
type Error struct {
	Kind   Kind
	Code   string
	Detail string
	Errors []FieldError
	// RetryAfter, when positive, tells the client when to try again.
	RetryAfter time.Duration
	// Extra holds additional problem members (e.g. the field and ceiling of
	// bound_exceeded); keys must not collide with the standard ones.
	Extra map[string]any
	// Cause, when set, is the error behind this one: logged, never shown.
	Cause error
}

// Unwrap returns the cause, so errors.Is and errors.As see through e.
func (e *Error) Unwrap() error { return e.Cause }

func (e *Error) Error() string {
	if len(e.Errors) > 0 {
		return fmt.Sprintf("%s: %s (%d problems, first %s: %s)", e.Code, e.Detail, len(e.Errors), e.Errors[0].Path, e.Errors[0].Message)
	}
	return e.Code + ": " + e.Detail
}

// New returns an error of the given kind and code with a formatted detail.
func New(kind Kind, code, format string, args ...any) *Error {
	return &Error{Kind: kind, Code: code, Detail: fmt.Sprintf(format, args...)}
}

// WithErrors returns e carrying the field errors.
func (e *Error) WithErrors(errs []FieldError) *Error {
	e.Errors = errs
	return e
}

// As returns the *Error in err's chain, if any.
func As(err error) (*Error, bool) {
	var fe *Error
	ok := errors.As(err, &fe)
	return fe, ok
}

// HasCode reports whether err carries a fault with the code.
func HasCode(err error, code string) bool {
	fe, ok := As(err)
	return ok && fe.Code == code
}

// NotAnID refuses raw, given in a path as the id of a what, which is no
// UUID: 404 as an unknown id is (what cannot exist is not found), saying
// what an id looks like, since "123" or a key pasted in its place is the
// usual slip.
func NotAnID(what, raw string) *Error {
	return New(NotFound, "not_found", "%s %q not found: %s ids are UUIDs, as 0192f0c4-5d1e-7c3a-9b8e-2f4a6c8e0a1b", what, raw, what)
}

// BoundExceeded refuses a value above an operator ceiling (bounds are
// rejections, never clamps): 400 bound_exceeded naming field and ceiling
// (as written to the client), the problem at path (a body's pointer, or a
// query parameter's name).
func BoundExceeded(path, field string, ceiling any) *Error {
	fe := New(BadRequest, "bound_exceeded", "%s is above the ceiling %v", field, ceiling)
	fe.Errors = []FieldError{{Path: path, Message: fmt.Sprintf("must be at most %v", ceiling)}}
	fe.Extra = map[string]any{"field": field, "ceiling": ceiling}
	return fe
}
