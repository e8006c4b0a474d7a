package api_test

import (
	"strings"
	"testing"

	"github.com/relais/relais/internal/relaistest"
)

// A pattern whose compiled program would make checking a long value burn
// a core for a minute is refused where it is written, a Working's field
// or a process input, at its pointer.
func TestCostlyPatternIsRefused(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	costly := strings.Repeat("[a-z]{1000}", 80) + "!"
	field := map[string]any{"name": "t", "type": "text", "pattern": costly}
	r := env.Do("PUT", "/api/v1/definitions/rx_probe/working", env.Designer, map[string]any{"name": "Probe",
		"inputs": map[string]any{"fields": []any{field}}, "outputs": map[string]any{"fields": []any{}}})
	if r.Status != 422 || r.Code() != "invalid_contract" || !strings.Contains(string(r.Body), `"/inputs/fields/0/pattern"`) || !strings.Contains(string(r.Body), "too costly") {
		t.Errorf("Working with a costly pattern: %d %.400s, want 422 at /inputs/fields/0/pattern", r.Status, r.Body)
	}
	r = env.Do("POST", "/api/v1/processes/rx_probe/versions", env.Designer, map[string]any{
		"inputs": map[string]any{"fields": []any{field}}, "start": "done", "nodes": map[string]any{"done": map[string]any{"kind": "end"}}})
	if r.Status != 422 || r.Code() != "invalid_process" || !strings.Contains(string(r.Body), `"/inputs/fields/0/pattern"`) {
		t.Errorf("process input with a costly pattern: %d %.400s, want 422 at /inputs/fields/0/pattern", r.Status, r.Body)
	}
	field["pattern"] = "^[A-Za-z0-9]{1,1000}$"
	env.Must(201, "PUT", "/api/v1/definitions/rx_probe/working", env.Designer, map[string]any{"name": "Probe",
		"inputs": map[string]any{"fields": []any{field}}, "outputs": map[string]any{"fields": []any{}}})
}
