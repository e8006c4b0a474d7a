// Package wake wakes this replica's waiters for work (long-polling fetches,
// worker streams) when an occurrence they subscribe to becomes claimable.
// It is fed by the replica's LISTEN connection (engine.ChannelOccurrence)
// and wakes only the waiters whose (definition, revision) pairs match.
// Wake-ups are hints: a woken waiter re-checks the database.
package wake

import (
	"strconv"
	"sync"
	"time"

	"github.com/relais/relais/engine"
)

// Hub indexes waiters by the pairs they subscribe to. The zero value is
// not usable; call NewHub. It does not bound its size: its users do.
type Hub struct {
	mu     sync.Mutex
	byPair map[string]map[*Waiter]struct{}
	// one wakes a single idle waiter per notification (NewHubOne).
	one bool
}

// Waiter is one registered waiter. Its channel carries the time from which
// the announced occurrence is claimable (a retry may be announced early),
// or the zero time for "re-check now".
type Waiter struct {
	pairs []string
	c     chan time.Time

	// later is the earliest time still ahead that a sooner pending wake
	// displaced from c (see send), until Later takes it.
	mu    sync.Mutex
	later time.Time
}

// C is the channel a wake-up arrives on. It holds at most one pending
// wake-up: the earliest.
func (w *Waiter) C() <-chan time.Time { return w.c }

// Later returns, and forgets, the earliest time still ahead that was
// announced while a sooner wake-up was pending on C, and so not sent
// (zero if none). A waiter that claims once woken and remembers due
// times itself (a worker stream) asks for it after each wake-up from C:
// a retry announced for later in the transaction that also made work
// claimable now was lost, and the stream pushed it at its next keep-alive,
// seconds late (Zeebe- and River-user QA).
func (w *Waiter) Later() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	at := w.later
	w.later = time.Time{}
	return at
}

// keepLater keeps at for Later if it is ahead and sooner than the time
// kept.
func (w *Waiter) keepLater(at time.Time) {
	if at.IsZero() || !at.After(time.Now()) {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.later.IsZero() || at.Before(w.later) {
		w.later = at
	}
}

// NewHub returns an empty hub that wakes every waiter of a notified pair.
func NewHub() *Hub { return &Hub{byPair: map[string]map[*Waiter]struct{}{}} }

// NewHubOne returns an empty hub that wakes one waiter per notification,
// for waiters that claim as soon as they are woken (long polls). Each
// notification announces one occurrence: waking every waiter of its pair
// would send them all to claim it, and all but one would find nothing, a
// claim statement each for nothing. A waiter that already has a wake
// pending is passed over (it will claim); when it leaves without having
// consumed its wake, the wake goes to another waiter of its pairs.
func NewHubOne() *Hub { return &Hub{byPair: map[string]map[*Waiter]struct{}{}, one: true} }

func pairKey(key string, revision int) string { return key + "@" + strconv.Itoa(revision) }

// Register adds a waiter for the pairs.
func (h *Hub) Register(p engine.Pairs) *Waiter {
	w := &Waiter{c: make(chan time.Time, 1)}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.index(w, p)
	return w
}

// Update replaces the pairs of a registered waiter (a pattern subscription
// that resolved to a new key).
func (h *Hub) Update(w *Waiter, p engine.Pairs) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.unindex(w)
	h.index(w, p)
}

// Unregister removes a waiter. In a NewHubOne hub, a wake it had not
// consumed is handed to another waiter of its pairs.
func (h *Hub) Unregister(w *Waiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	pairs := append([]string(nil), w.pairs...)
	h.unindex(w)
	if !h.one {
		return
	}
	select {
	case at := <-w.c:
		for _, pk := range pairs {
			if h.wakeOne(pk, at) {
				return
			}
		}
	default:
	}
}

func (h *Hub) index(w *Waiter, p engine.Pairs) {
	w.pairs = w.pairs[:0]
	for i, k := range p.Keys {
		pk := pairKey(k, int(p.Revisions[i]))
		w.pairs = append(w.pairs, pk)
		set := h.byPair[pk]
		if set == nil {
			set = map[*Waiter]struct{}{}
			h.byPair[pk] = set
		}
		set[w] = struct{}{}
	}
}

func (h *Hub) unindex(w *Waiter) {
	for _, pk := range w.pairs {
		if set := h.byPair[pk]; set != nil {
			delete(set, w)
			if len(set) == 0 {
				delete(h.byPair, pk)
			}
		}
	}
	w.pairs = w.pairs[:0]
}

// Notify handles a ChannelOccurrence payload: it wakes the waiters of its
// pair. It never blocks.
func (h *Hub) Notify(payload string) {
	mode, key, rev, at, ok := engine.ParseAvailabilityPayload(payload)
	if !ok || mode != engine.ModePull {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.one {
		h.wakeOne(pairKey(key, rev), at)
		return
	}
	for w := range h.byPair[pairKey(key, rev)] {
		send(w, at)
	}
}

// wakeOne wakes a waiter of pk that has no wake pending; when every one
// has, the earliest time goes to one of them (it re-checks then). It
// reports whether pk has any waiter.
func (h *Hub) wakeOne(pk string, at time.Time) bool {
	var busy *Waiter
	for w := range h.byPair[pk] {
		if len(w.c) == 0 {
			send(w, at)
			return true
		}
		busy = w
	}
	if busy != nil {
		send(busy, at)
		return true
	}
	return false
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

// send keeps the earliest pending wake on the waiter's channel, the zero
// time (re-check now) the earliest of all, and the earliest of the later
// ones still ahead for Later.
func send(w *Waiter, at time.Time) {
	select {
	case w.c <- at:
	default:
		select {
		case prev := <-w.c:
			if prev.IsZero() || !at.IsZero() && prev.Before(at) {
				at, prev = prev, at
			}
			// The later of the two is kept aside, not dropped: one still
			// ahead is due after the wake-up sent claims.
			w.keepLater(prev)
		default:
		}
		select {
		case w.c <- at:
		default:
		}
	}
}
