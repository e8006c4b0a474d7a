package server

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/relais/relais/internal/pgfault"
)

// databaseGate cuts short the requests that wait on a PostgreSQL that
// stopped answering the replica's probe, and those that arrive while it
// gets no answer: their contexts are cancelled with
// pgfault.ErrUnresponsive, so that their statements fail at once and they
// are answered 503 database_unavailable (see pgfault.CutShort), each in
// its protocol's format. A server that refuses connections fails each
// statement at once anyway; one that hangs (a frozen machine, a network
// black hole) would hold every request until it answers again, however
// long that takes. A request that needs no database (a cached token, a
// static document) is served as usual.
//
// Only a request in flight for longer than the probe's own timeout is cut
// at a verdict (each failed probe gives one, every few seconds): one that
// began a moment before may be a statement of a database that is merely
// slow, and cutting a COMMIT short leaves its outcome unknown to the
// client.
type databaseGate struct {
	down atomic.Bool
	// patience is how long a request waits before a verdict may cut it.
	patience time.Duration

	mu       sync.Mutex
	inflight map[*gated]struct{}
}

// gated is one request in flight.
type gated struct {
	cancel context.CancelCauseFunc
	began  time.Time
}

func newDatabaseGate() *databaseGate {
	return &databaseGate{patience: databaseProbeTimeout, inflight: map[*gated]struct{}{}}
}

// set records a verdict of the probe: down cuts short the requests in
// flight for longer than patience.
func (g *databaseGate) set(up bool) {
	g.down.Store(!up)
	if up {
		return
	}
	before := time.Now().Add(-g.patience)
	g.mu.Lock()
	defer g.mu.Unlock()
	for r := range g.inflight {
		if r.began.Before(before) {
			r.cancel(pgfault.ErrUnresponsive)
		}
	}
}

// unanswered reports whether err is a probe that got no answer in time
// (a hung server), as opposed to a refusal or no error.
func unanswered(err error) bool {
	var ne net.Error
	return err != nil && (errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err) || errors.As(err, &ne) && ne.Timeout())
}

// guard is the middleware.
func (g *databaseGate) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithCancelCause(r.Context())
		defer cancel(nil)
		if g.down.Load() {
			// The database gave no answer to the last probe: refused at
			// once rather than left waiting for it.
			cancel(pgfault.ErrUnresponsive)
			next.ServeHTTP(w, r.WithContext(ctx))
			return
		}
		entry := &gated{cancel: cancel, began: time.Now()}
		g.mu.Lock()
		g.inflight[entry] = struct{}{}
		g.mu.Unlock()
		defer func() {
			g.mu.Lock()
			delete(g.inflight, entry)
			g.mu.Unlock()
		}()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}
