package pull_test

// Black-box tests of the pull protocol (DESIGN §3) through HTTP: refusals,
// bounds, outputs validation, replay, lock expiry and attempts, retries,
// priority, grants and secrets.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/config"
	"github.com/relais/relais/internal/isoduration"
	"github.com/relais/relais/internal/relaistest"
)

// ---------------------------------------------------------------- helpers

const crmKey = "add_company_to_crm"

// created and existing are valid outputs of add_company_to_crm.
var (
	created  = map[string]any{"result": "created", "crm_id": "C-1"}
	existing = map[string]any{"result": "existing", "crm_id": "C-2"}
)

// newCRM starts Relais with add_company_to_crm revision 1, the pull-only
// process crm_only with the policy, and a consumer granted the definition.
func newCRM(t *testing.T, policy map[string]any, opts ...relaistest.Option) (*relaistest.Env, string) {
	t.Helper()
	env := relaistest.New(t, opts...)
	env.Definition("add_company_to_crm.yaml")
	env.Process("crm_only", relaistest.CRMProcess(policy))
	return env, env.Consumer("crm-sync", crmKey)
}

// start starts an instance of process and returns its id and the id of
// the occurrence of its first (pull) node.
func start(t *testing.T, env *relaistest.Env, process, name string) (instance, occurrence string) {
	t.Helper()
	inst := env.Must(201, "POST", "/api/v1/processes/"+process+"/instances", env.Operator,
		map[string]any{"inputs": map[string]any{"name": name}}).JSON(t)
	path, _ := inst["path"].([]any)
	if inst["status"] != "running" || len(path) != 1 {
		t.Fatalf("started instance = %v, want running with one occurrence on its path", inst)
	}
	return inst["id"].(string), path[0].(map[string]any)["occurrence_id"].(string)
}

// fetchBody is a fetch-and-lock request for add_company_to_crm (every
// granted revision) with extra members given as key, value pairs.
func fetchBody(worker string, kv ...any) map[string]any {
	b := map[string]any{"worker_id": worker, "subscriptions": []any{map[string]any{"definition": crmKey}}}
	for i := 0; i+1 < len(kv); i += 2 {
		b[kv[i].(string)] = kv[i+1]
	}
	return b
}

// fetch calls fetch-and-lock, wants 200 and returns the occurrences.
func fetch(t *testing.T, env *relaistest.Env, token string, body map[string]any) []map[string]any {
	t.Helper()
	return occurrencesOf(t, env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", token, body))
}

func occurrencesOf(t *testing.T, r relaistest.Response) []map[string]any {
	t.Helper()
	raw, ok := r.JSON(t)["occurrences"].([]any)
	if !ok {
		t.Fatalf("fetch answer %s has no occurrences list", r.Body)
	}
	out := make([]map[string]any, len(raw))
	for i, o := range raw {
		out[i] = o.(map[string]any)
	}
	return out
}

func ids(occs []map[string]any) []string {
	out := make([]string, len(occs))
	for i, o := range occs {
		out[i] = o["id"].(string)
	}
	return out
}

// one wants exactly one fetched occurrence, with the id when given.
func one(t *testing.T, occs []map[string]any, wantID string) map[string]any {
	t.Helper()
	if len(occs) != 1 || (wantID != "" && occs[0]["id"] != wantID) {
		t.Fatalf("fetched %v, want exactly occurrence %s", ids(occs), wantID)
	}
	return occs[0]
}

// act calls complete, fail or extend on an occurrence.
func act(env *relaistest.Env, token, occurrence, action string, body any) relaistest.Response {
	env.T.Helper()
	return env.Do("POST", "/api/v1/pull/occurrences/"+occurrence+"/"+action, token, body)
}

func completeBody(worker string, outputs any) map[string]any {
	return map[string]any{"worker_id": worker, "outputs": outputs}
}

func failBody(worker string, kv ...any) map[string]any {
	b := map[string]any{"worker_id": worker, "error_code": "CRM_DOWN", "message": "the CRM answered 503", "retryable": true}
	for i := 0; i+1 < len(kv); i += 2 {
		b[kv[i].(string)] = kv[i+1]
	}
	return b
}

func extendBody(worker string) map[string]any {
	return map[string]any{"worker_id": worker, "lock_duration": "PT1M"}
}

// wantProblem checks an error answer: status, problem+json, code and the
// standard members. It returns the problem document.
func wantProblem(t *testing.T, what string, r relaistest.Response, status int, code string) map[string]any {
	t.Helper()
	if r.Status != status || r.Code() != code {
		t.Errorf("%s: got %d %q, want %d %q; body: %s", what, r.Status, r.Code(), status, code, r.Body)
		return map[string]any{}
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("%s: Content-Type %q, want application/problem+json", what, ct)
	}
	var p map[string]any
	if err := json.Unmarshal(r.Body, &p); err != nil {
		t.Errorf("%s: body %q is not JSON: %v", what, r.Body, err)
		return map[string]any{}
	}
	if p["type"] != "urn:relais:problem:"+code || p["status"] != float64(status) {
		t.Errorf("%s: problem type %v status %v, want %q and %d", what, p["type"], p["status"], "urn:relais:problem:"+code, status)
	}
	return p
}

// observe returns the observation of an occurrence (operator API).
func observe(t *testing.T, env *relaistest.Env, occurrence string) map[string]any {
	t.Helper()
	return env.Must(200, "GET", "/api/v1/occurrences/"+occurrence, env.Operator, nil).JSON(t)
}

func instanceOf(t *testing.T, env *relaistest.Env, id string) map[string]any {
	t.Helper()
	return env.Must(200, "GET", "/api/v1/instances/"+id, env.Operator, nil).JSON(t)
}

func attemptsOf(t *testing.T, occ map[string]any) []map[string]any {
	t.Helper()
	raw, _ := occ["attempts"].([]any)
	out := make([]map[string]any, len(raw))
	for i, a := range raw {
		out[i] = a.(map[string]any)
	}
	return out
}

// waitStatus polls an occurrence until its status is want.
func waitStatus(t *testing.T, env *relaistest.Env, occurrence, want string, within time.Duration) map[string]any {
	t.Helper()
	var occ map[string]any
	relaistest.WaitFor(t, within, "occurrence "+occurrence+" status "+want, func() (bool, string) {
		occ = observe(t, env, occurrence)
		return occ["status"] == want, fmt.Sprintf("status %v", occ["status"])
	})
	return occ
}

// doCtx is a call that may run off the test goroutine and be cancelled:
// it reports errors instead of failing the test.
func doCtx(ctx context.Context, env *relaistest.Env, method, path, token string, body any) (relaistest.Response, error) {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return relaistest.Response{}, err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, env.URL+path, rd)
	if err != nil {
		return relaistest.Response{}, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return relaistest.Response{}, err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	return relaistest.Response{Status: res.StatusCode, Header: res.Header, Body: data}, err
}

// answer is the outcome of a call made in the background.
type answer struct {
	res relaistest.Response
	err error
	at  time.Time
}

// poll is a fetch-and-lock running off the test goroutine.
type poll struct {
	env    *relaistest.Env
	ch     chan answer
	cancel context.CancelFunc // aborts the call: a client that goes away
}

// background starts a fetch-and-lock off the test goroutine; the test waits
// for it to end before its replica is stopped.
func background(t *testing.T, env *relaistest.Env, token string, body map[string]any) *poll {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &poll{env: env, ch: make(chan answer, 1), cancel: cancel}
	done := make(chan struct{})
	go func() {
		defer close(done)
		res, err := doCtx(ctx, env, "POST", "/api/v1/pull/fetch-and-lock", token, body)
		p.ch <- answer{res: res, err: err, at: time.Now()}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return p
}

// waiting waits until the replica counts the poll among its waiters,
// failing at once if the poll was answered instead.
func (p *poll) waiting(t *testing.T) {
	t.Helper()
	relaistest.WaitFor(t, 3*time.Second, "long poll registered (relais_pull_waiters = 1)", func() (bool, string) {
		t.Helper()
		select {
		case a := <-p.ch:
			t.Fatalf("long poll answered before anything happened: %d %s (err %v), want it waiting", a.res.Status, a.res.Body, a.err)
		default:
		}
		v, ok := metric(t, p.env, "relais_pull_waiters")
		return ok && v == 1, fmt.Sprintf("relais_pull_waiters %v (present %v)", v, ok)
	})
}

// receive waits for the poll's answer.
func (p *poll) receive(t *testing.T, within time.Duration) answer {
	t.Helper()
	select {
	case a := <-p.ch:
		return a
	case <-time.After(within):
		t.Fatalf("long poll: no answer within %v", within)
		return answer{}
	}
}

// metric reads a gauge or counter (without labels) from a replica's
// /metrics.
func metric(t *testing.T, env *relaistest.Env, name string) (float64, bool) {
	t.Helper()
	r := env.Must(200, "GET", "/metrics", "", nil)
	for _, line := range strings.Split(string(r.Body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("metric line %q: %v", line, err)
			}
			return f, true
		}
	}
	return 0, false
}

// waitWaiters polls the replica's relais_pull_waiters gauge until it is want.
func waitWaiters(t *testing.T, env *relaistest.Env, want float64, within time.Duration) {
	t.Helper()
	relaistest.WaitFor(t, within, fmt.Sprintf("relais_pull_waiters = %v", want), func() (bool, string) {
		v, ok := metric(t, env, "relais_pull_waiters")
		return ok && v == want, fmt.Sprintf("%v (present %v)", v, ok)
	})
}

// ------------------------------------------------------------- refusals

var actions = []string{"complete", "fail", "extend"}

// bodyFor is a well-formed request of each action for worker.
func bodyFor(action, worker string) map[string]any {
	switch action {
	case "complete":
		return completeBody(worker, created)
	case "fail":
		return failBody(worker)
	default:
		return extendBody(worker)
	}
}

// A worker whose lock expired (and nobody re-fetched) is refused with
// lock_expired on complete, fail and extend; nothing changes.
func TestRefusalLockExpired(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, nil)
	inst, id := start(t, env, "crm_only", "Acme")
	occ := one(t, fetch(t, env, consumer, fetchBody("w1", "lock_duration", "PT1M")), id)
	env.Clock.AdvanceTo(relaistest.TimeOf(t, "lock_expires_at", occ["lock_expires_at"]).Add(time.Millisecond))

	for _, a := range actions {
		wantProblem(t, a+" after the lock expired", act(env, consumer, id, a, bodyFor(a, "w1")), 409, "lock_expired")
		// Another worker is not told the lapsed holder has it (observed
		// available, nobody holds it): not_reserved, fetch it first.
		p := wantProblem(t, a+" by another worker after the lock expired", act(env, consumer, id, a, bodyFor(a, "w2")), 409, "not_reserved")
		if d, _ := p["detail"].(string); strings.Contains(d, "w1") {
			t.Errorf("%s by another worker: detail %q names the lapsed holder", a, d)
		}
	}
	got := observe(t, env, id)
	// Its lock lapsed: available again, and otherwise unchanged.
	if got["status"] != "available" || got["attempt_count"] != 1.0 || got["route"] != nil {
		t.Errorf("occurrence after refusals: status %v attempt_count %v route %v, want available, 1, null", got["status"], got["attempt_count"], got["route"])
	}
	if s := instanceOf(t, env, inst)["status"]; s != "running" {
		t.Errorf("instance status %v, want running (a refused completion must not advance it)", s)
	}
}

// A worker whose expired lock was taken over by another worker of the same
// consumer is refused with locked_by_other_worker; the new holder still
// settles normally.
func TestRefusalLockedByOtherWorker(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, nil)
	inst, id := start(t, env, "crm_only", "Acme")
	one(t, fetch(t, env, consumer, fetchBody("worker-a", "lock_duration", "PT1S")), id)
	// B long-polls: the occurrence becomes claimable when A's lock ends.
	b := one(t, fetch(t, env, consumer, fetchBody("worker-b", "wait", "PT5S", "lock_duration", "PT1M")), id)
	if b["attempt"] != 2.0 {
		t.Fatalf("worker B got attempt %v, want 2", b["attempt"])
	}
	for _, a := range actions {
		p := wantProblem(t, a+" by worker A", act(env, consumer, id, a, bodyFor(a, "worker-a")), 409, "locked_by_other_worker")
		// A's lock lapsed: it is told so, not only to fix its worker_id.
		if d, _ := p["detail"].(string); !strings.Contains(d, "lock lapsed") {
			t.Errorf("%s by worker A: %q, want it to say its lock may have lapsed", a, d)
		}
	}
	res := env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/complete", consumer, completeBody("worker-b", created)).JSON(t)
	if res["status"] != "completed" || res["route"] != "created" {
		t.Errorf("worker B's completion = %v, want completed via created", res)
	}
	if got := instanceOf(t, env, inst); got["status"] != "completed" || got["end_node"] != "done" {
		t.Errorf("instance = %v %v, want completed at done", got["status"], got["end_node"])
	}
}

// An occurrence that is not reserved (never fetched, or back to available
// after a retryable failure) is refused with not_reserved.
func TestRefusalNotReserved(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, nil)

	_, fresh := start(t, env, "crm_only", "Never fetched")
	for _, a := range actions {
		wantProblem(t, a+" of a never fetched occurrence", act(env, consumer, fresh, a, bodyFor(a, "w1")), 409, "not_reserved")
	}
	// Claim the fresh one out of the way, then the one under test.
	one(t, fetch(t, env, consumer, fetchBody("w0")), fresh)

	_, id := start(t, env, "crm_only", "Acme")
	one(t, fetch(t, env, consumer, fetchBody("w1")), id)
	res := env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/fail", consumer, failBody("w1", "retry_delay", "PT1M")).JSON(t)
	if res["status"] != "available" {
		t.Fatalf("retryable failure answered %v, want status available", res)
	}
	for _, a := range actions {
		wantProblem(t, a+" after a retryable failure", act(env, consumer, id, a, bodyFor(a, "w1")), 409, "not_reserved")
	}
	if got := observe(t, env, id); got["status"] != "available" || got["attempt_count"] != 1.0 {
		t.Errorf("occurrence after refusals: status %v attempt_count %v, want available, 1", got["status"], got["attempt_count"])
	}
}

// After settlement, a different completion, a failure or an extension is
// refused with already_settled, while an identical replay of the completion
// answers the same 200.
func TestRefusalAlreadySettled(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, nil)

	t.Run("completed", func(t *testing.T) {
		inst, id := start(t, env, "crm_only", "Acme")
		one(t, fetch(t, env, consumer, fetchBody("w1")), id)
		first := env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/complete", consumer, completeBody("w1", created))

		wantProblem(t, "different completion", act(env, consumer, id, "complete", completeBody("w1", existing)), 409, "already_settled")
		wantProblem(t, "fail after completion", act(env, consumer, id, "fail", failBody("w1")), 409, "already_settled")
		wantProblem(t, "extend after completion", act(env, consumer, id, "extend", extendBody("w1")), 409, "already_settled")

		replay := act(env, consumer, id, "complete", completeBody("w1", created))
		if replay.Status != 200 || !bytes.Equal(replay.Body, first.Body) {
			t.Errorf("identical replay: got %d %s, want 200 %s", replay.Status, replay.Body, first.Body)
		}
		// Equal JSON is an identical completion whatever its formatting.
		reordered := act(env, consumer, id, "complete", `{"outputs": {"crm_id": "C-1", "result": "created"}, "worker_id": "w1"}`)
		if reordered.Status != 200 || !bytes.Equal(reordered.Body, first.Body) {
			t.Errorf("replay with reordered keys: got %d %s, want 200 %s", reordered.Status, reordered.Body, first.Body)
		}
		got := observe(t, env, id)
		if got["status"] != "completed" || got["route"] != "created" || got["attempt_count"] != 1.0 {
			t.Errorf("occurrence = status %v route %v attempt_count %v, want completed, created, 1", got["status"], got["route"], got["attempt_count"])
		}
		if outs, _ := got["outputs"].(map[string]any); outs["crm_id"] != "C-1" {
			t.Errorf("stored outputs = %v, want the first completion's", got["outputs"])
		}
		if i := instanceOf(t, env, inst); i["status"] != "completed" || i["end_node"] != "done" {
			t.Errorf("instance = %v at %v, want completed at done", i["status"], i["end_node"])
		}
	})

	t.Run("failed", func(t *testing.T) {
		_, id := start(t, env, "crm_only", "Globex")
		one(t, fetch(t, env, consumer, fetchBody("w1")), id)
		res := env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/fail", consumer, failBody("w1", "retryable", false)).JSON(t)
		if res["status"] != "failed" {
			t.Fatalf("non-retryable failure answered %v, want status failed", res)
		}
		for _, a := range actions {
			wantProblem(t, a+" after a terminal failure", act(env, consumer, id, a, bodyFor(a, "w1")), 409, "already_settled")
		}
	})
}

// Stopping the instance cancels its occurrence: the worker learns it from
// extend, and a late completion or failure is refused; the instance stays
// cancelled.
func TestRefusalOccurrenceCancelled(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, nil)
	inst, id := start(t, env, "crm_only", "Acme")
	one(t, fetch(t, env, consumer, fetchBody("w1")), id)

	stopped := env.Must(200, "POST", "/api/v1/instances/"+inst+"/stop", env.Operator, map[string]any{"reason": "test stop"}).JSON(t)
	if stopped["status"] != "cancelled" {
		t.Fatalf("stop answered status %v, want cancelled", stopped["status"])
	}
	wantProblem(t, "extend after stop", act(env, consumer, id, "extend", extendBody("w1")), 409, "occurrence_cancelled")
	wantProblem(t, "complete after stop", act(env, consumer, id, "complete", completeBody("w1", created)), 409, "occurrence_cancelled")
	wantProblem(t, "fail after stop", act(env, consumer, id, "fail", failBody("w1")), 409, "occurrence_cancelled")

	got := instanceOf(t, env, inst)
	if got["status"] != "cancelled" || got["end_node"] != nil {
		t.Errorf("instance after late results = %v at %v, want cancelled (never resurrected)", got["status"], got["end_node"])
	}
	if path, _ := got["path"].([]any); len(path) != 1 {
		t.Errorf("instance path = %v, want only the cancelled node", got["path"])
	}
	occ := observe(t, env, id)
	if occ["status"] != "cancelled" || occ["route"] != nil {
		t.Errorf("occurrence = status %v route %v, want cancelled and no route", occ["status"], occ["route"])
	}
	if as := attemptsOf(t, occ); len(as) != 1 || as[0]["outcome"] != "cancelled" {
		t.Errorf("attempts = %v, want one attempt with outcome cancelled", occ["attempts"])
	}
	if occs := fetch(t, env, consumer, fetchBody("w2")); len(occs) != 0 {
		t.Errorf("fetch after stop got %v, want nothing", ids(occs))
	}
}

// --------------------------------------------------------------- bounds

// Every value over its ceiling is refused with bound_exceeded naming the
// field and the ceiling, and nothing is clamped: the refused request
// changes nothing.
func TestBoundsAreRejections(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, nil, func(c *config.Config) {
		c.Pull.MaxTasks = 5
		c.Pull.MaxLockDuration = 2 * time.Minute
		c.Pull.MaxWait = 10 * time.Second
		c.Pull.MaxRetryDelay = time.Hour
	})
	_, id := start(t, env, "crm_only", "Acme")

	wantBound := func(what string, r relaistest.Response, field string, ceiling any) {
		t.Helper()
		p := wantProblem(t, what, r, 400, "bound_exceeded")
		if len(p) == 0 {
			return
		}
		if p["field"] != field {
			t.Errorf("%s: problem field %v, want %q", what, p["field"], field)
		}
		switch want := ceiling.(type) {
		case int:
			if p["ceiling"] != float64(want) {
				t.Errorf("%s: problem ceiling %v, want %d", what, p["ceiling"], want)
			}
		case time.Duration:
			s, _ := p["ceiling"].(string)
			if d, err := isoduration.Parse(s); err != nil || d != want {
				t.Errorf("%s: problem ceiling %v, want an ISO-8601 duration of %v", what, p["ceiling"], want)
			}
		}
		errs, _ := p["errors"].([]any)
		if len(errs) == 0 || errs[0].(map[string]any)["path"] != "/"+field {
			t.Errorf("%s: problem errors %v, want one at /%s", what, p["errors"], field)
		}
	}
	post := func(body map[string]any) relaistest.Response {
		return env.Do("POST", "/api/v1/pull/fetch-and-lock", consumer, body)
	}
	wantBound("fetch max_tasks 6", post(fetchBody("w1", "max_tasks", 6)), "max_tasks", 5)
	wantBound("fetch lock_duration PT3M", post(fetchBody("w1", "lock_duration", "PT3M")), "lock_duration", 2*time.Minute)
	// Several at once: each at its pointer, the first named.
	all := post(fetchBody("w1", "max_tasks", 6, "lock_duration", "PT3M", "wait", "PT1M"))
	wantBound("fetch over three ceilings", all, "max_tasks", 5)
	if errs, _ := all.JSON(t)["errors"].([]any); len(errs) != 3 || errs[1].(map[string]any)["path"] != "/lock_duration" || errs[2].(map[string]any)["path"] != "/wait" {
		t.Errorf("fetch over three ceilings: errors %v, want max_tasks, lock_duration and wait", errs)
	}
	wantBound("fetch wait PT11S", post(fetchBody("w1", "wait", "PT11S")), "wait", 10*time.Second)
	// With other problems, every one in one answer, the ceiling's among
	// them (evaluator QA: the ceiling came a round later).
	// And the subscriptions' problems, which the database tells.
	badField := fetchBody("w1", "max_tasks", 6)
	badField["subscriptions"] = []any{map[string]any{"definition": crmKey, "fields": []any{"bad"}}}
	if p := wantProblem(t, "fetch over a ceiling with a bad field", post(badField), 400, "invalid_request"); len(p) > 0 {
		if errs := fmt.Sprint(p["errors"]); !strings.Contains(errs, "/max_tasks") || !strings.Contains(errs, "/subscriptions/0/fields/0") {
			t.Errorf("fetch over a ceiling with a bad field: errors %s, want both", errs)
		}
	}
	mixed := post(fetchBody("", "max_tasks", 6, "lock_duration", "PT0S"))
	if p := wantProblem(t, "fetch over a ceiling, without worker_id, lock PT0S", mixed, 400, "invalid_request"); len(p) > 0 {
		var paths []string
		for _, e := range p["errors"].([]any) {
			paths = append(paths, e.(map[string]any)["path"].(string))
		}
		if got := strings.Join(paths, " "); got != "/lock_duration /max_tasks /worker_id" {
			t.Errorf("fetch over a ceiling with other problems: errors at %s, want /lock_duration /max_tasks /worker_id", got)
		}
	}
	// A lock below a second would lapse before its completion came back,
	// spending an attempt: refused, as a stream's subscription refuses it.
	for _, d := range []string{"PT0.1S", "PT0S"} {
		p := wantProblem(t, "fetch lock_duration "+d, post(fetchBody("w1", "lock_duration", d)), 400, "invalid_request")
		if errs := fmt.Sprint(p["errors"]); !strings.Contains(errs, "/lock_duration") || !strings.Contains(errs, "at least PT1S") {
			t.Errorf("fetch lock_duration %s: errors %s, want /lock_duration at least PT1S", d, errs)
		}
	}
	if got := observe(t, env, id); got["status"] != "available" || got["attempt_count"] != 0.0 {
		t.Fatalf("after refused fetches the occurrence is %v with %v attempts, want available with 0 (never clamped)", got["status"], got["attempt_count"])
	}

	// At the ceilings everything is accepted.
	occ := one(t, fetch(t, env, consumer, fetchBody("w1", "max_tasks", 5, "lock_duration", "PT2M", "wait", "PT10S")), id)
	lock := occ["lock_expires_at"]

	wantBound("fail retry_delay PT2H", act(env, consumer, id, "fail", failBody("w1", "retry_delay", "PT2H")), "retry_delay", time.Hour)
	wantBound("extend lock_duration PT2M1S", act(env, consumer, id, "extend", map[string]any{"worker_id": "w1", "lock_duration": "PT2M1S"}), "lock_duration", 2*time.Minute)
	wantProblem(t, "extend lock_duration PT0.5S", act(env, consumer, id, "extend", map[string]any{"worker_id": "w1", "lock_duration": "PT0.5S"}), 400, "invalid_request")
	got := observe(t, env, id)
	if got["status"] != "reserved" || got["worker_id"] != "w1" || !sameTime(got["lock_expires_at"], lock) {
		t.Errorf("after refused fail and extend: status %v worker %v lock %v, want reserved by w1 until %v", got["status"], got["worker_id"], got["lock_expires_at"], lock)
	}

	before := time.Now()
	ext := env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/extend", consumer, map[string]any{"worker_id": "w1", "lock_duration": "PT2M"}).JSON(t)
	if until := relaistest.TimeOf(t, "lock_expires_at", ext["lock_expires_at"]); until.Before(before.Add(2*time.Minute-time.Second)) || until.After(time.Now().Add(2*time.Minute+time.Second)) {
		t.Errorf("extend at the ceiling: lock_expires_at %v, want about now + 2m", until)
	}
	// An extension never pulls a lock in (a stream keeps its tasks' locks
	// further out than a worker's few seconds).
	short := env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/extend", consumer, map[string]any{"worker_id": "w1", "lock_duration": "PT2S"}).JSON(t)
	if !sameTime(short["lock_expires_at"], ext["lock_expires_at"]) {
		t.Errorf("a 2 s extension moved the lock from %v to %v, want it kept", ext["lock_expires_at"], short["lock_expires_at"])
	}
	res := env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/fail", consumer, failBody("w1", "retry_delay", "PT1H")).JSON(t)
	if res["status"] != "available" {
		t.Errorf("fail with retry_delay at the ceiling = %v, want available", res)
	}
}

func sameTime(a, b any) bool {
	as, _ := a.(string)
	bs, _ := b.(string)
	at, err1 := time.Parse(time.RFC3339Nano, as)
	bt, err2 := time.Parse(time.RFC3339Nano, bs)
	return err1 == nil && err2 == nil && at.Equal(bt)
}

// ------------------------------------------------------------- outputs

// Invalid outputs are refused with every error's pointer; the reservation
// stays with the worker, who corrects and completes.
func TestInvalidOutputsKeepTheReservation(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, nil)
	inst, id := start(t, env, "crm_only", "Acme")
	one(t, fetch(t, env, consumer, fetchBody("w1", "lock_duration", "PT1M")), id)

	bad := map[string]any{"result": "maybe", "crm_id": 5, "matched_on": []any{"name", "email"}}
	p := wantProblem(t, "invalid outputs", act(env, consumer, id, "complete", completeBody("w1", bad)), 422, "invalid_outputs")
	var paths []string
	errs, _ := p["errors"].([]any)
	for _, e := range errs {
		paths = append(paths, e.(map[string]any)["path"].(string))
	}
	for _, want := range []string{"/outputs/result", "/outputs/crm_id", "/outputs/matched_on/1"} {
		if !slices.Contains(paths, want) {
			t.Errorf("invalid_outputs error paths %v, want one at %s", paths, want)
		}
	}
	wantProblem(t, "outputs missing crm_id", act(env, consumer, id, "complete", completeBody("w1", map[string]any{"result": "created"})), 422, "invalid_outputs")

	got := observe(t, env, id)
	if got["status"] != "reserved" || got["worker_id"] != "w1" || got["attempt_count"] != 1.0 {
		t.Errorf("after invalid outputs: status %v worker %v attempt_count %v, want reserved by w1, 1 attempt", got["status"], got["worker_id"], got["attempt_count"])
	}
	if as := attemptsOf(t, got); len(as) != 1 || as[0]["outcome"] != nil {
		t.Errorf("attempts after invalid outputs = %v, want one open attempt", got["attempts"])
	}
	res := env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/complete", consumer, completeBody("w1", created)).JSON(t)
	if res["status"] != "completed" || res["route"] != "created" {
		t.Errorf("corrected completion = %v, want completed via created", res)
	}
	if i := instanceOf(t, env, inst); i["status"] != "completed" || i["end_node"] != "done" {
		t.Errorf("instance = %v at %v, want completed at done", i["status"], i["end_node"])
	}
}

// --------------------------------------------------------------- replay

// A repeated request_id from the same worker returns the same reservations
// without claiming more or opening new attempts; another request_id claims
// others.
func TestRequestIDReplaysTheReservation(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, nil)
	for _, n := range []string{"A", "B", "C"} {
		start(t, env, "crm_only", n)
	}
	first := fetch(t, env, consumer, fetchBody("w1", "max_tasks", 2, "request_id", "req-1"))
	if len(first) != 2 {
		t.Fatalf("first fetch got %d occurrences, want 2", len(first))
	}
	again := fetch(t, env, consumer, fetchBody("w1", "max_tasks", 2, "request_id", "req-1"))
	a, b := ids(first), ids(again)
	slices.Sort(a)
	slices.Sort(b)
	if !slices.Equal(a, b) {
		t.Errorf("replayed request_id got %v, want the same %v", b, a)
	}
	for _, o := range again {
		if o["attempt"] != 1.0 {
			t.Errorf("replayed occurrence %v has attempt %v, want 1", o["id"], o["attempt"])
		}
	}
	for _, id := range a {
		if got := observe(t, env, id); got["attempt_count"] != 1.0 || len(attemptsOf(t, got)) != 1 {
			t.Errorf("occurrence %s after replay: attempt_count %v attempts %v, want one attempt", id, got["attempt_count"], got["attempts"])
		}
	}
	// Counted once: a worker replaying after a network error claimed
	// nothing more.
	if n := env.Metrics().Must(t, "relais_pull_claimed_total"); n != 2 {
		t.Errorf("relais_pull_claimed_total after a replay = %v, want 2", n)
	}
	// The same request_id with another body (declared fields, a lock)
	// is refused: it would answer the first fetch's reservations under
	// the second one's subscriptions and fields. A different wait is the
	// same request.
	for name, body := range map[string]map[string]any{
		"fields": {"worker_id": "w1", "max_tasks": 2, "request_id": "req-1",
			"subscriptions": []any{map[string]any{"definition": crmKey, "fields": []string{"/company_name"}}}},
		"lock": fetchBody("w1", "max_tasks", 2, "request_id", "req-1", "lock_duration", "PT2M"),
	} {
		wantProblem(t, "a replay with other "+name, env.Do("POST", "/api/v1/pull/fetch-and-lock", consumer, body), 422, "request_id_reused")
	}
	if waited := fetch(t, env, consumer, fetchBody("w1", "max_tasks", 2, "request_id", "req-1", "wait", "PT1S")); len(waited) != 2 {
		t.Errorf("a replay with another wait got %d occurrences, want the same 2", len(waited))
	}
	other := fetch(t, env, consumer, fetchBody("w1", "max_tasks", 2, "request_id", "req-2"))
	if len(other) != 1 || slices.Contains(a, other[0]["id"].(string)) {
		t.Errorf("another request_id got %v, want the one remaining occurrence (not one of %v)", ids(other), a)
	}
	// An empty or blank request_id is a client's unset variable: refused,
	// not read as none (the fetch would claim anew on every retry).
	for rid, code := range map[any]string{"": "invalid_request", "  ": "invalid_request", nil: "invalid_json"} {
		r := env.Do("POST", "/api/v1/pull/fetch-and-lock", consumer, fetchBody("w1", "request_id", rid))
		wantProblem(t, fmt.Sprintf("request_id %v", rid), r, 400, code)
		if !strings.Contains(string(r.Body), `"/request_id"`) {
			t.Errorf("request_id %q: %s, want a problem at /request_id", rid, r.Body)
		}
	}
}

// Fetches sent together with one request_id (a retry sent while the first
// still runs: a proxy's, a hedged request, on another replica) reserve
// max_tasks between them, and each answers those same reservations (API
// QA: each claimed its own, and the replay then answered all of them).
func TestConcurrentFetchesOfOneRequestIDClaimOnce(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, nil)
	other := env.Replica()
	for i := range 12 {
		start(t, env, "crm_only", fmt.Sprint("company ", i))
	}
	const n = 6
	answers := make([][]string, n)
	var wg sync.WaitGroup
	for i := range n {
		via := env
		if i%2 == 1 {
			via = other
		}
		wg.Go(func() {
			r := via.Do("POST", "/api/v1/pull/fetch-and-lock", consumer, fetchBody("wz", "max_tasks", 2, "request_id", "dup-1", "lock_duration", "PT5M"))
			if r.Status != 200 {
				t.Errorf("fetch %d: %d %s", i, r.Status, r.Body)
				return
			}
			answers[i] = ids(occurrencesOf(t, r))
			slices.Sort(answers[i])
		})
	}
	wg.Wait()
	for i, a := range answers {
		if len(a) != 2 || !slices.Equal(a, answers[0]) {
			t.Errorf("fetch %d answered %v, want the same 2 as the first, %v", i, a, answers[0])
		}
	}
	if got := ids(fetch(t, env, consumer, fetchBody("wz", "max_tasks", 2, "request_id", "dup-1", "lock_duration", "PT5M"))); len(got) != 2 {
		t.Errorf("the replay afterwards answered %d reservations, want 2", len(got))
	}
	reserved := env.Must(200, "GET", "/api/v1/occurrences?status=reserved&limit=100", env.Operator, nil).JSON(t)["items"].([]any)
	if len(reserved) != 2 {
		t.Errorf("%d occurrences reserved, want 2", len(reserved))
	}
}

// What a replay must repeat is what the fetch asks, not how it spells it:
// the order of fields and repeats in them do not matter.
func TestRequestIDReplayIgnoresSpelling(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, nil)
	start(t, env, "crm_only", "A")
	body := func(fields ...string) map[string]any {
		return map[string]any{"worker_id": "w1", "request_id": "req-s",
			"subscriptions": []any{map[string]any{"definition": crmKey, "fields": fields}}}
	}
	first := fetch(t, env, consumer, body("/company_name", "/country"))
	again := fetch(t, env, consumer, body("/country", "/company_name", "/country"))
	if len(first) != 1 || len(again) != 1 || first[0]["id"] != again[0]["id"] {
		t.Fatalf("replay with the fields reordered got %v, want the same as %v", ids(again), ids(first))
	}
}

// A replay never hands back a lock that lapsed: the worker no longer holds
// it, and completing it would only meet lock_expired. With nothing still
// held the request claims anew (here the same occurrence, a new attempt).
func TestRequestIDReplayLeavesLapsedLocks(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, nil)
	_, id := start(t, env, "crm_only", "Acme")
	first := one(t, fetch(t, env, consumer, fetchBody("w1", "request_id", "req-1", "lock_duration", "PT1M")), id)
	env.Clock.AdvanceTo(relaistest.TimeOf(t, "lock_expires_at", first["lock_expires_at"]).Add(time.Millisecond))
	again := one(t, fetch(t, env, consumer, fetchBody("w1", "request_id", "req-1", "lock_duration", "PT1M")), id)
	if again["attempt"] != 2.0 || !relaistest.TimeOf(t, "lock_expires_at", again["lock_expires_at"]).After(env.Clock.Now()) {
		t.Errorf("replay after the lock lapsed got attempt %v locked until %v, want a new attempt 2 with a live lock", again["attempt"], again["lock_expires_at"])
	}
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/complete", consumer, completeBody("w1", created))
}

// A fetched occurrence carries every member of DESIGN §3.
func TestFetchedOccurrenceCarriesEveryMember(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, map[string]any{"max_attempts": 4, "deadline": "PT1H", "priority": 7})
	inst, id := start(t, env, "crm_only", "Acme")
	before := time.Now()
	occ := one(t, fetch(t, env, consumer, fetchBody("w1", "lock_duration", "PT30S")), id)
	after := time.Now()
	want := map[string]any{"id": id, "definition": crmKey, "revision": 1.0, "attempt": 1.0, "attempts_left": 3.0,
		"instance_id": inst, "node": "crm", "priority": 7.0}
	for k, v := range want {
		if occ[k] != v {
			t.Errorf("fetched %s = %v, want %v", k, occ[k], v)
		}
	}
	if in, _ := occ["inputs"].(map[string]any); in["company_name"] != "Acme" || in["country"] != "FR" || in["source"] != "web" {
		t.Errorf("fetched inputs = %v, want the bound values", occ["inputs"])
	}
	slack := 2 * time.Second
	if l := relaistest.TimeOf(t, "lock_expires_at", occ["lock_expires_at"]); l.Before(before.Add(30*time.Second-slack)) || l.After(after.Add(30*time.Second+slack)) {
		t.Errorf("lock_expires_at = %v, want about now + 30s", l)
	}
	if d := relaistest.TimeOf(t, "deadline_at", occ["deadline_at"]); d.Before(before.Add(time.Hour-time.Minute)) || d.After(after.Add(time.Hour+slack)) {
		t.Errorf("deadline_at = %v, want about creation + 1h", d)
	}
}

// ------------------------------------------------------ expiry and attempts

// A worker that dies costs one lock duration, never the work: after its
// lock ends the occurrence is re-offered (no sweeper: the fetch itself sees
// the expired lock) and the first attempt is recorded as expired.
func TestExpiredLockIsReoffered(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, nil)
	_, id := start(t, env, "crm_only", "Acme")
	first := one(t, fetch(t, env, consumer, fetchBody("dead-worker", "lock_duration", "PT1S")), id)
	lockEnd := relaistest.TimeOf(t, "lock_expires_at", first["lock_expires_at"])

	second := one(t, fetch(t, env, consumer, fetchBody("w2", "wait", "PT5S", "lock_duration", "PT1M")), id)
	if now := time.Now(); now.Before(lockEnd.Add(-50 * time.Millisecond)) {
		t.Errorf("re-offered at %v, before the first lock ended at %v", now, lockEnd)
	}
	if second["attempt"] != 2.0 || second["attempts_left"] != 1.0 {
		t.Errorf("re-offered attempt %v attempts_left %v, want 2 and 1", second["attempt"], second["attempts_left"])
	}
	got := observe(t, env, id)
	as := attemptsOf(t, got)
	if len(as) != 2 {
		t.Fatalf("attempts = %v, want 2", got["attempts"])
	}
	if as[0]["number"] != 1.0 || as[0]["outcome"] != "expired" || as[0]["worker_id"] != "dead-worker" || as[0]["ended_at"] == nil {
		t.Errorf("attempt 1 = %v, want number 1 by dead-worker, outcome expired, ended", as[0])
	}
	if c, _ := as[0]["consumer"].(map[string]any); c["name"] != "crm-sync" {
		t.Errorf("attempt 1 consumer = %v, want crm-sync", as[0]["consumer"])
	}
	if as[1]["number"] != 2.0 || as[1]["worker_id"] != "w2" || as[1]["outcome"] != nil {
		t.Errorf("attempt 2 = %v, want number 2 by w2, open", as[1])
	}
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/complete", consumer, completeBody("w2", created))
}

// Once its lock lapses an occurrence is available again (DESIGN §3), even
// though no claim has taken it yet: observers see it so, filters and counts
// agree, and the lapsed attempt shows as expired.
func TestLapsedLockIsObservedAvailable(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, nil)
	_, id := start(t, env, "crm_only", "Acme")
	first := one(t, fetch(t, env, consumer, fetchBody("dead-worker", "lock_duration", "PT1M")), id)
	lockEnd := relaistest.TimeOf(t, "lock_expires_at", first["lock_expires_at"])
	if got := observe(t, env, id); got["status"] != "reserved" {
		t.Fatalf("status while the lock holds = %v, want reserved", got["status"])
	}
	env.Clock.AdvanceTo(lockEnd)

	got := observe(t, env, id)
	if got["status"] != "available" || !sameTime(got["available_at"], first["lock_expires_at"]) {
		t.Errorf("status %v available_at %v after the lock lapsed, want available since %v", got["status"], got["available_at"], first["lock_expires_at"])
	}
	if as := attemptsOf(t, got); len(as) != 1 || as[0]["outcome"] != "expired" || !sameTime(as[0]["ended_at"], first["lock_expires_at"]) {
		t.Errorf("attempts = %v, want one, expired when its lock ended", got["attempts"])
	}
	// The last holder is named, in the detail and in lists.
	items := env.Must(200, "GET", "/api/v1/occurrences?instance="+got["instance_id"].(string), env.Operator, nil).JSON(t)["items"].([]any)
	for what, o := range map[string]map[string]any{"detail": got, "list": items[0].(map[string]any)} {
		if c, _ := o["consumer"].(map[string]any); c["name"] != "crm-sync" {
			t.Errorf("%s consumer = %v, want crm-sync", what, o["consumer"])
		}
	}
	list := func(status string) []string {
		items := env.Must(200, "GET", "/api/v1/occurrences?definition="+crmKey+"&status="+status, env.Operator, nil).JSON(t)["items"].([]any)
		var out []string
		for _, it := range items {
			out = append(out, it.(map[string]any)["id"].(string))
		}
		return out
	}
	if a, r := list("available"), list("reserved"); len(a) != 1 || a[0] != id || len(r) != 0 {
		t.Errorf("status=available lists %v and status=reserved %v, want the occurrence only as available", a, r)
	}
	counts, err := env.Engine.CountOccurrencesByDefinitionStatus(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(counts) != 1 || counts[0].Status != "available" || counts[0].Count != 1 {
		t.Errorf("counts = %+v, want one available", counts)
	}
	// With an occurrence stored as available beside it, the lapsed one is
	// still counted once: added to the available row, taken from the
	// reserved row that sorts after it.
	start(t, env, "crm_only", "Globex")
	counts, err = env.Engine.CountOccurrencesByDefinitionStatus(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(counts) != 1 || counts[0].Status != "available" || counts[0].Count != 2 {
		t.Errorf("counts with another available occurrence = %+v, want two available and nothing reserved", counts)
	}

	// The next claim takes it as a new attempt and records the expiry.
	one(t, fetch(t, env, consumer, fetchBody("w2", "max_tasks", 1)), id)
	if got := observe(t, env, id); got["status"] != "reserved" || len(attemptsOf(t, got)) != 2 {
		t.Errorf("after a new claim: status %v attempts %v, want reserved with two attempts", got["status"], got["attempts"])
	}
}

// Extending prolongs the holder's lock: past the original lock end nobody
// else can claim the occurrence and the holder still settles it.
func TestExtendKeepsTheLock(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, nil)
	_, id := start(t, env, "crm_only", "Acme")
	occ := one(t, fetch(t, env, consumer, fetchBody("w1", "lock_duration", "PT30S")), id)
	firstEnd := relaistest.TimeOf(t, "lock_expires_at", occ["lock_expires_at"])

	before := env.Clock.Now()
	ext := env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/extend", consumer, extendBody("w1")).JSON(t)
	until := relaistest.TimeOf(t, "lock_expires_at", ext["lock_expires_at"])
	if until.Before(before.Add(time.Minute-2*time.Second)) || until.After(env.Clock.Now().Add(time.Minute+2*time.Second)) {
		t.Errorf("extend answered lock_expires_at %v, want about now + 1m", until)
	}
	obs := observe(t, env, id)
	if !sameTime(obs["lock_expires_at"], ext["lock_expires_at"]) {
		t.Errorf("observed lock_expires_at %v, want the extended %v", obs["lock_expires_at"], ext["lock_expires_at"])
	}
	if as := attemptsOf(t, obs); len(as) != 1 || !sameTime(as[0]["lock_expires_at"], ext["lock_expires_at"]) {
		t.Errorf("attempt = %v, want its lock_expires_at extended to %v", obs["attempts"], ext["lock_expires_at"])
	}

	env.Clock.AdvanceTo(firstEnd.Add(time.Second))
	if occs := fetch(t, env, consumer, fetchBody("w2", "wait", "PT0.3S")); len(occs) != 0 {
		t.Errorf("another worker claimed %v past the original lock end, want nothing (the lock was extended)", ids(occs))
	}
	res := env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/complete", consumer, completeBody("w1", created)).JSON(t)
	if res["route"] != "created" {
		t.Errorf("completion after extension = %v, want route created", res)
	}
}

// A task that crashes every worker ends failed after max_attempts: the
// timer fails it with attempts_exhausted and the instance follows on_error.
func TestCrashingTaskEndsFailedAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, map[string]any{"max_attempts": 2})
	inst, id := start(t, env, "crm_only", "Acme")

	one(t, fetch(t, env, consumer, fetchBody("crash-1", "lock_duration", "PT1S")), id)
	last := one(t, fetch(t, env, consumer, fetchBody("crash-2", "wait", "PT5S", "lock_duration", "PT1S")), id)
	if last["attempt"] != 2.0 || last["attempts_left"] != 0.0 {
		t.Fatalf("second fetch got attempt %v attempts_left %v, want 2 and 0", last["attempt"], last["attempts_left"])
	}

	occ := waitStatus(t, env, id, "failed", 5*time.Second)
	if occ["error_code"] != "attempts_exhausted" {
		t.Errorf("failed occurrence error_code %v, want attempts_exhausted", occ["error_code"])
	}
	// Counted as its policy reads.
	if msg, _ := occ["error_message"].(string); !strings.Contains(msg, "the last attempt (attempt 2 of max_attempts 2) ended: its lock expired") {
		t.Errorf("error_message %q, want the last attempt counted against max_attempts", msg)
	}
	as := attemptsOf(t, occ)
	if len(as) != 2 || as[0]["outcome"] != "expired" || as[1]["outcome"] != "expired" {
		t.Errorf("attempts = %v, want two expired attempts", occ["attempts"])
	}
	got := instanceOf(t, env, inst)
	if got["status"] != "failed" || got["end_node"] != "failed" {
		t.Errorf("instance = %v at %v, want failed at the on_error node failed", got["status"], got["end_node"])
	}
	if occs := fetch(t, env, consumer, fetchBody("crash-3")); len(occs) != 0 {
		t.Errorf("third fetch got %v, want nothing", ids(occs))
	}
}

// A retryable failure makes the occurrence available again after the retry
// delay, not before, and a waiting fetch gets it as soon as it is due.
func TestRetryDelayIsHonoured(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, nil)
	_, id := start(t, env, "crm_only", "Acme")
	one(t, fetch(t, env, consumer, fetchBody("w1")), id)

	before := time.Now()
	res := env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/fail", consumer, failBody("w1", "retry_delay", "PT1S")).JSON(t)
	answered := time.Now()
	if res["status"] != "available" || res["attempts_left"] != 2.0 {
		t.Errorf("fail answered %v, want status available with attempts_left 2", res)
	}
	due := relaistest.TimeOf(t, "available_at", res["available_at"])
	if due.Before(before.Add(time.Second-250*time.Millisecond)) || due.After(answered.Add(time.Second+250*time.Millisecond)) {
		t.Errorf("available_at = %v, want about now + 1s (fail sent at %v)", due, before)
	}

	occ := one(t, fetch(t, env, consumer, fetchBody("w2", "wait", "PT3S")), id)
	got := time.Now()
	if got.Before(due.Add(-50 * time.Millisecond)) {
		t.Errorf("fetch answered at %v, %v before available_at %v", got, due.Sub(got), due)
	}
	if d := got.Sub(answered); d > 1500*time.Millisecond {
		t.Errorf("fetch answered %v after the failure, want within 1.5s", d)
	}
	if occ["attempt"] != 2.0 {
		t.Errorf("retried occurrence attempt %v, want 2", occ["attempt"])
	}
	obs := observe(t, env, id)
	if as := attemptsOf(t, obs); len(as) != 2 || as[0]["outcome"] != "failed" || as[0]["error_code"] != "CRM_DOWN" {
		t.Errorf("attempts = %v, want the first failed with CRM_DOWN", obs["attempts"])
	}
}

// NextClaimable, given a mark taken before a claim, still names an
// occurrence that came due between that claim and its own read (due
// already, so the waiter claims again at once); without the mark it would
// look past it, and the waiter would learn of it at its next periodic
// check only (QA saw streamed retries come at the next heartbeat).
func TestNextClaimableSeesWhatCameDueSinceTheClaim(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, nil)
	_, id := start(t, env, "crm_only", "Acme")
	one(t, fetch(t, env, consumer, fetchBody("w1")), id)
	res := env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/fail", consumer, failBody("w1", "retry_delay", "PT10S")).JSON(t)
	due := relaistest.TimeOf(t, "available_at", res["available_at"])
	ctx := context.Background()
	pairs, err := env.Engine.ResolveSubscriptions(ctx, env.ConsumerID("crm-sync"), []engine.Subscription{{Definition: "add_company_to_crm"}})
	if err != nil {
		t.Fatal(err)
	}
	if next, ok, err := env.Engine.NextClaimable(ctx, pairs, time.Time{}); err != nil || !ok || !next.Equal(due) {
		t.Fatalf("before it is due: NextClaimable = %v, %v, %v; want %v", next, ok, err, due)
	}
	mark := env.Engine.ClaimMark()
	env.Clock.Advance(11 * time.Second) // it comes due after the mark
	if next, ok, err := env.Engine.NextClaimable(ctx, pairs, mark); err != nil || !ok || !next.Equal(due) {
		t.Errorf("due since the mark: NextClaimable = %v, %v, %v; want %v (claim again now)", next, ok, err, due)
	}
	if _, ok, err := env.Engine.NextClaimable(ctx, pairs, time.Time{}); err != nil || ok {
		t.Errorf("without a mark: NextClaimable found %v (%v), want nothing ahead", ok, err)
	}
}

// A waiting fetch that hears of a retry due later does not sleep past an
// earlier one it already knew of.
func TestLaterRetryDoesNotDelayAnEarlierOne(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, nil)
	_, a := start(t, env, "crm_only", "Early")
	_, b := start(t, env, "crm_only", "Late")
	if got := fetch(t, env, consumer, fetchBody("w1", "max_tasks", 2)); len(got) != 2 {
		t.Fatalf("fetched %v, want both", ids(got))
	}
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+a+"/fail", consumer, failBody("w1", "retry_delay", "PT1S"))
	failedA := time.Now()

	type answer struct {
		occs []map[string]any
		at   time.Time
	}
	got := make(chan answer, 1)
	go func() {
		r := env.Do("POST", "/api/v1/pull/fetch-and-lock", consumer, fetchBody("w2", "wait", "PT8S"))
		var occs []map[string]any
		if r.Status == 200 {
			occs = occurrencesOf(t, r)
		}
		got <- answer{occs, time.Now()}
	}()
	waitWaiters(t, env, 1, 3*time.Second)
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+b+"/fail", consumer, failBody("w1", "retry_delay", "PT6S"))

	res := <-got
	one(t, res.occs, a)
	if d := res.at.Sub(failedA); d > 2500*time.Millisecond {
		t.Errorf("the retry due 1s after its failure was fetched %v after it: the later retry's wake-up replaced its own", d)
	}
}

// The execution policy is frozen on the occurrence at creation, with the
// documented defaults; a failure without retry_delay uses the frozen one.
func TestPolicyIsFrozenOnTheOccurrence(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, nil)
	_, id := start(t, env, "crm_only", "Defaults")
	pol, _ := observe(t, env, id)["policy"].(map[string]any)
	if pol["max_attempts"] != 3.0 || pol["retry_delay"] != "PT10S" || pol["deadline"] != nil || pol["priority"] != 5.0 {
		t.Errorf("default policy = %v, want max_attempts 3, retry_delay PT10S, no deadline, priority 5", pol)
	}

	env.Process("crm_slow", relaistest.CRMProcess(map[string]any{"max_attempts": 4, "retry_delay": "PT2S", "deadline": "PT5M", "priority": 6}))
	_, id2 := start(t, env, "crm_slow", "Frozen")
	pol, _ = observe(t, env, id2)["policy"].(map[string]any)
	if pol["max_attempts"] != 4.0 || pol["retry_delay"] != "PT2S" || pol["deadline"] != "PT5M" || pol["priority"] != 6.0 {
		t.Errorf("policy = %v, want max_attempts 4, retry_delay PT2S, deadline PT5M, priority 6", pol)
	}
	one(t, fetch(t, env, consumer, fetchBody("w1")), id2)
	before := time.Now()
	res := env.Must(200, "POST", "/api/v1/pull/occurrences/"+id2+"/fail", consumer, failBody("w1")).JSON(t)
	after := time.Now()
	if res["status"] != "available" || res["attempts_left"] != 3.0 {
		t.Errorf("fail answered %v, want available with attempts_left 3", res)
	}
	if due := relaistest.TimeOf(t, "available_at", res["available_at"]); due.Before(before.Add(2*time.Second-250*time.Millisecond)) || due.After(after.Add(2*time.Second+250*time.Millisecond)) {
		t.Errorf("available_at = %v, want about now + the frozen retry_delay PT2S", due)
	}
}

// A spent budget (or a non-retryable failure) makes the occurrence terminal
// failed with its last error, and the instance follows on_error.
func TestFailureWithSpentBudgetIsTerminal(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, nil)
	env.Process("crm_once", relaistest.CRMProcess(map[string]any{"max_attempts": 1}))

	inst, id := start(t, env, "crm_once", "Acme")
	one(t, fetch(t, env, consumer, fetchBody("w1")), id)
	res := env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/fail", consumer, failBody("w1")).JSON(t)
	if res["status"] != "failed" || res["attempts_left"] != 0.0 {
		t.Errorf("retryable failure of the last attempt answered %v, want failed with attempts_left 0", res)
	}
	occ := observe(t, env, id)
	if occ["status"] != "failed" || occ["error_code"] != "CRM_DOWN" || occ["error_message"] != "the CRM answered 503" {
		t.Errorf("occurrence = %v %v %v, want failed with CRM_DOWN and its message", occ["status"], occ["error_code"], occ["error_message"])
	}
	if i := instanceOf(t, env, inst); i["status"] != "failed" || i["end_node"] != "failed" || i["error_code"] != "CRM_DOWN" {
		t.Errorf("instance = %v at %v (%v), want failed at failed with CRM_DOWN", i["status"], i["end_node"], i["error_code"])
	}

	_, id2 := start(t, env, "crm_only", "Globex")
	one(t, fetch(t, env, consumer, fetchBody("w1")), id2)
	noMessage := failBody("w1", "retryable", false, "error_code", "BAD_VAT")
	delete(noMessage, "message")
	res = env.Must(200, "POST", "/api/v1/pull/occurrences/"+id2+"/fail", consumer, noMessage).JSON(t)
	if res["status"] != "failed" || res["attempts_left"] != 2.0 {
		t.Errorf("non-retryable failure answered %v, want failed with attempts_left 2", res)
	}
	// Sent without a message, it has none: null, not "" (Camunda QA).
	o := observe(t, env, id2)
	if o["status"] != "failed" || o["error_code"] != "BAD_VAT" {
		t.Errorf("occurrence = %v %v, want failed with BAD_VAT", o["status"], o["error_code"])
	}
	if m, ok := o["error_message"]; !ok || m != nil {
		t.Errorf("error_message = %#v, want null for a failure sent without one", m)
	}
	if as := o["attempts"].([]any); as[len(as)-1].(map[string]any)["error_message"] != nil {
		t.Errorf("the attempt's error_message = %#v, want null", as[len(as)-1].(map[string]any)["error_message"])
	}
}

// ------------------------------------------------------------- priority

// Fetches claim by priority (highest first), then by availability: a
// priority-9 occurrence created last is claimed first.
func TestPriorityOrdersClaims(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, nil)
	env.Process("crm_low", relaistest.CRMProcess(map[string]any{"priority": 1}))
	env.Process("crm_high", relaistest.CRMProcess(map[string]any{"priority": 9}))
	_, lowA := start(t, env, "crm_low", "Low A")
	_, lowB := start(t, env, "crm_low", "Low B")
	_, high := start(t, env, "crm_high", "High")

	for i, want := range []string{high, lowA, lowB} {
		occ := one(t, fetch(t, env, consumer, fetchBody("w1", "max_tasks", 1)), "")
		if occ["id"] != want {
			t.Errorf("fetch %d claimed %v (priority %v), want %s", i+1, occ["id"], occ["priority"], want)
		}
	}
	if occs := fetch(t, env, consumer, fetchBody("w1", "max_tasks", 1)); len(occs) != 0 {
		t.Errorf("fourth fetch got %v, want nothing", ids(occs))
	}
}

// Re-offers follow the same order as first offers: an occurrence whose
// lock expired became available at its lock expiry, and priority comes
// before that time.
func TestPriorityOrdersReoffers(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, nil)
	env.Process("crm_low", relaistest.CRMProcess(map[string]any{"priority": 1}))
	env.Process("crm_high", relaistest.CRMProcess(map[string]any{"priority": 9}))
	_, low := start(t, env, "crm_low", "Low")
	one(t, fetch(t, env, consumer, fetchBody("dead-1", "max_tasks", 1, "lock_duration", "PT1M")), low)
	_, high := start(t, env, "crm_high", "High")
	last := one(t, fetch(t, env, consumer, fetchBody("dead-2", "max_tasks", 1, "lock_duration", "PT2M")), high)
	env.Clock.AdvanceTo(relaistest.TimeOf(t, "lock_expires_at", last["lock_expires_at"]))

	for i, want := range []string{high, low} {
		occ := one(t, fetch(t, env, consumer, fetchBody("w1", "max_tasks", 1)), "")
		if occ["id"] != want {
			t.Errorf("re-offer %d claimed %v (priority %v), want %s", i+1, occ["id"], occ["priority"], want)
		}
	}
}

// ---------------------------------------------------------------- grants

func TestGrants(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, nil)
	env.Definition("score_company.yaml")
	// A second revision of add_company_to_crm.
	doc := relaistest.Body(relaistest.ExampleDocs(t, "definitions/add_company_to_crm.yaml")[0], "key")
	doc["description"] = "Second revision."
	env.Must(200, "PUT", "/api/v1/definitions/"+crmKey+"/working", env.Designer, doc)
	if rev := env.Must(201, "POST", "/api/v1/definitions/"+crmKey+"/revisions", env.Designer, nil).JSON(t)["revision"]; rev != 2.0 {
		t.Fatalf("snapshot made revision %v, want 2", rev)
	}

	t.Run("revision not granted is refused", func(t *testing.T) {
		rev2 := env.Must(201, "POST", "/api/v1/consumers", env.Admin, map[string]any{"name": "rev2-only",
			"grants": []any{map[string]any{"definition": crmKey, "revisions": []any{2}}}}).JSON(t)["token"].(string)
		p := wantProblem(t, "fetch of revision 1", env.Do("POST", "/api/v1/pull/fetch-and-lock", rev2,
			map[string]any{"worker_id": "w1", "subscriptions": []any{map[string]any{"definition": crmKey, "revisions": []any{1}}}}), 403, "not_granted")
		if errs, _ := p["errors"].([]any); len(errs) == 0 || errs[0].(map[string]any)["path"] != "/subscriptions/0/revisions/0" ||
			!strings.Contains(errs[0].(map[string]any)["message"].(string), "granted revision 2 of "+crmKey) {
			t.Errorf("not_granted errors %v, want one at /subscriptions/0/revisions/0 saying which revisions are granted", p["errors"])
		}
		// A misspelt key is named with the granted key it meant.
		p = wantProblem(t, "fetch of a misspelt definition", env.Do("POST", "/api/v1/pull/fetch-and-lock", rev2,
			map[string]any{"worker_id": "w1", "subscriptions": []any{map[string]any{"definition": crmKey + "s"}}}), 403, "not_granted")
		if errs, _ := p["errors"].([]any); len(errs) != 1 || !strings.Contains(errs[0].(map[string]any)["message"].(string), `(did you mean "`+crmKey+`"?)`) {
			t.Errorf("not_granted errors %v, want the granted key suggested", p["errors"])
		}
		wantProblem(t, "fetch of an ungranted definition", env.Do("POST", "/api/v1/pull/fetch-and-lock", rev2,
			map[string]any{"worker_id": "w1", "subscriptions": []any{map[string]any{"definition": "score_company"}}}), 403, "not_granted")
		if occs := fetch(t, env, rev2, map[string]any{"worker_id": "w1", "subscriptions": []any{map[string]any{"definition": crmKey, "revisions": []any{2}}}}); len(occs) != 0 {
			t.Errorf("revision 2 fetch got %v, want nothing (only revision 1 occurrences exist)", ids(occs))
		}
		// "all", as a grant says it: every revision granted (here 2).
		if occs := fetch(t, env, rev2, map[string]any{"worker_id": "w1", "subscriptions": []any{map[string]any{"definition": crmKey, "revisions": "all"}}}); len(occs) != 0 {
			t.Errorf(`revisions "all" fetch got %v, want nothing (only revision 1 occurrences exist)`, ids(occs))
		}
		p = wantProblem(t, "revisions neither a list nor all", env.Do("POST", "/api/v1/pull/fetch-and-lock", rev2,
			map[string]any{"worker_id": "w1", "subscriptions": []any{map[string]any{"definition": crmKey, "revisions": "every"}}}), 400, "invalid_json")
		if errs, _ := p["errors"].([]any); len(errs) != 1 || errs[0].(map[string]any)["path"] != "/subscriptions/0/revisions" {
			t.Errorf("revisions \"every\": errors %v, want one at /subscriptions/0/revisions", p["errors"])
		}
		// An empty list is no "every revision": refused as a grant's is.
		p = wantProblem(t, "revisions an empty list", env.Do("POST", "/api/v1/pull/fetch-and-lock", rev2,
			map[string]any{"worker_id": "w1", "subscriptions": []any{map[string]any{"definition": crmKey, "revisions": []any{}}}}), 400, "invalid_json")
		if errs, _ := p["errors"].([]any); len(errs) != 1 || !strings.Contains(fmt.Sprint(errs[0]), "at least one revision") {
			t.Errorf("revisions []: errors %v, want one saying a list names at least one", p["errors"])
		}
	})

	t.Run("ungranted consumer gets 404 like an unknown id", func(t *testing.T) {
		_, id := start(t, env, "crm_only", "Acme")
		one(t, fetch(t, env, consumer, fetchBody("w1")), id)
		other := env.Consumer("scorer", "score_company")
		rev2 := env.Must(201, "POST", "/api/v1/consumers", env.Admin, map[string]any{"name": "rev2-only-b",
			"grants": []any{map[string]any{"definition": crmKey, "revisions": []any{2}}}}).JSON(t)["token"].(string)
		unknown := uuid.NewString()
		for _, tok := range []struct{ name, token string }{{"no grant on the definition", other}, {"granted another revision", rev2}} {
			for _, a := range actions {
				// Same worker id as the holder; the answer must not reveal
				// that the occurrence exists (nor who holds it).
				got := act(env, tok.token, id, a, bodyFor(a, "w1"))
				ref := act(env, tok.token, unknown, a, bodyFor(a, "w1"))
				wantProblem(t, tok.name+": "+a+" of an existing occurrence", got, 404, "not_found")
				if p := wantProblem(t, tok.name+": "+a+" of an unknown id", ref, 404, "not_found"); !strings.Contains(fmt.Sprint(p["detail"]), "retention deleted it") {
					// A worker settling late learns where its occurrence went.
					t.Errorf("%s of an unknown id: %v; want retention named", a, p["detail"])
				}
				// Every answer has its own request_id; the rest must be equal.
				if g, r := withoutRequestID(strings.ReplaceAll(string(got.Body), id, "ID")), withoutRequestID(strings.ReplaceAll(string(ref.Body), unknown, "ID")); g != r {
					t.Errorf("%s: %s of an existing occurrence answered %s, unlike an unknown id %s", tok.name, a, g, r)
				}
			}
		}
		occ := observe(t, env, id)
		if occ["status"] != "reserved" || occ["worker_id"] != "w1" || len(attemptsOf(t, occ)) != 1 {
			t.Errorf("occurrence after ungranted calls: status %v worker %v attempts %v, want untouched", occ["status"], occ["worker_id"], occ["attempts"])
		}
	})

	t.Run("revoked consumer is refused at once", func(t *testing.T) {
		c := env.Must(201, "POST", "/api/v1/consumers", env.Admin, map[string]any{"name": "to-revoke",
			"grants": []any{map[string]any{"definition": crmKey, "revisions": "all"}}}).JSON(t)
		token, cid := c["token"].(string), fmt.Sprint(int64(c["id"].(float64)))
		_, id := start(t, env, "crm_only", "Revoked Co")
		one(t, fetch(t, env, token, fetchBody("w1")), id)
		env.Must(204, "DELETE", "/api/v1/consumers/"+cid, env.Admin, nil)
		wantProblem(t, "fetch by a revoked consumer", env.Do("POST", "/api/v1/pull/fetch-and-lock", token, fetchBody("w1")), 401, "unauthorized")
		wantProblem(t, "complete by a revoked consumer", act(env, token, id, "complete", completeBody("w1", created)), 401, "unauthorized")
		if occ := observe(t, env, id); occ["status"] != "reserved" {
			t.Errorf("occurrence after the revoked completion is %v, want reserved", occ["status"])
		}
	})

	t.Run("only consumer tokens pull", func(t *testing.T) {
		for _, tok := range []struct{ role, token string }{{"admin", env.Admin}, {"operator", env.Operator}, {"designer", env.Designer}} {
			wantProblem(t, tok.role+" token on fetch", env.Do("POST", "/api/v1/pull/fetch-and-lock", tok.token, fetchBody("w1")), 403, "forbidden")
		}
		wantProblem(t, "no token on fetch", env.Do("POST", "/api/v1/pull/fetch-and-lock", "", fetchBody("w1")), 401, "unauthorized")
	})
}

// --------------------------------------------------------------- secrets

// Secret and sensitive inputs reach the authorized consumer in clear, are
// masked on the observation API, and a worker's message echoing them is
// scrubbed before it is stored.
func TestSecretsClearForConsumerMaskedForObservers(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	field := func(name, class string) map[string]any {
		return map[string]any{"name": name, "type": "text", "required": true, "classification": class}
	}
	env.Must(201, "PUT", "/api/v1/definitions/call_vault/working", env.Designer, map[string]any{
		"name":    "Call the vault",
		"inputs":  map[string]any{"fields": []any{field("api_token", "secret"), field("contact_email", "sensitive"), field("label", "normal")}},
		"outputs": map[string]any{"fields": []any{map[string]any{"name": "ok", "type": "boolean", "required": true}}},
	})
	env.Must(201, "POST", "/api/v1/definitions/call_vault/revisions", env.Designer, nil)
	env.Process("vault_call", map[string]any{
		"inputs": map[string]any{"fields": []any{field("token", "secret"), field("email", "sensitive"), field("label", "normal")}},
		"start":  "call",
		"nodes": map[string]any{
			"call": map[string]any{"kind": "pull", "definition": "call_vault", "revision": 1,
				"inputs": map[string]any{"api_token": map[string]any{"from": "input.token"}, "contact_email": map[string]any{"from": "input.email"},
					"label": map[string]any{"from": "input.label"}},
				"next": "done", "on_error": "failed"},
			"done":   map[string]any{"kind": "end"},
			"failed": map[string]any{"kind": "end", "status": "failed"},
		},
	})
	consumer := env.Consumer("vault-worker", "call_vault")
	const secret, email = "tok-S3CR3T-7f3a9c21", "ceo@acme.example"

	inst := env.Must(201, "POST", "/api/v1/processes/vault_call/instances", env.Operator,
		map[string]any{"inputs": map[string]any{"token": secret, "email": email, "label": "Acme"}}).JSON(t)
	instID := inst["id"].(string)
	sub := map[string]any{"worker_id": "w1", "subscriptions": []any{map[string]any{"definition": "call_vault"}}}
	occ := one(t, fetch(t, env, consumer, sub), "")
	id := occ["id"].(string)
	if in, _ := occ["inputs"].(map[string]any); in["api_token"] != secret || in["contact_email"] != email || in["label"] != "Acme" {
		t.Errorf("fetched inputs = %v, want the secret and sensitive values in clear", occ["inputs"])
	}

	leaks := func(what string, body []byte) {
		t.Helper()
		for _, v := range []string{secret, email} {
			if bytes.Contains(body, []byte(v)) {
				t.Errorf("%s shows the protected value %q: %s", what, v, body)
			}
		}
	}
	obs := env.Must(200, "GET", "/api/v1/occurrences/"+id, env.Operator, nil)
	leaks("occurrence observation", obs.Body)
	in, _ := obs.JSON(t)["inputs"].(map[string]any)
	if m, _ := in["api_token"].(map[string]any); m["$masked"] != "secret" {
		t.Errorf("observed api_token = %v, want {\"$masked\":\"secret\"}", in["api_token"])
	}
	if m, _ := in["contact_email"].(map[string]any); m["$masked"] != "sensitive" {
		t.Errorf("observed contact_email = %v, want {\"$masked\":\"sensitive\"}", in["contact_email"])
	}
	if in["label"] != "Acme" {
		t.Errorf("observed label = %v, want Acme (normal values are shown)", in["label"])
	}

	// A completion whose outputs are keyed by the values is refused at
	// pointers naming them: the note kept on the attempt is scrubbed
	// (security QA: a card number stored and shown as /outputs/<card>).
	wantProblem(t, "outputs keyed by the values", act(env, consumer, id, "complete",
		completeBody("w1", map[string]any{"ok": true, secret: 1, "x" + email: 2})), 422, "invalid_outputs")
	obs = env.Must(200, "GET", "/api/v1/occurrences/"+id, env.Operator, nil)
	leaks("refused report's pointers", obs.Body)
	if r, _ := attemptsOf(t, obs.JSON(t))[0]["refused_reports"].(map[string]any); fmt.Sprint(r["pointers"]) != "[/outputs/[redacted] /outputs/x[redacted]]" {
		t.Errorf("refused_reports %v, want its pointers scrubbed", r)
	}

	// A retryable failure, then a terminal one, both echoing the values.
	msg := "vault refused token " + secret + " for " + email
	// The error code echoes the secret too: codes are shown as they are,
	// so one holding a protected value is replaced.
	res := env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/fail", consumer, failBody("w1", "message", msg, "retry_delay", "PT0S", "error_code", secret))
	leaks("fail answer", res.Body)
	one(t, fetch(t, env, consumer, sub), id)
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/fail", consumer, failBody("w1", "message", msg, "retryable", false))

	obs = env.Must(200, "GET", "/api/v1/occurrences/"+id, env.Operator, nil)
	leaks("occurrence observation after failures", obs.Body)
	o := obs.JSON(t)
	if m, _ := o["error_message"].(string); m == "" || !strings.Contains(m, "vault refused token") {
		t.Errorf("stored error_message = %v, want the scrubbed message", o["error_message"])
	}
	as := attemptsOf(t, o)
	if len(as) != 2 || as[0]["error_message"] == nil || as[1]["error_message"] == nil {
		t.Errorf("attempts = %v, want two failed attempts with their (scrubbed) messages", o["attempts"])
	} else if as[0]["error_code"] != "redacted" {
		t.Errorf("first attempt's error_code = %v, want redacted (the worker's code held the secret)", as[0]["error_code"])
	}
	leaks("occurrence list", env.Must(200, "GET", "/api/v1/occurrences?instance="+instID, env.Operator, nil).Body)
	leaks("instance observation", env.Must(200, "GET", "/api/v1/instances/"+instID, env.Operator, nil).Body)
	if logs := env.Logs.String(); strings.Contains(logs, secret) {
		t.Errorf("the logs show the secret value")
	}
	var dump string
	if err := env.Pool.QueryRow(context.Background(),
		"select concat_ws(' ', o::text, (select string_agg(a::text, ' ') from attempts a where a.occurrence_id = o.id), i::text) from occurrences o join instances i on i.id = o.instance_id where o.id = $1", id).Scan(&dump); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(dump, secret) || strings.Contains(dump, email) {
		t.Errorf("the occurrence, its attempts or its instance store the secret or the sensitive value in clear")
	}
}

// Long messages are cut on a character boundary: the column holds UTF-8.
func TestLongFailureMessageIsCutOnACharacter(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, nil)
	_, id := start(t, env, "crm_only", "Acme")
	one(t, fetch(t, env, consumer, fetchBody("w1")), id)
	msg := "x" + strings.Repeat("é", 1500)
	res := env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/fail", consumer, failBody("w1", "message", msg, "retryable", false)).JSON(t)
	if res["status"] != "failed" {
		t.Fatalf("fail answered %v, want status failed", res)
	}
	stored, _ := observe(t, env, id)["error_message"].(string)
	if !utf8.ValidString(stored) || len(stored) > 2000 || len(stored) < 1990 || !strings.HasSuffix(stored, "…") || !strings.HasPrefix(msg, strings.TrimSuffix(stored, "…")) {
		t.Errorf("stored message (%d bytes, valid UTF-8 %v): want a valid prefix of the message and an ellipsis, 2,000 bytes at most", len(stored), utf8.ValidString(stored))
	}
}

// A step that completed after a failed attempt shows no error code in its
// instance's path (it would read as the step's outcome), while its
// occurrence keeps the last error with its attempts; a step waiting for
// its retry shows it.
func TestCompletedStepShowsNoEarlierError(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, nil)
	inst, id := start(t, env, "crm_only", "Acme")
	one(t, fetch(t, env, consumer, fetchBody("w1")), id)
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/fail", consumer, failBody("w1", "retry_delay", "PT1S"))
	step := func() map[string]any {
		return env.Must(200, "GET", "/api/v1/instances/"+inst, env.Operator, nil).JSON(t)["path"].([]any)[0].(map[string]any)
	}
	if got := step(); got["status"] != "available" || got["error_code"] != "CRM_DOWN" {
		t.Errorf("step waiting for its retry: %v, want available with CRM_DOWN", got)
	}
	env.Clock.Advance(2 * time.Second)
	one(t, fetch(t, env, consumer, fetchBody("w1")), id)
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/complete", consumer, completeBody("w1", created))
	if got := step(); got["status"] != "completed" || got["error_code"] != nil {
		t.Errorf("completed step: %v, want no error code", got)
	}
	if got := observe(t, env, id); got["error_code"] != "CRM_DOWN" {
		t.Errorf("the occurrence: error_code %v, want its last error kept", got["error_code"])
	}
}

// A replica that is shutting down refuses new fetches (503
// replica_stopping, Retry-After) and claims nothing for them: the worker
// could not report what it was handed once the replica is gone, and the
// task would wait for its lock to lapse. The occurrence stays available to
// other replicas.
func TestAStoppingReplicaClaimsNothing(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, nil)
	other := env.Replica()
	_, id := start(t, env, "crm_only", "Acme")
	env.Drain()
	for _, wait := range []string{"PT0S", "PT5S"} {
		r := env.Do("POST", "/api/v1/pull/fetch-and-lock", consumer, fetchBody("w1", "wait", wait))
		if r.Status != 503 || r.Code() != "replica_stopping" || r.Header.Get("Retry-After") == "" {
			t.Errorf("fetch (wait %s) on a stopping replica: %d %s, want 503 replica_stopping with Retry-After", wait, r.Status, r.Body)
		}
	}
	if got := observe(t, env, id); got["status"] != "available" {
		t.Errorf("occurrence %v after fetches on a stopping replica, want available", got["status"])
	}
	// A refused fetch is no sighting: the worker is not listed as polling.
	if items := other.Must(200, "GET", "/api/v1/workers", env.Operator, nil).JSON(t)["items"].([]any); len(items) != 0 {
		t.Errorf("workers after refused fetches: %v, want none", items)
	}
	// Load balancers are told to send work elsewhere.
	if r := env.Do("GET", "/readyz", "", nil); r.Status != 503 || !strings.Contains(string(r.Body), "shutting down") {
		t.Errorf("readyz of a stopping replica: %d %s, want 503 shutting down", r.Status, r.Body)
	}
	one(t, occurrencesOf(t, other.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, fetchBody("w2"))), id)
}

var requestIDMember = regexp.MustCompile(`"http_request_id":"[^"]*",?`)

func withoutRequestID(body string) string { return requestIDMember.ReplaceAllString(body, "") }

// A policy's retry_backoff grows the delay after each failure of the
// budget, up to max_retry_delay; a worker's own retry_delay still wins,
// and an operator's retry starts the growth again.
func TestPolicyBackoffGrowsTheRetryDelay(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, nil)
	doc := relaistest.CRMProcess(map[string]any{"max_attempts": 7, "retry_delay": "PT10S", "retry_backoff": 2, "max_retry_delay": "PT25S"})
	nodes := doc["nodes"].(map[string]any)
	nodes["crm"].(map[string]any)["on_error"] = "hold"
	delete(nodes, "failed")
	env.Process("crm_held", doc)
	inst, id := start(t, env, "crm_held", "Acme")
	fail := func(worker string, want time.Duration, kv ...any) {
		t.Helper()
		one(t, fetch(t, env, consumer, fetchBody(worker)), id)
		before := env.Clock.Now()
		res := env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/fail", consumer, failBody(worker, kv...)).JSON(t)
		after := env.Clock.Now()
		due := relaistest.TimeOf(t, "available_at", res["available_at"])
		if due.Before(before.Add(want-time.Millisecond)) || due.After(after.Add(want+time.Millisecond)) {
			t.Errorf("%s: available %v after the failure, want %v", worker, due.Sub(before).Round(time.Millisecond), want)
		}
		env.Clock.AdvanceTo(due.Add(time.Millisecond))
	}
	// A worker waiving an attempt (attempts_left under what remains)
	// shortens the budget, not the wait: QA saw 1 s, 8 s, 16 s.
	fail("w1", 10*time.Second, "attempts_left", 5)
	fail("w2", 20*time.Second)
	fail("w3", 25*time.Second) // 40 s, capped
	fail("w4", time.Second, "retry_delay", "PT1S")
	fail("w5", 25*time.Second) // the worker's delay grew nothing

	pol, _ := observe(t, env, id)["policy"].(map[string]any)
	if pol["retry_backoff"] != 2.0 || pol["max_retry_delay"] != "PT25S" || pol["retry_delay"] != "PT10S" {
		t.Errorf("observed policy %v, want retry_delay PT10S, retry_backoff 2, max_retry_delay PT25S", pol)
	}

	// The sixth attempt (one was waived) fails for good; an operator's
	// retry gives a fresh budget, whose first failure waits retry_delay
	// again.
	one(t, fetch(t, env, consumer, fetchBody("w6")), id)
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/fail", consumer, failBody("w6", "retryable", false))
	env.Must(200, "POST", "/api/v1/instances/"+inst+"/retry", env.Operator, map[string]any{"reason": "the CRM is back"})
	fail("w7", 10*time.Second)
}

// A settlement naming its attempt is that attempt's: a failure report
// sent again after a lost answer, once the same worker holds the next
// attempt, is answered as the first was and fails nothing more (without
// the attempt, the same report is the next attempt's failure, found by QA
// as a worker's result then refused not_reserved); any other call for the
// earlier attempt is refused lock_expired; an attempt not made yet, 400.
func TestSettlementNamingItsAttempt(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, nil)
	_, id := start(t, env, "crm_only", "Acme")
	if a := one(t, fetch(t, env, consumer, fetchBody("w5")), id)["attempt"]; a != 1.0 {
		t.Fatalf("first fetch: attempt %v", a)
	}
	failure := failBody("w5", "retry_delay", "PT1S", "attempt", 1)
	first := env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/fail", consumer, failure).JSON(t)
	env.Clock.Advance(2 * time.Second)
	if a := one(t, fetch(t, env, consumer, fetchBody("w5")), id)["attempt"]; a != 2.0 {
		t.Fatalf("second fetch: attempt %v", a)
	}
	again := env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/fail", consumer, failure).JSON(t)
	if again["attempts_left"] != first["attempts_left"] || again["available_at"] != first["available_at"] {
		t.Errorf("attempt 1's failure sent again answered %v, want the first answer %v", again, first)
	}
	if o := observe(t, env, id); o["status"] != "reserved" || o["attempt_count"] != 2.0 {
		t.Errorf("after attempt 1's failure sent again: %v at attempt %v, want attempt 2 still reserved", o["status"], o["attempt_count"])
	}
	p := wantProblem(t, "attempt 1's completion", act(env, consumer, id, "complete", map[string]any{"worker_id": "w5", "attempt": 1, "outputs": created}), 409, "lock_expired")
	if d, _ := p["detail"].(string); !strings.Contains(d, "attempt 1") {
		t.Errorf("attempt 1's completion refused with %q, want it to name the attempt", d)
	}
	wantProblem(t, "attempt 1's extension", act(env, consumer, id, "extend", map[string]any{"worker_id": "w5", "attempt": 1}), 409, "lock_expired")
	wantProblem(t, "an attempt not made yet", act(env, consumer, id, "complete", map[string]any{"worker_id": "w5", "attempt": 3, "outputs": created}), 400, "invalid_request")
	wantProblem(t, "attempt 0", act(env, consumer, id, "complete", map[string]any{"worker_id": "w5", "attempt": 0, "outputs": created}), 400, "invalid_request")
	// null is no "none": an unset variable would act on the current attempt.
	if p := act(env, consumer, id, "fail", map[string]any{"worker_id": "w5", "attempt": nil, "error_code": "X", "retryable": true}); p.Status != 400 {
		t.Errorf("a failure naming a null attempt: %d %s, want 400", p.Status, p.Body)
	}
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/complete", consumer, map[string]any{"worker_id": "w5", "attempt": 2, "outputs": created})
	// Its replay, naming its attempt, is answered as the first.
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/complete", consumer, map[string]any{"worker_id": "w5", "attempt": 2, "outputs": created})

	// In a batch too: an item naming an earlier attempt is refused alone.
	_, other := start(t, env, "crm_only", "Initech")
	one(t, fetch(t, env, consumer, fetchBody("w5")), other)
	res := env.Must(200, "POST", "/api/v1/pull/settle", consumer, map[string]any{"worker_id": "w5", "items": []any{
		map[string]any{"id": other, "attempt": 2, "outputs": created}}}).JSON(t)
	if item := res["items"].([]any)[0].(map[string]any); item["status"] != 400.0 {
		t.Errorf("a batch item naming attempt 2 of an occurrence at attempt 1: %v, want 400", item)
	}
	res = env.Must(200, "POST", "/api/v1/pull/settle", consumer, map[string]any{"worker_id": "w5", "items": []any{
		map[string]any{"id": other, "attempt": 1, "outputs": created}}}).JSON(t)
	if item := res["items"].([]any)[0].(map[string]any); item["status"] != 200.0 {
		t.Errorf("a batch item naming its attempt: %v, want 200", item)
	}
}

// What a newcomer's slips are told (QA): an occurrence waiting for its
// retry is not "fetch it first" (no fetch takes it before its time); a
// completion whose outputs are not nested is told where they go (a batch
// item's too); a misspelt process key is told the one it may mean.
func TestNewcomersSlipsAreExplained(t *testing.T) {
	t.Parallel()
	env, consumer := newCRM(t, nil)
	_, id := start(t, env, "crm_only", "Acme")
	one(t, fetch(t, env, consumer, fetchBody("w1")), id)
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/fail", consumer, failBody("w1", "retry_delay", "PT1H"))
	p := wantProblem(t, "settling an occurrence waiting for its retry", act(env, consumer, id, "complete", completeBody("w1", created)), 409, "not_reserved")
	if d, _ := p["detail"].(string); !strings.Contains(d, "waits for its retry") {
		t.Errorf("detail %q, want it to say the occurrence waits for its retry", d)
	}
	p = wantProblem(t, "outputs not nested", act(env, consumer, id, "complete", map[string]any{"worker_id": "w1", "crm_id": "C1"}), 400, "unknown_field")
	if d, _ := p["detail"].(string); !strings.Contains(d, `go under "outputs"`) {
		t.Errorf("detail %q, want it to say the outputs go under \"outputs\"", d)
	}
	// The batch route's items too, and a single completion's body sent
	// to it.
	p = wantProblem(t, "a batch item's outputs not nested", env.Do("POST", "/api/v1/pull/settle", consumer,
		map[string]any{"worker_id": "w1", "items": []any{map[string]any{"id": id, "crm_id": "C1"}}}), 400, "unknown_field")
	if d, _ := p["detail"].(string); !strings.Contains(d, `go under "outputs"`) {
		t.Errorf("detail %q, want it to say the outputs go under \"outputs\"", d)
	}
	p = wantProblem(t, "a completion's body sent to the batch route", env.Do("POST", "/api/v1/pull/settle", consumer,
		completeBody("w1", created)), 400, "unknown_field")
	if d, _ := p["detail"].(string); !strings.Contains(d, `"items"`) {
		t.Errorf("detail %q, want it to say a batch takes items", d)
	}
	p = wantProblem(t, "a misspelt process", env.Do("POST", "/api/v1/processes/crm_onyl/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": "x"}}), 404, "not_found")
	if d, _ := p["detail"].(string); !strings.Contains(d, `did you mean "crm_only"`) {
		t.Errorf("detail %q, want the key it may mean", d)
	}
	// So is a process's page.
	p = wantProblem(t, "a misspelt process's versions", env.Do("GET", "/api/v1/processes/crm_onyl", env.Operator, nil), 404, "not_found")
	if d, _ := p["detail"].(string); !strings.Contains(d, `did you mean "crm_only"`) {
		t.Errorf("detail %q, want the key it may mean", d)
	}
}

// An id in a path that is no UUID (a number, a key pasted in its place) is
// not found, as an unknown one, and told what an id looks like.
func TestAnIDThatIsNoUUIDIsSaidSo(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	token := env.Consumer("crm", "add_company_to_crm")
	for _, c := range []struct {
		method, path, token string
		body                any
	}{
		{"POST", "/api/v1/pull/occurrences/123/complete", token, map[string]any{"worker_id": "w", "outputs": map[string]any{}}},
		{"POST", "/api/v1/pull/occurrences/123/extend", token, map[string]any{"worker_id": "w", "lock_duration": "PT1M"}},
		{"GET", "/api/v1/instances/123", env.Operator, nil},
	} {
		res := env.Do(c.method, c.path, c.token, c.body)
		if res.Status != 404 || !strings.Contains(string(res.Body), `\"123\" not found`) || !strings.Contains(string(res.Body), "ids are UUIDs") {
			t.Errorf("%s %s = %d %s; want 404 saying ids are UUIDs", c.method, c.path, res.Status, res.Body)
		}
	}
}
