package console

import (
	"net/netip"
	"sync"
	"time"
)

// Sign-in throttling: a client address that fails signInFailures times
// within signInWindow is refused (429) until the window ends. Tokens are
// 256-bit random values, so guessing one is hopeless anyway; the throttle
// keeps a script from turning the sign-in form into a load test of the
// token lookup, and makes such a script stand out in the logs.
const (
	signInFailures = 10
	signInWindow   = time.Minute
	// maxThrottled bounds the addresses remembered at once (about 100
	// bytes each): a client rotating through addresses cannot grow the
	// table without bound.
	maxThrottled = 10_000
)

// failureWindow counts one address's failed sign-ins since start.
type failureWindow struct {
	start    time.Time
	failures int
}

// signInThrottle counts failed sign-ins per client address in fixed
// windows. Successful sign-ins are not counted and do not reset the
// count: otherwise holding any valid token would let a client interleave
// successes to keep guessing.
type signInThrottle struct {
	mu      sync.Mutex
	windows map[netip.Prefix]*failureWindow
}

func newSignInThrottle() *signInThrottle {
	return &signInThrottle{windows: map[netip.Prefix]*failureWindow{}}
}

// throttleKey is what failures are counted by: the address, or its /64
// for IPv6, where one client commonly holds a whole /64.
func throttleKey(a netip.Addr) netip.Prefix {
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p
	}
	p, _ := a.Prefix(a.BitLen())
	return p
}

// blocked reports whether addr must wait before trying again, and how long.
func (t *signInThrottle) blocked(addr netip.Addr, now time.Time) (time.Duration, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	w, ok := t.windows[throttleKey(addr)]
	if !ok || !now.Before(w.start.Add(signInWindow)) || w.failures < signInFailures {
		return 0, false
	}
	return w.start.Add(signInWindow).Sub(now), true
}

// fail records a failed sign-in from addr.
func (t *signInThrottle) fail(addr netip.Addr, now time.Time) {
	k := throttleKey(addr)
	t.mu.Lock()
	defer t.mu.Unlock()
	w, ok := t.windows[k]
	if ok && !now.Before(w.start.Add(signInWindow)) {
		ok = false // the window is over: start a new one
	}
	if !ok {
		if _, known := t.windows[k]; !known && len(t.windows) >= maxThrottled {
			t.makeRoomLocked(now)
		}
		w = &failureWindow{start: now}
		t.windows[k] = w
	}
	w.failures++
}

// makeRoomLocked drops every finished window; if none has finished, the
// oldest one goes (it is the nearest to finishing anyway).
func (t *signInThrottle) makeRoomLocked(now time.Time) {
	var oldest netip.Prefix
	var oldestStart time.Time
	for k, w := range t.windows {
		if !now.Before(w.start.Add(signInWindow)) {
			delete(t.windows, k)
			continue
		}
		if oldestStart.IsZero() || w.start.Before(oldestStart) {
			oldest, oldestStart = k, w.start
		}
	}
	if len(t.windows) >= maxThrottled {
		delete(t.windows, oldest)
	}
}

// size is how many addresses are remembered (for tests).
func (t *signInThrottle) size() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.windows)
}
