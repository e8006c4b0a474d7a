package push_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/relais/relais/internal/embeddedpg"
	"github.com/relais/relais/internal/relaistest"
)

// TestResultRecordedThroughADatabaseOutage: PostgreSQL goes away while a
// push call is in flight and comes back a second later; the destination's
// answer is recorded once it is back (the instance completes, the
// destination was called once) instead of being lost and failed
// outcome_unknown when the reservation expires.
func TestResultRecordedThroughADatabaseOutage(t *testing.T) {
	t.Parallel()
	opts, cluster, pool := relaistest.OwnCluster(t)
	var mu sync.Mutex
	running := cluster
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		if running != nil {
			_ = running.Stop(context.Background())
		}
	})
	env := relaistest.NewOnPool(t, pool)
	env.Definition("score_company.yaml")

	restarted := make(chan error, 1)
	// The call may come before the start's answer has reached the test
	// (the runner is woken at its commit): the database must outlive that
	// answer, or the start would be a lost answer, not this test's case.
	answered := make(chan struct{})
	d := newDestination(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-answered:
		case <-time.After(10 * time.Second):
		}
		// The database goes while the call is in flight, and is back 9 s
		// later: past the call's budget and 5 s (the reservation once,
		// when the timers, back first, failed the call outcome_unknown),
		// within the 30 s the runner retries.
		mu.Lock()
		err := running.Stop(context.Background())
		running = nil
		mu.Unlock()
		if err != nil {
			restarted <- err
		} else {
			go func() {
				time.Sleep(9 * time.Second)
				c, err := embeddedpg.Start(context.Background(), opts)
				mu.Lock()
				running = c
				mu.Unlock()
				restarted <- err
			}()
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"outputs": {"score": 42, "band": "low"}}`)
	})
	env.Must(201, "PUT", "/api/v1/destinations/scoring", env.Admin, map[string]any{"url": d.URL + "/score", "max_timeout": "PT5S"})
	env.Process("scoring", scoreProcess("scoring", "PT2S"))
	id := env.Must(201, "POST", "/api/v1/processes/scoring/instances", env.Operator, map[string]any{"inputs": map[string]any{"crm_id": "C-1"}}).JSON(t)["id"].(string)
	close(answered)

	select {
	case err := <-restarted:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the destination was never called, or the database never came back")
	}
	var inst map[string]any
	relaistest.WaitFor(t, 20*time.Second, "the instance ends", func() (bool, string) {
		r := env.Do("GET", "/api/v1/instances/"+id, env.Operator, nil)
		if r.Status != 200 {
			return false, fmt.Sprintf("%d %s", r.Status, r.Body)
		}
		inst = r.JSON(t)
		return inst["status"] != "running", fmt.Sprintf("status %v", inst["status"])
	})
	if inst["status"] != "completed" || d.calls.Load() != 1 {
		t.Fatalf("instance %v (%v) after %d calls; want completed with the destination's answer, called once", inst["status"], inst["error_code"], d.calls.Load())
	}
}
