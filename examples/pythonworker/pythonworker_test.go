// Package pythonworker_test runs the Python example worker (worker.py)
// against a real Relais.
package pythonworker_test

import (
	"testing"
	"time"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/dbtest"
	"github.com/relais/relais/internal/relaistest"
)

func TestMain(m *testing.M) { dbtest.Main(m, engine.SchemaFingerprint(), engine.Migrate) }

// The example worker speaks the Connect protocol with Python's standard
// library alone, and does what every example worker does
// (relaistest.ExampleWorkerDrill).
func TestPythonWorker(t *testing.T) {
	t.Parallel()
	relaistest.RequirePython(t, "the Python example worker's test")
	relaistest.ExampleWorkerDrill(t, func(env *relaistest.Env, token string) *relaistest.Script {
		return relaistest.StartScript(t, ".", "python3", "worker.py", "RELAIS_URL="+env.URL, "RELAIS_TOKEN="+token, "CRM_LATENCY_MS=2500")
	})
}

// A refusal reaches the worker as Relais's problem: with a token that is
// not a consumer's, the stream ends for good (not retried) with the
// problem's code.
func TestPythonWorkerReadsARefusal(t *testing.T) {
	t.Parallel()
	relaistest.RequirePython(t, "the Python example worker's test")
	env := relaistest.New(t)
	w := relaistest.StartScript(t, ".", "python3", "worker.py", "RELAIS_URL="+env.URL, "RELAIS_TOKEN=rls_not_a_token")
	select {
	case err := <-w.Exited():
		if err == nil {
			t.Fatalf("the worker exited 0 with a bad token\n%s", w.Output())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the worker did not stop on a bad token\n%s", w.Output())
	}
	ended := w.Events("stream_ended")
	if len(ended) != 1 || ended[0]["connect"] != "unauthenticated" || ended[0]["code"] != "unauthorized" {
		t.Errorf("stream_ended %v; want one, unauthenticated with the problem's code unauthorized\n%s", ended, w.Output())
	}
}
