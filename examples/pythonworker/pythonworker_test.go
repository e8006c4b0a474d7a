// Package pythonworker_test runs the Python example worker (worker.py)
// against a real Relais.
package pythonworker_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
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

// A completion that gets no answer (a replica restarting, a connection
// cut) is sent again until it is answered, within the task's lock: the
// worker used to log it unanswered and drop it, the finished work then
// done again by the task's next attempt (chaos QA).
func TestPythonWorkerRetriesAnUnansweredCompletion(t *testing.T) {
	t.Parallel()
	relaistest.RequirePython(t, "the Python example worker's test")
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	env.Process("crm_only", relaistest.CRMProcess(nil))
	var cut atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/Complete") && cut.Add(1) <= 3 {
			// Read, then hung up on: the worker cannot tell whether it
			// was taken.
			_, _ = io.Copy(io.Discard, r.Body)
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		env.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	w := relaistest.StartScript(t, ".", "python3", "worker.py", "RELAIS_URL="+proxy.URL, "RELAIS_TOKEN="+env.Consumer("crm-sync", "add_company_to_crm"))
	inst := env.Must(201, "POST", "/api/v1/processes/crm_only/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": "Acme"}}).JSON(t)["id"].(string)
	if got := env.WaitEnded(inst, 20*time.Second); got["status"] != "completed" {
		t.Fatalf("instance %v; want completed\n%s", got["status"], w.Output())
	}
	occ := env.Must(200, "GET", "/api/v1/occurrences?instance="+inst, env.Operator, nil).JSON(t)["items"].([]any)[0].(map[string]any)["id"].(string)
	if a := env.Must(200, "GET", "/api/v1/occurrences/"+occ, env.Operator, nil).JSON(t)["attempts"].([]any); len(a) != 1 {
		t.Errorf("attempts %v; want one", a)
	}
	if n := len(w.Events("retrying")); n != 3 {
		t.Errorf("%d retries logged; want 3\n%s", n, w.Output())
	}
	if n := len(w.Events("unanswered")); n != 0 {
		t.Errorf("unanswered logged\n%s", w.Output())
	}
}
