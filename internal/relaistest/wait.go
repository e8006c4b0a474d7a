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

// TimeOf reads a time an API answer carried (RFC 3339), failing the test
// when v is not one; what names it in the failure.
func TimeOf(t testing.TB, what string, v any) time.Time {
	t.Helper()
	s, _ := v.(string)
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("%s = %v, want an RFC 3339 time: %v", what, v, err)
	}
	return at
}
