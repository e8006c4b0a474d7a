package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/relais/relais/internal/dbtest"
)

func jsonBody(v any) io.Reader {
	b, _ := json.Marshal(v)
	return strings.NewReader(string(b))
}

func callH(t *testing.T, method, url, token string, body any, headers ...string) response {
	t.Helper()
	req, err := http.NewRequest(method, url, jsonBody(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{status: res.StatusCode, header: res.Header, body: b}
}

func must(t *testing.T, want int, r response) map[string]any {
	t.Helper()
	if r.status != want {
		t.Fatalf("status %d, want %d: %s", r.status, want, r.body)
	}
	return r.json(t)
}

// TestWalkthroughAsANewUser follows the README: apply the examples, start
// instances, work them with curl-like calls, watch them route.
func TestWalkthroughAsANewUser(t *testing.T) {
	t.Parallel()
	var scoringCalls atomic.Int32
	scoring := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scoringCalls.Add(1)
		if r.Header.Get("Idempotency-Key") == "" {
			w.WriteHeader(400)
			return
		}
		fmt.Fprint(w, `{"outputs": {"score": 72, "band": "medium"}}`)
	}))
	defer scoring.Close()

	r := startServe(t, map[string]string{"RELAIS_DATABASE_URL": dbtest.URL(t), "RELAIS_BOOTSTRAP_TOKEN": bootstrap, "RELAIS_DATA_KEYS": testDataKeys})
	if _, stderr, err := applyRun(t, r.base, "-f", "../../examples"); err != nil {
		t.Fatalf("apply: %v\n%s", err, stderr)
	}
	// Point the example destination at this test's scoring service.
	must(t, 200, callH(t, "PUT", r.base+"/api/v1/destinations/scoring-api", bootstrap, map[string]any{"url": scoring.URL + "/score", "max_timeout": "PT5S"}))

	start := r.base + "/api/v1/processes/onboard_company/instances"
	bad := callH(t, "POST", start, bootstrap, map[string]any{"inputs": map[string]any{"company": map[string]any{"name": "Acme", "country": "France"}}})
	if bad.status != 422 || bad.json(t)["code"] != "invalid_inputs" || !strings.Contains(string(bad.body), `"/inputs/company/country"`) {
		t.Fatalf("invalid inputs: %d %s", bad.status, bad.body)
	}
	if list := must(t, 200, callH(t, "GET", r.base+"/api/v1/instances", bootstrap, nil)); len(list["items"].([]any)) != 0 {
		t.Fatalf("a refused start created an instance: %v", list)
	}

	company := map[string]any{"inputs": map[string]any{"company": map[string]any{"name": "Acme", "country": "FR",
		"contact": map[string]any{"email": "ceo@acme.example"}}}, "business_key": "acme"}
	first := must(t, 201, callH(t, "POST", start, bootstrap, company, "Idempotency-Key", "onboard-acme"))
	again := must(t, 200, callH(t, "POST", start, bootstrap, company, "Idempotency-Key", "onboard-acme"))
	if first["id"] != again["id"] {
		t.Fatalf("one Idempotency-Key gave two instances: %v %v", first["id"], again["id"])
	}
	if list := must(t, 200, callH(t, "GET", r.base+"/api/v1/instances?process=onboard_company", bootstrap, nil)); len(list["items"].([]any)) != 1 {
		t.Fatalf("instances: %v", list)
	}
	other := must(t, 201, callH(t, "POST", start, bootstrap, map[string]any{"inputs": map[string]any{"company": map[string]any{"name": "Globex", "country": "DE"}}}))

	consumer := must(t, 201, callH(t, "POST", r.base+"/api/v1/consumers", bootstrap, map[string]any{"name": "crm-sync",
		"grants": []any{map[string]any{"definition": "add_company_to_crm", "revisions": []int{1}}}}))["token"].(string)
	fetch := must(t, 200, callH(t, "POST", r.base+"/api/v1/pull/fetch-and-lock", consumer, map[string]any{"worker_id": "crm-sync-1",
		"subscriptions": []any{map[string]any{"definition": "add_company_to_crm", "revisions": []int{1}}}, "max_tasks": 10, "wait": "PT5S"}))
	occs := fetch["occurrences"].([]any)
	if len(occs) != 2 {
		t.Fatalf("fetched %d occurrences, want 2: %v", len(occs), fetch)
	}
	for _, o := range occs {
		o := o.(map[string]any)
		result := "created"
		if o["instance_id"] == first["id"] {
			result = "existing"
			if o["inputs"].(map[string]any)["contact"].(map[string]any)["email"] != "ceo@acme.example" {
				t.Errorf("the consumer did not get the sensitive contact in clear: %v", o["inputs"])
			}
		}
		res := must(t, 200, callH(t, "POST", r.base+"/api/v1/pull/occurrences/"+o["id"].(string)+"/complete", consumer,
			map[string]any{"worker_id": "crm-sync-1", "outputs": map[string]any{"result": result, "crm_id": "CRM-1"}}))
		if res["route"] != result {
			t.Errorf("route %v, want %s", res["route"], result)
		}
	}
	acme := must(t, 200, callH(t, "GET", r.base+"/api/v1/instances/"+first["id"].(string), bootstrap, nil))
	if acme["status"] != "completed" || acme["end_node"] != "done" || len(acme["path"].([]any)) != 1 {
		t.Errorf("acme took %v to %v via %v; want the existing branch straight to done", acme["status"], acme["end_node"], acme["path"])
	}
	if strings.Contains(string(callH(t, "GET", r.base+"/api/v1/instances/"+first["id"].(string), bootstrap, nil).body), "ceo@acme.example") {
		t.Error("the observation API shows a sensitive value")
	}
	// Globex was created in the CRM: the push node scores it.
	deadline := time.Now().Add(10 * time.Second)
	var globex map[string]any
	for time.Now().Before(deadline) {
		globex = must(t, 200, callH(t, "GET", r.base+"/api/v1/instances/"+other["id"].(string), bootstrap, nil))
		if globex["status"] != "running" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	path := globex["path"].([]any)
	if globex["status"] != "completed" || len(path) != 2 || path[1].(map[string]any)["node"] != "score" || path[1].(map[string]any)["status"] != "completed" {
		t.Fatalf("globex = %v", globex)
	}
	if n := scoringCalls.Load(); n != 1 {
		t.Errorf("scoring called %d times, want 1", n)
	}
}

// TestPushCallInFlightWhenRelaisDies kills relais while a destination holds
// its call: after a restart the occurrence fails with outcome_unknown and
// the destination was called exactly once.
func TestPushCallInFlightWhenRelaisDies(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	called := make(chan struct{}, 10)
	release := make(chan struct{})
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		called <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer dest.Close()
	defer close(release)

	url := dbtest.URL(t)
	env := []string{"RELAIS_DATABASE_URL=" + url, "RELAIS_BOOTSTRAP_TOKEN=" + bootstrap, "RELAIS_DATA_KEYS=" + testDataKeys, "RELAIS_TIMER_INTERVAL=PT0.2S"}
	first := startProcess(t, env...)
	base := first.base
	if _, stderr, err := applyRun(t, base, "-f", "../../examples/definitions"); err != nil {
		t.Fatalf("apply: %v\n%s", err, stderr)
	}
	must(t, 201, callH(t, "PUT", base+"/api/v1/destinations/slow", bootstrap, map[string]any{"url": dest.URL, "max_timeout": "PT2S"}))
	must(t, 201, callH(t, "POST", base+"/api/v1/processes/scoring/versions", bootstrap, map[string]any{
		"inputs": map[string]any{"fields": []any{}}, "start": "score",
		"nodes": map[string]any{
			"score": map[string]any{"kind": "push", "definition": "score_company", "revision": 1, "destination": "slow", "timeout": "PT2S",
				"inputs": map[string]any{"crm_id": map[string]any{"value": "C-1"}, "country": map[string]any{"value": "FR"}}, "next": "done", "on_error": "failed"},
			"done": map[string]any{"kind": "end"}, "failed": map[string]any{"kind": "end", "status": "failed"}}}))
	inst := must(t, 201, callH(t, "POST", base+"/api/v1/processes/scoring/instances", bootstrap, map[string]any{}))
	select {
	case <-called:
	case <-time.After(10 * time.Second):
		t.Fatal("the destination was not called")
	}
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.cmd.Wait()

	second := startProcess(t, env...)
	occID := ""
	// The call's budget (2 s) and engine.PushGrace (35 s), with room.
	deadline := time.Now().Add(60 * time.Second)
	for {
		got := must(t, 200, callH(t, "GET", second.base+"/api/v1/instances/"+inst["id"].(string), bootstrap, nil))
		step := got["path"].([]any)[0].(map[string]any)
		occID = step["occurrence_id"].(string)
		if got["status"] != "running" {
			if got["status"] != "failed" || step["error_code"] != "outcome_unknown" {
				t.Fatalf("instance %v, step %v; want failed with outcome_unknown", got["status"], step)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the orphaned call was not failed within 60 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	occ := must(t, 200, callH(t, "GET", second.base+"/api/v1/occurrences/"+occID, bootstrap, nil))
	if occ["status"] != "failed" || len(occ["attempts"].([]any)) != 1 {
		t.Errorf("occurrence = %v", occ)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the destination was called %d times; want exactly 1", n)
	}
	// The operator learns it from the log too, and checks with the
	// destination whether the call took effect.
	if logs := second.stderr.String(); !strings.Contains(logs, "push outcome unknown") || !strings.Contains(logs, "occurrence="+occID) {
		t.Errorf("the restarted replica did not log the unknown outcome of %s:\n%s", occID, logs)
	}
}
