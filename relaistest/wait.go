package relaistest

import (
	"fmt"
	"testing"
	"time"
)

// WaitFor polls cond every 20 ms until it holds, failing the test when
// within passes first; cond's second result describes what it last saw.
func WaitFor(t testing.TB, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %v; last seen: %s", what, within, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WaitEnded polls an instance (as operator) until it leaves running and
// returns it, failing the test when within passes first.
func (e *Env) WaitEnded(id string, within time.Duration) map[string]any {
	e.T.Helper()
	var inst map[string]any
	WaitFor(e.T, within, "instance "+id+" ends", func() (bool, string) {
		inst = e.Must(200, "GET", "/api/v1/instances/"+id, e.Operator, nil).JSON(e.T)
		return inst["status"] != "running", fmt.Sprintf("status %v", inst["status"])
	})
	return inst
}
