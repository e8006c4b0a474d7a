// Package endwait holds a replica's reads of instances that wait for them
// to leave running (GET /api/v1/instances/{id}?wait=): a caller that
// starts an instance and wants its outcome, as Zeebe's withResult or
// Temporal's GetResult give it, waits on the read instead of polling.
//
// An instance ends on whichever replica settles its last task, so the
// hub reads, every tick while any read waits, the statuses of all the
// instances waited on, in one statement: a read learns of the end within
// a tick, however many wait, and a task's cycle pays nothing for it (no
// notification per instance).
package endwait

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/relais/relais/internal/fault"
)

// full refuses a read that would wait while the hub holds its maximum:
// 429 too_many_waiters, to read again shortly. A new value each time, as
// the surfaces that answer it may annotate it.
func full(max int) *fault.Error {
	fe := fault.New(fault.TooManyRequests, "too_many_waiters", "this replica holds its maximum of %d reads waiting for an instance to end (RELAIS_PULL_MAX_WAITERS); read again shortly, or without wait", max)
	fe.RetryAfter = time.Second
	return fe
}

// Statuses reads the status of each instance of ids that exists.
type Statuses func(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]string, error)

// Hub holds the waiting reads of one replica. Its zero value is not
// usable: New makes one, Run reads the statuses until its context ends.
type Hub struct {
	statuses Statuses
	running  string // the status a read waits to see an instance leave
	tick     time.Duration
	max      int
	logger   *slog.Logger

	mu      sync.Mutex
	waiting map[uuid.UUID][]chan struct{}
	count   int
	closed  bool
	closing chan struct{}
	// recheck is closed, and replaced, when tokens or grants change: the
	// waiting reads check their caller's credentials again.
	recheck chan struct{}
}

// New returns a hub holding at most max waiting reads, which reads the
// statuses every tick while some wait, and wakes a read once its
// instance's status is other than running.
func New(statuses Statuses, running string, tick time.Duration, max int, logger *slog.Logger) *Hub {
	return &Hub{statuses: statuses, running: running, tick: tick, max: max, logger: logger,
		waiting: map[uuid.UUID][]chan struct{}{}, closing: make(chan struct{}), recheck: make(chan struct{})}
}

// Wait returns once id is no longer running, d has passed, ctx ended or
// the hub closed (the replica stopping: the read answers what it has,
// as a fetch does). The caller reads the instance first and again after:
// Wait says nothing of why it returned. It refuses a read when the
// hub holds its maximum (429 too_many_waiters). still, when tokens or grants change meanwhile,
// checks that the caller's credentials hold, and its error ends the wait:
// a token revoked while its read waits is refused then, not at the end.
func (h *Hub) Wait(ctx context.Context, id uuid.UUID, d time.Duration, still func(context.Context) error) error {
	ch, refused := h.register(id)
	if refused != nil {
		return refused
	}
	defer h.unregister(id, ch)
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		h.mu.Lock()
		recheck := h.recheck
		h.mu.Unlock()
		select {
		case <-ch:
		case <-timer.C:
		case <-ctx.Done():
		case <-h.closing:
		case <-recheck:
			if err := still(ctx); err != nil {
				return err
			}
			continue
		}
		return nil
	}
}

// Invalidate handles a ChannelInvalidate payload: a change of tokens or
// grants makes every waiting read check its caller's credentials again.
func (h *Hub) Invalidate(payload string) {
	switch kind, _, _ := strings.Cut(payload, ":"); kind {
	case "tokens", "grants":
		h.mu.Lock()
		close(h.recheck)
		h.recheck = make(chan struct{})
		h.mu.Unlock()
	}
}

func (h *Hub) register(id uuid.UUID) (chan struct{}, *fault.Error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		// Answered at once, as a closing hub answers those waiting.
		ch := make(chan struct{})
		close(ch)
		return ch, nil
	}
	if h.count >= h.max {
		return nil, full(h.max)
	}
	ch := make(chan struct{})
	h.waiting[id] = append(h.waiting[id], ch)
	h.count++
	return ch, nil
}

func (h *Hub) unregister(id uuid.UUID, ch chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	chs := h.waiting[id]
	for i, c := range chs {
		if c == ch {
			h.waiting[id] = append(chs[:i:i], chs[i+1:]...)
			h.count--
			break
		}
	}
	if len(h.waiting[id]) == 0 {
		delete(h.waiting, id)
	}
}

// Waiting is how many reads wait now.
func (h *Hub) Waiting() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.count
}

// Close answers every waiting read now and every later one at once.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.closed {
		h.closed = true
		close(h.closing)
	}
}

// Run reads the statuses every tick until ctx ends.
func (h *Hub) Run(ctx context.Context) {
	t := time.NewTicker(h.tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			h.check(ctx)
		}
	}
}

// check wakes the reads of the instances no longer running. A statement
// that fails wakes nobody: the reads wait on, to their deadline at worst.
func (h *Hub) check(ctx context.Context) {
	h.mu.Lock()
	ids := make([]uuid.UUID, 0, len(h.waiting))
	for id := range h.waiting {
		ids = append(ids, id)
	}
	h.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	statuses, err := h.statuses(ctx, ids)
	if err != nil {
		if ctx.Err() == nil {
			h.logger.Debug("reading the statuses of the instances waited on failed; the reads wait on", "instances", len(ids), "err", err)
		}
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, id := range ids {
		status, ok := statuses[id]
		if ok && status == h.running {
			continue
		}
		// Ended, held, or gone (erased, or retention's): its read
		// answers what it finds.
		for _, ch := range h.waiting[id] {
			close(ch)
			h.count--
		}
		// Woken once: unregister finds them gone.
		delete(h.waiting, id)
	}
}
