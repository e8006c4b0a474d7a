// Package pgfault recognizes the errors that mean PostgreSQL cannot be
// reached right now (the server is down, restarting, or the connection to
// it broke), as opposed to errors in what was asked of it. Relais answers
// those 503 database_unavailable with Retry-After, never 500 internal: the
// request was fine and will work again once the database is back.
package pgfault

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/relais/relais/internal/fault"
)

// RetryAfter is what clients are told to wait before trying again: long
// enough not to hammer a restarting server, short enough that a blip
// costs little.
const RetryAfter = 5 * time.Second

// Lost reports whether err says the database cannot be reached: a failed
// connect, a broken or timed-out connection, or a server that refuses
// sessions because it is shutting down, crashed or still starting.
func Lost(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		// A cancelled request is the caller's doing, not the database's.
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// Class 08 is connection exceptions; 57P01 admin shutdown, 57P02
		// crash shutdown, 57P03 cannot connect now (starting up or in
		// recovery). The server's state, not the request, is also behind
		// 53300 (too many connections), 53100 (disk full), class 28 met
		// opening a connection (a password rotated under a running
		// replica) and 25006 (a read-only server: a standby after a
		// failover). Not 53200 or 53400 (one statement's memory or temp
		// file limit), nor 57014 (a cancelled statement: most often its
		// client left): a request sent again would meet them again. Any
		// other server error is about the statement.
		var connectErr *pgconn.ConnectError
		switch c := pgErr.Code; {
		case strings.HasPrefix(c, "08"), c == "57P01", c == "57P02", c == "57P03", c == "53300", c == "53100", c == "25006":
			return true
		case strings.HasPrefix(c, "28"):
			return errors.As(err, &connectErr)
		}
		return false
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	switch {
	case errors.As(err, &connectErr), errors.As(err, &netErr), pgconn.Timeout(err):
		return true
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		// The server closed the connection under a statement.
		return true
	}
	// pgx reports a connection it already knows is dead with a bare
	// "conn closed" error that has no type of its own.
	return strings.Contains(err.Error(), "conn closed")
}

// CredentialsRefused reports whether err is the server refusing to open a
// session for the URL's role (class 28: a wrong password, a role that may
// not log in, no pg_hba.conf entry): it answered, so an operator looks at
// the credentials, not the network (SRE QA: a password rotated read
// "database unreachable").
func CredentialsRefused(err error) bool {
	pgErr, ok := errors.AsType[*pgconn.PgError](err)
	return ok && strings.HasPrefix(pgErr.Code, "28")
}

// TimedOut reports whether err is PostgreSQL cancelling a statement
// (57014: its statement_timeout, or an administrator's
// pg_cancel_backend) or giving up on a lock (55P03: its lock_timeout;
// Relais asks for no lock NOWAIT): the database too slow or too contended
// for the request right now, its transaction rolled back. Judged by code,
// not message: a server's lc_messages may be French. A request whose own
// context ended never gets here with a server error: pgx answers it with
// the context's error.
func TimedOut(err error) bool {
	pgErr, ok := errors.AsType[*pgconn.PgError](err)
	return ok && (pgErr.Code == "57014" || pgErr.Code == "55P03") && !errors.Is(err, context.Canceled)
}

// UnavailableCode is the problem code of a request answered while the
// database could not be reached.
const UnavailableCode = "database_unavailable"

// Unreachable reports whether err says PostgreSQL could not be reached,
// rather than anything about the statement or the data: the
// database_unavailable fault, or the lost connection itself. Waiting may
// cure it.
func Unreachable(err error) bool {
	if fe, ok := fault.As(err); ok {
		return fe.Code == UnavailableCode
	}
	return Lost(err)
}

// Unavailable returns the 503 database_unavailable fault for err, which
// it keeps as the cause for the log.
func Unavailable(err error) *fault.Error {
	detail := "the database cannot be reached right now; try again shortly (a write answered so may or may not have been applied: repeat it as it was, with its Idempotency-Key or request_id, and it is applied once)"
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.Code == "25006" {
		// Reachable, but a standby: nothing was written.
		detail = "the database takes no writes right now (a standby, or a failover under way); try again shortly: nothing was written"
	} else if TimedOut(err) {
		detail = "the database did not complete the request in time (its statement_timeout or lock_timeout): nothing was written; try again shortly"
	}
	fe := fault.New(fault.Unavailable, UnavailableCode, "%s", detail)
	fe.RetryAfter = RetryAfter
	fe.Cause = WithoutTLSAttempt(err)
	return fe
}

// WithoutTLSAttempt is err without the line of its TLS attempt when a
// plain attempt followed (sslmode=prefer, the default, against a server
// without TLS): "server refused TLS connection" above a refused password,
// or above a server starting up in an outage, sends a DBA looking at TLS.
// errors.As and Is still see err.
func WithoutTLSAttempt(err error) error {
	if err == nil {
		return nil
	}
	lines := strings.Split(err.Error(), "\n")
	kept := slices.DeleteFunc(slices.Clone(lines), func(l string) bool { return strings.Contains(l, "tls error: server refused TLS connection") })
	if len(kept) == len(lines) || len(kept) < 2 {
		return err // no such line, or nothing but it (sslmode=require)
	}
	return connectFailure{err: err, msg: strings.Join(kept, "\n")}
}

// connectFailure is an error said otherwise.
type connectFailure struct {
	err error
	msg string
}

func (c connectFailure) Error() string { return c.msg }
func (c connectFailure) Unwrap() error { return c.err }

// ErrUnresponsive is the cause a request's context is cancelled with when
// the replica's probe stops getting answers from PostgreSQL: a server that
// hangs (a frozen machine, a network black hole) rather than refusing
// connections would otherwise hold the request until it answers again.
var ErrUnresponsive = errors.New("PostgreSQL stopped answering this replica's probe")

// CutShort returns the 503 database_unavailable fault when ctx was
// cancelled because the database stopped answering (ErrUnresponsive), and
// nil otherwise (a client that left, a context still live): whatever error
// the request's work returned then (a cancelled statement) is answered as
// that fault.
func CutShort(ctx context.Context) error {
	if cause := context.Cause(ctx); ctx.Err() != nil && errors.Is(cause, ErrUnresponsive) {
		return Unavailable(cause)
	}
	return nil
}
