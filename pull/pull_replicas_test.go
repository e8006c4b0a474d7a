package pull_test

// Long polling (DESIGN §3): wake-ups on new work, on this replica and
// across replicas through NOTIFY; the empty answer when the wait elapses;
// release of a waiter whose client went away; the per-replica bound.

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/config"
	"github.com/relais/relais/internal/relaistest"
)

// A long poll on an empty queue is answered as soon as an instance reaches
// a matching pull node, not when its wait ends.
func TestLongPollWakesOnNewOccurrence(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, nil)
	began := time.Now()
	lp := background(t, env, consumer, fetchBody("w1", "wait", "PT5S"))
	lp.waiting(t)

	startedAt := time.Now()
	_, id := start(t, env, "crm_only", "Acme")
	a := lp.receive(t, 6*time.Second)
	if a.err != nil || a.res.Status != 200 {
		t.Fatalf("long poll: got %d %s (err %v), want 200", a.res.Status, a.res.Body, a.err)
	}
	one(t, occurrencesOf(t, a.res), id)
	if d := a.at.Sub(began); d >= 2*time.Second {
		t.Errorf("long poll answered %v after it began (%v after the start), want well before its 5s wait (< 2s)", d, a.at.Sub(startedAt))
	}
	waitWaiters(t, env, 0, 3*time.Second)
}

// A fetch waiting with a token that is rotated (or revoked) meanwhile is
// answered 401 when work arrives, and the work stays available: it is not
// handed to a token that could never settle it.
func TestLongPollWithARotatedTokenClaimsNothing(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, nil)
	lp := background(t, env, consumer, fetchBody("w1", "wait", "PT5S"))
	lp.waiting(t)
	env.Must(200, "POST", fmt.Sprintf("/api/v1/consumers/%d/rotate", env.ConsumerID("crm-sync")), env.Admin, nil)
	_, id := start(t, env, "crm_only", "Acme")
	a := lp.receive(t, 6*time.Second)
	if a.err != nil {
		t.Fatal(a.err)
	}
	wantProblem(t, "a waiting fetch whose token was rotated", a.res, 401, "unauthorized")
	if o := observe(t, env, id); o["status"] != "available" {
		t.Errorf("occurrence %v after the refused fetch, want available", o["status"])
	}
}

// A fetch waiting with a token revoked meanwhile is answered 401 at once,
// without waiting for work or its fallback poll: the worker hears that
// its token is gone when it is.
func TestLongPollEndsWhenItsTokenIsRevoked(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, nil)
	lp := background(t, env, consumer, fetchBody("w1", "wait", "PT30S"))
	lp.waiting(t)
	revoked := time.Now()
	env.Must(200, "POST", fmt.Sprintf("/api/v1/consumers/%d/rotate", env.ConsumerID("crm-sync")), env.Admin, nil)
	a := lp.receive(t, 10*time.Second)
	if a.err != nil {
		t.Fatal(a.err)
	}
	wantProblem(t, "a waiting fetch whose token was revoked", a.res, 401, "unauthorized")
	if d := a.at.Sub(revoked); d > 2*time.Second {
		t.Errorf("answered %v after the revocation, want at once (the fallback poll is 5 s)", d)
	}
}

// With nothing available a fetch answers {"occurrences":[]} once its wait
// elapses.
func TestLongPollAnswersEmptyAfterWait(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, nil)
	began := time.Now()
	r := env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, fetchBody("w1", "wait", "PT0.5S"))
	d := time.Since(began)
	if got := string(bytes.TrimSpace(r.Body)); got != `{"occurrences":[]}` {
		t.Errorf("empty long poll answered %s, want {\"occurrences\":[]}", got)
	}
	if d < 450*time.Millisecond || d > 1500*time.Millisecond {
		t.Errorf("empty long poll answered after %v, want about 0.5s", d)
	}
}

// A client that disconnects mid-wait releases its waiter at once, and the
// abandoned fetch claims nothing afterwards.
func TestLongPollReleasesWaiterOnClientDisconnect(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, nil)
	lp := background(t, env, consumer, fetchBody("gone", "wait", "PT30S"))
	lp.waiting(t)

	lp.cancel()
	if a := lp.receive(t, 3*time.Second); a.err == nil {
		t.Fatalf("cancelled fetch: got %d %s, want the client-side cancellation error", a.res.Status, a.res.Body)
	}
	waitWaiters(t, env, 0, 3*time.Second)
	// Not an empty answer: logged 499 and counted abandoned, so that a
	// proxy cutting long polls short shows.
	relaistest.WaitFor(t, 5*time.Second, "the abandoned fetch's log line and metric", func() (bool, string) {
		abandoned, _ := env.Metrics().Get("relais_pull_fetch_duration_seconds_count", "result", "abandoned")
		logged := strings.Contains(env.Logs.String(), "route=/api/v1/pull/fetch-and-lock") && strings.Contains(env.Logs.String(), "status=499")
		return abandoned == 1 && logged, fmt.Sprintf("abandoned %v, 499 logged %v", abandoned, logged)
	})
	if empty, _ := env.Metrics().Get("relais_pull_fetch_duration_seconds_count", "result", "empty"); empty != 0 {
		t.Errorf("the abandoned fetch counted empty too (%v)", empty)
	}
	// Its worker is live as long as after any fetch, not for the whole
	// wait it asked: a killed worker would hide a definition nobody serves.
	env.Clock.Advance(engine.LiveHeartbeats*10*time.Second + time.Second)
	if items := env.Must(200, "GET", "/api/v1/workers", env.Operator, nil).JSON(t)["items"].([]any); len(items) != 0 {
		t.Errorf("workers 31 s after an abandoned 30 s long poll: %v, want none", items)
	}
	// Unless it was seen since its abandoned poll began: a client that
	// gave up on one replica and polls another is not cut short.
	other := env.Replica()
	lp = background(t, env, consumer, fetchBody("moved", "wait", "PT30S"))
	lp.waiting(t)
	env.Clock.Advance(time.Second)
	other.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, fetchBody("moved"))
	lp.cancel()
	lp.receive(t, 3*time.Second)
	waitWaiters(t, env, 0, 3*time.Second)
	env.Clock.Advance(engine.LiveHeartbeats*10*time.Second + time.Second)
	if items := env.Must(200, "GET", "/api/v1/workers", env.Operator, nil).JSON(t)["items"].([]any); len(items) != 1 {
		t.Errorf("workers after a poll abandoned on one replica while another saw the worker: %v, want it listed", items)
	}

	_, id := start(t, env, "crm_only", "Acme")
	occ := one(t, fetch(t, env, consumer, fetchBody("w2")), id)
	if occ["attempt"] != 1.0 {
		t.Errorf("occurrence started after the disconnect has attempt %v, want 1 (claimed by nobody before)", occ["attempt"])
	}
}

// Waiters are bounded per replica: past the bound a fetch that would wait
// gets 429 too_many_waiters with Retry-After; a fetch without wait still
// works, and the slot is free again once the waiter leaves.
func TestWaitersAreBounded(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, nil, func(c *config.Config) { c.Pull.MaxWaiters = 1 })
	lp := background(t, env, consumer, fetchBody("w1", "wait", "PT10S"))
	lp.waiting(t)

	r := env.Do("POST", "/api/v1/pull/fetch-and-lock", consumer, fetchBody("w2", "wait", "PT50S"))
	wantProblem(t, "second long poll", r, 429, "too_many_waiters")
	if s, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || s < 1 {
		t.Errorf("Retry-After = %q, want a positive number of seconds", r.Header.Get("Retry-After"))
	}
	if occs := fetch(t, env, consumer, fetchBody("w3")); len(occs) != 0 {
		t.Errorf("fetch without wait got %v, want nothing (and 200)", ids(occs))
	}

	lp.cancel()
	waitWaiters(t, env, 0, 3*time.Second)
	env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, fetchBody("w2", "wait", "PT0.1S"))
}

// A full waiter bound refuses only fetches that would have to wait: work
// that is already available is delivered ("with nothing available it
// long-polls").
func TestFullWaiterBoundStillDeliversAvailableWork(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, nil, func(c *config.Config) { c.Pull.MaxWaiters = 1 })
	env.Definition("score_company.yaml")
	scorer := env.Consumer("scorer", "score_company")
	background(t, env, scorer, map[string]any{"worker_id": "idle", "subscriptions": []any{map[string]any{"definition": "score_company"}}, "wait": "PT10S"}).waiting(t)

	_, id := start(t, env, "crm_only", "Acme")
	r := env.Do("POST", "/api/v1/pull/fetch-and-lock", consumer, fetchBody("w1", "wait", "PT5S"))
	if r.Status != 200 {
		t.Fatalf("fetch with wait while an occurrence is available and the waiter bound is full: got %d %s, want 200 with the occurrence", r.Status, r.Body)
	}
	one(t, occurrencesOf(t, r), id)
}

// NOTIFY crosses replicas: a long poll on replica B is answered promptly
// when an instance is started through replica A.
func TestNotifyCrossesReplicas(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, nil)
	env2 := env.Replica()
	began := time.Now()
	lp := background(t, env2, consumer, fetchBody("w1", "wait", "PT10S"))
	lp.waiting(t)

	_, id := start(t, env, "crm_only", "Acme")
	startedAt := time.Now()
	a := lp.receive(t, 11*time.Second)
	if a.err != nil || a.res.Status != 200 {
		t.Fatalf("long poll on replica B: got %d %s (err %v), want 200", a.res.Status, a.res.Body, a.err)
	}
	one(t, occurrencesOf(t, a.res), id)
	if d := a.at.Sub(startedAt); d > 2*time.Second {
		t.Errorf("replica B answered %v after the start on replica A (long poll began %v before), want within 2s", d, startedAt.Sub(began))
	}
	if v, _ := metric(t, env, "relais_pull_waiters"); v != 0 {
		t.Errorf("replica A holds %v waiters, want 0", v)
	}
}
