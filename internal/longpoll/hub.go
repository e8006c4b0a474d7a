// Package longpoll holds a replica's long-polling fetches: the hub the
// LISTEN connection wakes, and the claim-or-wait loop every surface that
// long-polls (the pull protocol, the Camunda facade) runs on the engine.
package longpoll

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/relais/relais/engine"
)

// Hub wakes long-polling fetches of this replica. It is fed by the
// replica's LISTEN connection and wakes only the waiters whose
// subscriptions match a notification. Its size is bounded.
type Hub struct {
	max int

	mu      sync.Mutex
	byPair  map[string]map[*waiter]struct{}
	count   int
	closed  bool
	closing chan struct{}

	gauge prometheus.Gauge
}

// waiter is one long-polling fetch. wake carries the time from which the
// announced occurrence is claimable (a retry may be announced early).
type waiter struct {
	pairs []string
	wake  chan time.Time
}

// NewHub returns a hub admitting at most max waiters.
func NewHub(max int, reg prometheus.Registerer) *Hub {
	h := &Hub{max: max, byPair: map[string]map[*waiter]struct{}{}, closing: make(chan struct{}),
		gauge: prometheus.NewGauge(prometheus.GaugeOpts{Name: "relais_pull_waiters", Help: "Long-polling fetches waiting on this replica."})}
	if reg != nil {
		reg.MustRegister(h.gauge)
	}
	return h
}

func pairKey(key string, revision int) string { return key + "@" + strconv.Itoa(revision) }

// register adds a waiter for the pairs; ok is false when the hub is full
// or closed.
func (h *Hub) register(p engine.Pairs) (*waiter, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || h.count >= h.max {
		return nil, false
	}
	w := &waiter{wake: make(chan time.Time, 1)}
	for i, k := range p.Keys {
		pk := pairKey(k, int(p.Revisions[i]))
		w.pairs = append(w.pairs, pk)
		set := h.byPair[pk]
		if set == nil {
			set = map[*waiter]struct{}{}
			h.byPair[pk] = set
		}
		set[w] = struct{}{}
	}
	h.count++
	h.gauge.Set(float64(h.count))
	return w, true
}

func (h *Hub) unregister(w *waiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, pk := range w.pairs {
		if set := h.byPair[pk]; set != nil {
			delete(set, w)
			if len(set) == 0 {
				delete(h.byPair, pk)
			}
		}
	}
	h.count--
	h.gauge.Set(float64(h.count))
}

// Notify handles a ChannelOccurrence payload.
func (h *Hub) Notify(payload string) {
	mode, key, rev, at, ok := engine.ParseAvailabilityPayload(payload)
	if !ok || mode != engine.ModePull {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.byPair[pairKey(key, rev)] {
		send(w, at)
	}
}

// WakeAll wakes every waiter to re-check, e.g. after the LISTEN connection
// was lost and notifications may have been missed.
func (h *Hub) WakeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, set := range h.byPair {
		for w := range set {
			send(w, time.Time{})
		}
	}
}

// Close makes every waiter answer now and refuses new ones: a stopping
// replica drains its long polls instead of holding them to their deadline.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.closed {
		h.closed = true
		close(h.closing)
	}
}

// send keeps the earliest pending wake: a waiter that has not consumed one
// yet needs only the soonest time to re-check.
func send(w *waiter, at time.Time) {
	select {
	case w.wake <- at:
	default:
		select {
		case prev := <-w.wake:
			if !prev.IsZero() && (at.IsZero() || prev.Before(at)) {
				at = prev
			}
		default:
		}
		select {
		case w.wake <- at:
		default:
		}
	}
}
