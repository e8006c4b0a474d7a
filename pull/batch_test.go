package pull_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"
)

// A batch start applies the valid items in one request, reports each
// invalid one at its index with pointers into the batch, replays an
// item's Idempotency-Key, and refuses a batch over the ceiling whole.
func TestBatchStart(t *testing.T) {
	t.Parallel()
	env, _ := newCRM(t, nil)
	items := []any{
		map[string]any{"inputs": map[string]any{"name": "Acme"}, "idempotency_key": "k-1"},
		map[string]any{"inputs": map[string]any{"nom": "Acme"}},
		map[string]any{"inputs": map[string]any{"name": "Globex"}, "business_key": "G-1"},
		map[string]any{"inputs": map[string]any{"name": "Acme"}, "idempotency_key": "k-1"},
	}
	res := env.Must(200, "POST", "/api/v1/processes/crm_only/instances/batch", env.Operator, map[string]any{"items": items}).JSON(t)
	got := res["items"].([]any)
	if len(got) != 4 {
		t.Fatalf("items = %v, want 4 results", got)
	}
	item := func(i int) map[string]any { return got[i].(map[string]any) }
	if item(0)["status"] != 201.0 || item(2)["status"] != 201.0 {
		t.Errorf("valid items answered %v and %v, want 201", item(0)["status"], item(2)["status"])
	}
	p, _ := item(1)["problem"].(map[string]any)
	if item(1)["status"] != 422.0 || p["code"] != "invalid_inputs" || !strings.HasPrefix(fmt.Sprint(p["errors"]), "[map[message:") || !strings.Contains(fmt.Sprint(p["errors"]), "/items/1/inputs") {
		t.Errorf("invalid item = %v, want 422 invalid_inputs with pointers under /items/1/inputs", item(1))
	}
	if item(3)["status"] != 422.0 || item(3)["problem"].(map[string]any)["code"] != "duplicate_item" ||
		!strings.Contains(fmt.Sprint(item(3)["problem"].(map[string]any)["errors"]), "/items/3/idempotency_key") {
		t.Errorf("repeated key in one batch = %v, want 422 duplicate_item at /items/3/idempotency_key", item(3))
	}
	id := item(0)["instance"].(map[string]any)["id"]
	list := env.Must(200, "GET", "/api/v1/instances?process=crm_only", env.Operator, nil).JSON(t)["items"].([]any)
	if len(list) != 2 {
		t.Errorf("%d instances exist, want the 2 valid ones", len(list))
	}
	// A later batch replays the key.
	again := env.Must(200, "POST", "/api/v1/processes/crm_only/instances/batch", env.Operator,
		map[string]any{"items": []any{items[0]}}).JSON(t)["items"].([]any)[0].(map[string]any)
	if again["status"] != 200.0 || again["instance"].(map[string]any)["id"] != id {
		t.Errorf("replayed item = %v, want 200 with instance %v", again, id)
	}
	big := make([]any, 1001)
	for i := range big {
		big[i] = map[string]any{"inputs": map[string]any{"name": "x"}}
	}
	wantProblem(t, "batch over the ceiling", env.Do("POST", "/api/v1/processes/crm_only/instances/batch", env.Operator, map[string]any{"items": big}), 400, "bound_exceeded")
	wantProblem(t, "empty batch", env.Do("POST", "/api/v1/processes/crm_only/instances/batch", env.Operator, map[string]any{"items": []any{}}), 400, "invalid_request")
	// The header a single start takes would be silently ignored: refused.
	wantProblem(t, "a batch with an Idempotency-Key header", env.Do("POST", "/api/v1/processes/crm_only/instances/batch", env.Operator,
		map[string]any{"items": []any{map[string]any{"inputs": map[string]any{"name": "x"}}}}, "Idempotency-Key", "hb1"), 400, "invalid_request")
	// A misspelt process fails the request as a single start does, not
	// each item under a 200.
	wantProblem(t, "a batch of an unknown process", env.Do("POST", "/api/v1/processes/crm_onyl/instances/batch", env.Operator,
		map[string]any{"items": []any{map[string]any{"inputs": map[string]any{"name": "x"}}}}), 404, "not_found")
	wantProblem(t, "an unknown process with a version", env.Do("POST", "/api/v1/processes/crm_onyl/instances", env.Operator,
		map[string]any{"version": 3, "inputs": map[string]any{"name": "x"}}), 404, "not_found")
	// null is no start: encoding/json would have read it as an empty item.
	if r := env.Do("POST", "/api/v1/processes/crm_only/instances/batch", env.Operator, map[string]any{"items": []any{nil, map[string]any{}}}); r.Status != 400 ||
		!strings.Contains(string(r.Body), `"path":"/items/0","message":"must be an object, not null"`) {
		t.Errorf("a null item: %d %s", r.Status, r.Body)
	}
	if r := env.Do("POST", "/api/v1/processes/crm_only/instances", env.Operator, "null"); r.Status != 400 {
		t.Errorf("a body of null: %d %s", r.Status, r.Body)
	}
	// A key no header could carry again is refused, as a business key is.
	for _, key := range []string{" k-2", `k-2\t`, `k\u200b2`} {
		r := env.Do("POST", "/api/v1/processes/crm_only/instances/batch", env.Operator,
			[]byte(`{"items":[{"inputs":{"name":"x"},"idempotency_key":"`+key+`"}]}`))
		if r.Status != 400 || !strings.Contains(string(r.Body), "/items/0/idempotency_key") {
			t.Errorf("idempotency key %q: %d %s", key, r.Status, r.Body)
		}
	}
	// A key used for another request is said at its member.
	reused := env.Must(200, "POST", "/api/v1/processes/crm_only/instances/batch", env.Operator,
		map[string]any{"items": []any{map[string]any{"inputs": map[string]any{"name": "Other"}, "idempotency_key": "k-1"}}}).JSON(t)["items"].([]any)[0].(map[string]any)
	if p, _ := reused["problem"].(map[string]any); reused["status"] != 422.0 || p["code"] != "idempotency_key_reused" ||
		!strings.Contains(fmt.Sprint(p["errors"]), "/items/0/idempotency_key") || strings.Contains(fmt.Sprint(p["detail"]), "Idempotency-Key") {
		t.Errorf("a reused key = %v, want 422 idempotency_key_reused at /items/0/idempotency_key", reused)
	}
	if n := len(env.Must(200, "GET", "/api/v1/instances?process=crm_only", env.Operator, nil).JSON(t)["items"].([]any)); n != 2 {
		t.Errorf("%d instances after refused batches, want 2", n)
	}
}

// A batch settlement settles each item as the single routes would, with
// their refusals per item, in one request; a malformed batch (a duplicate
// id, an item that neither completes nor fails, another worker's member)
// settles nothing.
func TestBatchSettle(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, nil)
	var ids []string
	for i := range 4 {
		_, id := start(t, env, "crm_only", fmt.Sprint("C", i))
		ids = append(ids, id)
	}
	got := fetch(t, env, consumer, fetchBody("w1", "max_tasks", 3))
	if len(got) != 3 {
		t.Fatalf("fetched %d, want 3", len(got))
	}
	held := map[string]bool{}
	for _, o := range got {
		held[o["id"].(string)] = true
	}
	var notHeld string
	for _, id := range ids {
		if !held[id] {
			notHeld = id
		}
	}
	g := ids3(got)
	for _, bad := range []map[string]any{
		{"worker_id": "w1", "items": []any{map[string]any{"id": g[0], "outputs": created}, map[string]any{"id": g[0], "outputs": created}}},
		{"worker_id": "w1", "items": []any{map[string]any{"id": g[0]}}},
		{"worker_id": "w1", "items": []any{map[string]any{"id": g[0], "outputs": created, "worker_id": "w2"}}},
	} {
		r := env.Do("POST", "/api/v1/pull/settle", consumer, bad)
		if r.Status != 400 {
			t.Errorf("malformed batch %v: %d %s, want 400", bad, r.Status, r.Body)
		}
	}
	if s := observe(t, env, g[0])["status"]; s != "reserved" {
		t.Fatalf("after refused batches %s is %v, want still reserved", g[0], s)
	}
	// Every problem of a malformed batch is answered at once.
	r := env.Do("POST", "/api/v1/pull/settle", consumer, map[string]any{"worker_id": "w1", "items": []any{
		map[string]any{"id": g[0], "outputs": created}, map[string]any{"id": g[0], "outputs": created}, map[string]any{"id": g[1]}}})
	if body := string(r.Body); r.Status != 400 || !strings.Contains(body, `"/items/1/id"`) || !strings.Contains(body, `"/items/2"`) {
		t.Errorf("a batch with an id given twice and an item without outcome: %d %s, want 400 pointing at both", r.Status, body)
	}
	r = env.Do("POST", "/api/v1/pull/settle", consumer, map[string]any{"worker_id": "w1", "items": []any{
		map[string]any{"id": g[0], "outputs": created, "error_code": "CRM_DOWN"}}})
	if body := string(r.Body); r.Status != 400 || !strings.Contains(body, "not both") {
		t.Errorf("an item with both outcomes: %d %s, want 400 saying not both", r.Status, body)
	}
	res := env.Must(200, "POST", "/api/v1/pull/settle", consumer, map[string]any{"worker_id": "w1", "items": []any{
		map[string]any{"id": g[0], "outputs": created},
		map[string]any{"id": g[1], "error_code": "CRM_DOWN", "message": "503", "retryable": true, "retry_delay": "PT1M"},
		map[string]any{"id": g[2], "outputs": map[string]any{"result": "maybe"}},
		map[string]any{"id": notHeld, "outputs": created},
	}}).JSON(t)["items"].([]any)
	status := func(i int) any { return res[i].(map[string]any)["status"] }
	code := func(i int) any { p, _ := res[i].(map[string]any)["problem"].(map[string]any); return p["code"] }
	if status(0) != 200.0 || res[0].(map[string]any)["result"].(map[string]any)["route"] != "created" {
		t.Errorf("item 0 = %v, want completed on route created", res[0])
	}
	if status(1) != 200.0 || res[1].(map[string]any)["result"].(map[string]any)["status"] != "available" {
		t.Errorf("item 1 = %v, want failed, available again", res[1])
	}
	if status(2) != 422.0 || code(2) != "invalid_outputs" {
		t.Errorf("item 2 = %v, want 422 invalid_outputs", res[2])
	}
	// Its pointers point into the batch, as a refused start's do.
	for _, e := range res[2].(map[string]any)["problem"].(map[string]any)["errors"].([]any) {
		if p := e.(map[string]any)["path"].(string); !strings.HasPrefix(p, "/items/2/outputs") {
			t.Errorf("item 2 points at %s, want a pointer under /items/2/outputs", p)
		}
	}
	if status(3) != 409.0 || code(3) != "not_reserved" {
		t.Errorf("item 3 = %v, want 409 not_reserved", res[3])
	}
	for i, want := range []string{"completed", "available", "reserved", "available"} {
		id := []string{g[0], g[1], g[2], notHeld}[i]
		if s := observe(t, env, id)["status"]; s != want {
			t.Errorf("occurrence %d is %v, want %s", i, s, want)
		}
	}
	// The refused item can still be corrected and resubmitted.
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+g[2]+"/complete", consumer, completeBody("w1", existing))
}

func ids3(occs []map[string]any) []string { return ids(occs) }

// A start's version is a version number, or absent (or null) for the
// latest: 0 or a negative one is a bad value at /version, not the latest
// (a client's unset variable ran whatever was latest: designer QA) nor an
// unknown process; one the process lacks is 422 unknown_version. A batch
// item's likewise, at its pointer.
func TestStartVersionIsChecked(t *testing.T) {
	t.Parallel()
	env, _ := newCRM(t, nil)
	for version, want := range map[int]string{-1: "invalid_request", 0: "invalid_request", 99: "unknown_version"} {
		r := env.Do("POST", "/api/v1/processes/crm_only/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": "x"}, "version": version})
		if r.Code() != want || !strings.Contains(string(r.Body), `"path":"/version"`) {
			t.Errorf("version %d: %d %s, want %s at /version", version, r.Status, r.Body, want)
		}
	}
	env.Must(201, "POST", "/api/v1/processes/crm_only/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": "x"}, "version": nil})
	r := env.Do("POST", "/api/v1/processes/crm_only/instances/batch", env.Operator, map[string]any{"items": []any{
		map[string]any{"inputs": map[string]any{"name": "y"}}, map[string]any{"inputs": map[string]any{"name": "z"}, "version": 0}}})
	if r.Code() != "invalid_request" || !strings.Contains(string(r.Body), `"path":"/items/1/version"`) {
		t.Errorf("a batch item of version 0: %d %s, want invalid_request at /items/1/version", r.Status, r.Body)
	}
}

// A creation window selects by the created_at the API shows: a batch's
// instances share their transaction's created_at, though their ids were
// minted while the batch was read, before it.
func TestCreatedWindowIsCreatedAt(t *testing.T) {
	t.Parallel()
	env, _ := newCRM(t, nil)
	items := make([]any, 50)
	for i := range items {
		items[i] = map[string]any{"inputs": map[string]any{"name": fmt.Sprint("c", i)}}
	}
	res := env.Must(200, "POST", "/api/v1/processes/crm_only/instances/batch", env.Operator, map[string]any{"items": items}).JSON(t)["items"].([]any)
	at, err := time.Parse(time.RFC3339Nano, res[0].(map[string]any)["instance"].(map[string]any)["created_at"].(string))
	if err != nil {
		t.Fatal(err)
	}
	occ := env.Must(200, "GET", "/api/v1/occurrences?process=crm_only&limit=1", env.Operator, nil).JSON(t)["items"].([]any)[0].(map[string]any)
	occAt, err := time.Parse(time.RFC3339Nano, occ["created_at"].(string))
	if err != nil {
		t.Fatal(err)
	}
	count := func(list, after, before string, at time.Time) int {
		q := url.Values{"process": {"crm_only"}, "limit": {"200"}}
		if after != "" {
			q.Set(after, at.Format(time.RFC3339Nano))
		}
		if before != "" {
			q.Set(before, at.Format(time.RFC3339Nano))
		}
		return len(env.Must(200, "GET", "/api/v1/"+list+"?"+q.Encode(), env.Operator, nil).JSON(t)["items"].([]any))
	}
	for _, tc := range []struct {
		list          string
		at            time.Time
		after, before string
		want          int
	}{
		{"instances", at, "created_after", "", 50},
		{"instances", at, "", "created_before", 0},
		{"instances", at.Add(time.Microsecond), "created_after", "", 0},
		{"instances", at.Add(time.Microsecond), "", "created_before", 50},
		{"occurrences", occAt, "created_after", "", 50},
		{"occurrences", occAt, "", "created_before", 0},
		{"occurrences", occAt.Add(time.Microsecond), "created_after", "", 0},
	} {
		if got := count(tc.list, tc.after, tc.before, tc.at); got != tc.want {
			t.Errorf("%s %s%s %s: %d, want %d", tc.list, tc.after, tc.before, tc.at.Format(time.RFC3339Nano), got, tc.want)
		}
	}
}
