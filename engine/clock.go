package engine

import (
	"sync"
	"time"
)

// clockFresh is how long a reading of the database's clock serves to
// date a write without reading it again.
const clockFresh = time.Second

// dbClock follows the database's clock between reads, so that a start
// under load is dated without a round trip of its own: the transactions
// around it (every settlement's lock) read the clock anyway. A reading is
// the clock of a transaction that was answered at a local instant: the
// database's clock was at least that then, and this process's monotonic
// clock carries it forward. The estimate is therefore never ahead of the
// database (an occurrence dated by it is claimable when it commits), and
// behind it by the reading's round trip at most; it never goes back.
type dbClock struct {
	mu sync.Mutex
	// db is the database's clock, at least, at the local instant local
	// (which carries a monotonic reading); zero before the first reading.
	db    time.Time
	local time.Time
}

// observe records that the database's clock was at least db when an
// answer carrying it arrived, at answered.
func (c *dbClock) observe(db, answered time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.local.IsZero() && c.db.Add(answered.Sub(c.local)).After(db) {
		// The older reading, carried forward, is the closer bound: keep
		// it, so that the estimate never goes back.
		return
	}
	c.db, c.local = db, answered
}

// now is the database's clock at local, if a reading within clockFresh
// of it is known.
func (c *dbClock) now(local time.Time) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.local.IsZero() {
		return time.Time{}, false
	}
	// local may precede the reading (taken by another goroutine since):
	// the bound holds backwards too, the two clocks running alike.
	since := local.Sub(c.local)
	if since > clockFresh || since < -clockFresh {
		return time.Time{}, false
	}
	return c.db.Add(since), true
}
