package stream

import (
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/wake"
)

// recentFor is how long a cancellation nobody held is remembered: far
// longer than a claim takes to be indexed.
const recentFor = 10 * time.Second

type recentCancel struct {
	reason string
	at     time.Time
}

// recentEntry is a cancellation in recentOrder.
type recentEntry struct {
	id uuid.UUID
	at time.Time
}

// workerKey names a worker: at most one stream per worker on all replicas.
type workerKey struct {
	consumer int64
	worker   string
}

// registry holds this replica's streams: bounded, indexed by stream, by
// worker and by the occurrences they hold, so that notifications (wake-ups,
// cancellations, signals from other replicas) reach the stream they concern
// without touching the others.
type registry struct {
	max  int
	wake *wake.Hub

	mu       sync.Mutex
	byID     map[uuid.UUID]*session
	byWorker map[workerKey]*session
	byHeld   map[uuid.UUID]*session
	// open are the sessions whose subscriptions may match keys or
	// revisions created later (a pattern, or a key without revisions):
	// a notification for a pair they do not have yet makes them resolve
	// again.
	open map[*session]struct{}
	// recent are cancellations no stream held when they arrived: a claim
	// may have committed just before the cancellation and not be indexed
	// yet. hold checks them, so that none is missed.
	recent map[uuid.UUID]recentCancel
	// recentOrder holds recent's entries in arrival order, so that
	// forgetting the old ones takes only them: a bulk stop sends a
	// cancellation per occurrence, and a walk over the whole map at each
	// made it quadratic, under the lock streams use.
	recentOrder []recentEntry
	closed      bool
	closing     chan struct{}
	// grace is how long a stream holding assignments may keep them once
	// the replica stops, for its worker to settle them (set by close).
	grace time.Duration
	// closeBy is when the first close stops waiting: a later close (a
	// drain, then a stop) waits no longer than it.
	closeBy time.Time
	running sync.WaitGroup

	streams   prometheus.Gauge
	connected *prometheus.GaugeVec
	byKey     map[string]int
}

// isClosed reports whether close was called, without the registry's lock
// (every stream's loop asks): closing is closed by then.
func (r *registry) isClosed() bool {
	select {
	case <-r.closing:
		return true
	default:
		return false
	}
}

// graceTime is close's grace, read by the streams once closing is closed.
func (r *registry) graceTime() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.grace
}

func newRegistry(max int, reg prometheus.Registerer) *registry {
	r := &registry{max: max, wake: wake.NewHub(), byID: map[uuid.UUID]*session{}, byWorker: map[workerKey]*session{},
		byHeld: map[uuid.UUID]*session{}, open: map[*session]struct{}{}, recent: map[uuid.UUID]recentCancel{},
		closing: make(chan struct{}), byKey: map[string]int{},
		streams: prometheus.NewGauge(prometheus.GaugeOpts{Name: "relais_worker_streams", Help: "Worker streams connected to this replica."}),
		connected: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "relais_workers_connected",
			Help: "Worker streams connected to this replica, by subscribed definition (sum over replicas for the total)."}, []string{"definition"}),
	}
	if reg != nil {
		reg.MustRegister(r.streams, r.connected)
	}
	return r
}

// admit registers s. A stream of the same worker on this replica is
// returned as replaced: it is no longer indexed by worker and must end. A
// full or closing replica refuses s.
func (r *registry) admit(s *session) (replaced *session, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		fe := fault.New(fault.Unavailable, endReplicaStopping, "this replica is shutting down; subscribe again (another replica will serve you)")
		// A second, not the client's growing backoff: another replica
		// (behind the same address) serves at once.
		fe.RetryAfter = time.Second
		return nil, fe
	}
	k := workerKey{s.consumerID, s.workerID}
	replaced = r.byWorker[k]
	if replaced == nil && len(r.byID) >= r.max {
		fe := fault.New(fault.TooManyRequests, "too_many_streams", "this replica holds its maximum of %d worker streams; retry shortly", r.max)
		fe.RetryAfter = time.Second
		return nil, fe
	}
	r.byID[s.id] = s
	r.byWorker[k] = s
	r.running.Add(1)
	r.streams.Set(float64(len(r.byID)))
	s.waiter = r.wake.Register(s.pairs)
	r.setKeys(s, s.pairs.DefinitionKeys())
	if s.open() {
		r.open[s] = struct{}{}
	}
	return replaced, nil
}

// remove forgets s once it ended.
func (r *registry) remove(s *session) {
	r.wake.Unregister(s.waiter)
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.byID, s.id)
	if k := (workerKey{s.consumerID, s.workerID}); r.byWorker[k] == s {
		delete(r.byWorker, k)
	}
	// remove runs on the session's own goroutine, which owns held.
	for id := range s.held {
		if r.byHeld[id] == s {
			delete(r.byHeld, id)
		}
	}
	delete(r.open, s)
	r.setKeys(s, nil)
	r.streams.Set(float64(len(r.byID)))
	r.running.Done()
}

// setKeys moves s's count in relais_workers_connected to keys.
func (r *registry) setKeys(s *session, keys []string) {
	for _, k := range s.keys {
		// A definition's series falls to 0 when its last stream leaves,
		// rather than vanish: an alert compares with 0, no absent().
		r.byKey[k]--
		r.connected.WithLabelValues(k).Set(float64(r.byKey[k]))
		if r.byKey[k] == 0 {
			delete(r.byKey, k)
		}
	}
	s.keys = keys
	for _, k := range keys {
		r.byKey[k]++
		r.connected.WithLabelValues(k).Set(float64(r.byKey[k]))
	}
}

// resolved records s's new pairs (its subscriptions resolved again).
func (r *registry) resolved(s *session, p engine.Pairs) {
	r.wake.Update(s.waiter, p)
	r.mu.Lock()
	defer r.mu.Unlock()
	s.pairsSeen = p
	r.setKeys(s, p.DefinitionKeys())
}

// hold and drop index the occurrences a session holds. A cancellation
// that arrived before hold is passed on.
func (r *registry) hold(s *session, id uuid.UUID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.byHeld[id] = s
	if c, ok := r.recent[id]; ok {
		delete(r.recent, id)
		s.post(event{kind: eventCancel, occurrence: id, reason: c.reason})
	}
}

func (r *registry) drop(s *session, id uuid.UUID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byHeld[id] == s {
		delete(r.byHeld, id)
	}
}

func (r *registry) holder(id uuid.UUID) *session {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byHeld[id]
}

func (r *registry) stream(id uuid.UUID) *session {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byID[id]
}

// notify handles a ChannelOccurrence payload: it wakes the streams of the
// pair, and makes open streams that lack the pair resolve again.
func (r *registry) notify(payload string) {
	r.wake.Notify(payload)
	mode, key, rev, _, ok := engine.ParseAvailabilityPayload(payload)
	if !ok || mode != engine.ModePull {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for s := range r.open {
		if !s.pairsSeen.Matches(key, rev) && s.mayMatch(key) {
			s.post(event{kind: eventResolve})
		}
	}
}

// regrant handles a ChannelInvalidate payload: when a consumer's grants
// changed (or it was revoked), its streams resolve their subscriptions at
// once, ending with not_granted when none is granted any more, rather than
// at their next periodic resolution; when tokens were revoked or rotated,
// every stream checks its token at once.
func (r *registry) regrant(payload string) {
	kind, arg, _ := strings.Cut(payload, ":")
	switch kind {
	case "grants":
		id, err := strconv.ParseInt(arg, 10, 64)
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, s := range r.byID {
			if err != nil || s.consumerID == id {
				s.post(event{kind: eventResolve})
			}
		}
	case "tokens":
		// A token revoked or rotated: every stream checks its own at once
		// (from the emptied cache), not at its next heartbeat.
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, s := range r.byID {
			s.post(event{kind: eventReauth})
		}
	}
}

// cancel handles a ChannelCancel payload.
func (r *registry) cancel(payload string) {
	id, reason, ok := engine.ParseCancelPayload(payload)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := r.byHeld[id]; s != nil {
		s.post(event{kind: eventCancel, occurrence: id, reason: reason})
		return
	}
	now := time.Now()
	for len(r.recentOrder) > 0 && now.Sub(r.recentOrder[0].at) > recentFor {
		old := r.recentOrder[0]
		r.recentOrder = r.recentOrder[1:]
		// Taken by a claim meanwhile, or noted again since: not this entry's
		// to forget.
		if c, ok := r.recent[old.id]; ok && c.at.Equal(old.at) {
			delete(r.recent, old.id)
		}
	}
	r.recent[id] = recentCancel{reason: reason, at: now}
	r.recentOrder = append(r.recentOrder, recentEntry{id: id, at: now})
}

// signal handles a ChannelWorker payload.
func (r *registry) signal(payload string) {
	sig, ok := engine.ParseWorkerSignal(payload)
	if !ok {
		return
	}
	switch sig.Kind {
	case engine.SignalTakeover:
		r.mu.Lock()
		s := r.byWorker[workerKey{sig.ConsumerID, sig.WorkerID}]
		if s != nil && s.id != sig.Stream {
			delete(r.byWorker, workerKey{sig.ConsumerID, sig.WorkerID})
		}
		r.mu.Unlock()
		if s != nil && s.id != sig.Stream {
			s.post(event{kind: eventReplaced})
		}
	case engine.SignalSettled:
		if s := r.holder(sig.Occurrence); s != nil {
			s.post(event{kind: eventSettled, occurrence: sig.Occurrence, attempt: sig.Attempt})
		}
	case engine.SignalAck:
		if s := r.stream(sig.Stream); s != nil && s.consumerID == sig.ConsumerID {
			s.ack(sig.Sequence)
		}
	case engine.SignalDrain:
		if s := r.stream(sig.Stream); s != nil && s.consumerID == sig.ConsumerID {
			s.post(event{kind: eventDrain})
		}
	}
}

// wakeAll makes every stream re-check, after the LISTEN connection was
// lost and notifications may have been missed.
func (r *registry) wakeAll() {
	r.wake.WakeAll()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.byID {
		s.post(event{kind: eventRecheck})
	}
}

// close refuses new streams and tells the running ones to end, handing
// their assignments back; it waits for them up to timeout after the first
// close, so that closing again adds no wait of its own.
func (r *registry) close(timeout time.Duration) bool {
	r.mu.Lock()
	if !r.closed {
		r.closed = true
		// What the workers have not settled by then is handed back within
		// the timeout.
		r.grace = max(timeout-handBackTimeout, 0)
		r.closeBy = time.Now().Add(timeout)
		close(r.closing)
	}
	closeBy := r.closeBy
	r.mu.Unlock()
	done := make(chan struct{})
	go func() {
		r.running.Wait()
		close(done)
	}()
	t := time.NewTimer(time.Until(closeBy))
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// mayMatch reports whether a key could belong to s's subscriptions: a
// pattern matches it, or a subscription names it without revisions.
func (s *session) mayMatch(key string) bool {
	for _, sub := range s.subs {
		switch {
		case engine.IsKeyPattern(sub.Definition):
			if strings.HasPrefix(key, strings.TrimSuffix(sub.Definition, "*")) {
				return true
			}
		case sub.Definition == key && len(sub.Revisions) == 0:
			return true
		}
	}
	return false
}

// open reports whether s's subscriptions may match pairs that do not exist
// yet.
func (s *session) open() bool {
	for _, sub := range s.subs {
		if engine.IsKeyPattern(sub.Definition) || len(sub.Revisions) == 0 {
			return true
		}
	}
	return false
}
