package longpoll

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/relais/relais/internal/fault"
)

// FetchCounters count the fetches of a surface that long-polls (the pull
// protocol's fetch-and-lock, the Camunda facade's fetchAndLock) by result
// (claimed, empty, too_many_waiters) and the occurrences they claimed.
type FetchCounters struct {
	claimed prometheus.Counter
	fetches *prometheus.CounterVec
}

// NewFetchCounters returns counters with these options (fetches gets its
// result label), registered with reg when it is not nil. Every result is
// there from the start at 0: the first throttled fetch after a restart is
// then a rise that rate() and increase() see.
func NewFetchCounters(claimed, fetches prometheus.CounterOpts, reg prometheus.Registerer) *FetchCounters {
	c := &FetchCounters{claimed: prometheus.NewCounter(claimed), fetches: prometheus.NewCounterVec(fetches, []string{"result"})}
	for _, result := range []string{"claimed", "empty", CodeTooManyWaiters} {
		c.fetches.WithLabelValues(result)
	}
	if reg != nil {
		reg.MustRegister(c.claimed, c.fetches)
	}
	return c
}

// Waited counts a fetch ClaimOrWait refused because the replica's waiters
// are at their bound (err is ClaimOrWait's).
func (c *FetchCounters) Waited(err error) {
	if fault.HasCode(err, CodeTooManyWaiters) {
		c.fetches.WithLabelValues(CodeTooManyWaiters).Inc()
	}
}

// Answered counts a fetch answered with delivered occurrences, of which
// claimed were claimed by it (not a replay's).
func (c *FetchCounters) Answered(delivered, claimed int) {
	c.claimed.Add(float64(claimed))
	if delivered > 0 {
		c.fetches.WithLabelValues("claimed").Inc()
	} else {
		c.fetches.WithLabelValues("empty").Inc()
	}
}
