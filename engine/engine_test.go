package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relais/relais/internal/dbtest"
	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/keyring"
	"github.com/relais/relais/queries"
)

func TestMain(m *testing.M) { dbtest.Main(m, SchemaFingerprint(), Migrate) }

var testKeys = keyring.NewKeySpec("t")

func setup(t testing.TB) *Engine {
	t.Helper()
	return New(dbtest.Pool(t), Options{Keys: testRing(t)})
}

// testRing is the keyring of testKeys.
func testRing(t testing.TB) *keyring.Keyring {
	t.Helper()
	ring, err := keyring.Parse(testKeys)
	if err != nil {
		t.Fatal(err)
	}
	return ring
}

const crmWorking = `{"name":"Add company to CRM",
 "inputs":{"fields":[{"name":"company_name","type":"text","required":true},{"name":"token","type":"text","classification":"secret"}]},
 "outputs":{"fields":[{"name":"result","type":"choice","required":true,"values":["created","existing"]},{"name":"crm_id","type":"text","required":true}]},
 "routing_output":"result"}`

// twoStepProcess runs crm then check (both pull), so an instance stays
// running after its first node.
func twoStepProcess(policy string) string {
	return `{"inputs":{"fields":[{"name":"name","type":"text","required":true}]},"start":"crm","nodes":{
	 "crm":{"kind":"pull","definition":"crm","revision":1,"inputs":{"company_name":{"from":"input.name"}},` + policy + `
	        "routes":{"created":"check","existing":"check"},"on_error":"failed"},
	 "check":{"kind":"pull","definition":"crm","revision":1,"inputs":{"company_name":{"from":"nodes.crm.output.crm_id"}},"routes":{"created":"done","existing":"done"}},
	 "done":{"kind":"end"},"failed":{"kind":"end","status":"failed"}}}`
}

func prepare(t testing.TB, e *Engine, policy string) {
	t.Helper()
	ctx := context.Background()
	if _, _, err := e.SaveWorking(ctx, "crm", []byte(crmWorking)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Snapshot(ctx, "crm"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.PublishProcess(ctx, "two_step", []byte(twoStepProcess(policy))); err != nil {
		t.Fatal(err)
	}
}

func consumer(t testing.TB, e *Engine) int64 {
	t.Helper()
	c, _, err := e.CreateConsumer(context.Background(), fmt.Sprintf("c-%d", time.Now().UnixNano()), []Grant{{Definition: "crm"}})
	if err != nil {
		t.Fatal(err)
	}
	return c.ID
}

func occurrences(t testing.TB, e *Engine, inst uuid.UUID) map[string][]queries.Occurrence {
	t.Helper()
	rows, err := e.q.OccurrenceListByInstance(context.Background(), inst)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]queries.Occurrence{}
	for _, r := range rows {
		out[r.Node] = append(out[r.Node], r)
	}
	return out
}

func claimOne(t testing.TB, e *Engine, c int64, worker string) Reservation {
	t.Helper()
	got, err := e.Claim(context.Background(), ClaimRequest{ConsumerID: c, WorkerID: worker, Pairs: Pairs{Keys: []string{"crm"}, Revisions: []int32{1}},
		MaxTasks: 1, LockDuration: time.Minute})
	if err != nil || len(got) != 1 {
		t.Fatalf("claim: %v, %v", got, err)
	}
	return got[0]
}

func TestConcurrentAdvancementCreatesOneOccurrencePerNode(t *testing.T) {
	t.Parallel()
	e := setup(t)
	prepare(t, e, "")
	ctx := context.Background()
	pv, err := e.GetProcessVersion(ctx, "two_step", 1)
	if err != nil {
		t.Fatal(err)
	}
	// An instance that has not been advanced yet, as a crash between two
	// transactions would leave one if advancement were not atomic.
	id := uuid.Must(uuid.NewV7())
	if _, err := e.q.InstanceInsert(ctx, queries.InstanceInsertParams{ID: id, ProcessKey: "two_step", Version: int32(pv.Version), Inputs: json.RawMessage(`{"name":"Acme"}`)}); err != nil {
		t.Fatal(err)
	}
	race := func() {
		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() {
				if err := e.reconcile(ctx, id); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	race()
	if occs := occurrences(t, e, id); len(occs["crm"]) != 1 || len(occs) != 1 {
		t.Fatalf("after 50 concurrent advancements: %v; want exactly one occurrence of crm", occs)
	}

	// 50 workers race to complete it: one settlement, one next occurrence.
	c := consumer(t, e)
	res := claimOne(t, e, c, "w")
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[string]int{}
	for i := range 50 {
		wg.Go(func() {
			outputs := fmt.Sprintf(`{"result":"created","crm_id":"C-%d"}`, i%2)
			_, err := e.Complete(ctx, WorkerRef{ConsumerID: c, WorkerID: "w", Occurrence: res.ID}, json.RawMessage(outputs))
			code := "ok"
			if fe, ok := fault.As(err); ok {
				code = fe.Code
			} else if err != nil {
				code = err.Error()
			}
			mu.Lock()
			codes[code]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if codes["ok"] < 1 || codes["ok"]+codes["already_settled"] != 50 {
		t.Fatalf("completion results %v; want successes (one settlement and its identical replays) and already_settled only", codes)
	}
	race()
	occs := occurrences(t, e, id)
	if len(occs["crm"]) != 1 || len(occs["check"]) != 1 {
		t.Fatalf("occurrences %v; want one crm and one check", occs)
	}
	var attempts int
	if err := e.pool.QueryRow(ctx, "select count(*) from attempts where occurrence_id = $1 and outcome = 'completed'", res.ID).Scan(&attempts); err != nil || attempts != 1 {
		t.Fatalf("%d completed attempts (%v); want 1", attempts, err)
	}
}

func TestStopRacingCompletionStaysConsistent(t *testing.T) {
	t.Parallel()
	e := setup(t)
	prepare(t, e, "")
	ctx := context.Background()
	c := consumer(t, e)
	rounds := 200
	if testing.Short() {
		rounds = 20
	}
	outcomes := map[string]int{}
	for i := range rounds {
		inst, _, err := e.StartInstance(ctx, StartRequest{ProcessKey: "two_step", Inputs: json.RawMessage(`{"name":"Acme"}`)})
		if err != nil {
			t.Fatal(err)
		}
		res := claimOne(t, e, c, "w")
		var completeErr, stopErr error
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Go(func() {
			<-start
			_, completeErr = e.Complete(ctx, WorkerRef{ConsumerID: c, WorkerID: "w", Occurrence: res.ID}, json.RawMessage(`{"result":"created","crm_id":"C"}`))
		})
		wg.Go(func() {
			<-start
			_, stopErr = e.StopInstance(ctx, inst.ID)
		})
		close(start)
		wg.Wait()
		if stopErr != nil {
			t.Fatalf("round %d: stop: %v", i, stopErr)
		}
		got, err := e.GetInstance(ctx, inst.ID)
		if err != nil {
			t.Fatal(err)
		}
		occs := occurrences(t, e, inst.ID)
		crm := occs["crm"][0]
		switch {
		case completeErr == nil:
			// Completion won: crm completed, the instance advanced to
			// check, and the stop then cancelled check.
			if crm.Status != StatusCompleted || len(occs["check"]) != 1 || occs["check"][0].Status != StatusCancelled {
				t.Fatalf("round %d: completion succeeded but crm=%s check=%v", i, crm.Status, occs["check"])
			}
			outcomes["completed then stopped"]++
		case fault.HasCode(completeErr, "occurrence_cancelled"):
			if crm.Status != StatusCancelled || len(occs["check"]) != 0 {
				t.Fatalf("round %d: completion refused but crm=%s check=%v", i, crm.Status, occs["check"])
			}
			outcomes["stopped first"]++
		default:
			t.Fatalf("round %d: completion error %v", i, completeErr)
		}
		if got.Status != InstanceCancelled {
			t.Fatalf("round %d: instance %s; want cancelled (never resurrected)", i, got.Status)
		}
		var open int
		if err := e.pool.QueryRow(ctx, "select count(*) from attempts a join occurrences o on o.id = a.occurrence_id where o.instance_id = $1 and a.ended_at is null", inst.ID).Scan(&open); err != nil || open != 0 {
			t.Fatalf("round %d: %d attempts left open (%v)", i, open, err)
		}
	}
	t.Logf("outcomes over %d rounds: %v", rounds, outcomes)
}

// testClock is a clock shared by an engine's replicas that a test moves
// forward instead of sleeping.
type testClock struct{ offset atomic.Int64 }

func (c *testClock) now() time.Time               { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *testClock) advance(d time.Duration)      { c.offset.Add(int64(d)) }
func (c *testClock) options(t testing.TB) Options { return Options{Keys: testRing(t), Now: c.now} }

func TestDeadlineFailsOnceAcrossTwoReplicas(t *testing.T) {
	t.Parallel()
	clock := &testClock{}
	pool := dbtest.Pool(t)
	a, b := New(pool, clock.options(t)), New(pool, clock.options(t))
	prepare(t, a, `"policy":{"deadline":"PT1H"},`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go a.RunTimerLoop(ctx, 100*time.Millisecond, nil)
	go b.RunTimerLoop(ctx, 100*time.Millisecond, nil)

	var ids []uuid.UUID
	for range 10 {
		inst, _, err := a.StartInstance(ctx, StartRequest{ProcessKey: "two_step", Inputs: json.RawMessage(`{"name":"Acme"}`)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, inst.ID)
	}
	clock.advance(time.Hour)
	deadline := time.Now().Add(6 * time.Second)
	for _, id := range ids {
		for {
			inst, err := a.GetInstance(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if inst.Status != InstanceRunning {
				if inst.Status != InstanceFailed || deref(inst.EndNode) != "failed" || deref(inst.ErrorCode) != "deadline_exceeded" {
					t.Fatalf("instance %s ended %s at %v with %v; want failed at the on_error node with deadline_exceeded", id, inst.Status, deref(inst.EndNode), deref(inst.ErrorCode))
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("instance %s still running 6 s after its PT1H deadline passed", id)
			}
			time.Sleep(50 * time.Millisecond)
		}
		occs := occurrences(t, a, id)
		if len(occs["crm"]) != 1 || occs["crm"][0].Status != StatusFailed || deref(occs["crm"][0].ErrorCode) != "deadline_exceeded" {
			t.Fatalf("occurrences %v", occs)
		}
	}
}

func TestSettlementRefusedAfterStop(t *testing.T) {
	t.Parallel()
	e := setup(t)
	prepare(t, e, "")
	ctx := context.Background()
	c := consumer(t, e)
	inst, _, err := e.StartInstance(ctx, StartRequest{ProcessKey: "two_step", Inputs: json.RawMessage(`{"name":"Acme"}`)})
	if err != nil {
		t.Fatal(err)
	}
	res := claimOne(t, e, c, "w")
	if _, err := e.StopInstance(ctx, inst.ID); err != nil {
		t.Fatal(err)
	}
	_, err = e.Complete(ctx, WorkerRef{ConsumerID: c, WorkerID: "w", Occurrence: res.ID}, json.RawMessage(`{"result":"created","crm_id":"C"}`))
	if !fault.HasCode(err, "occurrence_cancelled") {
		t.Fatalf("late completion: %v; want occurrence_cancelled", err)
	}
	got, _ := e.GetInstance(ctx, inst.ID)
	if got.Status != InstanceCancelled {
		t.Fatalf("instance %s after a late completion", got.Status)
	}
	if _, err := e.StopInstance(ctx, inst.ID); err != nil {
		t.Fatalf("stopping twice: %v", err)
	}
}

func TestStartIdempotency(t *testing.T) {
	t.Parallel()
	e := setup(t)
	prepare(t, e, "")
	ctx := context.Background()
	req := StartRequest{ProcessKey: "two_step", Inputs: json.RawMessage(`{"name":"Acme"}`), IdempotencyKey: "order-1"}
	a, created, err := e.StartInstance(ctx, req)
	if err != nil || !created {
		t.Fatal(err)
	}
	req.Inputs = json.RawMessage(`{ "name" : "Acme" }`)
	b, created, err := e.StartInstance(ctx, req)
	if err != nil || created || b.ID != a.ID {
		t.Fatalf("replay: %v created=%v id %s vs %s", err, created, b.ID, a.ID)
	}
	req.Inputs = json.RawMessage(`{"name":"Other"}`)
	if _, _, err := e.StartInstance(ctx, req); !fault.HasCode(err, "idempotency_key_reused") {
		t.Fatalf("other body, same key: %v", err)
	}
	if _, _, err := e.StartInstance(ctx, StartRequest{ProcessKey: "two_step", Inputs: json.RawMessage(`{"nom":1}`)}); !fault.HasCode(err, "invalid_inputs") {
		t.Fatalf("invalid inputs: %v", err)
	}
}

func TestSecretsAreSealedAtRest(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	if _, _, err := e.SaveWorking(ctx, "crm", []byte(crmWorking)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Snapshot(ctx, "crm"); err != nil {
		t.Fatal(err)
	}
	doc := `{"inputs":{"fields":[{"name":"name","type":"text","required":true},{"name":"tok","type":"text","required":true,"classification":"secret"}]},
	 "start":"crm","nodes":{"crm":{"kind":"pull","definition":"crm","revision":1,
	 "inputs":{"company_name":{"from":"input.name"},"token":{"from":"input.tok"}},"routes":{"created":"done","existing":"done"}},"done":{"kind":"end"}}}`
	if _, _, err := e.PublishProcess(ctx, "sealed", []byte(doc)); err != nil {
		t.Fatal(err)
	}
	const canary = "CANARY-SECRET-5c1e"
	inst, _, err := e.StartInstance(ctx, StartRequest{ProcessKey: "sealed", Inputs: json.RawMessage(`{"name":"Acme","tok":"` + canary + `"}`)})
	if err != nil {
		t.Fatal(err)
	}
	var leaks int
	err = e.pool.QueryRow(ctx, `select (select count(*) from instances where inputs::text like '%'||$1||'%' or encode(sealed_inputs, 'escape') like '%'||$1||'%')
	                                + (select count(*) from occurrences where inputs::text like '%'||$1||'%' or encode(sealed_inputs, 'escape') like '%'||$1||'%')`, canary).Scan(&leaks)
	if err != nil || leaks != 0 {
		t.Fatalf("%d rows hold the secret in clear (%v)", leaks, err)
	}
	c := consumer(t, e)
	res := claimOne(t, e, c, "w")
	var in map[string]string
	_ = json.Unmarshal(res.Inputs, &in)
	if in["token"] != canary {
		t.Fatalf("the consumer got %v; want the secret in clear", in)
	}
	obs, err := e.GetOccurrence(ctx, res.ID)
	if err != nil {
		t.Fatal(err)
	}
	if string(obs.Inputs) == "" || json.Valid(obs.Inputs) && containsBytes(obs.Inputs, canary) {
		t.Fatalf("observation shows the secret: %s", obs.Inputs)
	}
	if inst.ID == (uuid.UUID{}) {
		t.Fatal("no instance")
	}
	// A worker's error message echoing the secret is scrubbed.
	if _, err := e.Fail(ctx, WorkerRef{ConsumerID: c, WorkerID: "w", Occurrence: res.ID}, Failure{ErrorCode: "CRM_DOWN", Message: "token " + canary + " refused", Retryable: true}); err != nil {
		t.Fatal(err)
	}
	obs, _ = e.GetOccurrence(ctx, res.ID)
	if containsBytes([]byte(deref(obs.ErrorMessage)), canary) || containsBytes([]byte(deref(obs.AttemptList[0].ErrorMessage)), canary) {
		t.Fatalf("stored message leaks the secret: %q", deref(obs.ErrorMessage))
	}
}

func containsBytes(b []byte, s string) bool {
	return len(s) > 0 && errors.Is(nil, nil) && string(b) != "" && indexOf(string(b), s) >= 0
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

// TestTimerPassReportsItsLag: a pass takes the longest-overdue occurrences
// first and says how late it runs, by the database clock (the
// relais_timer_lag_seconds gauge); nothing due is no lag.
func TestTimerPassReportsItsLag(t *testing.T) {
	t.Parallel()
	clock := &testClock{}
	e := New(dbtest.Pool(t), clock.options(t))
	prepare(t, e, `"policy":{"deadline":"PT1H"},`)
	ctx := context.Background()
	if pass, err := e.RunTimerPass(ctx); err != nil || pass.Due != 0 || pass.Settled != 0 || pass.Lag != 0 || len(pass.Failed) != 0 {
		t.Fatalf("pass with nothing due: %+v, %v; want nothing found and no lag", pass, err)
	}
	var oldest uuid.UUID
	for i := range timerBatch + 1 {
		inst, _, err := e.StartInstance(ctx, StartRequest{ProcessKey: "two_step", Inputs: json.RawMessage(`{"name":"Acme"}`)})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			oldest = inst.ID
			// The first one's deadline passes 10 minutes before the others'.
			clock.advance(10 * time.Minute)
		}
	}
	clock.advance(time.Hour + 7*time.Second)
	pass, err := e.RunTimerPass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if pass.Due != timerBatch || pass.Settled != timerBatch || pass.Failed["deadline_exceeded"] != timerBatch || len(pass.Failed) != 1 {
		t.Errorf("pass found %d, settled %d, failed %v; want a full batch of %d, deadline_exceeded", pass.Due, pass.Settled, pass.Failed, timerBatch)
	}
	// 10 min 7 s overdue, give or take the time the starts took.
	if want := 10*time.Minute + 7*time.Second; pass.Lag < want || pass.Lag > want+30*time.Second {
		t.Errorf("lag %v; want about %v (the oldest deadline's)", pass.Lag, want)
	}
	if got := occurrences(t, e, oldest)["crm"][0]; got.Status != StatusFailed {
		t.Errorf("the longest-overdue occurrence is %s after a full batch; want it settled first", got.Status)
	}
	pass, err = e.RunTimerPass(ctx)
	if err != nil || pass.Due != 1 || pass.Settled != 1 || pass.Lag < 7*time.Second || pass.Lag > 40*time.Second {
		t.Errorf("second pass: %+v, %v; want the last one, about 7 s late", pass, err)
	}
}

// TestResultAfterTheDeadlineIsRefused: a result, a failure or an extension
// that comes after the occurrence's deadline is refused (409
// deadline_exceeded) even before the timer failed it, and even while its
// lock is live, a deferred one alike: which of the two it ends as must not
// depend on when the timer runs. The timer then fails it as usual.
func TestResultAfterTheDeadlineIsRefused(t *testing.T) {
	t.Parallel()
	clock := &testClock{}
	e := New(dbtest.Pool(t), clock.options(t))
	prepare(t, e, `"policy":{"deadline":"PT1H"},`)
	ctx := context.Background()
	c := consumer(t, e)
	var ids []uuid.UUID
	for range 3 {
		inst, _, err := e.StartInstance(ctx, StartRequest{ProcessKey: "two_step", Inputs: json.RawMessage(`{"name":"Acme"}`)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, inst.ID)
	}
	claim := func(n int) []Reservation {
		got, err := e.Claim(ctx, ClaimRequest{ConsumerID: c, WorkerID: "w", Pairs: Pairs{Keys: []string{"crm"}, Revisions: []int32{1}},
			MaxTasks: n, LockDuration: 3 * time.Hour})
		if err != nil || len(got) != n {
			t.Fatalf("claim: %v, %v", got, err)
		}
		return got
	}
	got := claim(3)
	held := WorkerRef{ConsumerID: c, WorkerID: "w", Occurrence: got[0].ID}
	deferred := WorkerRef{ConsumerID: c, WorkerID: "w", Occurrence: got[1].ID}
	if _, err := e.Defer(ctx, deferred, "a person decides"); err != nil {
		t.Fatal(err)
	}
	// The third fails, is offered again and taken by the same worker,
	// which then sends the same report past the deadline: that is its
	// second attempt's report, refused, not the first one's answer.
	retried := WorkerRef{ConsumerID: c, WorkerID: "w", Occurrence: got[2].ID}
	again := Failure{ErrorCode: "crm_down", Retryable: true, RetryDelay: new(time.Duration)}
	if _, err := e.Fail(ctx, retried, again); err != nil {
		t.Fatal(err)
	}
	if r := claim(1); r[0].ID != retried.Occurrence {
		t.Fatalf("claimed %s, want the failed one again", r[0].ID)
	}
	clock.advance(time.Hour + time.Second)
	if _, err := e.Fail(ctx, retried, again); !fault.HasCode(err, CodeDeadlineExceeded) {
		t.Errorf("the same report on a later attempt past the deadline: %v; want deadline_exceeded", err)
	}

	for name, settle := range map[string]func(WorkerRef) error{
		"complete": func(r WorkerRef) error {
			_, err := e.Complete(ctx, r, json.RawMessage(`{"result":"created","crm_id":"C"}`))
			return err
		},
		"fail": func(r WorkerRef) error {
			_, err := e.Fail(ctx, r, Failure{ErrorCode: "crm_down", Retryable: true})
			return err
		},
		"extend": func(r WorkerRef) error { _, err := e.Extend(ctx, r, time.Minute); return err },
	} {
		for _, r := range []WorkerRef{held, deferred} {
			if name == "extend" && r == deferred {
				continue // a deferred occurrence has no lock to extend
			}
			if err := settle(r); !fault.HasCode(err, CodeDeadlineExceeded) {
				t.Errorf("%s of %s past its deadline: %v; want deadline_exceeded", name, r.Occurrence, err)
			}
		}
	}
	if _, err := e.RunTimers(ctx); err != nil {
		t.Fatal(err)
	}
	// Once the timer failed it, its holder still hears why; another worker
	// only that it is settled.
	if _, err := e.Extend(ctx, held, time.Minute); !fault.HasCode(err, CodeDeadlineExceeded) {
		t.Errorf("extension once the timer failed the occurrence: %v; want deadline_exceeded", err)
	}
	other := WorkerRef{ConsumerID: c, WorkerID: "other", Occurrence: held.Occurrence}
	if _, err := e.Complete(ctx, other, json.RawMessage(`{"result":"created","crm_id":"C"}`)); !fault.HasCode(err, "already_settled") {
		t.Errorf("another worker's completion once the timer failed the occurrence: %v; want already_settled", err)
	}
	for _, id := range ids {
		if inst, _ := e.GetInstance(ctx, id); inst.Status != InstanceFailed || deref(inst.ErrorCode) != CodeDeadlineExceeded {
			t.Errorf("instance %s ended %s with %v; want failed with deadline_exceeded", id, inst.Status, deref(inst.ErrorCode))
		}
	}
}

// TestTaggedClaimIsAskedAgain: a worker stream tags its claims (TagOnly:
// no replay looked for); one whose COMMIT answer was lost is asked again
// under its tag, which replays what it reserved rather than claim more,
// and a tag only tags: the same tag with TagOnly claims anew.
func TestTaggedClaimIsAskedAgain(t *testing.T) {
	t.Parallel()
	e := setup(t)
	prepare(t, e, "")
	ctx := context.Background()
	c := consumer(t, e)
	for range 4 {
		if _, _, err := e.StartInstance(ctx, StartRequest{ProcessKey: "two_step", Inputs: json.RawMessage(`{"name":"Acme"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	claim := func(tagOnly bool, n int) []Reservation {
		t.Helper()
		got, err := e.Claim(ctx, ClaimRequest{ConsumerID: c, WorkerID: "w", Pairs: Pairs{Keys: []string{"crm"}, Revisions: []int32{1}},
			MaxTasks: n, LockDuration: time.Minute, RequestID: "stream-1/1", TagOnly: tagOnly})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	lost := claim(true, 2)
	again := claim(false, 2)
	if len(lost) != 2 || len(again) != 2 || again[0].ID != lost[0].ID || again[1].ID != lost[1].ID {
		t.Fatalf("asked again under its tag: %v, want the lost claim's %v", again, lost)
	}
	if more := claim(true, 2); len(more) != 2 || more[0].ID == lost[0].ID || more[0].ID == lost[1].ID {
		t.Errorf("a tag only tags: %v, want two more", more)
	}
	// A stream that ends before asking again hands back what the tag
	// reserved (all four now), no attempt spent.
	n, err := e.HandBackTagged(ctx, c, "w", "stream-1/1")
	if err != nil || n != 4 {
		t.Fatalf("hand back the tagged claim: %d, %v; want 4", n, err)
	}
	// Asked again under a tag after its grant was withdrawn (the stream's
	// pairs no longer hold its definition), nothing is delivered, and
	// what it reserved is handed back.
	tagged, err := e.Claim(ctx, ClaimRequest{ConsumerID: c, WorkerID: "w", Pairs: Pairs{Keys: []string{"crm"}, Revisions: []int32{1}},
		MaxTasks: 4, LockDuration: time.Minute, RequestID: "stream-1/2", TagOnly: true})
	if err != nil || len(tagged) != 4 {
		t.Fatalf("claim all four again: %d, %v", len(tagged), err)
	}
	define(t, e, "notify", notifyWorking)
	if _, err := e.SetGrants(ctx, c, []Grant{{Definition: "notify"}}); err != nil {
		t.Fatal(err)
	}
	got, err := e.Claim(ctx, ClaimRequest{ConsumerID: c, WorkerID: "w", Pairs: Pairs{Keys: []string{"crm", "notify"}, Revisions: []int32{1, 1}},
		MaxTasks: 4, LockDuration: time.Minute, RequestID: "stream-1/2", Recover: true})
	if err != nil || len(got) != 0 {
		t.Errorf("asked again without the grant: %v, %v; want nothing delivered", got, err)
	}
	if _, err := e.SetGrants(ctx, c, []Grant{{Definition: "crm"}}); err != nil {
		t.Fatal(err)
	}
	if again := claim(true, 4); len(again) != 4 {
		t.Errorf("after the withdrawn replay, %d claimable, want the 4 handed back", len(again))
	}
}

// A replica is named by its host and process id; the first process of a
// container (pid 1) adds random digits, since containers on one host's
// network share its name (verifier QA).
func TestReplicaNames(t *testing.T) {
	t.Parallel()
	host := func() (string, error) { return "box", nil }
	if got := replicaName(host, 4242); got != "box-4242" {
		t.Errorf("replicaName(box, 4242) = %q, want box-4242", got)
	}
	seen := map[string]bool{}
	for range 20 {
		name := replicaName(host, 1)
		if !regexp.MustCompile(`^box-1-[0-9a-f]{4}$`).MatchString(name) {
			t.Fatalf("replicaName(box, 1) = %q, want box-1-xxxx", name)
		}
		seen[name] = true
	}
	if len(seen) < 2 {
		t.Errorf("20 pid-1 names were all %v: want them apart", seen)
	}
}

func TestPoolClosedTellsAReadFailingOnTheClosedPool(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	e := New(pool, Options{Keys: testRing(t)})
	_, err := e.Health(context.Background())
	if err != nil || PoolClosed(err) {
		t.Fatalf("health on an open pool: %v (closed %t)", err, PoolClosed(err))
	}
	// A snapshot's refresh in flight as the process stops: its WARN asked
	// nothing of anyone (see snapshot.Cache.QuietWhen).
	pool.Close()
	if _, err := e.Health(context.Background()); !PoolClosed(err) {
		t.Errorf("health on a closed pool: %v, want it told by PoolClosed", err)
	}
}

// A stored process version this build cannot parse, as an older replica
// meets one a newer release published mid-roll, is said to be most likely
// that, with its first problem: it read as corruption (upgrade QA).
func TestAStoredVersionThisBuildCannotParseNamesANewerRelease(t *testing.T) {
	t.Parallel()
	e := setup(t)
	prepare(t, e, `"policy":{"max_attempts":2},`)
	ctx := context.Background()
	// Published versions are immutable (a trigger): lifted for this one
	// statement, in one transaction no other test sees the table without.
	tx, err := e.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, stmt := range []string{`alter table process_versions disable trigger user`,
		`update process_versions set document = jsonb_set(document::jsonb, '{nodes,crm,policy,retry_jitter}', '"full"')::json where process_key = 'two_step'`,
		`alter table process_versions enable trigger user`} {
		if _, err := tx.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = e.GetProcessVersion(ctx, "two_step", 1)
	if err == nil || !strings.Contains(err.Error(), "a newer Relais release most likely wrote it") || !strings.Contains(err.Error(), "/nodes/crm/policy/retry_jitter") {
		t.Errorf("reading it: %v, want it to name a newer release and the member this build does not know", err)
	}
}
