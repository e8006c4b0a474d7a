package pull_test

import (
	"testing"

	"github.com/relais/relais/internal/relaistest"
)

// A worker subscribed to several definitions is served by each in turn,
// whatever one's backlog: one definition's older occurrences do not hold
// back another's (by priority first, as ever; in order within each). A
// fetch of four takes two of each definition with work (an idle one
// subscribed between them takes no turn); fetches of one take each
// definition as often as the other, even while another worker claims in
// lockstep on the same replica (which a turn counter moved on at each
// claim would defeat: the shared worker would always be served the same
// definition first).
func TestClaimsTakeTurnsAcrossDefinitions(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	for _, key := range []string{"team_a.job", "team_b.job", "team_c.job"} {
		nsDefinition(t, env, key)
		env.Process(processKeyFor(key), nsProcess(key))
	}
	token := env.Consumer("pool", "team_a.job", "team_b.job", "team_c.job")
	startMany := func(process string, n int) {
		items := make([]any, n)
		for i := range items {
			items[i] = map[string]any{"inputs": map[string]any{"company": "Acme", "city": "Lyon", "card": "4111111111111111"}}
		}
		env.Must(200, "POST", "/api/v1/processes/"+process+"/instances/batch", env.Operator, map[string]any{"items": items})
	}
	startMany("team_a_job", 80)
	startMany("team_c_job", 40)
	// team_b.job has no work.
	shared := map[string]any{"worker_id": "shared", "subscriptions": []any{map[string]any{"definition": "team_a.job"},
		map[string]any{"definition": "team_b.job"}, map[string]any{"definition": "team_c.job"}}}
	byDefinition := map[string][]string{}
	for _, o := range fetch(t, env, token, withMax(shared, 4)) {
		byDefinition[o["definition"].(string)] = append(byDefinition[o["definition"].(string)], o["id"].(string))
	}
	if len(byDefinition["team_a.job"]) != 2 || len(byDefinition["team_c.job"]) != 2 {
		t.Errorf("a fetch of four took %v, want two of each definition with work", byDefinition)
	}
	// Fetches of one by the shared worker, each followed by one of
	// another worker taking team_a.job alone.
	alone := map[string]any{"worker_id": "alone", "subscriptions": []any{map[string]any{"definition": "team_a.job"}}}
	counts := map[string]int{}
	for range 36 {
		for _, o := range fetch(t, env, token, withMax(shared, 1)) {
			counts[o["definition"].(string)]++
		}
		fetch(t, env, token, withMax(alone, 1))
	}
	// Each definition half the time: outside 6 to 30 of 36 is a chance of
	// about one in 10^5 (binomial), a starved one is 0.
	if c := counts["team_c.job"]; c < 6 || c > 30 || counts["team_b.job"] != 0 {
		t.Errorf("36 fetches of one took %v, want team_a.job and team_c.job about half each", counts)
	}
}

func withMax(body map[string]any, n int) map[string]any {
	out := map[string]any{"max_tasks": n}
	for k, v := range body {
		out[k] = v
	}
	return out
}
