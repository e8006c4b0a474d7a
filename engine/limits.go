package engine

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/relais/relais/contracts"
	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/isoduration"
)

// Bounds of free-text request fields, in bytes of UTF-8, each refused
// above with 400 naming the field. Names and keys are indexed, and
// PostgreSQL refuses an index row above about 2.7 KB (a 500 before these
// bounds); the others keep stored text to a size people write. Names with
// a pattern (definition and process keys, release and destination names,
// field and node names) are bounded by it.
const (
	MaxTokenName       = 200                       // a staff token's name
	MaxConsumerName    = 200                       // a consumer's name
	MaxBusinessKey     = 200                       // an instance's business_key
	MaxIdempotencyKey  = 200                       // the Idempotency-Key header of a start
	MaxReleaseNotes    = contracts.MaxReleaseNotes // a release's notes
	MaxDestinationURL  = 2_048                     // a destination's url, query included
	MaxHeaderName      = 200                       // a destination header's name
	MaxHeaderValue     = 8_192                     // a destination header's value
	MaxDestinationHdrs = 50                        // headers of one destination
	MinSigningSecret   = 32                        // a destination's signing secret, in bytes
	MaxSigningSecret   = 256
	MaxWorkerID        = 200 // a worker_id, on every protocol
)

// MinLockDuration is the shortest lock a fetch or an extension may ask
// for: a shorter one lapses before its worker's completion can arrive
// over a network, and each lapse spends an attempt.
const MinLockDuration = time.Second

// LockTooShort refuses a lock_duration below MinLockDuration, in the words
// every surface that takes one (a fetch, an extension) answers with.
var LockTooShort = fault.FieldError{Path: "/lock_duration", Message: "must be at least " + isoduration.Format(MinLockDuration) +
	": a shorter lock lapses before a completion can arrive, and each lapse spends an attempt"}

// WorkerIDProblem says what is wrong with a worker id, "" when nothing:
// every protocol (REST, the stream, the facade) takes 1 to MaxWorkerID
// bytes of UTF-8 without NUL, blank, surrounding white space or invisible
// characters, and names the problem at its own pointer.
func WorkerIDProblem(id string) string {
	switch {
	case id == "":
		return fmt.Sprintf("is required (1 to %d bytes of UTF-8, without NUL)", MaxWorkerID)
	case len(id) > MaxWorkerID:
		return fmt.Sprintf("is %d bytes long: at most %d bytes of UTF-8", len(id), MaxWorkerID)
	case strings.ContainsRune(id, 0) || !utf8.ValidString(id):
		return "must be UTF-8 without NUL"
	// Operators read and filter by worker id as by business key: an id
	// nobody could type in a filter names no worker to them.
	case strings.TrimSpace(id) == "":
		return "must not be blank: name the worker (its host or pod name, say)"
	case strings.TrimSpace(id) != id:
		return "must not begin or end with white space"
	case strings.ContainsFunc(id, Invisible):
		return "must not hold control or format characters"
	}
	return ""
}

// NameProblem says what is wrong with a consumer's or a staff token's
// name, or "": 1 to maxBytes bytes, not blank, without white space around
// it or control and format characters. The audit log shows a staff
// token's name as its actor, and filters by it exactly; the worker
// catalog and the console show a consumer's: a name nobody could read or
// type again names nobody (API client QA: "evil\nname\u202e" and a blank
// name were taken).
func NameProblem(name string, maxBytes int) string {
	switch {
	case name == "":
		return "is required"
	case len(name) > maxBytes:
		return fmt.Sprintf("is longer than %d bytes", maxBytes)
	case !utf8.ValidString(name):
		return "must be UTF-8"
	case strings.TrimSpace(name) == "":
		return "must not be blank"
	case strings.TrimSpace(name) != name:
		return "must not begin or end with white space"
	case strings.ContainsFunc(name, Invisible):
		return "must not hold control or format characters (a line break, a tab, a zero-width space, a direction mark)"
	}
	return ""
}

// tooLong is the problem of a free-text field over its documented maximum.
// Lengths are counted in bytes of UTF-8, the unit PostgreSQL's index rows
// are bounded in.
func tooLong(path string, maxBytes int) fault.FieldError {
	return fault.FieldError{Path: path, Message: fmt.Sprintf("is longer than %d bytes", maxBytes)}
}
