package wake

import (
	"testing"
	"time"

	"github.com/relais/relais/engine"
)

func pairs(keys ...string) engine.Pairs {
	var p engine.Pairs
	for _, k := range keys {
		p.Keys, p.Revisions = append(p.Keys, k), append(p.Revisions, 1)
	}
	return p
}

func payload(key string, at time.Time) string {
	return engine.AvailabilityPayload(engine.ModePull, key, 1, at)
}

func pending(w *Waiter) (time.Time, bool) {
	select {
	case at := <-w.C():
		return at, true
	default:
		return time.Time{}, false
	}
}

func TestNotifyWakesOnlyMatchingWaiters(t *testing.T) {
	t.Parallel()
	h := NewHub()
	a, b := h.Register(pairs("crm.a")), h.Register(pairs("crm.b"))
	now := time.UnixMilli(time.Now().UnixMilli())
	h.Notify(payload("crm.a", now))
	if at, ok := pending(a); !ok || !at.Equal(now) {
		t.Errorf("waiter of crm.a: woken %v at %v, want woken at %v", ok, at, now)
	}
	if _, ok := pending(b); ok {
		t.Error("waiter of crm.b woken by crm.a")
	}
	h.Notify(engine.AvailabilityPayload(engine.ModePush, "crm.b", 1, now))
	if _, ok := pending(b); ok {
		t.Error("a push occurrence woke a pull waiter")
	}
}

func TestPendingWakeKeepsTheEarliestTime(t *testing.T) {
	t.Parallel()
	h := NewHub()
	w := h.Register(pairs("k"))
	now := time.UnixMilli(time.Now().UnixMilli())
	h.Notify(payload("k", now.Add(time.Minute)))
	h.Notify(payload("k", now))
	h.Notify(payload("k", now.Add(time.Hour)))
	if at, _ := pending(w); !at.Equal(now) {
		t.Errorf("pending wake at %v, want the earliest %v", at, now)
	}
	// The times still ahead that the sooner wake displaced: the earliest
	// is kept for the waiter to be woken then, once.
	if later := w.Later(); !later.Equal(now.Add(time.Minute)) {
		t.Errorf("kept for later: %v, want the earliest time displaced, %v", later, now.Add(time.Minute))
	}
	if later := w.Later(); !later.IsZero() {
		t.Errorf("kept for later again: %v, want nothing (taken)", later)
	}
	h.Notify(payload("k", now.Add(time.Hour)))
	h.WakeAll()
	if at, ok := pending(w); !ok || !at.IsZero() {
		t.Errorf("after WakeAll the pending wake is %v (%v), want the zero time: re-check now", at, ok)
	}
	if later := w.Later(); !later.Equal(now.Add(time.Hour)) {
		t.Errorf("kept for later past WakeAll: %v, want %v", later, now.Add(time.Hour))
	}
	h.WakeAll()
	h.Notify(payload("k", now))
	if at, ok := pending(w); !ok || !at.IsZero() {
		t.Errorf("a notice after WakeAll replaced its pending wake: %v (%v), want the zero time", at, ok)
	}
}

func TestUpdateAndUnregister(t *testing.T) {
	t.Parallel()
	h := NewHub()
	w := h.Register(pairs("old"))
	h.Update(w, pairs("new", "other"))
	h.Notify(payload("old", time.Now()))
	if _, ok := pending(w); ok {
		t.Error("woken for a pair it no longer waits for")
	}
	h.Notify(payload("other", time.Now()))
	if _, ok := pending(w); !ok {
		t.Error("not woken for a pair it was updated to")
	}
	h.Unregister(w)
	h.Notify(payload("new", time.Now()))
	if _, ok := pending(w); ok {
		t.Error("woken after Unregister")
	}
	if len(h.byPair) != 0 {
		t.Errorf("index not empty after the last waiter left: %v", h.byPair)
	}
}

// A NewHubOne hub wakes one waiter per notification, passes over waiters
// with a wake pending, and hands the pending wake of a waiter that leaves
// to another: every announced occurrence reaches one waiter.
func TestHubOneWakesOneWaiter(t *testing.T) {
	t.Parallel()
	h := NewHubOne()
	pairs := engine.Pairs{Keys: []string{"crm"}, Revisions: []int32{1}}
	ws := []*Waiter{h.Register(pairs), h.Register(pairs), h.Register(pairs)}
	pending := func() (n int) {
		for _, w := range ws {
			n += len(w.c)
		}
		return n
	}
	now := time.Now()
	h.Notify(engine.AvailabilityPayload(engine.ModePull, "crm", 1, now))
	if n := pending(); n != 1 {
		t.Fatalf("%d waiters woken by one notification, want 1", n)
	}
	h.Notify(engine.AvailabilityPayload(engine.ModePull, "crm", 1, now))
	if n := pending(); n != 2 {
		t.Fatalf("%d waiters woken by two notifications, want 2 (a pending one is passed over)", n)
	}
	// A woken waiter leaves without consuming its wake: it moves on.
	var gone *Waiter
	for _, w := range ws {
		if len(w.c) == 1 {
			gone = w
			break
		}
	}
	h.Unregister(gone)
	left := 0
	for _, w := range ws {
		if w != gone {
			left += len(w.c)
		}
	}
	if left != 2 {
		t.Errorf("%d wakes among the waiters left, want 2 (the leaver's was handed on)", left)
	}
	// Every waiter of a broadcasting hub is woken.
	b := NewHub()
	all := []*Waiter{b.Register(pairs), b.Register(pairs)}
	b.Notify(engine.AvailabilityPayload(engine.ModePull, "crm", 1, now))
	if len(all[0].c)+len(all[1].c) != 2 {
		t.Error("NewHub no longer wakes every waiter")
	}
}
