package engine

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relais/relais/engine/process"
	"github.com/relais/relais/internal/dbtest"
	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/queries"
)

// notifyWorking takes an error to report: its code and message.
const notifyWorking = `{"name":"Notify",
 "inputs":{"fields":[{"name":"code","type":"text","required":true},{"name":"message","type":"text","required":true}]},
 "outputs":{"fields":[]}}`

// routingProcess starts with crm, whose on_error is onError; notify reads
// crm's error. Its token input is secret, so a failure message echoing it
// is scrubbed before anything reads it.
func routingProcess(onError string) string {
	return `{"inputs":{"fields":[{"name":"name","type":"text","required":true},{"name":"token","type":"text","classification":"secret"}]},
	 "start":"crm","nodes":{
	 "crm":{"kind":"pull","definition":"crm","revision":1,"inputs":{"company_name":{"from":"input.name"},"token":{"from":"input.token"}},
	        "routes":{"created":"done","existing":"done"},"on_error":` + onError + `},
	 "notify":{"kind":"pull","definition":"notify","revision":1,
	        "inputs":{"code":{"from":"nodes.crm.error.code"},"message":{"from":"nodes.crm.error.message"}},"next":"done","on_error":"failed"},
	 "done":{"kind":"end"},"failed":{"kind":"end","status":"failed"}}}`
}

// define saves and snapshots a definition's Working.
func define(t testing.TB, e *Engine, key, working string) {
	t.Helper()
	ctx := context.Background()
	if _, _, err := e.SaveWorking(ctx, key, []byte(working)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Snapshot(ctx, key); err != nil {
		t.Fatal(err)
	}
}

// prepareRouting stores crm and notify and publishes doc as process
// routing.
func prepareRouting(t testing.TB, e *Engine, doc string) {
	t.Helper()
	define(t, e, "crm", crmWorking)
	define(t, e, "notify", notifyWorking)
	if _, _, err := e.PublishProcess(context.Background(), "routing", []byte(doc)); err != nil {
		t.Fatal(err)
	}
}

func startRouting(t testing.TB, e *Engine, inputs string) Instance {
	t.Helper()
	inst, _, err := e.StartInstance(context.Background(), StartRequest{ProcessKey: "routing", Inputs: json.RawMessage(inputs)})
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

// failCRM claims the instance's crm occurrence and fails it for good with
// code and message.
func failCRM(t testing.TB, e *Engine, c int64, code, message string) Reservation {
	t.Helper()
	res := claimOne(t, e, c, "w")
	if res.Node != "crm" {
		t.Fatalf("claimed node %s, want crm", res.Node)
	}
	if _, err := e.Fail(context.Background(), WorkerRef{ConsumerID: c, WorkerID: "w", Occurrence: res.ID},
		Failure{ErrorCode: code, Message: message}); err != nil {
		t.Fatal(err)
	}
	return res
}

// inputsOf returns the stored inputs of an instance's occurrence of node.
func inputsOf(t testing.TB, e *Engine, inst uuid.UUID, node string) map[string]any {
	t.Helper()
	occs := occurrences(t, e, inst)
	if len(occs[node]) != 1 {
		t.Fatalf("occurrences %v; want one of %s", occs, node)
	}
	in, err := e.unseal(occs[node][0].Inputs, occs[node][0].SealedInputs, aadOccurrenceInputs(occs[node][0].ID))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(in, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func instanceStatus(t testing.TB, e *Engine, id uuid.UUID) Instance {
	t.Helper()
	inst, err := e.GetInstance(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

// TestPullFailureRoutesByCode: a worker's error code picks the on_error
// target; the error-path node reads the code and the scrubbed message.
func TestPullFailureRoutesByCode(t *testing.T) {
	t.Parallel()
	e := setup(t)
	prepareRouting(t, e, routingProcess(`{"PAYMENT_DECLINED":"notify","*":"failed"}`))
	c := consumer(t, e)

	const token = "tok_CANARY_91f3"
	declined := startRouting(t, e, `{"name":"Acme","token":"`+token+`"}`)
	failCRM(t, e, c, "PAYMENT_DECLINED", "card declined for "+token)
	if got := instanceStatus(t, e, declined.ID); got.Status != InstanceRunning {
		t.Fatalf("instance %s after PAYMENT_DECLINED; want running at notify", got.Status)
	}
	in := inputsOf(t, e, declined.ID, "notify")
	if in["code"] != "PAYMENT_DECLINED" {
		t.Errorf("notify's code: got %v, want PAYMENT_DECLINED", in["code"])
	}
	msg, _ := in["message"].(string)
	if !strings.HasPrefix(msg, "card declined for ") || strings.Contains(msg, token) {
		t.Errorf("notify's message: got %q, want the stored message, scrubbed of the secret token", msg)
	}

	other := startRouting(t, e, `{"name":"Globex"}`)
	failCRM(t, e, c, "CRM_DOWN", "")
	got := instanceStatus(t, e, other.ID)
	if got.Status != InstanceFailed || deref(got.EndNode) != "failed" || deref(got.ErrorCode) != "CRM_DOWN" {
		t.Errorf("instance %s at %s with %s after CRM_DOWN; want failed at the \"*\" target failed with CRM_DOWN",
			got.Status, deref(got.EndNode), deref(got.ErrorCode))
	}
	if occs := occurrences(t, e, other.ID); len(occs["notify"]) != 0 {
		t.Errorf("CRM_DOWN reached notify: %v", occs)
	}
}

// TestUnmatchedCodeWithoutDefaultFailsTheInstance: a map without "*"
// fails the instance on a code it does not name, as no on_error does.
func TestUnmatchedCodeWithoutDefaultFailsTheInstance(t *testing.T) {
	t.Parallel()
	e := setup(t)
	prepareRouting(t, e, routingProcess(`{"PAYMENT_DECLINED":"notify"}`))
	c := consumer(t, e)
	inst := startRouting(t, e, `{"name":"Acme"}`)
	failCRM(t, e, c, "CRM_DOWN", "down")
	got := instanceStatus(t, e, inst.ID)
	if got.Status != InstanceFailed || deref(got.EndNode) != "crm" || deref(got.ErrorCode) != "CRM_DOWN" {
		t.Errorf("instance %s at %s with %s; want failed at crm with CRM_DOWN", got.Status, deref(got.EndNode), deref(got.ErrorCode))
	}
	if occs := occurrences(t, e, inst.ID); len(occs) != 1 {
		t.Errorf("occurrences %v; want crm only", occs)
	}
}

// TestPushErrorRoutesByCode: codes Relais makes for a push call route like
// a worker's.
func TestPushErrorRoutesByCode(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	define(t, e, "crm", crmWorking)
	define(t, e, "notify", notifyWorking)
	if _, _, err := e.PutDestination(ctx, DestinationSpec{Name: "crm-api", URL: "http://127.0.0.1:9/", MaxTimeout: 5 * time.Second}, false); err != nil {
		t.Fatal(err)
	}
	doc := `{"inputs":{"fields":[{"name":"name","type":"text","required":true}]},"start":"push","nodes":{
	 "push":{"kind":"push","definition":"crm","revision":1,"destination":"crm-api","inputs":{"company_name":{"from":"input.name"}},
	         "routes":{"created":"done","existing":"done"},"on_error":{"destination_http_503":"notify","*":"failed"}},
	 "notify":{"kind":"pull","definition":"notify","revision":1,
	         "inputs":{"code":{"from":"nodes.push.error.code"},"message":{"from":"nodes.push.error.message"}},"next":"done"},
	 "done":{"kind":"end"},"failed":{"kind":"end","status":"failed"}}}`
	if _, _, err := e.PublishProcess(ctx, "pushing", []byte(doc)); err != nil {
		t.Fatal(err)
	}
	settle := func(res PushResult) uuid.UUID {
		t.Helper()
		inst, _, err := e.StartInstance(ctx, StartRequest{ProcessKey: "pushing", Inputs: json.RawMessage(`{"name":"Acme"}`)})
		if err != nil {
			t.Fatal(err)
		}
		calls, _, err := e.ClaimPush(ctx, "replica-1", 1)
		if err != nil || len(calls) != 1 || calls[0].InstanceID != inst.ID {
			t.Fatalf("claim push: %v, %v", calls, err)
		}
		if _, err := e.SettlePush(ctx, calls[0].ID, calls[0].Attempt, res); err != nil {
			t.Fatal(err)
		}
		return inst.ID
	}

	unavailable := settle(PushResult{ErrorCode: "destination_http_503", Message: "HTTP 503 Service Unavailable"})
	if got := instanceStatus(t, e, unavailable); got.Status != InstanceRunning {
		t.Fatalf("instance %s after destination_http_503; want running at notify", got.Status)
	}
	in := inputsOf(t, e, unavailable, "notify")
	if in["code"] != "destination_http_503" || in["message"] != "HTTP 503 Service Unavailable" {
		t.Errorf("notify's inputs: got %v, want the push error's code and message", in)
	}

	invalid := settle(PushResult{Outputs: json.RawMessage(`{"result":"maybe"}`)})
	got := instanceStatus(t, e, invalid)
	if got.Status != InstanceFailed || deref(got.EndNode) != "failed" || deref(got.ErrorCode) != "invalid_outputs" {
		t.Errorf("instance %s at %s with %s after invalid outputs; want failed at failed with invalid_outputs",
			got.Status, deref(got.EndNode), deref(got.ErrorCode))
	}
}

// TestTimerCodeRoutesByCode: deadline_exceeded, made by the timer, routes
// by the map too.
func TestTimerCodeRoutesByCode(t *testing.T) {
	t.Parallel()
	clock := &testClock{}
	e := New(dbtest.Pool(t), clock.options(t))
	define(t, e, "crm", crmWorking)
	define(t, e, "notify", notifyWorking)
	doc := strings.Replace(routingProcess(`{"deadline_exceeded":"notify","*":"failed"}`),
		`"routes":{"created":"done"`, `"policy":{"deadline":"PT1H"},"routes":{"created":"done"`, 1)
	if _, _, err := e.PublishProcess(context.Background(), "routing", []byte(doc)); err != nil {
		t.Fatal(err)
	}
	inst := startRouting(t, e, `{"name":"Acme"}`)
	clock.advance(time.Hour)
	if n, err := e.RunTimers(context.Background()); err != nil || n != 1 {
		t.Fatalf("timers settled %d, %v; want 1", n, err)
	}
	in := inputsOf(t, e, inst.ID, "notify")
	if in["code"] != "deadline_exceeded" || !strings.Contains(in["message"].(string), "deadline") {
		t.Errorf("notify's inputs: got %v, want deadline_exceeded and the timer's message", in)
	}
}

// TestDeadlineSaysTheRetryItCut: an occurrence whose retry was due after
// its deadline fails deadline_exceeded at the deadline, its message naming
// the worker's own code, which the routing code replaces.
func TestDeadlineSaysTheRetryItCut(t *testing.T) {
	t.Parallel()
	clock := &testClock{}
	e := New(dbtest.Pool(t), clock.options(t))
	define(t, e, "crm", crmWorking)
	define(t, e, "notify", notifyWorking)
	doc := strings.Replace(routingProcess(`{"deadline_exceeded":"notify","*":"failed"}`),
		`"routes":{"created":"done"`, `"policy":{"deadline":"PT1H"},"routes":{"created":"done"`, 1)
	if _, _, err := e.PublishProcess(context.Background(), "routing", []byte(doc)); err != nil {
		t.Fatal(err)
	}
	inst := startRouting(t, e, `{"name":"Acme"}`)
	c := consumer(t, e)
	res := claimOne(t, e, c, "w")
	later := 2 * time.Hour
	if _, err := e.Fail(context.Background(), WorkerRef{ConsumerID: c, WorkerID: "w", Occurrence: res.ID},
		Failure{ErrorCode: "GATEWAY_DOWN", Message: "the gateway is down", Retryable: true, RetryDelay: &later}); err != nil {
		t.Fatal(err)
	}
	clock.advance(time.Hour)
	if n, err := e.RunTimers(context.Background()); err != nil || n != 1 {
		t.Fatalf("timers settled %d, %v; want 1", n, err)
	}
	in := inputsOf(t, e, inst.ID, "notify")
	if in["code"] != "deadline_exceeded" || !strings.HasSuffix(in["message"].(string), "; its last attempt had failed GATEWAY_DOWN, its retry due only after the deadline") {
		t.Errorf("notify's inputs: got %v, want deadline_exceeded and the worker's code in the message", in)
	}
}

// publishBornFailing publishes as key a process whose first node (strict)
// fails from birth on any name longer than 3 characters, its error path
// entering notify with the error's code and message.
func publishBornFailing(t testing.TB, e *Engine, key string) {
	t.Helper()
	define(t, e, "notify", notifyWorking)
	define(t, e, "strict", `{"name":"Strict","inputs":{"fields":[{"name":"company_name","type":"text","required":true,"max_length":3}]},"outputs":{"fields":[]}}`)
	doc := `{"inputs":{"fields":[{"name":"name","type":"text","required":true}]},"start":"strict","nodes":{
	 "strict":{"kind":"pull","definition":"strict","revision":1,"inputs":{"company_name":{"from":"input.name"}},"next":"done",
	           "on_error":{"invalid_inputs":"notify"}},
	 "notify":{"kind":"pull","definition":"notify","revision":1,
	           "inputs":{"code":{"from":"nodes.strict.error.code"},"message":{"from":"nodes.strict.error.message"}},"next":"done"},
	 "done":{"kind":"end"}}}`
	if _, _, err := e.PublishProcess(context.Background(), key, []byte(doc)); err != nil {
		t.Fatal(err)
	}
}

// TestFailedFromBirthFeedsItsError: an occurrence whose inputs break the
// revision fails when created, in the transaction that started the
// instance, and the node on its error path reads invalid_inputs and the
// pointers.
func TestFailedFromBirthFeedsItsError(t *testing.T) {
	t.Parallel()
	e := setup(t)
	define(t, e, "crm", crmWorking)
	publishBornFailing(t, e, "routing")
	inst := startRouting(t, e, `{"name":"Acme Corporation"}`)
	in := inputsOf(t, e, inst.ID, "notify")
	if in["code"] != "invalid_inputs" || !strings.Contains(in["message"].(string), "/company_name") {
		t.Errorf("notify's inputs: got %v, want invalid_inputs and a message naming /company_name", in)
	}
}

// A protected field's violation names the field, not the constraint the
// value broke: "at most 3 characters" of a secret tells operators its
// length; a normal field's still says it.
func TestFailedFromBirthDoesNotDescribeProtectedValues(t *testing.T) {
	t.Parallel()
	e := setup(t)
	define(t, e, "crm", crmWorking)
	define(t, e, "notify", notifyWorking)
	define(t, e, "strict", `{"name":"Strict","inputs":{"fields":[{"name":"company_name","type":"text","required":true,"max_length":3,"classification":"secret"},
		{"name":"label","type":"text","required":true,"max_length":3}]},"outputs":{"fields":[]}}`)
	doc := `{"inputs":{"fields":[{"name":"name","type":"text","required":true},{"name":"secret_name","type":"text","required":true,"classification":"secret"}]},"start":"strict","nodes":{
	 "strict":{"kind":"pull","definition":"strict","revision":1,"inputs":{"company_name":{"from":"input.secret_name"},"label":{"from":"input.name"}},"next":"done",
	           "on_error":{"invalid_inputs":"notify"}},
	 "notify":{"kind":"pull","definition":"notify","revision":1,
	           "inputs":{"code":{"from":"nodes.strict.error.code"},"message":{"from":"nodes.strict.error.message"}},"next":"done"},
	 "done":{"kind":"end"}}}`
	if _, _, err := e.PublishProcess(context.Background(), "routing", []byte(doc)); err != nil {
		t.Fatal(err)
	}
	inst := startRouting(t, e, `{"name":"Acme Corporation","secret_name":"Acme Corporation"}`)
	occs, err := e.InstanceOccurrences(context.Background(), inst.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(occs) != 1 || occs[0].Node != "strict" {
		t.Fatalf("occurrences %v, want strict's alone: a protected value's failure is not routed (on_error names notify)", occs)
	}
	msg := deref(occs[0].ErrorMessage)
	if !strings.Contains(msg, "/company_name: does not satisfy its contract (a protected value") || strings.Contains(msg, "/company_name: must") ||
		!strings.Contains(msg, "/label: must be at most 3") {
		t.Errorf("strict's message %q: want /company_name named without its constraint, /label with it", msg)
	}
	got, err := e.GetInstance(context.Background(), inst.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != InstanceFailed || deref(got.EndNode) != "strict" || deref(got.ErrorCode) != CodeInvalidInputs {
		t.Errorf("instance %s at %v (%v), want failed at strict with invalid_inputs", got.Status, deref(got.EndNode), deref(got.ErrorCode))
	}
}

// A protected value that breaks a node's contract stops the instance
// there whatever route on_error names (held when on_error holds): routed,
// the failure would be an oracle, a designer chaining nodes whose
// revisions constrain the value ("^A", "^B", …) reading it off the
// instance's path. A normal value's failure is routed as before.
func TestProtectedValueFailureIsNotRouted(t *testing.T) {
	t.Parallel()
	e := setup(t)
	define(t, e, "notify", notifyWorking)
	define(t, e, "probe", `{"name":"Probe","inputs":{"fields":[{"name":"v","type":"text","required":true,"pattern":"^A","classification":"secret"}]},"outputs":{"fields":[]}}`)
	publish := func(key, onError string) {
		t.Helper()
		doc := `{"inputs":{"fields":[{"name":"pin","type":"text","required":true,"classification":"secret"}]},"start":"a","nodes":{
		 "a":{"kind":"pull","definition":"probe","revision":1,"inputs":{"v":{"from":"input.pin"}},"next":"done","on_error":` + onError + `},
		 "b":{"kind":"pull","definition":"probe","revision":1,"inputs":{"v":{"from":"input.pin"}},"next":"done"},
		 "done":{"kind":"end"}}}`
		if _, _, err := e.PublishProcess(context.Background(), key, []byte(doc)); err != nil {
			t.Fatal(err)
		}
	}
	publish("leak", `{"invalid_inputs":"b","*":"done"}`)
	publish("leak_held", `{"invalid_inputs":"hold","*":"b"}`)
	// A normal field failing on purpose beside the protected one: routed,
	// whether the node failed would again depend on the protected value.
	define(t, e, "mixed", `{"name":"Mixed","inputs":{"fields":[{"name":"n","type":"text","required":true,"pattern":"^A"},
		{"name":"v","type":"text","required":true,"pattern":"^[^A]","classification":"secret"}]},"outputs":{"fields":[]}}`)
	mixed := `{"inputs":{"fields":[{"name":"pin","type":"text","required":true,"classification":"secret"},{"name":"n","type":"text","required":true}]},"start":"a","nodes":{
	 "a":{"kind":"pull","definition":"mixed","revision":1,"inputs":{"n":{"from":"input.n"},"v":{"from":"input.pin"}},"next":"done","on_error":{"invalid_inputs":"b"}},
	 "b":{"kind":"pull","definition":"probe","revision":1,"inputs":{"v":{"from":"input.pin"}},"next":"done"},
	 "done":{"kind":"end"}}}`
	if _, _, err := e.PublishProcess(context.Background(), "leak_mixed", []byte(mixed)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ process, status string }{{"leak", InstanceFailed}, {"leak_held", InstanceHeld}, {"leak_mixed", InstanceFailed}} {
		inputs := `{"pin":"PIN-TOP-SECRET"}`
		if c.process == "leak_mixed" {
			inputs = `{"pin":"PIN-TOP-SECRET","n":"x"}`
		}
		inst, _, err := e.StartInstance(context.Background(), StartRequest{ProcessKey: c.process, Inputs: []byte(inputs)})
		if err != nil {
			t.Fatal(err)
		}
		occs, err := e.InstanceOccurrences(context.Background(), inst.ID)
		if err != nil {
			t.Fatal(err)
		}
		got, err := e.GetInstance(context.Background(), inst.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(occs) != 1 || got.Status != c.status {
			t.Errorf("%s: %d occurrences, instance %s; want a's alone and the instance %s", c.process, len(occs), got.Status, c.status)
		}
		// Reconciling it (a replica recovering the instance) routes it
		// no further either.
		if err := e.reconcile(context.Background(), inst.ID); err != nil {
			t.Fatal(err)
		}
		if occs, _ := e.InstanceOccurrences(context.Background(), inst.ID); len(occs) != 1 {
			t.Errorf("%s after reconcile: %d occurrences, want 1", c.process, len(occs))
		}
	}
}

// TestErrorBindingConstraintsAtCreation: bindings are checked by type at
// publish, constraints when the occurrence is created: an error code too
// long for the target fails the reading node from birth.
func TestErrorBindingConstraintsAtCreation(t *testing.T) {
	t.Parallel()
	e := setup(t)
	define(t, e, "crm", crmWorking)
	define(t, e, "notify", strings.Replace(notifyWorking, `{"name":"code","type":"text","required":true}`,
		`{"name":"code","type":"text","required":true,"max_length":8}`, 1))
	if _, _, err := e.PublishProcess(context.Background(), "routing", []byte(routingProcess(`"notify"`))); err != nil {
		t.Fatal(err)
	}
	c := consumer(t, e)
	inst := startRouting(t, e, `{"name":"Acme"}`)
	failCRM(t, e, c, "PAYMENT_DECLINED", "declined")
	occs := occurrences(t, e, inst.ID)
	if len(occs["notify"]) != 1 || occs["notify"][0].Status != StatusFailed || deref(occs["notify"][0].ErrorCode) != "invalid_inputs" {
		t.Fatalf("notify: %v; want failed from birth with invalid_inputs", occs["notify"])
	}
	if got := instanceStatus(t, e, inst.ID); got.Status != InstanceFailed || deref(got.EndNode) != "failed" || deref(got.ErrorCode) != "invalid_inputs" {
		t.Errorf("instance %s at %s with %s; want failed at notify's on_error failed with invalid_inputs", got.Status, deref(got.EndNode), deref(got.ErrorCode))
	}
}

// TestHoldMakesTheInstanceHeld: a failure routed to hold leaves the
// instance held at the failed node, the occurrence failed with its error;
// nothing advances a held instance, and a stop cancels it.
func TestHoldMakesTheInstanceHeld(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	prepareRouting(t, e, routingProcess(`{"PAYMENT_DECLINED":"notify","CRM_LOCKED":"hold","*":"failed"}`))
	c := consumer(t, e)
	inst := startRouting(t, e, `{"name":"Acme"}`)
	res := failCRM(t, e, c, "CRM_LOCKED", "the record is locked")

	check := func(when string) {
		t.Helper()
		got := instanceStatus(t, e, inst.ID)
		if got.Status != InstanceHeld || deref(got.ErrorCode) != "CRM_LOCKED" || got.EndedAt != nil || got.EndNode != nil {
			t.Fatalf("%s: instance %s, error %s, ended %v at %s; want held with CRM_LOCKED, not ended",
				when, got.Status, deref(got.ErrorCode), got.EndedAt, deref(got.EndNode))
		}
		occs := occurrences(t, e, inst.ID)
		if len(occs) != 1 || len(occs["crm"]) != 1 {
			t.Fatalf("%s: occurrences %v; want crm only", when, occs)
		}
		crm := occs["crm"][0]
		if crm.Status != StatusFailed || deref(crm.ErrorCode) != "CRM_LOCKED" || deref(crm.ErrorMessage) != "the record is locked" {
			t.Fatalf("%s: crm %s with %s %q; want failed with its error kept", when, crm.Status, deref(crm.ErrorCode), deref(crm.ErrorMessage))
		}
	}
	check("after the failure")

	// Nothing advances it: recovery, timers, a late report.
	if err := e.reconcile(ctx, inst.ID); err != nil {
		t.Fatal(err)
	}
	if n, err := e.RunTimers(ctx); err != nil || n != 0 {
		t.Fatalf("timers settled %d, %v; want nothing", n, err)
	}
	ref := WorkerRef{ConsumerID: c, WorkerID: "w", Occurrence: res.ID}
	if _, err := e.Complete(ctx, ref, json.RawMessage(`{"result":"created","crm_id":"C"}`)); !fault.HasCode(err, "already_settled") {
		t.Fatalf("late completion: %v; want already_settled", err)
	}
	if _, err := e.Fail(ctx, ref, Failure{ErrorCode: "OTHER"}); !fault.HasCode(err, "already_settled") {
		t.Fatalf("late failure: %v; want already_settled", err)
	}
	check("after recovery, timers and late reports")

	held, err := e.ListInstances(ctx, InstanceFilter{Status: InstanceHeld, Limit: 10})
	if err != nil || len(held) != 1 || held[0].ID != inst.ID {
		t.Fatalf("held instances: %v, %v; want this one", held, err)
	}

	stopped, err := e.StopInstance(ctx, inst.ID)
	if err != nil {
		t.Fatalf("stopping a held instance: %v", err)
	}
	if stopped.Status != InstanceCancelled || stopped.EndedAt == nil {
		t.Fatalf("after stop: %s, ended %v; want cancelled and ended", stopped.Status, stopped.EndedAt)
	}
	if occs := occurrences(t, e, inst.ID); occs["crm"][0].Status != StatusFailed {
		t.Errorf("crm after stop: %s; want still failed", occs["crm"][0].Status)
	}
	if again, err := e.StopInstance(ctx, inst.ID); err != nil || again.Status != InstanceCancelled {
		t.Errorf("stopping again: %s, %v; want cancelled, no error", again.Status, err)
	}
}

// TestHoldFromBirth: an occurrence failed at creation holds the instance
// as it starts, on a string on_error too.
func TestHoldFromBirth(t *testing.T) {
	t.Parallel()
	e := setup(t)
	define(t, e, "strict", `{"name":"Strict","inputs":{"fields":[{"name":"company_name","type":"text","required":true,"max_length":3}]},"outputs":{"fields":[]}}`)
	doc := `{"inputs":{"fields":[{"name":"name","type":"text","required":true}]},"start":"strict","nodes":{
	 "strict":{"kind":"pull","definition":"strict","revision":1,"inputs":{"company_name":{"from":"input.name"}},"next":"done","on_error":"hold"},
	 "done":{"kind":"end"}}}`
	if _, _, err := e.PublishProcess(context.Background(), "routing", []byte(doc)); err != nil {
		t.Fatal(err)
	}
	inst := startRouting(t, e, `{"name":"Acme Corporation"}`)
	if inst.Status != InstanceHeld || deref(inst.ErrorCode) != "invalid_inputs" {
		t.Fatalf("started instance %s with %s; want held with invalid_inputs", inst.Status, deref(inst.ErrorCode))
	}
}

// TestPushResultAfterTheDeadlineIsNotTaken: a destination's answer that
// comes after the occurrence's deadline fails it as deadline_exceeded,
// before the timer got to it as after: the deadline wins either way.
func TestPushResultAfterTheDeadlineIsNotTaken(t *testing.T) {
	t.Parallel()
	clock := &testClock{}
	e := New(dbtest.Pool(t), clock.options(t))
	ctx := context.Background()
	define(t, e, "crm", crmWorking)
	if _, _, err := e.PutDestination(ctx, DestinationSpec{Name: "crm-api", URL: "http://127.0.0.1:9/", MaxTimeout: 5 * time.Second}, false); err != nil {
		t.Fatal(err)
	}
	doc := `{"inputs":{"fields":[{"name":"name","type":"text","required":true}]},"start":"push","nodes":{
	 "push":{"kind":"push","definition":"crm","revision":1,"destination":"crm-api","inputs":{"company_name":{"from":"input.name"}},
	         "policy":{"deadline":"PT1H"},"routes":{"created":"done","existing":"done"},"on_error":{"*":"failed"}},
	 "done":{"kind":"end"},"failed":{"kind":"end","status":"failed"}}}`
	if _, _, err := e.PublishProcess(ctx, "pushing", []byte(doc)); err != nil {
		t.Fatal(err)
	}
	inst, _, err := e.StartInstance(ctx, StartRequest{ProcessKey: "pushing", Inputs: json.RawMessage(`{"name":"Acme"}`)})
	if err != nil {
		t.Fatal(err)
	}
	calls, _, err := e.ClaimPush(ctx, "replica-1", 1)
	if err != nil || len(calls) != 1 {
		t.Fatalf("claim push: %v, %v", calls, err)
	}
	clock.advance(time.Hour + time.Second)
	code, err := e.SettlePush(ctx, calls[0].ID, calls[0].Attempt, PushResult{Outputs: json.RawMessage(`{"result":"created","crm_id":"C"}`)})
	if err != nil || code != CodeDeadlineExceeded {
		t.Fatalf("a result past the deadline: code %q, %v; want deadline_exceeded", code, err)
	}
	got := instanceStatus(t, e, inst.ID)
	if got.Status != InstanceFailed || deref(got.EndNode) != "failed" || deref(got.ErrorCode) != CodeDeadlineExceeded {
		t.Errorf("instance %s at %s with %s; want failed at failed with deadline_exceeded", got.Status, deref(got.EndNode), deref(got.ErrorCode))
	}
}

// A document identical to a published version is that version, even when
// a rule added since refuses it (here, a normal process input feeding a
// secret field): publishing stays idempotent by digest, and a new document
// is judged by the rule.
func TestRepublishingAVersionARuleNowRefuses(t *testing.T) {
	t.Parallel()
	e := setup(t)
	define(t, e, "strict", `{"name":"Strict","inputs":{"fields":[{"name":"company_name","type":"text","required":true,"classification":"secret"}]},"outputs":{"fields":[]}}`)
	doc := []byte(`{"inputs":{"fields":[{"name":"name","type":"text","required":true}]},"start":"strict","nodes":{
	 "strict":{"kind":"pull","definition":"strict","revision":1,"inputs":{"company_name":{"from":"input.name"}},"next":"done"},
	 "done":{"kind":"end"}}}`)
	if _, _, err := e.PublishProcess(context.Background(), "lax", doc); !fault.HasCode(err, "invalid_process") {
		t.Fatalf("publishing a normal input feeding a secret field: %v, want invalid_process", err)
	}
	// As if published before the rule.
	p, _ := process.Parse(doc)
	if err := e.q.ProcessEnsure(context.Background(), "lax"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.q.ProcessVersionInsert(context.Background(), queries.ProcessVersionInsertParams{ProcessKey: "lax", Version: 1, Digest: p.Digest(), Document: p.Canonical()}); err != nil {
		t.Fatal(err)
	}
	pv, created, err := e.PublishProcess(context.Background(), "lax", doc)
	if err != nil || created || pv.Version != 1 {
		t.Fatalf("the same document again: version %d, created %v, %v; want version 1 as it is", pv.Version, created, err)
	}
}

// TestARefusedCompletionSaysNoProtectedConstraint: a completion's outputs
// that break a protected field's constraint are refused naming the field,
// not the constraint (a worker's report of the refusal reaches operators:
// "at most 4 characters" tells a length); a normal field's keeps it.
func TestARefusedCompletionSaysNoProtectedConstraint(t *testing.T) {
	t.Parallel()
	clock := &testClock{}
	e := New(dbtest.Pool(t), clock.options(t))
	define(t, e, "crm", strings.Replace(crmWorking, `{"name":"crm_id","type":"text","required":true}`,
		`{"name":"crm_id","type":"text","required":true},{"name":"ref","type":"text","classification":"sensitive","max_length":4},{"name":"note","type":"text","max_length":2}`, 1))
	define(t, e, "notify", notifyWorking)
	if _, _, err := e.PublishProcess(context.Background(), "routing", []byte(routingProcess(`{"*":"notify"}`))); err != nil {
		t.Fatal(err)
	}
	startRouting(t, e, `{"name":"Acme"}`)
	c := consumer(t, e)
	res := claimOne(t, e, c, "w")
	_, err := e.Complete(context.Background(), WorkerRef{ConsumerID: c, WorkerID: "w", Occurrence: res.ID},
		json.RawMessage(`{"result":"created","crm_id":"C","ref":"ABCDEFG","note":"long"}`))
	var fe *fault.Error
	if !errors.As(err, &fe) || fe.Code != CodeInvalidOutputs {
		t.Fatalf("complete: %v; want invalid_outputs", err)
	}
	got := map[string]string{}
	for _, v := range fe.Errors {
		got[v.Path] = v.Message
	}
	if got["/outputs/ref"] != protectedViolation || !strings.Contains(got["/outputs/note"], "2") {
		t.Errorf("violations %v; want ref's constraint unsaid, note's said", got)
	}
}
