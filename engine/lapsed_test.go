package engine

import (
	"testing"
	"time"
)

// TestLockLapsedDefinition holds relais_lock_lapsed, the one definition of
// "the lock lapsed, the occurrence is offered again" that the claim, the
// list filter, the counts and observations use, to DESIGN §3: a reserved
// pull occurrence whose lock expired, with attempts left and its deadline
// (if any) ahead. It never answers null, so the list's NOT of it is exact.
func TestLockLapsedDefinition(t *testing.T) {
	t.Parallel()
	e := setup(t)
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	past, future := now.Add(-time.Second), now.Add(time.Second)
	type row struct {
		status, mode      string
		lockExpiresAt     *time.Time
		attempts, maxAtts int
		deadlineAt        *time.Time
	}
	tests := []struct {
		name string
		row  row
		want bool
	}{
		{"expired lock, attempts left", row{"reserved", "pull", &past, 1, 3, nil}, true},
		{"expired exactly now", row{"reserved", "pull", &now, 1, 3, nil}, true},
		{"deadline ahead", row{"reserved", "pull", &past, 1, 3, &future}, true},
		{"live lock", row{"reserved", "pull", &future, 1, 3, nil}, false},
		{"last attempt spent", row{"reserved", "pull", &past, 3, 3, nil}, false},
		{"deadline passed", row{"reserved", "pull", &past, 1, 3, &past}, false},
		{"deadline now", row{"reserved", "pull", &past, 1, 3, &now}, false},
		{"push call", row{"reserved", "push", &past, 1, 3, nil}, false},
		{"no lock", row{"reserved", "pull", nil, 1, 3, nil}, false},
		{"available", row{"available", "pull", &past, 1, 3, nil}, false},
		{"completed", row{"completed", "pull", &past, 1, 3, nil}, false},
	}
	for _, tt := range tests {
		var lapsed *bool
		r := tt.row
		err := e.pool.QueryRow(t.Context(), "select relais_lock_lapsed($1, $2, $3, $4, $5, $6, $7)",
			r.status, r.mode, r.lockExpiresAt, r.attempts, r.maxAtts, r.deadlineAt, now).Scan(&lapsed)
		if err != nil {
			t.Fatal(err)
		}
		if lapsed == nil {
			t.Errorf("%s: null, want %v (never null, or NOT of it drops rows)", tt.name, tt.want)
			continue
		}
		if *lapsed != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, *lapsed, tt.want)
		}
	}
}
