// Package longpoll holds a replica's long-polling fetches: the hub the
// LISTEN connection wakes, and the claim-or-wait loop every surface that
// long-polls (the pull protocol, the Camunda facade) runs on the engine.
package longpoll

import (
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/wake"
)

// Hub wakes long-polling fetches of this replica. It is fed by the
// replica's LISTEN connection and wakes only the waiters whose
// subscriptions match a notification (internal/wake). Its size is bounded.
type Hub struct {
	max  int
	wake *wake.Hub

	mu      sync.Mutex
	count   int
	closed  bool
	closing chan struct{}

	gauge prometheus.Gauge
}

// NewHub returns a hub admitting at most max waiters.
func NewHub(max int, reg prometheus.Registerer) *Hub {
	h := &Hub{max: max, wake: wake.NewHubOne(), closing: make(chan struct{}),
		gauge: prometheus.NewGauge(prometheus.GaugeOpts{Name: "relais_pull_waiters", Help: "Long-polling fetches waiting on this replica."})}
	if reg != nil {
		reg.MustRegister(h.gauge)
	}
	return h
}

// register adds a waiter for the pairs; ok is false when the hub is full
// or closed.
func (h *Hub) register(p engine.Pairs) (*wake.Waiter, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || h.count >= h.max {
		return nil, false
	}
	h.count++
	h.gauge.Set(float64(h.count))
	return h.wake.Register(p), true
}

func (h *Hub) unregister(w *wake.Waiter) {
	h.wake.Unregister(w)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.count--
	h.gauge.Set(float64(h.count))
}

// Refusal is the refusal of a fetch on a stopping replica (503
// replica_stopping), or nil: a fetch checks it before it is recorded as a
// worker's sighting, which a refused one is not.
func (h *Hub) Refusal() error {
	if h.Stopping() {
		return stoppingFault()
	}
	return nil
}

// Stopping reports whether Close was called: the replica is shutting down.
func (h *Hub) Stopping() bool {
	select {
	case <-h.closing:
		return true
	default:
		return false
	}
}

// Notify handles a ChannelOccurrence payload.
func (h *Hub) Notify(payload string) { h.wake.Notify(payload) }

// WakeAll wakes every waiter to re-check, e.g. after the LISTEN connection
// was lost and notifications may have been missed.
func (h *Hub) WakeAll() { h.wake.WakeAll() }

// Invalidate handles a ChannelInvalidate payload: a change of tokens or
// grants wakes every waiter, which checks its caller's credentials again
// (a revoked token's fetch is answered 401 at once, not at its next
// fallback poll).
func (h *Hub) Invalidate(payload string) {
	switch kind, _, _ := strings.Cut(payload, ":"); kind {
	case "tokens", "grants":
		h.wake.WakeAll()
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
