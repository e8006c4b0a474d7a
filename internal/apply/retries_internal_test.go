package apply

import (
	"strings"
	"testing"
	"time"

	"github.com/relais/relais/engine/process"
)

// A pull node whose retry delay is no shorter than its deadline can never
// retry: apply says so (designer QA: it published without a word).
func TestFutileRetries(t *testing.T) {
	node := func(retry, deadline time.Duration, attempts int) *process.Node {
		return &process.Node{Kind: process.KindPull, Policy: process.Policy{MaxAttempts: attempts, RetryDelay: retry, Deadline: deadline}}
	}
	p := &process.Process{Nodes: map[string]*process.Node{
		"check":  node(5*time.Minute, 2*time.Minute, 3),
		"fine":   node(10*time.Second, 2*time.Minute, 3),
		"once":   node(5*time.Minute, 2*time.Minute, 1),
		"nodead": node(5*time.Minute, 0, 3),
	}}
	got := futileRetries(p)
	if want := "; node check retries after PT5M, no sooner than its deadline (PT2M) ends the occurrence: no retry can run"; !strings.HasPrefix(got, want) {
		t.Errorf("futileRetries = %q, want %q…", got, want)
	}
	for _, other := range []string{"fine", "once", "nodead"} {
		if strings.Contains(got, "node "+other+" ") {
			t.Errorf("futileRetries = %q names %s", got, other)
		}
	}
}

// A push node whose deadline is shorter than its timeout has its call cut
// short by the deadline: apply says so (push QA).
func TestAPushDeadlineUnderItsTimeout(t *testing.T) {
	push := func(timeout, deadline time.Duration) *process.Node {
		return &process.Node{Kind: process.KindPush, Timeout: timeout, Policy: process.Policy{MaxAttempts: 1, Deadline: deadline}}
	}
	got := futileRetries(&process.Process{Nodes: map[string]*process.Node{
		"charge": push(3*time.Second, time.Second), "fine": push(time.Second, time.Minute), "nodead": push(3*time.Second, 0)}})
	if want := "; node charge's call may take PT3S, past its deadline (PT1S), which cuts it short"; !strings.HasPrefix(got, want) {
		t.Errorf("futileRetries = %q, want %q…", got, want)
	}
	for _, other := range []string{"fine", "nodead"} {
		if strings.Contains(got, "node "+other) {
			t.Errorf("futileRetries = %q names %s", got, other)
		}
	}
}
