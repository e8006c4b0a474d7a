package console

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/relais/relais/engine"
)

// countsTTL is how old the counts by status may be before a refresh starts.
const countsTTL = 5 * time.Second

// menusTTL is how old the filter form's lists of definitions and consumers
// may be: they change when a designer or an administrator adds one.
const menusTTL = 30 * time.Second

// refreshTimeout bounds one refresh, which runs detached from the request
// that started it.
const refreshTimeout = 30 * time.Second

// snapshotCache keeps the result of an expensive read for a while.
//
// It exists for the operations view's counts by status. Counting reads
// every entry of an index: at a million occurrences that takes hundreds of
// milliseconds, too slow for every request and wasteful when several
// operators watch the same view. So the counts are computed by one GROUP BY
// over occurrences_by_definition_status and kept for countsTTL. When they
// are older, the next request still answers at once with them and starts
// one refresh in the background (stale-while-revalidate); only the first
// request of a replica waits, and concurrent first requests share that one
// query (singleflight). Exact counters kept in a table by triggers were
// rejected: every state change of every occurrence would contend on a few
// counter rows, slowing the pull protocol to make a display a few seconds
// fresher.
type snapshotCache[T any] struct {
	name   string
	load   func(context.Context) (T, error)
	logger *slog.Logger
	ttl    time.Duration
	now    func() time.Time
	// clock dates a value for display; nil uses now.
	clock func() time.Time

	mu    sync.Mutex
	value T
	at    time.Time // zero until the first successful load
	// readAt is when the value was read by the clock pages compare with
	// (the engine's); at, by the cache's own clock, decides its age.
	readAt     time.Time
	refreshing chan struct{}
	lastErr    error
}

func newSnapshotCache[T any](name string, load func(context.Context) (T, error), logger *slog.Logger, ttl time.Duration) *snapshotCache[T] {
	return &snapshotCache[T]{name: name, load: load, logger: logger, ttl: ttl, now: time.Now}
}

// get returns the cached value, refreshing it as described on the type.
func (s *snapshotCache[T]) get(ctx context.Context) (T, error) {
	v, _, err := s.getAt(ctx)
	return v, err
}

// getAt is get with the time the value was read, which pages show ("as
// of 14:05:03"): a cached value must say how old it is.
func (s *snapshotCache[T]) getAt(ctx context.Context) (T, time.Time, error) {
	var zero T
	s.mu.Lock()
	if !s.at.IsZero() {
		if s.now().Sub(s.at) >= s.ttl {
			s.startRefreshLocked()
		}
		v, at := s.value, s.readAt
		s.mu.Unlock()
		return v, at, nil
	}
	done := s.startRefreshLocked()
	s.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
		return zero, time.Time{}, ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.at.IsZero() {
		return zero, time.Time{}, s.lastErr
	}
	return s.value, s.readAt, nil
}

// startRefreshLocked starts a refresh unless one runs, and returns the
// channel closed when the running one ends.
func (s *snapshotCache[T]) startRefreshLocked() chan struct{} {
	if s.refreshing != nil {
		return s.refreshing
	}
	done := make(chan struct{})
	s.refreshing = done
	go func() {
		defer close(done)
		// Detached from the request: a browser closing its tab must not
		// cancel the read other requests wait for.
		ctx, cancel := context.WithTimeout(context.Background(), refreshTimeout)
		defer cancel()
		readAt := s.now()
		if s.clock != nil {
			readAt = s.clock()
		}
		v, err := s.load(ctx)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.refreshing = nil
		if err != nil {
			s.lastErr = err
			s.logger.Warn("console: refreshing a cached view failed; the previous one stays", "what", s.name, "err", err)
			return
		}
		s.value, s.at, s.readAt, s.lastErr = v, s.now(), readAt, nil
	}()
	return done
}

// countSnapshot is definition → status → number of occurrences.
type countSnapshot map[string]map[string]int64

// loadCounts reads the counts of every (definition, status) pair.
func loadCounts(eng *engine.Engine) func(context.Context) (countSnapshot, error) {
	return func(ctx context.Context) (countSnapshot, error) {
		// The engine's cache, which the metrics read too: one counting
		// query per replica whoever asks.
		rows, _, err := eng.OccurrenceCounts(ctx)
		if err != nil {
			return nil, err
		}
		snap := countSnapshot{}
		for _, r := range rows {
			if snap[r.Definition] == nil {
				snap[r.Definition] = map[string]int64{}
			}
			snap[r.Definition][r.Status] = r.Count
		}
		return snap, nil
	}
}

// forDefinition returns the counts by status of one definition, or of all
// definitions when key is empty.
func (s countSnapshot) forDefinition(key string) map[string]int64 {
	out := map[string]int64{}
	for def, byStatus := range s {
		if key != "" && def != key {
			continue
		}
		for status, n := range byStatus {
			out[status] += n
		}
	}
	return out
}

// filterMenus are the choices the filter forms offer.
type filterMenus struct {
	definitions []string
	processes   []string
	consumers   []consumerChoice
}

type consumerChoice struct {
	id   int64
	name string
}

// loadMenus reads the definition keys and consumer names. Listing
// consumers also reads their grants, one query each, which is why the menus
// are cached rather than read per request.
func loadMenus(eng *engine.Engine) func(context.Context) (filterMenus, error) {
	return func(ctx context.Context) (filterMenus, error) {
		var m filterMenus
		defs, err := eng.ListDefinitions(ctx, "", maxOptions)
		if err != nil {
			return m, err
		}
		for _, d := range defs {
			m.definitions = append(m.definitions, d.Key)
		}
		procs, err := eng.ListProcesses(ctx, "", maxOptions)
		if err != nil {
			return m, err
		}
		for _, p := range procs {
			m.processes = append(m.processes, p.Key)
		}
		cs, err := eng.ListConsumers(ctx, 0, maxOptions)
		if err != nil {
			return m, err
		}
		for _, c := range cs {
			m.consumers = append(m.consumers, consumerChoice{id: c.ID, name: c.Name})
		}
		return m, nil
	}
}
