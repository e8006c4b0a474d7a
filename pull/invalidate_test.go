package pull_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/relais/relais/internal/relaistest"
)

// What a replica keeps in memory to spare the database on every fetch,
// settlement and start (grants, revisions, the latest process version) is
// dropped on every replica when it changes on any: the change is seen at
// once, not after a timeout.
func TestCachedKnowledgeFollowsChangesAcrossReplicas(t *testing.T) {
	t.Parallel()
	a, consumer := newCRM(t, nil)
	b := a.Replica()
	consumerID := a.ConsumerID("crm-sync")
	// Replica a learns the grants and the revisions.
	fetch(t, a, consumer, fetchBody("w1"))

	// A new revision snapshotted on b is subscribed on a at once.
	working := a.Must(200, "GET", "/api/v1/definitions/"+crmKey, a.Operator, nil).JSON(t)["working"].(map[string]any)
	working["description"] = "changed"
	b.Must(200, "PUT", "/api/v1/definitions/"+crmKey+"/working", b.Designer, working)
	b.Must(201, "POST", "/api/v1/definitions/"+crmKey+"/revisions", b.Designer, nil)
	doc := relaistest.CRMProcess(nil)
	doc["nodes"].(map[string]any)["crm"].(map[string]any)["revision"] = 2
	b.Process("crm_only", doc)
	relaistest.WaitFor(t, 2*time.Second, "replica a starts version 2", func() (bool, string) {
		inst := a.Must(201, "POST", "/api/v1/processes/crm_only/instances", a.Operator, map[string]any{"inputs": map[string]any{"name": "x"}}).JSON(t)
		return inst["version"] == 2.0, fmt.Sprint("version ", inst["version"])
	})
	relaistest.WaitFor(t, 2*time.Second, "replica a claims revision 2", func() (bool, string) {
		got := fetch(t, a, consumer, fetchBody("w1", "max_tasks", 10))
		for _, o := range got {
			if o["revision"] == 2.0 {
				return true, ""
			}
		}
		return false, fmt.Sprint(len(got), " claimed, none of revision 2")
	})

	// Grants withdrawn on b: a refuses at once.
	b.Must(200, "PUT", fmt.Sprintf("/api/v1/consumers/%d/grants", consumerID), b.Admin, map[string]any{"grants": []any{}})
	relaistest.WaitFor(t, 2*time.Second, "replica a refuses the withdrawn grant", func() (bool, string) {
		r := a.Do("POST", "/api/v1/pull/fetch-and-lock", consumer, fetchBody("w1"))
		return r.Status == 403, fmt.Sprint(r.Status)
	})
}

// A token revoked behind Relais's back (an operator's SQL in an emergency)
// is forgotten by every replica that kept it, through the trigger's
// notification: within its delivery, not at the next restart.
func TestTokenRevokedBySQLIsForgotten(t *testing.T) {
	t.Parallel()
	a, consumer := newCRM(t, nil)
	b := a.Replica()
	for _, env := range []*relaistest.Env{a, b} {
		env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, fetchBody("w1"))
	}
	if _, err := a.Pool.Exec(t.Context(), "update tokens set revoked_at = now() where consumer_id is not null"); err != nil {
		t.Fatal(err)
	}
	for name, env := range map[string]*relaistest.Env{"a": a, "b": b} {
		relaistest.WaitFor(t, 2*time.Second, "replica "+name+" refuses the revoked token", func() (bool, string) {
			r := env.Do("POST", "/api/v1/pull/fetch-and-lock", consumer, fetchBody("w1"))
			return r.Status == 401, fmt.Sprint(r.Status)
		})
	}
}

// A long poll resolves its subscriptions when it begins: a grant withdrawn
// while it waits (on another replica), or its consumer revoked, stops it
// from claiming what becomes available afterwards. It answers 403
// not_granted (401 once its consumer, and so its token, is gone), and the
// occurrence stays available for a worker still granted.
func TestWithdrawnGrantStopsAWaitingLongPoll(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		withdraw func(b *relaistest.Env, id int64)
		// A deleted consumer's token is revoked with it: the waiting
		// fetch authenticates again when it wakes and is refused as such.
		status int
		code   string
	}{
		"grants emptied": {func(b *relaistest.Env, id int64) {
			b.Must(200, "PUT", fmt.Sprintf("/api/v1/consumers/%d/grants", id), b.Admin, map[string]any{"grants": []any{}})
		}, 403, "not_granted"},
		"consumer revoked": {func(b *relaistest.Env, id int64) {
			b.Must(204, "DELETE", fmt.Sprintf("/api/v1/consumers/%d", id), b.Admin, nil)
		}, 401, "unauthorized"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			a, consumer := newCRM(t, nil)
			b := a.Replica()
			answered := make(chan relaistest.Response, 1)
			go func() {
				answered <- a.Do("POST", "/api/v1/pull/fetch-and-lock", consumer, fetchBody("w1", "wait", "PT10S"))
			}()
			relaistest.WaitFor(t, 5*time.Second, "the fetch waits", func() (bool, string) {
				n := a.Metrics().Must(t, "relais_pull_waiters")
				return n == 1, fmt.Sprint(n, " waiters")
			})
			tc.withdraw(b, a.ConsumerID("crm-sync"))
			// Seen by replica a (its memo emptied by the notification).
			relaistest.WaitFor(t, 2*time.Second, "replica a refuses the consumer", func() (bool, string) {
				r := a.Do("POST", "/api/v1/pull/fetch-and-lock", consumer, fetchBody("w2"))
				return r.Status == 403 || r.Status == 401, fmt.Sprint(r.Status)
			})
			_, id := start(t, b, "crm_only", "Acme")
			select {
			case r := <-answered:
				if r.Status != tc.status || r.JSON(t)["code"] != tc.code {
					t.Errorf("the waiting fetch answered %d %s, want %d %s", r.Status, r.Body, tc.status, tc.code)
				}
			case <-time.After(8 * time.Second):
				t.Fatal("the waiting fetch did not answer")
			}
			if o := observe(t, a, id); o["status"] != "available" {
				t.Errorf("occurrence %v after the withdrawal, want available", o["status"])
			}
		})
	}
}
