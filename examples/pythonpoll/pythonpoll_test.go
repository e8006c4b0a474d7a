// Package pythonpoll_test runs the Python long-polling example worker
// (worker.py) against a real Relais.
package pythonpoll_test

import (
	"testing"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/dbtest"
	"github.com/relais/relais/internal/relaistest"
)

func TestMain(m *testing.M) { dbtest.Main(m, engine.SchemaFingerprint(), engine.Migrate) }

// The long-polling worker does what every example worker does
// (relaistest.ExampleWorkerDrill): its locks, two seconds long, extended
// each second, outlast a task of 2.5 s, and an extension refused tells it
// of a stopped instance.
func TestPythonPollingWorker(t *testing.T) {
	t.Parallel()
	relaistest.RequirePython(t, "the Python long-polling example worker's test")
	relaistest.ExampleWorkerDrill(t, func(env *relaistest.Env, token string) *relaistest.Script {
		return relaistest.StartScript(t, ".", "python3", "worker.py", "RELAIS_URL="+env.URL, "RELAIS_TOKEN="+token, "CRM_LATENCY_MS=2500", "LOCK_SECONDS=2")
	})
}
