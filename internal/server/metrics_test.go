package server_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/relais/relais/internal/config"
	"github.com/relais/relais/internal/relaistest"
)

// Distinctive values a request carries that must never become a label:
// ids, worker ids, business keys and payload values would make every
// series unique and could leak what DESIGN §5 protects.
const (
	metricsWorker      = "worker-METRICS-7c1e"
	metricsBusinessKey = "BK-METRICS-19af"
	metricsCompany     = "Company METRICS 55d0"
	metricsCRMID       = "CRM-METRICS-a0b1"
)

var uuidRE = regexp.MustCompile(`[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`)

// TestMetricsAfterActivity runs pulls, a push and the timers, then checks
// every family the replica exports has the values that activity implies,
// and that no label value is an id, a worker id, a business key or a
// payload value.
func TestMetricsAfterActivity(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	crm := env.Definition("add_company_to_crm.yaml")
	score := env.Definition("score_company.yaml")
	// Defined, never run: its series are there, at zero.
	idle := env.Definition("charge_card.yaml")
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"outputs":{"score":42,"band":"low"}}`)
	}))
	t.Cleanup(dest.Close)
	env.Must(201, "PUT", "/api/v1/destinations/scoring-api", env.Admin, map[string]any{"url": dest.URL + "/score", "max_timeout": "PT5S"})
	env.Process("onboard_company", relaistest.Body(relaistest.ExampleDocs(t, "processes/onboard_company.yaml")[0], "key", "name"))
	env.Process("deadlines", relaistest.CRMProcess(map[string]any{"deadline": "PT1H"}))
	consumer := env.Consumer("metrics", crm, score)

	start := func(name string) string {
		t.Helper()
		inst := env.Must(201, "POST", "/api/v1/processes/onboard_company/instances", env.Operator, map[string]any{
			"inputs": map[string]any{"company": map[string]any{"name": name, "country": "FR"}}, "business_key": metricsBusinessKey}).JSON(t)
		return inst["id"].(string)
	}
	fetch := func() []any {
		t.Helper()
		return env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, map[string]any{"worker_id": metricsWorker, "max_tasks": 1,
			"subscriptions": []any{map[string]any{"definition": crm}}}).JSON(t)["occurrences"].([]any)
	}
	complete := func(occ, worker, result string) relaistest.Response {
		t.Helper()
		return env.Do("POST", "/api/v1/pull/occurrences/"+occ+"/complete", consumer, map[string]any{"worker_id": worker,
			"outputs": map[string]any{"result": result, "crm_id": metricsCRMID}})
	}

	created := start(metricsCompany)
	existing := start(metricsCompany + " again")
	for i, result := range []string{"created", "existing"} {
		got := fetch()
		if len(got) != 1 {
			t.Fatalf("fetch %d: %v", i, got)
		}
		occ := got[0].(map[string]any)["id"].(string)
		if i == 1 {
			if r := complete(occ, "someone-else", result); r.Status != 409 {
				t.Fatalf("completion by another worker: %d %s; want 409", r.Status, r.Body)
			}
		}
		if r := complete(occ, metricsWorker, result); r.Status != 200 {
			t.Fatalf("completion: %d %s", r.Status, r.Body)
		}
	}
	if got := fetch(); len(got) != 0 {
		t.Fatalf("fetch with nothing left: %v", got)
	}
	for _, id := range []string{created, existing} {
		if inst := env.WaitEnded(id, 15*time.Second); inst["status"] != "completed" {
			t.Fatalf("instance %s: %v", id, inst["status"])
		}
	}

	// A deadline passed 90 s ago whose occurrence another transaction
	// holds: every timer pass finds it due and cannot settle it, so the
	// lag stays visible until the row is let go.
	late := env.Must(201, "POST", "/api/v1/processes/deadlines/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": "Late"}}).JSON(t)
	lateOcc := late["path"].([]any)[0].(map[string]any)["occurrence_id"].(string)
	tx, err := env.Pool.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(context.Background(), "select 1 from occurrences where id = $1 for update", lateOcc); err != nil {
		t.Fatal(err)
	}
	env.Clock.Advance(time.Hour + 90*time.Second)
	relaistest.WaitFor(t, 10*time.Second, "the timers report their lag", func() (bool, string) {
		lag, _ := env.Metrics().Get("relais_timer_lag_seconds")
		return lag >= 90 && lag < 600, fmt.Sprintf("relais_timer_lag_seconds %v", lag)
	})
	if err := tx.Rollback(context.Background()); err != nil {
		t.Fatal(err)
	}
	if inst := env.WaitEnded(late["id"].(string), 15*time.Second); inst["error_code"] != "deadline_exceeded" {
		t.Fatalf("late instance: %v", inst)
	}
	relaistest.WaitFor(t, 10*time.Second, "the lag falls back to 0 once nothing is due", func() (bool, string) {
		lag, _ := env.Metrics().Get("relais_timer_lag_seconds")
		return lag == 0, fmt.Sprintf("relais_timer_lag_seconds %v", lag)
	})

	// The counts are the engine's cache: they catch up within its TTL.
	want := map[[2]string]float64{{crm, "completed"}: 2, {crm, "failed"}: 1, {crm, "available"}: 0, {crm, "reserved"}: 0,
		{crm, "cancelled"}: 0, {crm, "deferred"}: 0, {score, "completed"}: 1, {idle, "available"}: 0, {idle, "failed"}: 0}
	var m relaistest.Metrics
	relaistest.WaitFor(t, 15*time.Second, "relais_occurrences counts what happened", func() (bool, string) {
		m = env.Metrics()
		for k, n := range want {
			if got, ok := m.Get("relais_occurrences", "definition", k[0], "status", k[1]); !ok || got != n {
				return false, fmt.Sprintf("%s %s: %v (present %v), want %v", k[0], k[1], got, ok, n)
			}
		}
		return true, ""
	})
	if at := m.Must(t, "relais_occurrences_counted_timestamp_seconds"); time.Since(time.Unix(int64(at), 0)) > time.Minute {
		t.Errorf("counts taken at %v; want within the last minute", time.Unix(int64(at), 0))
	}

	for _, c := range []struct {
		name   string
		labels []string
		want   func(float64) bool
		says   string
	}{
		{"relais_pull_fetch_duration_seconds_count", []string{"result", "claimed"}, eq(2), "2 claiming fetches"},
		{"relais_pull_fetch_duration_seconds_count", []string{"result", "empty"}, eq(1), "1 empty fetch"},
		{"relais_pull_fetch_duration_seconds_sum", []string{"result", "claimed"}, between(0, 30), "a sane total duration"},
		{"relais_pull_settle_duration_seconds_count", []string{"action", "complete", "result", "ok"}, eq(2), "2 completions"},
		{"relais_pull_settle_duration_seconds_count", []string{"action", "complete", "result", "conflict"}, eq(1), "1 refused completion"},
		{"relais_push_call_duration_seconds_count", []string{"destination", "scoring-api", "outcome", "ok"}, eq(1), "1 push call"},
		{"relais_push_call_duration_seconds_sum", []string{"destination", "scoring-api"}, between(0, 5), "a call within its budget"},
		{"relais_timer_pass_duration_seconds_count", nil, between(1, 1e9), "timer passes"},
		{"relais_timer_failures_total", []string{"code", "deadline_exceeded"}, eq(1), "the late instance's deadline"},
		{"relais_timer_failures_total", []string{"code", "outcome_unknown"}, eq(0), "no push call orphaned (the series exists from the start)"},
		{"relais_database_up", nil, eq(1), "the database answers"},
		{"relais_data_key_retired", nil, eq(0), "its first data key is live"},
		{"relais_data_keys", nil, eq(1), "the test replicas' one data key"},
		{"relais_database_unavailable_total", nil, eq(0), "no request met a lost database"},
		{"relais_retention_passes_total", []string{"result", "failed"}, eq(0), "no failed retention pass (the series exists from the start)"},
		{"relais_retention_deleted_instances_total", nil, eq(0), "nothing old enough to delete"},
		{"relais_retention_applied_seconds", nil, eq(30 * 24 * 3600), "the default P30D applied (no other replica noted a longer one)"},
		{"relais_group_commit_writes_total", []string{"lane", "starts"}, eq(3), "the 3 starts"},
		{"relais_instances_started_total", []string{"process", "onboard_company"}, eq(2), "2 onboardings started"},
		{"relais_instances_ended_total", []string{"process", "onboard_company", "status", "completed"}, eq(2), "both completed"},
		{"relais_instances_started_total", []string{"process", "deadlines"}, eq(1), "the late instance started"},
		{"relais_instances_ended_total", []string{"process", "deadlines", "status", "failed"}, eq(1), "the late instance failed by its deadline (a timer)"},
		{"relais_group_commit_groups_total", []string{"lane", "starts"}, between(1, 3), "3 starts in 1 to 3 transactions"},
		{"relais_group_commit_writes_total", []string{"lane", "settlements"}, between(3, 1e9), "3 completions at least (and the claims)"},
		{"relais_group_commit_gathers_total", []string{"lane", "settlements", "result", "lapsed"}, between(0, 1e9), "the series exists from the start"},
	} {
		if got := m.Must(t, c.name, c.labels...); !c.want(got) {
			t.Errorf("%s%v = %v; want %s", c.name, c.labels, got, c.says)
		}
	}

	body := string(env.Must(200, "GET", "/metrics", "", nil).Body)
	for _, v := range []string{metricsWorker, "someone-else", metricsBusinessKey, metricsCompany, metricsCRMID, created, existing, late["id"].(string), lateOcc} {
		if strings.Contains(body, v) {
			t.Errorf("/metrics holds %q", v)
		}
	}
	for _, s := range m {
		for name, v := range s.Labels {
			if uuidRE.MatchString(v) {
				t.Errorf("%s has an id in label %s=%q", s.Name, name, v)
			}
		}
	}
}

func eq(want float64) func(float64) bool { return func(v float64) bool { return v == want } }

func between(lo, hi float64) func(float64) bool {
	return func(v float64) bool { return v >= lo && v <= hi }
}

// Any client may send any token as an HTTP method: methods outside the
// standard ones share one label value, so that they cannot open series
// without bound.
func TestUnknownMethodsShareOneLabel(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	for i := range 20 {
		req, err := http.NewRequest(fmt.Sprintf("X%dMETHOD", i), env.URL+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
	}
	m := env.Metrics()
	if n, ok := m.Get("relais_http_requests_total", "method", "other"); !ok || n < 20 {
		t.Errorf("requests with unknown methods counted %v under method=other, want 20", n)
	}
	for _, s := range m {
		if strings.HasPrefix(s.Name, "relais_http_") && strings.Contains(s.Labels["method"], "METHOD") {
			t.Fatalf("a method sent by a client became a label: %v", s)
		}
	}
}

// relais_instances_held counts the instances held for an operator by the
// definition of their node, falling back to 0 once resolved.
func TestHeldInstancesGauge(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	crm := env.Definition("add_company_to_crm.yaml")
	doc := relaistest.CRMProcess(map[string]any{"max_attempts": 1})
	nodes := doc["nodes"].(map[string]any)
	nodes["crm"].(map[string]any)["on_error"] = "hold"
	delete(nodes, "failed")
	env.Process("held_crm", doc)
	consumer := env.Consumer("held", crm)
	inst := env.Must(201, "POST", "/api/v1/processes/held_crm/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": "Acme"}}).JSON(t)
	occ := env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, map[string]any{"worker_id": "w", "max_tasks": 1,
		"subscriptions": []any{map[string]any{"definition": crm}}}).JSON(t)["occurrences"].([]any)[0].(map[string]any)["id"].(string)
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+occ+"/fail", consumer, map[string]any{"worker_id": "w", "error_code": "CRM_DOWN"})
	held := func(want float64) {
		t.Helper()
		relaistest.WaitFor(t, 15*time.Second, fmt.Sprintf("relais_instances_held{definition=%q} = %v", crm, want), func() (bool, string) {
			got, ok := env.Metrics().Get("relais_instances_held", "definition", crm)
			return ok && got == want, fmt.Sprintf("%v (present %v)", got, ok)
		})
	}
	held(1)
	// The failure counts in the last hour's ended occurrences, as the
	// health page charts them.
	relaistest.WaitFor(t, 15*time.Second, "relais_occurrences_ended_last_hour failed 1, completed 0", func() (bool, string) {
		m := env.Metrics()
		failed, okF := m.Get("relais_occurrences_ended_last_hour", "definition", crm, "status", "failed")
		completed, okC := m.Get("relais_occurrences_ended_last_hour", "definition", crm, "status", "completed")
		return okF && okC && failed == 1 && completed == 0, fmt.Sprintf("failed %v (present %v), completed %v (present %v)", failed, okF, completed, okC)
	})
	env.Must(200, "POST", "/api/v1/instances/"+inst["id"].(string)+"/abandon", env.Operator, map[string]any{"reason": "test"})
	held(0)
}

// relais_occurrences_waiting_retry counts the occurrences waiting out a
// retry delay (failures under way that hold and fail nothing yet), 0 before
// and once brought forward.
func TestWaitingRetryGauge(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	crm := env.Definition("add_company_to_crm.yaml")
	env.Process("crm_retried", relaistest.CRMProcess(map[string]any{"max_attempts": 5}))
	consumer := env.Consumer("retried", crm)
	retrying := func(want float64) {
		t.Helper()
		relaistest.WaitFor(t, 15*time.Second, fmt.Sprintf("relais_occurrences_waiting_retry{definition=%q} = %v", crm, want), func() (bool, string) {
			got, ok := env.Metrics().Get("relais_occurrences_waiting_retry", "definition", crm)
			return ok && got == want, fmt.Sprintf("%v (present %v)", got, ok)
		})
	}
	inst := env.Must(201, "POST", "/api/v1/processes/crm_retried/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": "Acme"}}).JSON(t)
	retrying(0)
	occ := env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, map[string]any{"worker_id": "w", "max_tasks": 1,
		"subscriptions": []any{map[string]any{"definition": crm}}}).JSON(t)["occurrences"].([]any)[0].(map[string]any)["id"].(string)
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+occ+"/fail", consumer, map[string]any{"worker_id": "w", "error_code": "CRM_DOWN", "retryable": true, "retry_delay": "PT1H"})
	retrying(1)
	env.Must(200, "POST", "/api/v1/instances/"+inst["id"].(string)+"/retry", env.Operator, map[string]any{"reason": "CRM is back"})
	retrying(0)
}

// relais_workers_live counts every replica's live workers by definition
// and protocol, zero included before any connects (an alert compares with
// 0); relais_oldest_claimable_age_seconds says how long the oldest
// claimable occurrence has waited, 0 once none waits.
func TestLiveWorkersAndQueueAgeGauges(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	crm := env.Definition("add_company_to_crm.yaml")
	env.Process("crm_only", relaistest.CRMProcess(nil))
	consumer := env.Consumer("crm-sync", crm)
	gauge := func(name string, want func(float64) bool, what string, labels ...string) {
		t.Helper()
		relaistest.WaitFor(t, 15*time.Second, fmt.Sprintf("%s%v %s", name, labels, what), func() (bool, string) {
			got, ok := env.Metrics().Get(name, labels...)
			return ok && want(got), fmt.Sprintf("%v (present %v)", got, ok)
		})
	}
	is := func(v float64) func(float64) bool { return func(got float64) bool { return got == v } }
	gauge("relais_workers_live", is(0), "= 0", "definition", crm, "protocol", "long_poll")
	gauge("relais_workers_live", is(0), "= 0", "definition", crm, "protocol", "stream")
	gauge("relais_oldest_claimable_age_seconds", is(0), "= 0", "definition", crm)

	env.Must(201, "POST", "/api/v1/processes/crm_only/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": "Acme"}})
	env.Clock.Advance(time.Minute)
	gauge("relais_oldest_claimable_age_seconds", func(got float64) bool { return got >= 60 }, ">= 60")

	got := env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, map[string]any{"worker_id": "poller-1", "max_tasks": 1,
		"subscriptions": []any{map[string]any{"definition": crm}}}).JSON(t)["occurrences"].([]any)
	if len(got) != 1 {
		t.Fatalf("fetched %v, want the occurrence", got)
	}
	// The first scrape after the claim may answer the snapshot before
	// it: the age it read then (a minute, and the seconds the scrapes
	// above took), never brought forward to now.
	env.Clock.Advance(10 * time.Minute)
	if got, _ := env.Metrics().Get("relais_oldest_claimable_age_seconds", "definition", crm); got > 300 {
		t.Errorf("the queue age read %v s after the claim and ten minutes, want what the snapshot saw, about 60 s", got)
	}
	// A worker seen after the ten minutes (poller-1 is no longer live).
	env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, map[string]any{"worker_id": "poller-2", "max_tasks": 1,
		"subscriptions": []any{map[string]any{"definition": crm}}})
	gauge("relais_workers_live", is(1), "= 1", "definition", crm, "protocol", "long_poll")
	gauge("relais_oldest_claimable_age_seconds", is(0), "= 0 once claimed", "definition", crm)
}

// relais_revisions_untaken counts a definition's revisions whose
// occurrences wait while its live workers take only others (a process
// version pinned revision 2, its workers subscribe to revision 1): an
// alert on relais_workers_live == 0 says nothing, a worker serves it.
func TestRevisionsUntakenGauge(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	crm := env.Definition("add_company_to_crm.yaml")
	if rev := env.AddInput(crm, "region"); rev != 2 {
		t.Fatalf("revision %d, want 2", rev)
	}
	process := relaistest.CRMProcess(nil)
	process["nodes"].(map[string]any)["crm"].(map[string]any)["revision"] = 2
	env.Process("crm_v2", process)
	consumer := env.Consumer("crm-sync", crm)
	untaken := func(want float64, what string) {
		t.Helper()
		relaistest.WaitFor(t, 15*time.Second, "relais_revisions_untaken "+what, func() (bool, string) {
			got, ok := env.Metrics().Get("relais_revisions_untaken", "definition", crm)
			return ok && got == want, fmt.Sprintf("%v (present %v)", got, ok)
		})
	}
	untaken(0, "= 0 with nothing waiting")
	env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, map[string]any{"worker_id": "crm-r1", "max_tasks": 1,
		"subscriptions": []any{map[string]any{"definition": crm, "revisions": []int{1}}}})
	env.Must(201, "POST", "/api/v1/processes/crm_v2/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": "Acme"}})
	untaken(1, "= 1 while revision 2 waits for a worker taking revision 1 alone")
}

// relais_locks_lapsed_last_hour counts a definition's locks that lapsed
// in the last hour, from their expiry (a worker alone on its definition
// that died: nothing takes its tasks back), and once only when a claim
// takes one back: an alert on workers dying while they hold tasks.
func TestLapsedLocksGauge(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	crm := env.Definition("add_company_to_crm.yaml")
	env.Process("crm_only", relaistest.CRMProcess(nil))
	consumer := env.Consumer("crm-sync", crm)
	lapsed := func(want float64, what string) {
		t.Helper()
		relaistest.WaitFor(t, 15*time.Second, "relais_locks_lapsed_last_hour "+what, func() (bool, string) {
			got, ok := env.Metrics().Get("relais_locks_lapsed_last_hour", "definition", crm)
			return ok && got == want, fmt.Sprintf("%v (present %v)", got, ok)
		})
	}
	lapsed(0, "= 0 before any task")
	env.Must(201, "POST", "/api/v1/processes/crm_only/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": "Acme"}})
	fetch := func(worker string) {
		t.Helper()
		tasks := env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, map[string]any{"worker_id": worker, "max_tasks": 1, "lock_duration": "PT1S",
			"subscriptions": []any{map[string]any{"definition": crm}}}).JSON(t)["occurrences"].([]any)
		if len(tasks) != 1 {
			t.Fatalf("%s fetched %v, want the task", worker, tasks)
		}
	}
	fetch("dies-1")
	lapsed(1, "= 1 once its lock expired, nothing taking it back")
	fetch("takes-over")
	lapsed(1, "= 1 still once taken back")
}

// relais_oldest_deferred_age_seconds says how long the oldest deferred
// occurrence of a definition has waited to be settled by id (an approval
// sitting on someone's desk), 0 once none is deferred.
func TestOldestDeferredGauge(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	crm := env.Definition("add_company_to_crm.yaml")
	env.Process("crm_only", relaistest.CRMProcess(nil))
	consumer := env.Consumer("crm-sync", crm)
	gauge := func(want func(float64) bool, what string) {
		t.Helper()
		relaistest.WaitFor(t, 15*time.Second, "relais_oldest_deferred_age_seconds "+what, func() (bool, string) {
			got, ok := env.Metrics().Get("relais_oldest_deferred_age_seconds", "definition", crm)
			return ok && want(got), fmt.Sprintf("%v (present %v)", got, ok)
		})
	}
	gauge(func(got float64) bool { return got == 0 }, "= 0 before any deferral")

	env.Must(201, "POST", "/api/v1/processes/crm_only/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": "Acme"}})
	got := env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, map[string]any{"worker_id": "w1", "max_tasks": 1,
		"subscriptions": []any{map[string]any{"definition": crm}}}).JSON(t)["occurrences"].([]any)
	if len(got) != 1 {
		t.Fatalf("fetched %v, want the occurrence", got)
	}
	id := got[0].(map[string]any)["id"].(string)
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/defer", consumer, map[string]any{"worker_id": "w1", "reason": "waiting for a signature"})
	env.Clock.Advance(2 * time.Hour)
	gauge(func(got float64) bool { return got >= 7200 }, ">= 7200 two hours after the deferral")
	// Nothing is claimable meanwhile: a deferral is not a queue's lag.
	if got, _ := env.Metrics().Get("relais_oldest_claimable_age_seconds", "definition", crm); got != 0 {
		t.Errorf("relais_oldest_claimable_age_seconds = %v with the one occurrence deferred, want 0", got)
	}

	env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/complete", consumer,
		map[string]any{"worker_id": "w2", "outputs": map[string]any{"result": "created", "crm_id": "C-1"}})
	gauge(func(got float64) bool { return got == 0 }, "= 0 once settled")
}

// The counters alerts take rate() of are there from the start at 0: the
// first push failure or throttled fetch after a restart is then a rise,
// not a series appearing at 1 that rate() cannot see.
func TestFailureCountersStartAtZero(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	// Label values quote names clients chose: never read as a page
	// (security QA).
	if h := env.Do("GET", "/metrics", "", nil).Header.Get("X-Content-Type-Options"); h != "nosniff" {
		t.Errorf("/metrics X-Content-Type-Options %q, want nosniff", h)
	}
	m := env.Metrics()
	for _, c := range [][]string{
		{"relais_push_calls_total", "result", "ok"}, {"relais_push_calls_total", "result", "connection_failed"},
		{"relais_push_calls_total", "result", "deadline_exceeded"}, {"relais_push_calls_total", "result", "call_aborted"},
		{"relais_pull_fetches_total", "result", "too_many_waiters"}, {"relais_pull_fetches_total", "result", "claimed"},
		// The latencies a dashboard shows, present before the first fetch
		// or settlement (SRE QA).
		{"relais_pull_fetch_duration_seconds_count", "result", "claimed"}, {"relais_pull_settle_duration_seconds_count", "action", "complete", "result", "ok"},
	} {
		if n, ok := m.Get(c[0], c[1:]...); !ok || n != 0 {
			t.Errorf("%s{%s=%q} after a start: %v (present %v), want 0", c[0], c[1], c[2], n, ok)
		}
	}
}

// With RELAIS_METRICS_TOKEN, /metrics answers only its bearer (security
// QA: the metrics name definitions, consumers and destinations to whoever
// reaches the listener); an API token is no pass.
func TestMetricsToken(t *testing.T) {
	t.Parallel()
	const token = "metrics-scraper-secret-0001"
	env := relaistest.New(t, func(c *config.Config) { c.MetricsToken = token })
	for _, bearer := range []string{"", env.Admin, token + "x", "metrics-scraper-secret-000"} {
		r := env.Do("GET", "/metrics", bearer, nil)
		if r.Status != http.StatusUnauthorized || r.Code() != "unauthorized" || !strings.Contains(string(r.Body), "RELAIS_METRICS_TOKEN") || r.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("/metrics with %q: %d %s, want 401 naming RELAIS_METRICS_TOKEN", bearer, r.Status, r.Body)
		}
	}
	if r := env.Do("GET", "/metrics", token, nil); r.Status != http.StatusOK || !strings.Contains(string(r.Body), "relais_data_keys") {
		t.Errorf("/metrics with its token: %d %.200s", r.Status, r.Body)
	}
	// The scheme in any case, as the API takes it (verifier QA).
	if r := env.Do("GET", "/metrics", "", nil, "Authorization", "bearer "+token); r.Status != http.StatusOK {
		t.Errorf("/metrics with bearer in lower case: %d", r.Status)
	}
	// The probes stay open: a load balancer has no token.
	if r := env.Do("GET", "/readyz", "", nil); r.Status != http.StatusOK {
		t.Errorf("/readyz without a token: %d", r.Status)
	}
}
