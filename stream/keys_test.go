package stream_test

import (
	"strings"
	"testing"
	"time"

	"github.com/relais/relais/internal/config"
	"github.com/relais/relais/internal/keyring"
	"github.com/relais/relais/internal/relaistest"
)

// TestAReplicaWithoutTheKeyHandsItsClaimsBack: tasks whose values were
// sealed with a data key a replica lacks (a rotation run before every
// replica had the new key) are handed back by it, no attempt spent: its
// long poll is refused 503 data_key_missing with Retry-After, its streams
// claim again once a second rather than in a loop fed by their own
// hand-backs, and a replica with the key delivers the task, its budget
// whole.
func TestAReplicaWithoutTheKeyHandsItsClaimsBack(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t, func(c *config.Config) { c.DataKeys = keyring.NewKeySpec("new") + "," + relaistest.TestKeys })
	lagging := env.Replica(func(c *config.Config) { c.DataKeys = relaistest.TestKeys })
	env.Definition("add_company_to_crm.yaml")
	proc := relaistest.CRMProcess(nil)
	proc["inputs"].(map[string]any)["fields"] = append(proc["inputs"].(map[string]any)["fields"].([]any),
		map[string]any{"name": "contact", "type": "object", "required": true, "classification": "sensitive",
			"fields": []any{map[string]any{"name": "email", "type": "text", "required": true}}})
	proc["nodes"].(map[string]any)["crm"].(map[string]any)["inputs"].(map[string]any)["contact"] = map[string]any{"from": "input.contact"}
	env.Process("crm_sealed", proc)
	token := env.Consumer("crm-sync", "add_company_to_crm")
	env.Must(201, "POST", "/api/v1/processes/crm_sealed/instances", env.Operator, map[string]any{
		"inputs": map[string]any{"name": "Acme", "contact": map[string]any{"email": "a@b.example"}}})
	fetch := map[string]any{"worker_id": "w", "subscriptions": []any{map[string]any{"definition": "add_company_to_crm"}}}

	r := lagging.Do("POST", "/api/v1/pull/fetch-and-lock", token, fetch)
	if r.Status != 503 || r.Code() != "data_key_missing" || r.Header.Get("Retry-After") != "1" {
		t.Fatalf("fetch from the replica without the key: %d %s (Retry-After %q); want 503 data_key_missing", r.Status, r.Body, r.Header.Get("Retry-After"))
	}

	c := newClient(t, "connect", lagging.URL)
	s := open(t, c, token, subscribeRequest("w-stream", 1))
	s.quiet(2500 * time.Millisecond)
	s.close()
	if n := strings.Count(lagging.Logs.String(), "a claim cannot be delivered"); n < 3 || n > 6 {
		t.Errorf("%d undeliverable claims in 2.5 s of a stream and one fetch; want one a second, not a loop", n)
	}

	got := env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", token, fetch).JSON(t)["occurrences"].([]any)
	if len(got) != 1 {
		t.Fatalf("fetch from a replica with the key: %d tasks; want 1", len(got))
	}
	o := got[0].(map[string]any)
	if o["attempts_left"] != 2.0 || o["inputs"].(map[string]any)["contact"].(map[string]any)["email"] != "a@b.example" {
		t.Errorf("task %v; want its whole budget (3, this attempt taking one) and its sealed value opened", o)
	}
}
