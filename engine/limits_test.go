package engine

import (
	"strings"
	"testing"

	"github.com/relais/relais/internal/config"
)

// TestWorkerIDProblem: one rule for every protocol's worker_id, and a
// refusal that names what is wrong (a long id is not a missing one).
func TestWorkerIDProblem(t *testing.T) {
	t.Parallel()
	for id, want := range map[string]string{
		"w-1":                              "",
		strings.Repeat("é", MaxWorkerID/2): "",
		"":                                 "is required",
		strings.Repeat("w", MaxWorkerID+1): "is 201 bytes long: at most 200",
		"w\x00":                            "without NUL",
		"w\xff":                            "must be UTF-8",
		"  ":                               "must not be blank",
		" w-1":                             "white space",
		"w-1\n":                            "white space",
		"w\u200b1":                         "control or format",
	} {
		got := WorkerIDProblem(id)
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("worker id %q: %q, want %q", id, got, want)
		}
	}
}

// TestTheConfigurationKnowsTheLockFloor: the boot refuses lock settings
// under the floor every fetch is held to.
func TestTheConfigurationKnowsTheLockFloor(t *testing.T) {
	t.Parallel()
	if config.MinLockDuration != MinLockDuration {
		t.Errorf("config.MinLockDuration %v, engine.MinLockDuration %v; want one floor", config.MinLockDuration, MinLockDuration)
	}
}

// TestTheConfigurationKnowsTheBatchCeiling: the boot's ceiling on
// RELAIS_PULL_MAX_TASKS and RELAIS_STREAM_MAX_IN_FLIGHT is the batch
// ceiling its comment names, written in a package that cannot import this
// one.
func TestTheConfigurationKnowsTheBatchCeiling(t *testing.T) {
	t.Parallel()
	if config.MaxTasksCeiling != MaxBatch {
		t.Errorf("config.MaxTasksCeiling %d, engine.MaxBatch %d; want one ceiling", config.MaxTasksCeiling, MaxBatch)
	}
}
