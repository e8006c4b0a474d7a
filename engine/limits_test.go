package engine

import (
	"strings"
	"testing"
)

// TestWorkerIDProblem: one rule for every protocol's worker_id.
func TestWorkerIDProblem(t *testing.T) {
	t.Parallel()
	for id, ok := range map[string]bool{
		"w-1": true, strings.Repeat("é", MaxWorkerID/2): true,
		"": false, strings.Repeat("w", MaxWorkerID+1): false, "w\x00": false, "w\xff": false,
	} {
		if got := WorkerIDProblem(id) == ""; got != ok {
			t.Errorf("worker id %q accepted %v, want %v", id, got, ok)
		}
	}
}
