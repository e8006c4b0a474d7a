package pull_test

// Black-box tests of the completed pull protocol (DESIGN §11): namespaced
// keys and patterns, declared fields, defer and settle tokens, release,
// idempotent fail and attempts_left.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relais/relais/internal/relaistest"
)

// nsDefinition saves and snapshots a small dotted-key definition whose
// inputs hold a name, a nested object and a secret.
func nsDefinition(t *testing.T, env *relaistest.Env, key string) {
	t.Helper()
	env.Must(201, "PUT", "/api/v1/definitions/"+key+"/working", env.Designer, map[string]any{
		"name": key,
		"inputs": map[string]any{"fields": []any{
			map[string]any{"name": "company", "type": "text", "required": true},
			map[string]any{"name": "address", "type": "object", "fields": []any{
				map[string]any{"name": "city", "type": "text"},
				map[string]any{"name": "street", "type": "text"},
			}},
			map[string]any{"name": "card", "type": "text", "classification": "secret"},
		}},
		"outputs": map[string]any{"fields": []any{map[string]any{"name": "ok", "type": "boolean", "required": true}}},
	})
	env.Must(201, "POST", "/api/v1/definitions/"+key+"/revisions", env.Designer, nil)
}

// nsProcess runs one pull node on key@1 fed from the instance inputs.
func nsProcess(key string) map[string]any {
	return map[string]any{
		"inputs": map[string]any{"fields": []any{
			map[string]any{"name": "company", "type": "text", "required": true},
			map[string]any{"name": "city", "type": "text", "required": true},
			map[string]any{"name": "card", "type": "text", "required": true, "classification": "secret"},
		}},
		"start": "task",
		"nodes": map[string]any{
			"task": map[string]any{"kind": "pull", "definition": key, "revision": 1,
				"inputs": map[string]any{
					"company": map[string]any{"from": "input.company"},
					"address": map[string]any{"value": map[string]any{"street": "1 rue de la Paix"}},
					"card":    map[string]any{"from": "input.card"},
				},
				"next": "done", "on_error": "failed"},
			"done":   map[string]any{"kind": "end"},
			"failed": map[string]any{"kind": "end", "status": "failed"},
		},
	}
}

func startNS(t *testing.T, env *relaistest.Env, process string) (instance, occurrence string) {
	t.Helper()
	inst := env.Must(201, "POST", "/api/v1/processes/"+process+"/instances", env.Operator,
		map[string]any{"inputs": map[string]any{"company": "Acme", "city": "Lyon", "card": "4111111111111111"}}).JSON(t)
	return inst["id"].(string), inst["path"].([]any)[0].(map[string]any)["occurrence_id"].(string)
}

func subscribe(worker string, subs ...map[string]any) map[string]any {
	list := make([]any, len(subs))
	for i, s := range subs {
		list[i] = s
	}
	return map[string]any{"worker_id": worker, "subscriptions": list}
}

// A pattern grant covers keys created after it; a pattern subscription
// claims every granted key it matches; what the patterns do not cover stays
// invisible (404) and ungranted subscriptions are refused.
func TestPatternGrantsAndSubscriptions(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	nsDefinition(t, env, "crm.add_company")
	res := env.Must(201, "POST", "/api/v1/consumers", env.Admin, map[string]any{"name": "crm-team",
		"grants": []any{map[string]any{"definition": "crm.*"}}}).JSON(t)
	token := res["token"].(string)
	// Created after the grant: covered all the same.
	nsDefinition(t, env, "crm.sync.contacts")
	nsDefinition(t, env, "billing.charge")
	for _, key := range []string{"crm.add_company", "crm.sync.contacts", "billing.charge"} {
		env.Process(processKeyFor(key), nsProcess(key))
	}
	_, a := startNS(t, env, processKeyFor("crm.add_company"))
	_, b := startNS(t, env, processKeyFor("crm.sync.contacts"))
	_, c := startNS(t, env, processKeyFor("billing.charge"))

	seen := map[string]bool{}
	for _, o := range fetch(t, env, token, map[string]any{"worker_id": "w1", "max_tasks": 10, "subscriptions": []any{map[string]any{"definition": "crm.*"}}}) {
		seen[o["id"].(string)] = true
	}
	if !seen[a] || !seen[b] || seen[c] {
		t.Errorf("claimed %v, want %s and %s (crm.*) and never %s (billing)", seen, a, b, c)
	}
	// Outside the patterns: invisible, as an unknown id.
	wantProblem(t, "complete of an ungranted occurrence", act(env, token, c, "complete", completeBody("w1", map[string]any{"ok": true})), 404, "not_found")
	// Its own grants named, nothing close being granted (Go SDK QA: a
	// key that does not exist read as a grant to ask for).
	if p := wantProblem(t, "subscription to an ungranted key", env.Do("POST", "/api/v1/pull/fetch-and-lock", token,
		subscribe("w1", map[string]any{"definition": "billing.charge"})), 403, "not_granted"); !strings.Contains(fmt.Sprint(p["errors"]), "not granted to this consumer, which is granted crm.*") {
		t.Errorf("ungranted key: errors %v, want the consumer's grants named", p["errors"])
	}
	wantProblem(t, "subscription to an ungranted pattern", env.Do("POST", "/api/v1/pull/fetch-and-lock", token,
		subscribe("w1", map[string]any{"definition": "billing.*"})), 403, "not_granted")
}

// A subscription nothing could ever match (a key without published
// revisions, a revision the key lacks) is refused at its pointer instead
// of waiting forever: a pattern grant would let a misspelt key through.
func TestSubscriptionsThatCanNeverMatchAreRefused(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	nsDefinition(t, env, "crm.add_company")
	token := env.Must(201, "POST", "/api/v1/consumers", env.Admin, map[string]any{"name": "crm-team",
		"grants": []any{map[string]any{"definition": "crm.*"}}}).JSON(t)["token"].(string)
	env.Process(processKeyFor("crm.add_company"), nsProcess("crm.add_company"))
	_, occ := startNS(t, env, processKeyFor("crm.add_company"))

	for name, c := range map[string]struct {
		sub  map[string]any
		path string
	}{
		"misspelt key":         {map[string]any{"definition": "crm.add_compnay"}, "/subscriptions/1/definition"},
		"unpublished revision": {map[string]any{"definition": "crm.add_company", "revisions": []int{1, 2}}, "/subscriptions/1/revisions/1"},
	} {
		p := wantProblem(t, name, env.Do("POST", "/api/v1/pull/fetch-and-lock", token,
			subscribe("w1", map[string]any{"definition": "crm.*"}, c.sub)), 400, "invalid_request")
		if !strings.Contains(fmt.Sprint(p["errors"]), c.path) {
			t.Errorf("%s: errors %v, want one at %s", name, p["errors"], c.path)
		}
		// The misspelt key is named with the granted key it meant, as an
		// explicit grant's would be.
		if name == "misspelt key" && !strings.Contains(fmt.Sprint(p["errors"]), `did you mean "crm.add_company"`) {
			t.Errorf("misspelt key: errors %v, want the granted key suggested", p["errors"])
		}
	}
	// A key asked without its namespace (a Zeebe job type, a Camunda
	// topic written short) is named with the granted key it meant.
	explicit := env.Must(201, "POST", "/api/v1/consumers", env.Admin, map[string]any{"name": "crm-explicit",
		"grants": []any{map[string]any{"definition": "crm.add_company", "revisions": "all"}}}).JSON(t)["token"].(string)
	p := wantProblem(t, "a key without its namespace", env.Do("POST", "/api/v1/pull/fetch-and-lock", explicit,
		subscribe("w1", map[string]any{"definition": "add_company"})), 403, "not_granted")
	if !strings.Contains(fmt.Sprint(p["errors"]), `did you mean "crm.add_company"`) {
		t.Errorf("a key without its namespace: errors %v, want the granted key suggested", p["errors"])
	}
	// A key outside the grants is still not_granted, whether it exists or
	// not: nothing is revealed of what the consumer is not granted.
	wantProblem(t, "an ungranted unknown key", env.Do("POST", "/api/v1/pull/fetch-and-lock", token,
		subscribe("w1", map[string]any{"definition": "billing.no_such_key"})), 403, "not_granted")
	// Nor of revisions it is not granted: one granted revision 1 only
	// hears not_granted for revision 7, as for any revision beyond it.
	only1 := env.Must(201, "POST", "/api/v1/consumers", env.Admin, map[string]any{"name": "rev-1-only",
		"grants": []any{map[string]any{"definition": "crm.add_company", "revisions": []int{1}}}}).JSON(t)["token"].(string)
	wantProblem(t, "an ungranted unknown revision", env.Do("POST", "/api/v1/pull/fetch-and-lock", only1,
		subscribe("w1", map[string]any{"definition": "crm.add_company", "revisions": []int{7}})), 403, "not_granted")
	got := fetch(t, env, token, map[string]any{"worker_id": "w1", "max_tasks": 1,
		"subscriptions": []any{map[string]any{"definition": "crm.add_company", "revisions": []int{1}}}})
	if len(got) != 1 || got[0]["id"] != occ {
		t.Fatalf("fetched %v, want %s", got, occ)
	}
}

func processKeyFor(key string) string {
	out := []byte(key)
	for i, c := range out {
		if c == '.' {
			out[i] = '_'
		}
	}
	return string(out)
}

// Patterns in the wrong place are refused with the pointer, changing
// nothing.
func TestBadPatterns(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	nsDefinition(t, env, "crm.add_company")
	token := env.Consumer("c", "crm.add_company")
	for _, bad := range []string{"crm*", "*.x", "a..b", "crm.*.x", "CRM.*", ".crm", "crm."} {
		r := env.Do("POST", "/api/v1/consumers", env.Admin, map[string]any{"name": "x-" + bad, "grants": []any{map[string]any{"definition": bad}}})
		if r.Status != 422 && r.Status != 400 {
			t.Errorf("grant %q: %d %s, want 4xx", bad, r.Status, r.Body)
		}
		r = env.Do("POST", "/api/v1/pull/fetch-and-lock", token, subscribe("w1", map[string]any{"definition": bad}))
		if r.Status != 400 {
			t.Errorf("subscription %q: %d %s, want 400", bad, r.Status, r.Body)
		}
	}
	r := env.Do("POST", "/api/v1/consumers", env.Admin, map[string]any{"name": "p", "grants": []any{map[string]any{"definition": "crm.*", "revisions": []int{1}}}})
	if r.Status != 422 {
		t.Errorf("pattern grant with revisions: %d %s, want 422", r.Status, r.Body)
	}
	wantProblem(t, "pattern subscription with revisions", env.Do("POST", "/api/v1/pull/fetch-and-lock", token,
		subscribe("w1", map[string]any{"definition": "crm.*", "revisions": []int{1}})), 400, "invalid_request")
	list := env.Must(200, "GET", "/api/v1/consumers", env.Admin, nil).JSON(t)["items"].([]any)
	if len(list) != 1 {
		t.Errorf("%d consumers after refused creations, want 1", len(list))
	}
}

// A worker that declares fields receives those and their parents only:
// neither the secret card nor the undeclared street.
func TestDeclaredFields(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	nsDefinition(t, env, "crm.add_company")
	env.Process("pp", nsProcess("crm.add_company"))
	token := env.Consumer("c", "crm.add_company")
	_, id := startNS(t, env, "pp")

	bad := env.Do("POST", "/api/v1/pull/fetch-and-lock", token,
		subscribe("w1", map[string]any{"definition": "crm.add_company", "fields": []string{"/company", "/address/zip"}}))
	p := wantProblem(t, "unknown pointer", bad, 400, "invalid_request")
	if errs, _ := p["errors"].([]any); len(errs) != 1 || errs[0].(map[string]any)["path"] != "/subscriptions/0/fields/1" {
		t.Errorf("errors = %v, want one at /subscriptions/0/fields/1 naming the revision", p["errors"])
	} else if msg := errs[0].(map[string]any)["message"].(string); !strings.Contains(msg, "revision 1") || !strings.Contains(msg, "/address/zip") {
		t.Errorf("message %q does not name the revision and the pointer", msg)
	}

	occ := one(t, fetch(t, env, token, subscribe("w1", map[string]any{"definition": "crm.add_company", "fields": []string{"/company", "/address/city"}})), id)
	var inputs map[string]any
	raw, _ := json.Marshal(occ["inputs"])
	_ = json.Unmarshal(raw, &inputs)
	want := `{"address":{},"company":"Acme"}`
	if got, _ := json.Marshal(inputs); string(got) != want {
		t.Errorf("inputs = %s, want %s (the street was not declared, the city is absent)", got, want)
	}
	if strings.Contains(string(raw), "4111") || strings.Contains(string(raw), "Paix") {
		t.Errorf("undeclared values delivered: %s", raw)
	}
}

// Where a worker's subscriptions overlap (a pattern and a key it covers),
// the most specific one says what is delivered: a catch-all pattern next
// to a key's declared fields delivered every input, the secret card too
// (Zeebe-user QA). One key or pattern listed twice is refused: which of
// the two the worker meant cannot be told.
func TestDeclaredFieldsOfTheMostSpecificSubscription(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	nsDefinition(t, env, "crm.add_company")
	env.Process("pp", nsProcess("crm.add_company"))
	token := env.Consumer("c", "crm.*")
	pattern := map[string]any{"definition": "crm.*"}
	key := map[string]any{"definition": "crm.add_company", "fields": []string{"/company"}}
	for _, order := range [][]map[string]any{{pattern, key}, {key, pattern}} {
		_, id := startNS(t, env, "pp")
		occ := one(t, fetch(t, env, token, subscribe("w1", order...)), id)
		if got, _ := json.Marshal(occ["inputs"]); string(got) != `{"company":"Acme"}` {
			t.Errorf("subscribed to %v: inputs %s, want the key's declared field only", order, got)
		}
	}

	for _, twice := range []map[string]any{key, pattern} {
		p := wantProblem(t, "subscribed twice", env.Do("POST", "/api/v1/pull/fetch-and-lock", token,
			subscribe("w1", twice, map[string]any{"definition": twice["definition"], "fields": []string{"/city"}})), 400, "invalid_request")
		errs, _ := p["errors"].([]any)
		if len(errs) != 1 || errs[0].(map[string]any)["path"] != "/subscriptions/1/definition" ||
			!strings.Contains(errs[0].(map[string]any)["message"].(string), "at /subscriptions/0") {
			t.Errorf("%s subscribed twice: errors %v, want one at /subscriptions/1/definition naming /subscriptions/0", twice["definition"], errs)
		}
	}
	// A key not granted is refused as such first, listed twice or not
	// (verifier QA: the duplicate was said, the grant only after its fix).
	narrow := env.Consumer("narrow", "crm.add_company")
	other := map[string]any{"definition": "crm.other"}
	wantProblem(t, "a key not granted, twice", env.Do("POST", "/api/v1/pull/fetch-and-lock", narrow,
		subscribe("w2", map[string]any{"definition": "crm.add_company"}, other, other)), 403, "not_granted")
}

// A revision published without a field a live worker declares leaves
// that worker's fetches working: a subscription listing no revisions takes
// the revisions its fields fit; one listing the revision is refused.
func TestDeclaredFieldsSkipARevisionWithoutThem(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	nsDefinition(t, env, "crm.add_company")
	env.Process("pp", nsProcess("crm.add_company"))
	token := env.Consumer("c", "crm.add_company")
	_, id := startNS(t, env, "pp")
	env.Must(200, "PUT", "/api/v1/definitions/crm.add_company/working", env.Designer, map[string]any{
		"name":    "crm.add_company",
		"inputs":  map[string]any{"fields": []any{map[string]any{"name": "company", "type": "text", "required": true}}},
		"outputs": map[string]any{"fields": []any{map[string]any{"name": "ok", "type": "boolean", "required": true}}},
	})
	env.Must(201, "POST", "/api/v1/definitions/crm.add_company/revisions", env.Designer, nil)

	occ := one(t, fetch(t, env, token, subscribe("w1", map[string]any{"definition": "crm.add_company", "fields": []string{"/address/city"}})), id)
	if occ["revision"] != 1.0 {
		t.Errorf("fetched revision %v, want 1", occ["revision"])
	}
	for _, sub := range []map[string]any{
		{"definition": "crm.add_company", "revisions": []int{2}, "fields": []string{"/address/city"}},
		{"definition": "crm.*", "fields": []string{"/no_such_field"}},
	} {
		bad := env.Do("POST", "/api/v1/pull/fetch-and-lock", token, subscribe("w1", sub))
		p := wantProblem(t, "fields no revision taken has", bad, 400, "invalid_request")
		if !strings.Contains(fmt.Sprint(p["errors"]), "/subscriptions/0/fields/0") {
			t.Errorf("%v: errors %v, want one at /subscriptions/0/fields/0", sub, p["errors"])
		}
	}
	// A field no revision has is said once for them all, with the name
	// meant (evolution QA: nine lines alike, one per revision).
	bad := env.Do("POST", "/api/v1/pull/fetch-and-lock", token, subscribe("w1", map[string]any{"definition": "crm.add_company", "fields": []string{"/compnay"}}))
	p := wantProblem(t, "a misspelt field", bad, 400, "invalid_request")
	errs, _ := p["errors"].([]any)
	if len(errs) != 1 || errs[0].(map[string]any)["message"] != `crm.add_company revisions 1, 2: "/compnay" has no input at /compnay (did you mean /company?)` {
		t.Errorf("a misspelt field: errors %v, want one naming both revisions and /company", errs)
	}
	// A field some listed revision has: which one, no other name offered;
	// a name without its slash: the pointer meant.
	for _, c := range []struct {
		sub  map[string]any
		want string
	}{
		{map[string]any{"definition": "crm.add_company", "revisions": []int{1, 2}, "fields": []string{"/address/city"}},
			`crm.add_company revision 2: "/address/city" has no input at /address (revision 1 of crm.add_company has it)`},
		{map[string]any{"definition": "crm.add_company", "fields": []string{"company"}},
			`crm.add_company revisions 1, 2: "company" must be a JSON pointer to an input field, such as /company/name (did you mean /company?)`},
	} {
		p := wantProblem(t, "fields", env.Do("POST", "/api/v1/pull/fetch-and-lock", token, subscribe("w1", c.sub)), 400, "invalid_request")
		if errs, _ := p["errors"].([]any); len(errs) != 1 || errs[0].(map[string]any)["message"] != c.want {
			t.Errorf("%v: errors %v, want %q", c.sub, p["errors"], c.want)
		}
	}
}

// Defer hands the occurrence over: no lock, visible as deferred, settled
// later by another worker of the consumer; a settle token settles that
// occurrence only and nothing else, and not twice.
func TestDeferAndSettleToken(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, map[string]any{"deadline": "P2D"})
	inst, id := start(t, env, "crm_only", "Acme")
	one(t, fetch(t, env, consumer, fetchBody("w1")), id)

	// Only the holder may defer: the usual refusals.
	other := env.Consumer("other", crmKey)
	// The consumer's own other worker is told who holds it (a worker_id
	// unlike the fetch's is the usual slip); another consumer is not.
	if p := wantProblem(t, "defer by another worker", act(env, consumer, id, "defer", map[string]any{"worker_id": "w2"}), 409, "locked_by_other_worker"); !strings.Contains(fmt.Sprint(p["detail"]), `reserved by worker "w1" of this consumer, not "w2"`) {
		t.Errorf("defer by another worker of the consumer: %v; want the holder named", p["detail"])
	}
	if p := wantProblem(t, "defer by another consumer", act(env, other, id, "defer", map[string]any{"worker_id": "w1"}), 409, "locked_by_other_worker"); strings.Contains(fmt.Sprint(p["detail"]), "w1") {
		t.Errorf("defer by another consumer: %v; want no worker named", p["detail"])
	}
	d := env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/defer", consumer, map[string]any{"worker_id": "w1", "reason": "waiting for a signature"}).JSON(t)
	if d["status"] != "deferred" || d["deadline_at"] == nil {
		t.Errorf("defer answered %v, want deferred with its deadline", d)
	}
	if d["defer_reason"] != "waiting for a signature" {
		t.Errorf("defer answered the reason %v, want the one stored", d["defer_reason"])
	}
	// Asked again, with another reason: the first deferral stands, and
	// its answer says which reason is kept.
	again := env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/defer", consumer, map[string]any{"worker_id": "w1", "reason": "escalated"}).JSON(t)
	if again["deferred_at"] != d["deferred_at"] || again["defer_reason"] != "waiting for a signature" {
		t.Errorf("second defer answered %v, want the first %v with its reason", again, d)
	}
	obs := observe(t, env, id)
	if obs["status"] != "deferred" || obs["lock_expires_at"] != nil || obs["defer_reason"] != "waiting for a signature" {
		t.Errorf("observed %v %v %v, want deferred without lock, with its reason", obs["status"], obs["lock_expires_at"], obs["defer_reason"])
	}
	// Its attempt is open, without a lock expiry either.
	occ := env.Must(200, "GET", "/api/v1/occurrences/"+id, env.Operator, nil).JSON(t)
	if as := occ["attempts"].([]any); len(as) != 1 || as[0].(map[string]any)["lock_expires_at"] != nil || as[0].(map[string]any)["ended_at"] != nil {
		t.Errorf("deferred occurrence's attempts %v, want one open attempt without a lock expiry", as)
	}
	items := env.Must(200, "GET", "/api/v1/occurrences?status=deferred", env.Operator, nil).JSON(t)["items"].([]any)
	if len(items) != 1 {
		t.Errorf("status=deferred lists %d, want 1", len(items))
	}
	// No lock to lapse: a day later nobody can claim it.
	env.Clock.Advance(24 * time.Hour)
	if got := fetch(t, env, consumer, fetchBody("w3")); len(got) != 0 {
		t.Errorf("a deferred occurrence was claimed: %v", ids(got))
	}
	wantProblem(t, "extend of a deferred occurrence", act(env, consumer, id, "extend", extendBody("w1")), 409, "not_reserved")
	wantProblem(t, "release of a deferred occurrence", act(env, consumer, id, "release", map[string]any{"worker_id": "w1"}), 409, "not_reserved")

	tok := env.Must(201, "POST", "/api/v1/pull/occurrences/"+id+"/settle-token", consumer, map[string]any{"worker_id": "ui"}).JSON(t)
	st := tok["token"].(string)
	// The issue is logged with the token's hash prefix, never the token:
	// one found in the wrong place is matched to its issue.
	sum := sha256.Sum256([]byte(st))
	if logs := env.Logs.String(); !strings.Contains(logs, "event=settle_token.issued") || !strings.Contains(logs, "token_sha256_prefix="+hex.EncodeToString(sum[:6])) || strings.Contains(logs, st) {
		t.Errorf("settle_token.issued not logged with the token's hash prefix alone")
	}
	if tok["expires_at"] != obs["deadline_at"] {
		t.Errorf("settle token expires %v, want at the deadline %v", tok["expires_at"], obs["deadline_at"])
	}
	// Refused everywhere else.
	_, other2 := start(t, env, "crm_only", "Other")
	wantProblem(t, "settle token on another occurrence", act(env, st, other2, "complete", completeBody("", created)), 401, "unauthorized")
	wantProblem(t, "settle token on fetch", env.Do("POST", "/api/v1/pull/fetch-and-lock", st, fetchBody("x")), 401, "unauthorized")
	wantProblem(t, "settle token on extend", act(env, st, id, "extend", extendBody("x")), 401, "unauthorized")
	// Refused as what it is, not as an unknown token: it is fine, only
	// in the wrong place.
	if p := wantProblem(t, "settle token on the API", env.Do("GET", "/api/v1/occurrences/"+id, st, nil), 401, "unauthorized"); !strings.Contains(fmt.Sprint(p["detail"]), "a settle token only completes or fails its own deferred occurrence") {
		t.Errorf("settle token on the API: %v; want where it is taken said", p["detail"])
	}

	res := env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/complete", st, map[string]any{"outputs": created}).JSON(t)
	if res["status"] != "completed" || res["route"] != "created" {
		t.Errorf("complete with the settle token answered %v", res)
	}
	// A second click is told what became of the first: the same answer
	// for the same outputs, 409 already_settled for others (it was an
	// opaque 401, the same as a forged token's).
	if again := act(env, st, id, "complete", map[string]any{"outputs": created}); again.Status != 200 || again.JSON(t)["route"] != "created" {
		t.Errorf("the settle token's completion sent again: %d %s, want the same 200", again.Status, again.Body)
	}
	wantProblem(t, "the settle token with other outputs after settlement", act(env, st, id, "complete", completeBody("", existing)), 409, "already_settled")
	wantProblem(t, "the settle token failing it after settlement", act(env, st, id, "fail", failBody("")), 409, "already_settled")
	if s := instanceOf(t, env, inst)["status"]; s != "completed" {
		t.Errorf("instance %v, want completed", s)
	}
	if as := attemptsOf(t, observe(t, env, id)); len(as) != 1 || as[0]["worker_id"] != "w1" || as[0]["settled_by"] != "settle-token" || as[0]["settled_with_token"] != true {
		t.Errorf("attempts %v, want w1's attempt settled with its settle token", as)
	}
}

// A rotation at once answers a leaked consumer token: the settle tokens
// it could have issued stop with it. A rotation with an overlap is
// planned, and the front ends holding settle tokens keep them.
func TestSettleTokensEndWithARotationAtOnce(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, map[string]any{"deadline": "P2D"})
	settleToken := func(token, id string) string {
		t.Helper()
		one(t, fetch(t, env, token, fetchBody("w1")), id)
		env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/defer", token, map[string]any{"worker_id": "w1"})
		return env.Must(201, "POST", "/api/v1/pull/occurrences/"+id+"/settle-token", token, map[string]any{"worker_id": "ui"}).JSON(t)["token"].(string)
	}
	_, planned := start(t, env, "crm_only", "Planned")
	plannedToken := settleToken(consumer, planned)
	_, leaked := start(t, env, "crm_only", "Leaked")
	leakedToken := settleToken(consumer, leaked)

	rotate := fmt.Sprintf("/api/v1/consumers/%d/rotate", env.ConsumerID("crm-sync"))
	fresh := env.Must(200, "POST", rotate, env.Admin, map[string]any{"overlap": "PT1H"}).JSON(t)["token"].(string)
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+planned+"/complete", plannedToken, map[string]any{"outputs": created})

	env.Must(200, "POST", rotate, env.Admin, nil)
	wantProblem(t, "settle token after a rotation at once", act(env, leakedToken, leaked, "complete", map[string]any{"outputs": created}), 401, "unauthorized")
	wantProblem(t, "the rotated token", act(env, fresh, leaked, "settle-token", map[string]any{"worker_id": "ui"}), 401, "unauthorized")
	if s := observe(t, env, leaked)["status"]; s != "deferred" {
		t.Errorf("occurrence %v after its settle token was refused, want still deferred", s)
	}
}

// A deferred occurrence is completed or failed by any worker of its
// consumer; a stop cancels it; its deadline still applies.
func TestDeferredSettledByAnotherWorkerAndStopped(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, map[string]any{"deadline": "PT1H"})
	_, id := start(t, env, "crm_only", "Acme")
	one(t, fetch(t, env, consumer, fetchBody("w1")), id)
	// Without a reason: none, null wherever it is read, not "".
	if d := env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/defer", consumer, map[string]any{"worker_id": "w1"}).JSON(t); d["defer_reason"] != nil {
		t.Errorf("defer without a reason answered %q", d["defer_reason"])
	}
	if d := env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/defer", consumer, map[string]any{"worker_id": "w1"}).JSON(t); d["defer_reason"] != nil {
		t.Errorf("defer again without a reason answered %q", d["defer_reason"])
	}
	if o := observe(t, env, id); o["defer_reason"] != nil {
		t.Errorf("a deferral without a reason observed with %q", o["defer_reason"])
	}
	wantProblem(t, "settle token of a reserved occurrence", func() relaistest.Response {
		_, other := start(t, env, "crm_only", "Other")
		one(t, fetch(t, env, consumer, fetchBody("w1")), other)
		return act(env, consumer, other, "settle-token", map[string]any{"worker_id": "w1"})
	}(), 409, "not_deferred")
	res := env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/fail", consumer, failBody("w9", "retryable", false)).JSON(t)
	if res["status"] != "failed" {
		t.Errorf("fail by another worker answered %v", res)
	}
	// The attempt keeps the worker that deferred it and records who settled it.
	if as := attemptsOf(t, observe(t, env, id)); len(as) != 1 || as[0]["worker_id"] != "w1" || as[0]["settled_by"] != "w9" || as[0]["settled_with_token"] != false {
		t.Errorf("attempts %v, want w1's attempt settled by w9 without a token", as)
	}

	// Failed for a retry, a deferred occurrence is available again and no
	// longer deferred.
	_, retried := start(t, env, "crm_only", "Retried")
	one(t, fetch(t, env, consumer, fetchBody("w1")), retried)
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+retried+"/defer", consumer, map[string]any{"worker_id": "w1", "reason": "waiting for a human"})
	oldToken := env.Must(201, "POST", "/api/v1/pull/occurrences/"+retried+"/settle-token", consumer, map[string]any{"worker_id": "ui"}).JSON(t)["token"].(string)
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+retried+"/fail", consumer, failBody("w9", "retry_delay", "PT1S"))
	if o := observe(t, env, retried); o["status"] != "available" || o["deferred_at"] != nil || o["defer_reason"] != nil {
		t.Errorf("deferred then failed for a retry: %v, deferred_at %v, defer_reason %v; want available, neither", o["status"], o["deferred_at"], o["defer_reason"])
	}
	// Its next attempt, deferred again, takes none of the first's tokens.
	env.Clock.Advance(2 * time.Second)
	one(t, fetch(t, env, consumer, fetchBody("w1")), retried)
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+retried+"/defer", consumer, map[string]any{"worker_id": "w1"})
	wantProblem(t, "the first attempt's settle token on the second", act(env, oldToken, retried, "complete", completeBody("", created)), 409, "already_settled")
	if o := observe(t, env, retried); o["status"] != "deferred" {
		t.Errorf("the second attempt after the first's token was refused: %v, want still deferred", o["status"])
	}

	inst2, id2 := start(t, env, "crm_only", "Stopped")
	one(t, fetch(t, env, consumer, fetchBody("w1")), id2)
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+id2+"/defer", consumer, map[string]any{"worker_id": "w1"})
	stopToken := env.Must(201, "POST", "/api/v1/pull/occurrences/"+id2+"/settle-token", consumer, map[string]any{"worker_id": "ui"}).JSON(t)["token"].(string)
	env.Must(200, "POST", "/api/v1/instances/"+inst2+"/stop", env.Operator, map[string]any{"reason": "test stop"})
	wantProblem(t, "complete after stop", act(env, consumer, id2, "complete", completeBody("w1", created)), 409, "occurrence_cancelled")
	// A front end's click after the stop is told so, as the worker is
	// (DESIGN §2: a late result for a cancelled occurrence is 409).
	wantProblem(t, "the settle token after stop", act(env, stopToken, id2, "complete", completeBody("", created)), 409, "occurrence_cancelled")

	inst3, id3 := start(t, env, "crm_only", "Late")
	one(t, fetch(t, env, consumer, fetchBody("w1")), id3)
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+id3+"/defer", consumer, map[string]any{"worker_id": "w1"})
	env.Clock.Advance(2 * time.Hour)
	if got := env.WaitEnded(inst3, 5*time.Second); got["status"] != "failed" {
		t.Errorf("instance %v, want failed", got["status"])
	}
	if got := observe(t, env, id3); got["error_code"] != "deadline_exceeded" {
		t.Errorf("deferred past its deadline: %v %v, want failed deadline_exceeded", got["status"], got["error_code"])
	}
	// Any worker of the consumer may settle a deferred occurrence: each is
	// told deadline_exceeded once the timer failed it, as before it did.
	for _, w := range []string{"w1", "w9"} {
		wantProblem(t, "complete by "+w+" past the deadline", act(env, consumer, id3, "complete", completeBody(w, created)), 409, "deadline_exceeded")
	}
}

// Release hands the reservation back at once without spending an attempt.
func TestRelease(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, map[string]any{"max_attempts": 2})
	_, id := start(t, env, "crm_only", "Acme")
	first := one(t, fetch(t, env, consumer, fetchBody("w1")), id)
	if first["attempts_left"] != 1.0 {
		t.Fatalf("attempts_left %v, want 1", first["attempts_left"])
	}
	wantProblem(t, "release by another worker", act(env, consumer, id, "release", map[string]any{"worker_id": "w2"}), 409, "locked_by_other_worker")
	res := env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/release", consumer, map[string]any{"worker_id": "w1"}).JSON(t)
	if res["status"] != "available" || res["attempts_left"] != 2.0 {
		t.Errorf("release answered %v, want available with 2 attempts left", res)
	}
	// Sent again (its answer lost), it answers what it got, as a
	// settlement's replay does (polyglot QA: 409 "fetch it first").
	replay := func(what string) {
		t.Helper()
		for _, body := range []map[string]any{{"worker_id": "w1"}, {"worker_id": "w1", "attempt": 1}} {
			again := env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/release", consumer, body).JSON(t)
			if again["status"] != "available" || again["attempts_left"] != 2.0 || again["available_at"] != res["available_at"] {
				t.Errorf("%s %v: %v, want the first answer %v", what, body, again, res)
			}
		}
	}
	replay("release sent again")
	second := one(t, fetch(t, env, consumer, fetchBody("w2")), id)
	if second["attempt"] != 2.0 || second["attempts_left"] != 1.0 {
		t.Errorf("after release: attempt %v, attempts_left %v; want 2 and 1 (the released attempt was given back)", second["attempt"], second["attempts_left"])
	}
	as := attemptsOf(t, observe(t, env, id))
	if len(as) != 2 || as[0]["outcome"] != "released" || as[0]["settled_by"] != nil {
		t.Errorf("attempts %v, want the first released, by its own worker (no settled_by)", as)
	}
	// Another worker holds it now: w1's release is still the one it made.
	replay("release sent again once another worker holds it")
	wantProblem(t, "a release w1 never made", act(env, consumer, id, "release", map[string]any{"worker_id": "w3"}), 409, "locked_by_other_worker")
}

// A grant withdrawn under a worker's reservation leaves it nothing to
// settle (404, as an unknown id), but it may still hand the reservation
// back at no attempt's cost; holding it until the lock lapsed spent one
// (and, with one attempt, failed the instance). Another worker of the
// consumer may not.
func TestReleaseAfterTheGrantWasWithdrawn(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, map[string]any{"max_attempts": 1})
	_, id := start(t, env, "crm_only", "Acme")
	one(t, fetch(t, env, consumer, fetchBody("w1")), id)
	env.Must(200, "PUT", fmt.Sprintf("/api/v1/consumers/%d/grants", env.ConsumerID("crm-sync")), env.Admin, map[string]any{"grants": []any{}})
	wantProblem(t, "complete after the grant was withdrawn", act(env, consumer, id, "complete", completeBody("w1", created)), 404, "not_found")
	wantProblem(t, "release by a worker that does not hold it", act(env, consumer, id, "release", map[string]any{"worker_id": "w2"}), 404, "not_found")
	res := env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/release", consumer, map[string]any{"worker_id": "w1"}).JSON(t)
	if res["status"] != "available" || res["attempts_left"] != 1.0 {
		t.Errorf("release after the grant was withdrawn answered %v, want available with its 1 attempt left", res)
	}
	wantProblem(t, "release again", act(env, consumer, id, "release", map[string]any{"worker_id": "w1"}), 404, "not_found")
}

// An identical fail replay answers the same 200; attempts_left lowers the
// budget and can never raise it.
func TestFailReplayAndAttemptsLeft(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, map[string]any{"max_attempts": 5})
	_, id := start(t, env, "crm_only", "Acme")
	one(t, fetch(t, env, consumer, fetchBody("w1")), id)
	wantProblem(t, "attempts_left above the budget", act(env, consumer, id, "fail", failBody("w1", "attempts_left", 5)), 400, "bound_exceeded")
	// A malformed report lists every problem, the ceiling's included.
	both := wantProblem(t, "a bad code and a delay over the ceiling", act(env, consumer, id, "fail", failBody("w1", "error_code", "no spaces", "retry_delay", "P30D")), 400, "invalid_request")
	if errs := fmt.Sprint(both["errors"]); !strings.Contains(errs, "/error_code") || !strings.Contains(errs, "/retry_delay") {
		t.Errorf("errors %s; want /error_code and /retry_delay", errs)
	}
	// A delay on a terminal failure would be ignored: the worker meant a
	// retry, and is told so rather than failing the instance for good.
	for _, retryable := range []any{false, nil} {
		b := failBody("w1", "retry_delay", "PT5S", "retryable", retryable)
		if retryable == nil {
			delete(b, "retryable")
		}
		p := wantProblem(t, fmt.Sprintf("a delay with retryable %v", retryable), act(env, consumer, id, "fail", b), 400, "invalid_request")
		if errs := fmt.Sprint(p["errors"]); !strings.Contains(errs, "/retry_delay") || !strings.Contains(errs, "retryable true") {
			t.Errorf("errors %s; want /retry_delay asking for retryable true", errs)
		}
	}
	// So would attempts left on a terminal failure: it answered "failed"
	// with the attempts the worker meant to leave.
	for _, retryable := range []any{false, nil} {
		b := failBody("w1", "attempts_left", 2, "retryable", retryable)
		if retryable == nil {
			delete(b, "retryable")
		}
		p := wantProblem(t, fmt.Sprintf("attempts left with retryable %v", retryable), act(env, consumer, id, "fail", b), 400, "invalid_request")
		if errs := fmt.Sprint(p["errors"]); !strings.Contains(errs, "/attempts_left") || !strings.Contains(errs, "retryable true") {
			t.Errorf("errors %s; want /attempts_left asking for retryable true", errs)
		}
	}
	body := failBody("w1", "attempts_left", 1, "retry_delay", "PT1S")
	first := env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/fail", consumer, body).JSON(t)
	if first["status"] != "available" || first["attempts_left"] != 1.0 {
		t.Errorf("fail answered %v, want available with 1 left", first)
	}
	replay := env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/fail", consumer, body).JSON(t)
	if a, b := mustJSON(first), mustJSON(replay); a != b {
		t.Errorf("replay answered %s, want %s", b, a)
	}
	wantProblem(t, "a different fail after settlement", act(env, consumer, id, "fail", failBody("w1", "error_code", "OTHER")), 409, "not_reserved")
	env.Clock.Advance(2 * time.Second)
	one(t, fetch(t, env, consumer, fetchBody("w2")), id)
	last := env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/fail", consumer, failBody("w2", "attempts_left", 0)).JSON(t)
	if last["status"] != "failed" {
		t.Errorf("attempts_left 0 answered %v, want failed (terminal)", last)
	}
	if r := env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/fail", consumer, failBody("w2", "attempts_left", 0)).JSON(t); mustJSON(r) != mustJSON(last) {
		t.Errorf("terminal replay answered %v, want %v", r, last)
	}
}

// The same report for the next attempt the same worker holds is that
// attempt's failure, not a replay of the first: a retry loop meeting the
// same outage spends the budget and ends, instead of holding the
// occurrence with the first report's stale answer.
func TestTheSameFailOnTheNextAttemptIsANewFailure(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, map[string]any{"max_attempts": 3})
	_, id := start(t, env, "crm_only", "Acme")
	body := failBody("w1", "retry_delay", "PT1S")
	failed := func(attempt int, status string, left float64) map[string]any {
		t.Helper()
		one(t, fetch(t, env, consumer, fetchBody("w1")), id)
		got := env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/fail", consumer, body).JSON(t)
		if got["status"] != status || got["attempts_left"] != left {
			t.Fatalf("attempt %d failed: %v, want %s with %v left", attempt, got, status, left)
		}
		env.Clock.Advance(2 * time.Second)
		return got
	}
	failed(1, "available", 2)
	failed(2, "available", 1)
	last := failed(3, "failed", 0)
	as := attemptsOf(t, observe(t, env, id))
	if len(as) != 3 {
		t.Fatalf("attempts %v, want 3", as)
	}
	for i, a := range as {
		if a["outcome"] != "failed" || a["error_code"] != "CRM_DOWN" {
			t.Errorf("attempt %d: %v, want failed with CRM_DOWN", i+1, a)
		}
	}
	// Held by nobody now: the same report is a replay of the last one.
	if r := env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/fail", consumer, body).JSON(t); mustJSON(r) != mustJSON(last) {
		t.Errorf("replay answered %v, want %v", r, last)
	}
}

// A report replayed by a worker that does not hold the later attempt is a
// replay, even where that attempt is deferred (which any worker of the
// consumer may settle): it must not fail the work a colleague set aside.
func TestAFailReplayLeavesAnotherWorkersDeferredAttempt(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, map[string]any{"max_attempts": 3})
	_, id := start(t, env, "crm_only", "Acme")
	body := failBody("w1", "retry_delay", "PT1S")
	one(t, fetch(t, env, consumer, fetchBody("w1")), id)
	first := env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/fail", consumer, body).JSON(t)
	env.Clock.Advance(2 * time.Second)
	one(t, fetch(t, env, consumer, fetchBody("w2")), id)
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/defer", consumer, map[string]any{"worker_id": "w2", "reason": "a human decides"})
	if again := env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/fail", consumer, body).JSON(t); mustJSON(again) != mustJSON(first) {
		t.Errorf("w1's replay answered %v, want its first answer %v", again, first)
	}
	if o := observe(t, env, id); o["status"] != "deferred" || o["attempts_left"] != 1.0 {
		t.Errorf("after w1's replay: %v with %v left, want still deferred with 1 left", o["status"], o["attempts_left"])
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// A batch settlement (/pull/settle) of deferred occurrences records who
// settled each, as a single one does; a failure refused by a bound
// records nothing.
func TestBatchSettlementOfDeferredRecordsWhoSettled(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, map[string]any{"max_attempts": 3})
	_, a := start(t, env, "crm_only", "A")
	_, b := start(t, env, "crm_only", "B")
	if got := fetch(t, env, consumer, fetchBody("w1", "max_tasks", 2)); len(got) != 2 {
		t.Fatalf("fetched %d, want 2", len(got))
	}
	for _, id := range []string{a, b} {
		env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/defer", consumer, map[string]any{"worker_id": "w1"})
	}
	wantProblem(t, "attempts_left above the budget", act(env, consumer, b, "fail", failBody("w2", "attempts_left", 9)), 400, "bound_exceeded")
	if as := attemptsOf(t, observe(t, env, b)); as[0]["settled_by"] != nil {
		t.Errorf("a refused failure recorded who settled: %v", as)
	}
	env.Must(200, "POST", "/api/v1/pull/settle", consumer, map[string]any{"worker_id": "w2", "items": []any{
		map[string]any{"id": a, "outputs": created},
		map[string]any{"id": b, "error_code": "CRM_DOWN", "message": "503", "retryable": false},
	}})
	for _, id := range []string{a, b} {
		if as := attemptsOf(t, observe(t, env, id)); len(as) != 1 || as[0]["worker_id"] != "w1" || as[0]["settled_by"] != "w2" {
			t.Errorf("attempts of %s: %v, want w1's attempt settled by w2", id, as)
		}
	}
}

// A settling call that leaves out a member it needs is 400
// invalid_request at that member's pointer (and the OpenAPI document
// requires the member: TestRecordedExchanges checks each of these
// refusals against it).
func TestSettlementsNameWhatTheyLack(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, nil)
	_, id := start(t, env, "crm_only", "Acme")
	one(t, fetch(t, env, consumer, fetchBody("w1")), id)
	for _, c := range []struct {
		action  string
		body    map[string]any
		pointer string
	}{
		{"complete", map[string]any{"worker_id": "w1"}, "/outputs"},
		{"complete", map[string]any{"outputs": map[string]any{"result": "created", "crm_id": "C-1"}}, "/worker_id"},
		{"fail", map[string]any{"worker_id": "w1"}, "/error_code"},
		{"extend", map[string]any{}, "/worker_id"},
		{"defer", map[string]any{"reason": "later"}, "/worker_id"},
		{"release", map[string]any{}, "/worker_id"},
		{"settle-token", map[string]any{}, "/worker_id"},
	} {
		p := wantProblem(t, fmt.Sprintf("%s without %s", c.action, c.pointer), act(env, consumer, id, c.action, c.body), 400, "invalid_request")
		errs, _ := p["errors"].([]any)
		if len(errs) != 1 || errs[0].(map[string]any)["path"] != c.pointer {
			t.Errorf("%s without %s: errors %v, want one at %s", c.action, c.pointer, errs, c.pointer)
		} else if msg, _ := errs[0].(map[string]any)["message"].(string); c.pointer == "/error_code" && !strings.HasPrefix(msg, "is required") {
			t.Errorf("fail without an error code: %q, want it to say the code is required", msg)
		}
	}
	// A code of Relais's own would pass for what Relais did (an
	// operator's abandon, in filters and the console): refused, naming it.
	for _, code := range []string{"abandoned", "attempts_exhausted", "outcome_unknown", "Abandoned", "OUTCOME_UNKNOWN"} {
		p := wantProblem(t, "fail with "+code, act(env, consumer, id, "fail", map[string]any{"worker_id": "w1", "error_code": code}), 400, "invalid_request")
		if errs, _ := p["errors"].([]any); len(errs) != 1 || errs[0].(map[string]any)["path"] != "/error_code" ||
			!strings.Contains(fmt.Sprint(errs[0].(map[string]any)["message"]), code+" is Relais's code for") {
			t.Errorf("fail with %s: errors %v, want it refused at /error_code as Relais's", code, p["errors"])
		}
	}
	// Nothing was settled: the worker still holds its reservation.
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/complete", consumer,
		map[string]any{"worker_id": "w1", "outputs": map[string]any{"result": "created", "crm_id": "C-1"}})
}

// A consumer revokes its settle tokens of one occurrence at once (a front
// end's link leaked): they settle nothing more, the occurrence stays
// deferred for its workers, and a new token may be issued. Another
// consumer's revocation finds no occurrence.
func TestSettleTokensOfAnOccurrenceAreRevoked(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, nil)
	_, id := start(t, env, "crm_only", "Acme")
	one(t, fetch(t, env, consumer, fetchBody("w1")), id)
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/defer", consumer, map[string]any{"worker_id": "w1", "reason": "approval"})
	issue := func() string {
		return env.Must(201, "POST", "/api/v1/pull/occurrences/"+id+"/settle-token", consumer, map[string]any{"worker_id": "ui"}).JSON(t)["token"].(string)
	}
	leaked, other := issue(), issue()
	outsider := env.Consumer("other-team", crmKey)
	if r := env.Do("DELETE", "/api/v1/pull/occurrences/"+id+"/settle-token", outsider, nil); r.Status != 200 || r.JSON(t)["revoked"] != 0.0 {
		t.Errorf("another consumer's revocation: %d %s, want 200 revoked 0 (its own tokens, none)", r.Status, r.Body)
	}
	if got := env.Must(200, "DELETE", "/api/v1/pull/occurrences/"+id+"/settle-token", consumer, nil).JSON(t)["revoked"]; got != 2.0 {
		t.Errorf("revoked %v, want 2", got)
	}
	if !strings.Contains(env.Logs.String(), "event=settle_token.revoked") {
		t.Error("the revocation is not logged")
	}
	for _, tok := range []string{leaked, other} {
		wantProblem(t, "a revoked settle token", act(env, tok, id, "complete", map[string]any{"outputs": created}), 401, "unauthorized")
	}
	if got := env.Must(200, "DELETE", "/api/v1/pull/occurrences/"+id+"/settle-token", consumer, nil).JSON(t)["revoked"]; got != 0.0 {
		t.Errorf("revoked again: %v, want 0", got)
	}
	wantProblem(t, "an unknown occurrence", env.Do("DELETE", "/api/v1/pull/occurrences/"+uuid.Must(uuid.NewV7()).String()+"/settle-token", consumer, nil), 404, "not_found")
	fresh := issue()
	if res := env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/complete", fresh, map[string]any{"outputs": created}).JSON(t); res["status"] != "completed" {
		t.Errorf("a token issued after the revocation: %v", res)
	}
}

// A settle token issued before tokens named their attempt (migration
// 0028; an older replica during a rolling upgrade issues them too) is
// good while its occurrence is deferred, and unknown once it ended: QA
// saw 500 (a null read as the token's liveness) where 401 was meant.
func TestSettleTokenWithoutAttemptAfterItsOccurrenceEnded(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, nil)
	_, id := start(t, env, "crm_only", "Acme")
	one(t, fetch(t, env, consumer, fetchBody("w1")), id)
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/defer", consumer, map[string]any{"worker_id": "w1", "reason": "approval"})
	st := env.Must(201, "POST", "/api/v1/pull/occurrences/"+id+"/settle-token", consumer, map[string]any{"worker_id": "ui"}).JSON(t)["token"].(string)
	if _, err := env.Pool.Exec(context.Background(), "update settle_tokens set attempt = null where occurrence_id = $1", id); err != nil {
		t.Fatal(err)
	}
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/complete", st, map[string]any{"outputs": created})
	wantProblem(t, "an older settle token after its occurrence ended", act(env, st, id, "complete", map[string]any{"outputs": created}), 401, "unauthorized")
	wantProblem(t, "an older settle token failing an ended occurrence", act(env, st, id, "fail", failBody("")), 401, "unauthorized")
}

// A front end whose retryable failure's answer was lost sends it again
// with its settle token: it is told the first answer, as a worker would be
// (not 401 because the occurrence was offered again meanwhile), and the
// token settles nothing of a later attempt (TestDeferredSettledByAnother-
// WorkerAndStopped has the colleague's failure).
func TestSettleTokenRetryableFailureResent(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, nil)
	_, id := start(t, env, "crm_only", "Acme")
	one(t, fetch(t, env, consumer, fetchBody("w1")), id)
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/defer", consumer, map[string]any{"worker_id": "w1"})
	token := env.Must(201, "POST", "/api/v1/pull/occurrences/"+id+"/settle-token", consumer, map[string]any{"worker_id": "w1"}).JSON(t)["token"].(string)
	failure := failBody("", "retry_delay", "PT1S")
	first := env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/fail", token, failure).JSON(t)
	if first["status"] != "available" {
		t.Fatalf("the token's retryable failure answered %v, want available", first)
	}
	again := func(what string) {
		t.Helper()
		if got := env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/fail", token, failure).JSON(t); got["status"] != first["status"] || got["available_at"] != first["available_at"] || got["attempts_left"] != first["attempts_left"] {
			t.Errorf("%s: the same failure again answered %v, want the first answer %v", what, got, first)
		}
	}
	again("before the next attempt")
	wantProblem(t, "another failure with the token", act(env, token, id, "fail", failBody("", "error_code", "OTHER")), 409, "already_settled")
	wantProblem(t, "a completion with the token", act(env, token, id, "complete", completeBody("", created)), 409, "already_settled")

	// The next attempt, deferred again by the same worker: the old token
	// still learns what its own attempt got, and settles nothing now.
	env.Clock.Advance(2 * time.Second)
	one(t, fetch(t, env, consumer, fetchBody("w1")), id)
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/defer", consumer, map[string]any{"worker_id": "w1"})
	again("with the next attempt deferred")
	wantProblem(t, "the old token's completion of the next attempt", act(env, token, id, "complete", completeBody("", created)), 409, "already_settled")
	o := observe(t, env, id)
	if o["status"] != "deferred" {
		t.Errorf("the next attempt after the old token's calls: %v, want deferred", o["status"])
	}
	if as := attemptsOf(t, o); len(as) != 2 || as[0]["outcome"] != "failed" || as[0]["settled_with_token"] != true || as[1]["outcome"] != nil {
		t.Errorf("attempts %v, want the first failed with the token, the second open", as)
	}
	// The next attempt's own token, failing the same way, is its own.
	next := env.Must(201, "POST", "/api/v1/pull/occurrences/"+id+"/settle-token", consumer, map[string]any{"worker_id": "w1"}).JSON(t)["token"].(string)
	second := env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/fail", next, failure).JSON(t)
	if second["available_at"] == first["available_at"] {
		t.Errorf("the next attempt's failure answered the first's %v", second)
	}
	again("after the next attempt failed the same way")
}

// A failure's answer names the deadline when it leaves the occurrence
// available: a retry due past it is never tried, which available_at
// alone did not say. Without a deadline there is none to name.
func TestARetryAnswerNamesTheDeadline(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, map[string]any{"deadline": "PT1H", "max_attempts": 3})
	_, id := start(t, env, "crm_only", "Acme")
	one(t, fetch(t, env, consumer, fetchBody("w1")), id)
	res := env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/fail", consumer, failBody("w1", "retry_delay", "PT2H")).JSON(t)
	deadline := observe(t, env, id)["deadline_at"]
	if res["status"] != "available" || res["deadline_at"] == nil || res["deadline_at"] != deadline {
		t.Fatalf("a retry past the deadline answered %v; want available with deadline_at %v", res, deadline)
	}
	at, _ := time.Parse(time.RFC3339Nano, res["available_at"].(string))
	end, _ := time.Parse(time.RFC3339Nano, res["deadline_at"].(string))
	if !at.After(end) {
		t.Errorf("available_at %v, deadline_at %v: want the retry past the deadline", at, end)
	}
	// Released, it names it too.
	env.Clock.Advance(2 * time.Hour)
	_, id2 := start(t, env, "crm_only", "Beta")
	one(t, fetch(t, env, consumer, fetchBody("w1")), id2)
	if rel := env.Must(200, "POST", "/api/v1/pull/occurrences/"+id2+"/release", consumer, map[string]any{"worker_id": "w1"}).JSON(t); rel["deadline_at"] == nil {
		t.Errorf("release answered %v; want its deadline_at", rel)
	}

	plain, plainConsumer := newCRM(t, nil)
	_, id3 := start(t, plain, "crm_only", "Gamma")
	one(t, fetch(t, plain, plainConsumer, fetchBody("w1")), id3)
	if res := plain.Must(200, "POST", "/api/v1/pull/occurrences/"+id3+"/fail", plainConsumer, failBody("w1")).JSON(t); res["status"] != "available" {
		t.Errorf("a retry without a deadline answered %v", res)
	} else if _, ok := res["deadline_at"]; ok {
		t.Errorf("a retry without a deadline answered deadline_at %v; want none", res["deadline_at"])
	}
}

// A pattern not granted is named with what the consumer is granted, as a
// key is (verifier QA: it said only "not granted").
func TestAPatternNotGrantedNamesTheGrants(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	nsDefinition(t, env, "crm.add_company")
	token := env.Consumer("c", "crm.add_company")
	p := wantProblem(t, "a pattern not granted", env.Do("POST", "/api/v1/pull/fetch-and-lock", token,
		subscribe("w1", map[string]any{"definition": "pay.*"})), 403, "not_granted")
	if errs, _ := p["errors"].([]any); len(errs) != 1 || errs[0].(map[string]any)["message"] != "not granted to this consumer, which is granted crm.add_company" {
		t.Errorf("errors %v, want the pattern refused naming crm.add_company", p["errors"])
	}
}

// The most specific subscription governs its key whole: a revision its
// declared fields leave out (it lacks one) is not taken through a pattern
// with every input (security QA: revision 2's secret came whole through
// crm.*).
func TestAKeysDeclaredFieldsAreNotBypassedByAPattern(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	nsDefinition(t, env, "crm.add_company")
	env.Must(200, "PUT", "/api/v1/definitions/crm.add_company/working", env.Designer, map[string]any{
		"name": "crm.add_company",
		"inputs": map[string]any{"fields": []any{
			map[string]any{"name": "company", "type": "text", "required": true},
			map[string]any{"name": "card", "type": "text", "classification": "secret"},
		}},
		"outputs": map[string]any{"fields": []any{map[string]any{"name": "ok", "type": "boolean", "required": true}}},
	})
	env.Must(201, "POST", "/api/v1/definitions/crm.add_company/revisions", env.Designer, nil)
	second := nsProcess("crm.add_company")
	node := second["nodes"].(map[string]any)["task"].(map[string]any)
	node["revision"] = 2
	delete(node["inputs"].(map[string]any), "address")
	env.Process("pp2", second)
	token := env.Consumer("c", "crm.*")
	startNS(t, env, "pp2")
	got := fetch(t, env, token, subscribe("w1", map[string]any{"definition": "crm.*"},
		map[string]any{"definition": "crm.add_company", "fields": []string{"/address/city"}}))
	for _, o := range got {
		raw, _ := json.Marshal(o["inputs"])
		if strings.Contains(string(raw), "4111") {
			t.Errorf("revision %v delivered %s: the key's declared fields leave revision 2 out, and the pattern must not bring it whole", o["revision"], raw)
		}
	}
	if len(got) != 0 {
		t.Errorf("fetched %d occurrences of revision 2, which the key's declared fields leave out", len(got))
	}
}
