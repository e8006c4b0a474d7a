// Package snapshot keeps the result of an expensive read for a while and
// refreshes it in the background (stale-while-revalidate), so that what
// several surfaces show (the console's counts by status, the
// relais_occurrences gauge) costs one query per replica every few seconds
// whatever the number of readers.
package snapshot

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// refreshTimeout bounds one refresh, which runs detached from the request
// that started it.
const refreshTimeout = 30 * time.Second

// idleAges and idleWait: when nobody asked for idleAges ttls (a quiet
// spell), the stale value is likely far from the truth, so Fresh waits up
// to idleWait for its refresh before answering with it. A watched page
// (asking every few seconds) never waits.
const (
	idleAges = 3
	idleWait = time.Second
)

// Cache keeps the result of load for ttl.
//
// When the value is older than ttl, the next Get still answers at once with
// it and starts one refresh in the background; Fresh (for a page a person
// opens) does the same unless nobody asked for idleAges ttls: then it
// waits up to idleWait for the refresh, so that the first page after an
// idle hour is not an hour old. The first Get or Fresh of a cache (or one
// made while no load has succeeded yet) waits for its load, and concurrent
// first calls share that one load (singleflight). A failed refresh keeps the
// previous value. Exact counters kept in a table by triggers were rejected
// for the counts this serves: every state change of every occurrence would
// contend on a few counter rows, slowing the pull protocol to make a
// display a few seconds fresher.
type Cache[T any] struct {
	name   string
	load   func(context.Context) (T, error)
	logger *slog.Logger
	ttl    time.Duration
	// now is the clock ages are measured by; tests replace it.
	now func() time.Time
	// stamp dates a value for display (see StampWith); nil uses now.
	stamp func() time.Time
	// idleWait is idleWait; tests shorten it.
	idleWait time.Duration
	// stopped tells a load's error that says its source closed for good
	// (see QuietWhen).
	stopped func(error) bool

	mu         sync.Mutex
	value      T
	asked      time.Time // when Get or Fresh was last called, by now
	at         time.Time // when the load of value began; zero until one succeeded
	stamped    time.Time // the same moment by stamp, what Get returns
	refreshing chan struct{}
	lastErr    error
	// expiries counts Expire's calls, and valueExpiries how many there
	// had been when the value's load began: fewer than now, the value is
	// stale whatever its age.
	expiries, valueExpiries uint64
}

// Expire makes the value stale at once: the replica just changed what it
// shows (an operator's action), and a page opened next must not show the
// count the action made wrong (on-call QA: 24 held shown after they were
// all abandoned). Fresh then waits for the refresh (at most idleWait);
// Get answers at once, starting it.
func (s *Cache[T]) Expire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expiries++
}

// New returns a cache of load's result named name (for the log) that
// refreshes values older than ttl. A nil logger discards.
func New[T any](name string, load func(context.Context) (T, error), logger *slog.Logger, ttl time.Duration) *Cache[T] {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Cache[T]{name: name, load: load, logger: logger, ttl: ttl, now: time.Now, idleWait: idleWait}
}

// StampWith makes Get date values by clock rather than by the wall clock
// that measures their age: pages compare the date with times read from the
// engine's clock, which tests move. It returns s for chaining after New.
func (s *Cache[T]) StampWith(clock func() time.Time) *Cache[T] {
	s.stamp = clock
	return s
}

// QuietWhen has a refresh failure for which stopped is true logged at debug
// level: the process is stopping and closed the source under a refresh in
// flight, which every replica's shutdown (and the bench's every round)
// then logged as a WARN that asked for nothing. It returns s for chaining
// after New.
func (s *Cache[T]) QuietWhen(stopped func(error) bool) *Cache[T] {
	s.stopped = stopped
	return s
}

// Get returns the cached value and when the load that read it began (it
// shows the source as of that moment or later), refreshing it as described
// on the type. It waits for a load (at most until ctx ends) only
// while no load has succeeded yet; then an error is the load's.
func (s *Cache[T]) Get(ctx context.Context) (T, time.Time, error) {
	return s.get(ctx, false)
}

// Fresh is Get for a page a person opens: after a quiet spell (nobody
// asked for idleAges ttls) it waits up to idleWait for the refresh of a
// stale value, unless the last refresh failed (the source is likely down:
// waiting would only slow every page while it is).
func (s *Cache[T]) Fresh(ctx context.Context) (T, time.Time, error) {
	return s.get(ctx, true)
}

func (s *Cache[T]) get(ctx context.Context, fresh bool) (T, time.Time, error) {
	s.mu.Lock()
	now := s.now()
	quiet := !s.asked.IsZero() && now.Sub(s.asked) >= idleAges*s.ttl
	s.asked = now
	if !s.at.IsZero() {
		expired := s.valueExpiries < s.expiries
		if now.Sub(s.at) < s.ttl && !expired {
			v, at := s.value, s.stamped
			s.mu.Unlock()
			return v, at, nil
		}
		done := s.startRefreshLocked()
		if fresh && (quiet || expired) && s.lastErr == nil {
			timer := time.NewTimer(s.idleWait)
			defer timer.Stop()
			// Twice at most: a refresh in flight may have begun before
			// the expiry, and its value be stale when it lands.
			for range 2 {
				s.mu.Unlock()
				waited := false
				select {
				case <-done:
					waited = true
				case <-timer.C:
				case <-ctx.Done():
				}
				s.mu.Lock()
				if !waited || !expired || s.valueExpiries == s.expiries || s.lastErr != nil {
					break
				}
				done = s.startRefreshLocked()
			}
		}
		v, at := s.value, s.stamped
		s.mu.Unlock()
		return v, at, nil
	}
	done := s.startRefreshLocked()
	s.mu.Unlock()
	var zero T
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
	return s.value, s.stamped, nil
}

// startRefreshLocked starts a refresh unless one runs, and returns the
// channel closed when the running one ends.
func (s *Cache[T]) startRefreshLocked() chan struct{} {
	if s.refreshing != nil {
		return s.refreshing
	}
	done := make(chan struct{})
	s.refreshing = done
	// Read now, under the lock: an Expire after this call, before the
	// load runs, must leave its value stale.
	expiries := s.expiries
	go func() {
		defer close(done)
		// Detached from the request: a browser closing its tab must not
		// cancel the read other requests wait for.
		ctx, cancel := context.WithTimeout(context.Background(), refreshTimeout)
		defer cancel()
		// A value is stamped with when its load began: it shows the
		// database as of that moment or later, never earlier.
		began := s.now()
		stamped := began
		if s.stamp != nil {
			stamped = s.stamp()
		}
		v, err := s.load(ctx)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.refreshing = nil
		if err != nil {
			// Once per run of failures: through a database outage every
			// snapshot failed every few seconds, three WARN lines each
			// time (SRE QA); the repeats are at debug level.
			level := slog.LevelWarn
			if s.lastErr != nil || s.stopped != nil && s.stopped(err) {
				level = slog.LevelDebug
			}
			s.lastErr = err
			s.logger.Log(ctx, level, "refreshing a cached snapshot failed; the previous one stays (until one succeeds, repeats are logged at debug level)", "what", s.name, "err", err)
			return
		}
		s.value, s.at, s.stamped, s.lastErr, s.valueExpiries = v, began, stamped, nil, expiries
	}()
	return done
}
