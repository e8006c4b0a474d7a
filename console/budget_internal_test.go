package console

import (
	"testing"
	"time"
)

// A push call cut at its budget is explained with the budget it had: the
// runner's message names it, shorter than the node's timeout when the
// destination's max_timeout was lowered (push QA: the page said 5 seconds
// of a call cut at 2).
func TestCallBudget(t *testing.T) {
	t.Parallel()
	node := 5 * time.Second
	for _, c := range []struct {
		msg     string
		timeout *time.Duration
		want    time.Duration
		ok      bool
	}{
		{"no complete answer within the budget of PT2S", &node, 2 * time.Second, true},
		{"no complete answer within the budget of PT1.5S: cut", &node, 1500 * time.Millisecond, true},
		{"the occurrence's deadline passed during the call", &node, node, true},
		{"no complete answer within the budget of soon", &node, node, true},
		{"", nil, 0, false},
	} {
		if got, ok := callBudget(c.msg, c.timeout); got != c.want || ok != c.ok {
			t.Errorf("callBudget(%q) = %v, %v; want %v, %v", c.msg, got, ok, c.want, c.ok)
		}
	}
}
