package pull_test

import (
	"fmt"
	"testing"

	"github.com/relais/relais/internal/relaistest"
)

// A worker subscribed to several definitions is served by each in turn,
// whatever one's backlog: one definition's older occurrences do not hold
// back another's (by priority first, as ever; in order within each). A
// fetch of four takes two of each; successive fetches of one alternate
// between the definitions with work (an idle one subscribed between them
// gives its turn to neither).
func TestClaimsTakeTurnsAcrossDefinitions(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	for _, key := range []string{"team_a.job", "team_b.job", "team_c.job"} {
		nsDefinition(t, env, key)
		env.Process(processKeyFor(key), nsProcess(key))
	}
	token := env.Consumer("pool", "team_a.job", "team_b.job", "team_c.job")
	var backlog, trickle []string
	for range 10 {
		_, occ := startNS(t, env, "team_a_job")
		backlog = append(backlog, occ)
	}
	for range 4 {
		_, occ := startNS(t, env, "team_c_job")
		trickle = append(trickle, occ)
	}
	// team_b.job has no work.
	both := map[string]any{"worker_id": "w", "subscriptions": []any{map[string]any{"definition": "team_a.job"},
		map[string]any{"definition": "team_b.job"}, map[string]any{"definition": "team_c.job"}}}
	kinds := func(occs []map[string]any) (out []string) {
		for _, o := range occs {
			out = append(out, o["definition"].(string)+" "+o["id"].(string))
		}
		return out
	}
	four := fetch(t, env, token, withMax(both, 4))
	got := kinds(four)
	want := []string{"team_a.job " + backlog[0], "team_a.job " + backlog[1], "team_c.job " + trickle[0], "team_c.job " + trickle[1]}
	if !sameSet(got, want) {
		t.Errorf("a fetch of four took %v, want the two oldest of each definition %v", got, want)
	}
	var singles []string
	for range 4 {
		for _, o := range fetch(t, env, token, withMax(both, 1)) {
			singles = append(singles, o["definition"].(string))
		}
	}
	if fmt.Sprint(singles) != "[team_c.job team_a.job team_c.job team_a.job]" && fmt.Sprint(singles) != "[team_a.job team_c.job team_a.job team_c.job]" {
		t.Errorf("four fetches of one took %v, want the definitions in turn", singles)
	}
}

func withMax(body map[string]any, n int) map[string]any {
	out := map[string]any{"max_tasks": n}
	for k, v := range body {
		out[k] = v
	}
	return out
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]int{}
	for _, x := range a {
		seen[x]++
	}
	for _, x := range b {
		seen[x]--
	}
	for _, n := range seen {
		if n != 0 {
			return false
		}
	}
	return true
}
