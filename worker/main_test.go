package worker

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/dbtest"
)

// TestMain fails the run when goroutines outlive the tests: Run promises
// that none of its goroutines survive it. The stream tests run against a
// real Relais, on the database harness; the check runs once it stopped.
func TestMain(m *testing.M) {
	dbtest.Main(m, engine.SchemaFingerprint(), engine.Migrate, func() error {
		if leaked := leakedGoroutines(5 * time.Second); len(leaked) > 0 {
			return fmt.Errorf("%d goroutines leaked:\n\n%s", len(leaked), strings.Join(leaked, "\n\n"))
		}
		return nil
	})
}

// leakedGoroutines returns the stacks of goroutines other than the
// caller's, waiting up to within for them to end: some (a closed
// server's connections) take a moment.
func leakedGoroutines(within time.Duration) []string {
	deadline := time.Now().Add(within)
	for {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		// The caller's goroutine comes first.
		stacks := strings.Split(strings.TrimSpace(string(buf)), "\n\n")[1:]
		var leaked []string
		for _, s := range stacks {
			if !strings.Contains(s, "os/signal.signal_recv") && !strings.Contains(s, "runtime.ensureSigM") {
				leaked = append(leaked, s)
			}
		}
		if len(leaked) == 0 || time.Now().After(deadline) {
			return leaked
		}
		time.Sleep(10 * time.Millisecond)
	}
}
