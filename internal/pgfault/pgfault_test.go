package pgfault

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/relais/relais/internal/fault"
)

func TestLost(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"connection failure", &pgconn.PgError{Code: "08006"}, true},
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, true},
		{"crash shutdown", &pgconn.PgError{Code: "57P02"}, true},
		{"cannot connect now", &pgconn.PgError{Code: "57P03"}, true},
		{"query cancelled", &pgconn.PgError{Code: "57014"}, false},
		{"too many connections", &pgconn.PgError{Code: "53300"}, true},
		{"disk full", &pgconn.PgError{Code: "53100"}, true},
		{"password refused on a new connection", &pgconn.ConnectError{Config: &pgconn.Config{}}, true},
		{"a role refused outside a connect", &pgconn.PgError{Code: "28000"}, false},
		{"out of memory in one statement", &pgconn.PgError{Code: "53200"}, false},
		{"temp file limit of one statement", &pgconn.PgError{Code: "53400"}, false},
		{"read-only server", &pgconn.PgError{Code: "25006"}, true},
		{"lock timeout", &pgconn.PgError{Code: "55P03"}, false},
		{"serialization failure", &pgconn.PgError{Code: "40001"}, false},
		{"unique violation", fmt.Errorf("engine: x: %w", &pgconn.PgError{Code: "23505"}), false},
		{"dial refused", fmt.Errorf("engine: x: %w", &net.OpError{Op: "dial", Err: errors.New("connection refused")}), true},
		{"unexpected EOF", fmt.Errorf("engine: x: %w", io.ErrUnexpectedEOF), true},
		{"conn closed", errors.New("engine: x: conn closed"), true},
		{"client cancelled", fmt.Errorf("engine: x: %w", context.Canceled), false},
		{"anything else", errors.New("stored revision does not parse"), false},
	} {
		if got := Lost(c.err); got != c.want {
			t.Errorf("%s: Lost(%v) = %v; want %v", c.name, c.err, got, c.want)
		}
	}
}

func TestUnavailableKeepsTheCause(t *testing.T) {
	t.Parallel()
	cause := io.ErrUnexpectedEOF
	fe := Unavailable(cause)
	if fe.Kind != fault.Unavailable || fe.Code != "database_unavailable" || fe.RetryAfter <= 0 || !errors.Is(fe, cause) {
		t.Errorf("Unavailable = %+v; want a 503 fault with Retry-After that wraps its cause", fe)
	}
}

// A request cut short because PostgreSQL stopped answering is answered 503
// database_unavailable; one whose client left gets no answer at all.
func TestCutShort(t *testing.T) {
	t.Parallel()
	gone, leave := context.WithCancel(context.Background())
	leave()
	if err := CutShort(gone); err != nil {
		t.Errorf("a client that left: %v, want no error", err)
	}
	if err := CutShort(context.Background()); err != nil {
		t.Errorf("a live request: %v, want no error", err)
	}
	cut, stop := context.WithCancelCause(context.Background())
	stop(ErrUnresponsive)
	if fe, ok := fault.As(CutShort(cut)); !ok || fe.Code != UnavailableCode || fe.RetryAfter <= 0 {
		t.Errorf("a request cut short: %v, want 503 database_unavailable with Retry-After", CutShort(cut))
	}
}

// A read-only server's refusal says so: reachable, nothing written.
func TestUnavailableOnAStandbySaysNothingWasWritten(t *testing.T) {
	t.Parallel()
	fe := Unavailable(fmt.Errorf("insert: %w", &pgconn.PgError{Code: "25006"}))
	if fe.Code != UnavailableCode || !strings.Contains(fe.Detail, "takes no writes") {
		t.Errorf("Unavailable(25006) = %+v", fe)
	}
}

// A statement the server cancelled at its statement_timeout or
// lock_timeout (set in a URL, or a role's default) is the database too
// slow for the request, answered 503 saying nothing was written; one
// cancelled because its client left is not.
func TestTimedOut(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&pgconn.PgError{Code: "57014", Message: "canceling statement due to statement timeout"}, true},
		{fmt.Errorf("engine: start: %w", &pgconn.PgError{Code: "55P03", Message: "canceling statement due to lock timeout"}), true},
		// A server in French words it its own way: the code says it.
		{&pgconn.PgError{Code: "57014", Message: "annulation de la requête à cause du délai écoulé pour l'exécution de l'instruction"}, true},
		{errors.New("statement timeout"), false},
		{&pgconn.PgError{Code: "23505", Message: "duplicate key value violates unique constraint"}, false},
	} {
		if got := TimedOut(c.err); got != c.want {
			t.Errorf("TimedOut(%v) = %v, want %v", c.err, got, c.want)
		}
		if !c.want {
			continue
		}
		if fe := Unavailable(c.err); fe.Code != UnavailableCode || !strings.Contains(fe.Detail, "nothing was written") || !strings.Contains(fe.Detail, "statement_timeout") {
			t.Errorf("Unavailable(%v) = %v, want database_unavailable saying nothing was written", c.err, fe)
		}
	}
}

// A refused password under sslmode=prefer (the default) against a server
// without TLS is said without the TLS attempt's line, which sent a DBA
// looking at TLS; a TLS refusal alone (sslmode=require) stays. So is the
// cause of a database_unavailable refusal (SRE QA: the outage's warnings
// pointed at TLS).
func TestRefusalsLeaveOutTheTLSAttempt(t *testing.T) {
	t.Parallel()
	both := errors.New("failed to connect to `user=app database=relais`:\n\t127.0.0.1:5432 (127.0.0.1): tls error: server refused TLS connection\n\t127.0.0.1:5432 (127.0.0.1): failed SASL auth: FATAL: password authentication failed for user \"app\" (SQLSTATE 28P01)")
	got := WithoutTLSAttempt(both)
	if strings.Contains(got.Error(), "TLS") || !strings.Contains(got.Error(), "password authentication failed") || !errors.Is(got, both) {
		t.Errorf("prefer: %q", got)
	}
	alone := errors.New("failed to connect to `user=app database=relais`:\n\t127.0.0.1:5432 (127.0.0.1): tls error: server refused TLS connection")
	if got := WithoutTLSAttempt(alone); got != alone {
		t.Errorf("require: %q, want it as it was", got)
	}
}

func TestUnavailableCauseLeavesOutTheTLSAttempt(t *testing.T) {
	t.Parallel()
	both := errors.New("failed to connect to `user=app database=relais`:\n\t127.0.0.1:5432 (127.0.0.1): tls error: server refused TLS connection\n\t127.0.0.1:5432 (127.0.0.1): server error: FATAL: the database system is starting up (SQLSTATE 57P03)")
	if got := Unavailable(both).Cause; strings.Contains(got.Error(), "TLS") || !errors.Is(got, both) {
		t.Errorf("cause %q, want the starting server alone", got)
	}
}
