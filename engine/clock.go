package engine

import (
	"sync"
	"time"
)

// clockFresh is how long a reading of the database's clock serves to
// date a write without reading it again.
const clockFresh = time.Second

// readingLag bounds the round trip of a reading worth following: the
// reading is the clock of a transaction that began during it, so the
// longer it took, the further behind the database it may be.
const readingLag = 50 * time.Millisecond

// dbClock follows the database's clock between reads, so that a start
// under load is dated without a round trip of its own: the transactions
// around it (every settlement's lock) read the clock anyway. A reading is
// the clock (now()) of a transaction whose BEGIN left with the statement
// that read it, answered at a local instant: the database's clock was at
// least that then, and this process's monotonic clock carries it forward
// for clockFresh at most. The estimate is therefore never ahead of the
// database (an occurrence dated by it is claimable when it commits), and
// behind it by the reading's round trip at most (readingLag). Each
// reading replaces the last: the clock a replica follows may step back by
// that much, as the clocks of concurrent transactions already do.
type dbClock struct {
	// lag replaces readingLag when set (tests on a loaded machine).
	lag time.Duration

	mu sync.Mutex
	// db is the database's clock, at least, at the local instant local
	// (which carries a monotonic reading); zero before the first reading.
	db    time.Time
	local time.Time
}

// observe records the clock db of a transaction that began after sent
// (its BEGIN left then) and was answered at answered.
func (c *dbClock) observe(db, sent, answered time.Time) {
	lag := readingLag
	if c.lag > 0 {
		lag = c.lag
	}
	if answered.Sub(sent) > lag {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
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
