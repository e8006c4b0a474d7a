package engine

import (
	"testing"
	"time"
)

// A push call's budget is the least of its node's timeout, its
// destination's max_timeout and Relais's ceiling, each of which may be
// absent.
func TestCallBudget(t *testing.T) {
	t.Parallel()
	s := time.Second
	ptr := func(d time.Duration) *time.Duration { return &d }
	for _, c := range []struct {
		name          string
		timeout       time.Duration
		destCap       *time.Duration
		ceiling, want time.Duration
	}{
		{"the node's", 10 * s, ptr(30 * s), 60 * s, 10 * s},
		{"cut by the destination", 10 * s, ptr(5 * s), 60 * s, 5 * s},
		{"cut by the ceiling", 10 * s, ptr(30 * s), 3 * s, 3 * s},
		{"no destination known", 10 * s, nil, 3 * s, 3 * s},
		{"no ceiling", 10 * s, ptr(5 * s), 0, 5 * s},
		{"no timeout: the ceiling", 0, nil, 30 * s, 30 * s},
		{"no timeout: the destination's", 0, ptr(5 * s), 30 * s, 5 * s},
	} {
		if got := CallBudget(c.timeout, c.destCap, c.ceiling); got != c.want {
			t.Errorf("%s: CallBudget(%v, %v, %v) = %v, want %v", c.name, c.timeout, c.destCap, c.ceiling, got, c.want)
		}
	}
}
