package console_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/google/uuid"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/relaistest"
)

// incidents adds held instances to the fixture (DESIGN §12):
//   - pullHeld: a scoring instance (pull node on score_company, business
//     key lead-7) whose worker failed it with SCORER_DOWN, which its
//     on_error holds; a retry offers it again and it stays available;
//   - pushHeld: two checkout orders (order-1001, order-1002) whose payment
//     destination answered 503, which holds them;
//   - stopped: a third order, held then stopped by ops-alice with a reason.
func (f *fixture) addIncidents(t *testing.T) {
	t.Helper()
	env := f.env
	ctx := context.Background()

	env.Definition("score_company.yaml")
	env.Process("scoring", map[string]any{
		"inputs": map[string]any{"fields": []any{map[string]any{"name": "crm_id", "type": "text", "required": true}}},
		"start":  "score",
		"nodes": map[string]any{
			"score": map[string]any{"kind": "pull", "definition": "score_company", "revision": 1,
				"inputs": map[string]any{"crm_id": map[string]any{"from": "input.crm_id"}, "country": map[string]any{"value": "FR"}},
				"policy": map[string]any{"max_attempts": 2},
				"next":   "done", "on_error": map[string]any{"SCORER_DOWN": "hold", "*": "failed"}},
			"done":   map[string]any{"kind": "end"},
			"failed": map[string]any{"kind": "end", "status": "failed"},
		},
	})
	f.scorer = env.Consumer("scorer", "score_company")
	f.pullHeld = env.Must(201, "POST", "/api/v1/processes/scoring/instances", env.Operator, map[string]any{
		"business_key": "lead-7", "inputs": map[string]any{"crm_id": "CRM-7"}}).JSON(t)["id"].(string)
	occ := env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", f.scorer, map[string]any{"worker_id": "scorer-1",
		"subscriptions": []any{map[string]any{"definition": "score_company"}}}).JSON(t)["occurrences"].([]any)
	if len(occ) != 1 {
		t.Fatalf("scoring fetch: %v", occ)
	}
	f.pullHeldOcc = occ[0].(map[string]any)["id"].(string)
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+f.pullHeldOcc+"/fail", f.scorer, map[string]any{"worker_id": "scorer-1",
		"error_code": "SCORER_DOWN", "message": "the scoring model is being redeployed", "retryable": false})

	// The payment destination refuses every call: 503 holds the order.
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "maintenance", http.StatusServiceUnavailable)
	}))
	t.Cleanup(dest.Close)
	env.Must(201, "PUT", "/api/v1/destinations/payments", env.Admin, map[string]any{"url": dest.URL + "/charge", "max_timeout": "PT5S"})
	env.Definition("charge_card.yaml")
	checkout := relaistest.Body(relaistest.ExampleDocs(t, "processes/checkout.yaml")[0], "key")
	checkout["nodes"].(map[string]any)["charge"].(map[string]any)["on_error"] = map[string]any{
		"destination_http_503": "hold", "deadline_exceeded": "hold", "*": "refused"}
	env.Process("checkout", checkout)
	order := func(id string) string {
		return env.Must(201, "POST", "/api/v1/processes/checkout/instances", env.Operator, map[string]any{"business_key": id,
			"inputs": map[string]any{"order_id": id, "amount_cents": 4200, "currency": "EUR", "card_token": canarySecret,
				"cardholder": map[string]any{"name": canarySensitive, "email": "jo@example.com"}}}).JSON(t)["id"].(string)
	}
	f.pushHeld = []string{order("order-1001"), order("order-1002")}
	f.stopped = order("order-1003")
	for _, id := range append([]string{f.stopped}, f.pushHeld...) {
		relaistest.WaitFor(t, 10*time.Second, "order "+id+" held", func() (bool, string) {
			s := env.Must(200, "GET", "/api/v1/instances/"+id, env.Operator, nil).JSON(t)["status"].(string)
			return s == "held", s
		})
	}
	occs := env.Must(200, "GET", "/api/v1/occurrences?instance="+f.pushHeld[0], env.Operator, nil).JSON(t)["items"].([]any)
	f.pushHeldOcc = occs[0].(map[string]any)["id"].(string)
	if _, err := env.Engine.Act(ctx, engine.Actor{Name: "ops-alice"}, engine.ActionStop, uuid.MustParse(f.stopped), "duplicate order (OPS-1234)"); err != nil {
		t.Fatal(err)
	}
}

// newIncidentFixture is newFixture with incidents.
func newIncidentFixture(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t)
	f.addIncidents(t)
	return f
}

// The attempts table marks the first attempt after an operator's retry,
// where its fresh budget began (on-call QA: nothing said where).
func TestAttemptsMarkAnOperatorsRetry(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	env := f.env
	env.Must(200, "POST", "/api/v1/instances/"+f.pullHeld+"/retry", env.Operator, map[string]any{"reason": "model redeployed"})
	occ := env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", f.scorer, map[string]any{"worker_id": "scorer-1",
		"subscriptions": []any{map[string]any{"definition": "score_company"}}}).JSON(t)["occurrences"].([]any)
	if len(occ) != 1 || occ[0].(map[string]any)["id"] != f.pullHeldOcc {
		t.Fatalf("after the retry, fetched %v", occ)
	}
	for lang, want := range map[string]string{"en": "after operator’s retry at ", "fr": "après la reprise par operator le "} {
		page := signedIn(t, env.URL, lang, env.Operator).mustGet("/console/occurrences/"+f.pullHeldOcc, 200)
		var marks []string
		page.doc.Find(`[data-testid=attempt-row]`).Each(func(_ int, s *goquery.Selection) {
			marks = append(marks, strings.TrimSpace(s.Find(`[data-testid=retried-before]`).Text()))
		})
		if len(marks) != 2 || marks[0] != "" || !strings.HasPrefix(marks[1], want) {
			t.Errorf("%s: retry marks by attempt %q, want the second attempt marked %q", lang, marks, want)
		}
	}
}
