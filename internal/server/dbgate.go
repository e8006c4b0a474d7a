package server

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/relais/relais/internal/pgfault"
)

// databaseGate cuts short the API requests in flight when the replica's
// probe stops getting answers from PostgreSQL, and those that arrive while
// it gets none: their contexts are cancelled with pgfault.ErrUnresponsive,
// so that their statements fail at once and they are answered 503
// database_unavailable (see pgfault.CutShort), each in its protocol's
// format. A server that refuses connections fails each statement at once
// anyway; one that hangs (a frozen machine, a network black hole) would
// hold every request until it answers again, however long that takes. A
// request that needs no database (a cached token, a static document) is
// served as usual.
type databaseGate struct {
	down atomic.Bool

	mu       sync.Mutex
	inflight map[*context.CancelCauseFunc]struct{}
}

func newDatabaseGate() *databaseGate {
	return &databaseGate{inflight: map[*context.CancelCauseFunc]struct{}{}}
}

// set records the probe's verdict; the first down cuts the requests in
// flight short.
func (g *databaseGate) set(up bool) {
	if up {
		g.down.Store(false)
		return
	}
	if g.down.Swap(true) {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for cancel := range g.inflight {
		(*cancel)(pgfault.ErrUnresponsive)
	}
}

// guard is the middleware.
func (g *databaseGate) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithCancelCause(r.Context())
		defer cancel(nil)
		key := &cancel
		g.mu.Lock()
		g.inflight[key] = struct{}{}
		g.mu.Unlock()
		defer func() {
			g.mu.Lock()
			delete(g.inflight, key)
			g.mu.Unlock()
		}()
		if g.down.Load() {
			// Checked once registered: set cancels only what it finds.
			cancel(pgfault.ErrUnresponsive)
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}
