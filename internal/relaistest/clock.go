package relaistest

import (
	"sync"
	"time"
)

// Clock is the time an Env's engine acts at: the real time plus an offset
// that tests move forward, so a lock expiry or a deadline is reached without
// sleeping through it. Replicas of one Env share it, as replicas of one
// database share PostgreSQL's clock.
type Clock struct {
	mu     sync.Mutex
	offset time.Duration
}

// Now is the real time plus the offset.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += max(d, 0)
}

// AdvanceTo moves the clock forward until it shows at least t (a lock's end
// announced by the server, in the clock's time); it never moves back.
func (c *Clock) AdvanceTo(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d := time.Until(t) - c.offset; d > 0 {
		c.offset += d
	}
}
