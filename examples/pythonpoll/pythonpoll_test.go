// Package pythonpoll_test runs the Python long-polling example worker
// (worker.py) against a real Relais.
package pythonpoll_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

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

// A proxy's error page (502, HTML) is not Relais's answer: the worker
// backs off and asks again, where it died reading the page as JSON.
func TestPythonPollingWorkerOutlastsAProxysErrorPage(t *testing.T) {
	t.Parallel()
	relaistest.RequirePython(t, "the Python long-polling example worker's test")
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadGateway)
		fmt.Fprint(w, "<html><body><h1>502 Bad Gateway</h1></body></html>")
	}))
	t.Cleanup(proxy.Close)
	w := relaistest.StartScript(t, ".", "python3", "worker.py", "RELAIS_URL="+proxy.URL, "RELAIS_TOKEN=rls_any")
	relaistest.WaitFor(t, 20*time.Second, "two refused fetches logged", func() (bool, string) {
		return len(w.Events("fetch_refused")) >= 2, w.Output()
	})
	select {
	case err := <-w.Exited():
		t.Fatalf("the worker exited (%v) on a proxy's error page\n%s", err, w.Output())
	default:
	}
	if got := w.Events("fetch_refused")[0]; got["status"] != 502.0 || got["code"] != "http_502" {
		t.Errorf("logged %v, want the 502 and its code", got)
	}
}

// A task that cannot succeed is reported as a failure with its code, not
// left to its lock's expiry: a copy of the example whose handler raised
// ended its tasks attempts_exhausted, the on_error route never taken
// (found by QA, a newcomer). Its settlements name their attempt.
func TestPythonPollingWorkerReportsFailures(t *testing.T) {
	t.Parallel()
	relaistest.RequirePython(t, "the Python long-polling example worker's test")
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	env.Process("crm_only", relaistest.CRMProcess(nil))
	w := relaistest.StartScript(t, ".", "python3", "worker.py", "RELAIS_URL="+env.URL, "RELAIS_TOKEN="+env.Consumer("crm-sync", "add_company_to_crm"))
	id := env.Must(201, "POST", "/api/v1/processes/crm_only/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": "   "}}).JSON(t)["id"].(string)
	if got := env.WaitEnded(id, 20*time.Second); got["status"] != "failed" {
		t.Fatalf("instance %v; want failed\n%s", got["status"], w.Output())
	}
	occ := env.Must(200, "GET", "/api/v1/occurrences?instance="+id, env.Operator, nil).JSON(t)["items"].([]any)[0].(map[string]any)
	if occ["error_code"] != "BLANK_NAME" || occ["attempt_count"] != 1.0 {
		t.Errorf("occurrence failed with %v after %v attempts; want BLANK_NAME at once\n%s", occ["error_code"], occ["attempt_count"], w.Output())
	}
	// The worker logs its failure once answered, which may come after the
	// instance ended.
	relaistest.WaitFor(t, 5*time.Second, "the worker logs its failure", func() (bool, string) {
		return len(w.Events("failed")) >= 1, w.Output()
	})
	if n := len(w.Events("failed")); n != 1 {
		t.Errorf("%d failures logged; want 1\n%s", n, w.Output())
	}
}

// Outputs the contract refuses fail the task at once, the failure saying
// what the contract refused (designer QA: "the contract refused the
// outputs" told the operator nothing; the pointers were in an attempt's
// note alone).
func TestPythonPollingWorkerSaysWhatTheContractRefused(t *testing.T) {
	t.Parallel()
	relaistest.RequirePython(t, "the Python long-polling example worker's test")
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	working := env.Must(200, "GET", "/api/v1/definitions/add_company_to_crm", env.Designer, nil).JSON(t)["working"].(map[string]any)
	for _, f := range working["outputs"].(map[string]any)["fields"].([]any) {
		if f := f.(map[string]any); f["name"] == "crm_id" {
			f["pattern"] = "^SF-[0-9]+$" // the example answers CRM-0001
		}
	}
	env.Must(200, "PUT", "/api/v1/definitions/add_company_to_crm/working", env.Designer, working)
	env.Must(201, "POST", "/api/v1/definitions/add_company_to_crm/revisions", env.Designer, nil)
	doc := relaistest.CRMProcess(nil)
	doc["nodes"].(map[string]any)["crm"].(map[string]any)["revision"] = 2
	env.Process("crm_strict", doc)
	w := relaistest.StartScript(t, ".", "python3", "worker.py", "RELAIS_URL="+env.URL, "RELAIS_TOKEN="+env.Consumer("crm-sync", "add_company_to_crm"))
	id := env.Must(201, "POST", "/api/v1/processes/crm_strict/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": "Acme"}}).JSON(t)["id"].(string)
	if got := env.WaitEnded(id, 20*time.Second); got["status"] != "failed" {
		t.Fatalf("instance %v; want failed\n%s", got["status"], w.Output())
	}
	occ := env.Must(200, "GET", "/api/v1/occurrences?instance="+id, env.Operator, nil).JSON(t)["items"].([]any)[0].(map[string]any)
	if msg, _ := occ["error_message"].(string); occ["error_code"] != "invalid_outputs" || !strings.Contains(msg, "/outputs/crm_id") {
		t.Errorf("occurrence failed with %v: %q; want invalid_outputs naming /outputs/crm_id\n%s", occ["error_code"], msg, w.Output())
	}
}
