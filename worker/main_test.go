package worker

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/dbtest"
)

// TestMain fails the run when goroutines outlive the tests: Run promises
// that none of its goroutines survive it. The stream tests run against a
// real Relais, on the database harness; the check runs once it stopped.
func TestMain(m *testing.M) {
	// Stricter than the harness's own check, which ignores idle HTTP
	// connections: the SDK closes the ones it opened.
	dbtest.Main(m, engine.SchemaFingerprint(), engine.Migrate, func() error {
		return goleak.Find(goleak.IgnoreTopFunction("os/signal.signal_recv"), goleak.IgnoreTopFunction("runtime.ensureSigM"))
	})
}
