package console

import (
	"context"
	"time"

	"github.com/relais/relais/engine"
)

// SetClock replaces the clock sessions expire by; call it before serving.
func SetClock(c *Console, now func() time.Time) { c.now = now }

// SetCounts replaces where the console reads the counts by status; call it
// before serving.
func SetCounts(c *Console, f func(context.Context) ([]engine.OccurrenceCount, time.Time, error)) {
	c.countsOf = f
}

// SetBulkCost replaces what a bulk action is expected to take per
// instance; call it before serving.
func SetBulkCost(c *Console, d time.Duration) { c.bulkCost = d }

const MaxGraphNodes = maxGraphNodes
