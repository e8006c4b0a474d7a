package openapi_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
	validator "github.com/pb33f/libopenapi-validator"

	"github.com/relais/relais/internal/relaistest"
)

// A request case: a body the server either takes or always refuses.
type requestCase struct {
	name         string
	method, path string
	token        string
	body         string
	refused      bool // the server always refuses it, and so must the document
	// stricter: the server takes it, and the document deliberately
	// refuses it (one of deliberatelyStricter).
	stricter bool
}

// deliberatelyStricter are the request bodies the server takes and the
// document refuses on purpose, each for an explicit null the server reads
// as absent in a member that takes no value at all, which the document
// leaves out: declared null-only, the member would be typed never in a
// generated client's request bodies (openapi-fetch's Writable<> makes it
// ?: never), and a body of the client's own generated type would not fit
// them. TestRequestSchemasMatchTheServer sends each (the server must still
// take it, the document still refuse it); TestRecordedExchanges, which
// replays that test's traffic too, does not report them.
var deliberatelyStricter = map[string]string{
	listItemsRequiredNull:   "list items take no required (FieldItems)",
	completionErrorCodeNull: "a completion takes no error_code (SettleCompletion), so that an item with outputs and an error code does not compile",
	failureOutputsNull:      "a failure takes no outputs (SettleFailure), likewise",
}

const (
	listItemsRequiredNull   = `{"name": "Check", "inputs": {"fields": [{"name": "a", "type": "list", "items": {"type": "text", "required": null}}]}, "outputs": {"fields": []}}`
	completionErrorCodeNull = `{"worker_id": "w", "items": [{"id": "0193a5c4-6b2e-7c3d-9e4f-5a6b7c8d9e77", "outputs": {"crm_id": "1"}, "error_code": null, "message": "ignored"}]}`
	failureOutputsNull      = `{"worker_id": "w", "items": [{"id": "0193a5c4-6b2e-7c3d-9e4f-5a6b7c8d9e77", "outputs": null, "error_code": "CRM_DOWN"}]}`
)

// TestRequestSchemasMatchTheServer sends bodies to a server and holds the
// document's request schemas to what it does: a body it always refuses (a
// Working without inputs, an unknown field type, a grant without
// definition, a batch item that both completes and fails) the document
// refuses too, so that a generated client's types do not offer it; a body
// it takes, the document takes (null where it reads null as absent
// included), so that a client validating its requests never refuses what
// the server would have done, but for the stricter cases, each an explicit
// null that means nothing. Every answer validates against the document.
func TestRequestSchemasMatchTheServer(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	v := newValidator(t)
	crm := env.Definition("add_company_to_crm.yaml")
	consumer := env.Consumer("doc-check", crm)
	env.Process("doc_check", map[string]any{"inputs": map[string]any{"fields": []any{}}, "start": "done",
		"nodes": map[string]any{"done": map[string]any{"kind": "end"}}})

	working := func(name string, refused bool, body string) requestCase {
		return requestCase{"working: " + name, "PUT", "/api/v1/definitions/doc.check/working?dry_run=true", env.Designer, body, refused, false}
	}
	field := func(name string, refused bool, f string) requestCase {
		return working("field "+name, refused, `{"name": "Check", "inputs": {"fields": [`+f+`]}, "outputs": {"fields": []}}`)
	}
	process := func(name string, refused bool, body string) requestCase {
		return requestCase{"process: " + name, "POST", "/api/v1/processes/doc_check/versions?dry_run=true", env.Designer, body, refused, false}
	}
	node := func(name string, refused bool, n string) requestCase {
		return process("node "+name, refused, `{"inputs": {"fields": [{"name": "name", "type": "text", "required": true}]}, "start": "n", "nodes": {"n": `+n+`, "done": {"kind": "end"}}}`)
	}
	pull := func(extra string) string {
		return `{"kind": "pull", "definition": "add_company_to_crm", "revision": 1, "routes": {"created": "done", "existing": "done"}, "inputs": {"company_name": {"from": "input.name"}, "country": {"value": "FR"}, "source": {"value": "web"}}` + extra + `}`
	}
	consumers := 0
	grant := func(name string, refused bool, g string) requestCase {
		consumers++
		return requestCase{"grant: " + name, "POST", "/api/v1/consumers", env.Admin, fmt.Sprintf(`{"name": "doc-check-%d", "grants": [%s]}`, consumers, g), refused, false}
	}
	settle := func(name string, refused bool, item string) requestCase {
		return requestCase{"settle: " + name, "POST", "/api/v1/pull/settle", consumer,
			`{"worker_id": "w", "items": [` + strings.ReplaceAll(item, "ID", uuid.NewString()) + `]}`, refused, false}
	}
	// A count (no confirm_count): nothing is applied.
	bulk := func(name string, refused bool, body string) requestCase {
		return requestCase{"bulk action: " + name, "POST", "/api/v1/instances/actions", env.Operator, body, refused, false}
	}
	stricter := func(c requestCase) requestCase {
		if _, ok := deliberatelyStricter[c.body]; !ok {
			t.Fatalf("%s: its body is not one of deliberatelyStricter, which TestRecordedExchanges would then report", c.name)
		}
		c.stricter = true
		return c
	}
	env.Process("doc_crm", relaistest.CRMProcess(map[string]any{"max_attempts": 5}))
	start := func(name string, refused bool, body string) requestCase {
		return requestCase{"start: " + name, "POST", "/api/v1/processes/doc_check/instances", env.Operator, body, refused, false}
	}
	fetch := func(name string, refused bool, extra string) requestCase {
		return requestCase{"fetch: " + name, "POST", "/api/v1/pull/fetch-and-lock", consumer,
			`{"worker_id": "w", "subscriptions": [{"definition": "add_company_to_crm"}]` + extra + `}`, refused, false}
	}
	// Settlements of one occurrence each: {reserved} is a fresh one the
	// worker w holds.
	fail := func(name string, refused bool, body string) requestCase {
		return requestCase{"fail: " + name, "POST", "/api/v1/pull/occurrences/{reserved}/fail", consumer, body, refused, false}
	}
	deferral := func(name string, refused bool, body string) requestCase {
		return requestCase{"defer: " + name, "POST", "/api/v1/pull/occurrences/{reserved}/defer", consumer, body, refused, false}
	}
	reserve := func() string {
		t.Helper()
		env.Must(201, "POST", "/api/v1/processes/doc_crm/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": "Acme"}})
		got := env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", consumer, map[string]any{"worker_id": "w", "max_tasks": 1,
			"subscriptions": []any{map[string]any{"definition": "add_company_to_crm"}}}).JSON(t)["occurrences"].([]any)
		if len(got) != 1 {
			t.Fatalf("reserving an occurrence: %v", got)
		}
		return got[0].(map[string]any)["id"].(string)
	}
	release := func(name string, refused bool, body string) requestCase {
		return requestCase{"release: " + name, "POST", "/api/v1/definitions/" + crm + "/releases", env.Designer, body, refused, false}
	}
	cases := []requestCase{
		working("minimal", false, `{"name": "Check", "inputs": {"fields": []}, "outputs": {"fields": []}}`),
		working("nulls for absent members", false, `{"name": "Check", "description": null, "routing_output": null, "inputs": {"fields": []}, "outputs": {"fields": []}}`),
		working("routing output", false, `{"name": "Check", "inputs": {"fields": []}, "outputs": {"fields": [{"name": "result", "type": "choice", "required": true, "values": ["created", "existing"]}]}, "routing_output": "result"}`),
		working("without inputs", true, `{"name": "Check", "outputs": {"fields": []}}`),
		working("without outputs", true, `{"name": "Check", "inputs": {"fields": []}}`),
		working("without name", true, `{"inputs": {"fields": []}, "outputs": {"fields": []}}`),
		working("name null", true, `{"name": null, "inputs": {"fields": []}, "outputs": {"fields": []}}`),
		working("name empty", true, `{"name": "", "inputs": {"fields": []}, "outputs": {"fields": []}}`),
		working("inputs null", true, `{"name": "Check", "inputs": null, "outputs": {"fields": []}}`),
		working("contract without fields", true, `{"name": "Check", "inputs": {}, "outputs": {"fields": []}}`),
		field("of every type", false, `{"name": "a", "type": "text", "required": true, "classification": "sensitive", "format": "email", "min_length": 1, "max_length": 80, "pattern": "^.+$", "description": "A"},
			{"name": "b", "type": "integer", "minimum": 0, "maximum": 10}, {"name": "c", "type": "number"}, {"name": "d", "type": "boolean"},
			{"name": "e", "type": "date"}, {"name": "f", "type": "datetime", "classification": "secret"}, {"name": "g", "type": "choice", "values": ["x", "y"]},
			{"name": "h", "type": "object", "fields": [{"name": "i", "type": "text", "format": "uri"}]},
			{"name": "j", "type": "list", "items": {"type": "text", "format": "uuid", "classification": "normal"}, "min_items": 0, "max_items": 3}`),
		field("with nulls for absent members", false, `{"name": "a", "type": "text", "required": null, "classification": null, "description": null, "format": null, "min_length": null, "max_length": null, "pattern": null, "items": null, "values": null, "fields": null, "minimum": null, "maximum": null, "min_items": null, "max_items": null}`),
		// The server reads it as absent; the document, deliberately
		// stricter, leaves required out of list items (see
		// deliberatelyStricter).
		stricter(working("field list items with required null", false, listItemsRequiredNull)),
		field("without name", true, `{"type": "text"}`),
		field("without type", true, `{"name": "a"}`),
		field("type null", true, `{"name": "a", "type": null}`),
		field("type string", true, `{"name": "a", "type": "string"}`),
		field("classification confidential", true, `{"name": "a", "type": "text", "classification": "confidential"}`),
		field("format date", true, `{"name": "a", "type": "text", "format": "date"}`),
		field("name in capitals", true, `{"name": "Name", "type": "text"}`),
		field("required a string", true, `{"name": "a", "type": "text", "required": "yes"}`),
		field("choice without values", true, `{"name": "a", "type": "choice"}`),
		field("choice with no values", true, `{"name": "a", "type": "choice", "values": []}`),
		field("choice with a value twice", true, `{"name": "a", "type": "choice", "values": ["x", "x"]}`),
		field("object without fields", true, `{"name": "a", "type": "object"}`),
		field("list without items", true, `{"name": "a", "type": "list"}`),
		field("list items with a name", true, `{"name": "a", "type": "list", "items": {"name": "b", "type": "text"}}`),
		field("list items required", true, `{"name": "a", "type": "list", "items": {"type": "text", "required": true}}`),
		field("negative min_length", true, `{"name": "a", "type": "text", "min_length": -1}`),

		process("end only", false, `{"inputs": {"fields": []}, "start": "done", "nodes": {"done": {"kind": "end"}}}`),
		process("nulls for absent members", false, `{"name": null, "description": null, "inputs": {"fields": []}, "start": "done", "nodes": {"done": {"kind": "end", "status": null, "definition": null, "policy": null}}}`),
		process("without start", true, `{"inputs": {"fields": []}, "nodes": {"done": {"kind": "end"}}}`),
		process("start null", true, `{"inputs": {"fields": []}, "start": null, "nodes": {"done": {"kind": "end"}}}`),
		process("without nodes", true, `{"inputs": {"fields": []}, "start": "done"}`),
		process("no nodes", true, `{"inputs": {"fields": []}, "start": "done", "nodes": {}}`),
		process("without inputs", true, `{"start": "done", "nodes": {"done": {"kind": "end"}}}`),
		process("node name in capitals", true, `{"inputs": {"fields": []}, "start": "Done", "nodes": {"Done": {"kind": "end"}}}`),
		node("pull", false, pull(`, "policy": {"max_attempts": 3, "retry_delay": "PT1S", "priority": 5, "deadline": null}, "on_error": {"CRM_DOWN": "hold", "*": "done"}, "next": null, "destination": null, "status": null`)),
		node("binding from null, a value", false, `{"kind": "pull", "definition": "add_company_to_crm", "revision": 1, "routes": {"created": "done", "existing": "done"}, "inputs": {"company_name": {"from": "input.name", "value": null}, "country": {"from": null, "value": "FR"}, "source": {"value": "web"}}}`),
		node("kind missing", true, `{"definition": "add_company_to_crm", "revision": 1, "routes": {"created": "done", "existing": "done"}}`),
		node("kind task", true, `{"kind": "task", "definition": "add_company_to_crm", "revision": 1, "routes": {"created": "done", "existing": "done"}}`),
		node("pull without revision", true, `{"kind": "pull", "definition": "add_company_to_crm", "next": "done"}`),
		node("pull without definition", true, `{"kind": "pull", "revision": 1, "routes": {"created": "done", "existing": "done"}}`),
		node("pull with a status", true, pull(`, "status": "completed"`)),
		node("pull with a destination", true, pull(`, "destination": "hook"`)),
		node("end with a definition", true, `{"kind": "end", "definition": "add_company_to_crm"}`),
		node("end with status ok", true, `{"kind": "end", "status": "ok"}`),
		node("binding with from and value", true, `{"kind": "pull", "definition": "add_company_to_crm", "revision": 1, "routes": {"created": "done", "existing": "done"}, "inputs": {"country": {"from": "input.c", "value": "FR"}}}`),
		node("binding with neither", true, `{"kind": "pull", "definition": "add_company_to_crm", "revision": 1, "routes": {"created": "done", "existing": "done"}, "inputs": {"country": {}}}`),
		node("binding value null", true, `{"kind": "pull", "definition": "add_company_to_crm", "revision": 1, "routes": {"created": "done", "existing": "done"}, "inputs": {"country": {"value": null}}}`),
		node("on_error empty", true, pull(`, "on_error": {}`)),
		node("on_error code malformed", true, pull(`, "on_error": {"no code": "done"}`)),
		node("priority 10", true, pull(`, "policy": {"priority": 10}`)),

		grant("all revisions of a key", false, `{"definition": "add_company_to_crm", "revisions": "all"}`),
		grant("listed revisions of a key", false, `{"definition": "add_company_to_crm", "revisions": [1]}`),
		grant("a pattern", false, `{"definition": "crm.*"}`),
		grant("a pattern, all", false, `{"definition": "*", "revisions": "all"}`),
		grant("without definition", true, `{"revisions": "all"}`),
		grant("a key without revisions", true, `{"definition": "add_company_to_crm"}`),
		grant("revisions null", true, `{"definition": "add_company_to_crm", "revisions": null}`),
		grant("a pattern's revisions null", true, `{"definition": "crm.*", "revisions": null}`),
		grant("a pattern with a list", true, `{"definition": "crm.*", "revisions": [1]}`),
		grant("no revisions", true, `{"definition": "add_company_to_crm", "revisions": []}`),
		grant("a revision twice", true, `{"definition": "add_company_to_crm", "revisions": [1, 1]}`),
		grant("revision 0", true, `{"definition": "add_company_to_crm", "revisions": [0]}`),

		settle("a completion", false, `{"id": "ID", "outputs": {}}`),
		settle("a completion with a message", false, `{"id": "ID", "outputs": {"crm_id": "1"}, "message": "ignored"}`),
		// Deliberately stricter, as list items' required null above: a
		// completion's error_code is typed never, so that an item with
		// outputs and an error code does not compile.
		stricter(requestCase{"settle: a completion, error_code null", "POST", "/api/v1/pull/settle", consumer, completionErrorCodeNull, false, false}),
		settle("a failure", false, `{"id": "ID", "error_code": "CRM_DOWN", "retryable": true, "retry_delay": "PT1S"}`),
		settle("a malformed error code (the item's refusal only)", false, `{"id": "ID", "error_code": "no code"}`),
		settle("a failure with nulls", false, `{"id": "ID", "error_code": "CRM_DOWN", "message": null, "retryable": null, "attempts_left": null}`),
		settle("a failure with attempts_left -1 (the item's refusal only)", false, `{"id": "ID", "error_code": "CRM_DOWN", "retryable": true, "attempts_left": -1}`),
		settle("both", true, `{"id": "ID", "outputs": {}, "error_code": "CRM_DOWN"}`),
		stricter(requestCase{"settle: a failure, outputs null", "POST", "/api/v1/pull/settle", consumer, failureOutputsNull, false, false}),
		settle("neither", true, `{"id": "ID", "message": "what happened?"}`),
		settle("without id", true, `{"outputs": {}}`),

		bulk("a stop of every instance", false, `{"action": "stop", "reason": "doc check"}`),
		bulk("a stop of running ones", false, `{"action": "stop", "reason": "doc check", "filter": {"status": "running"}}`),
		bulk("a stop of held ones", false, `{"action": "stop", "reason": "doc check", "filter": {"status": "held"}}`),
		bulk("a retry of held ones", false, `{"action": "retry", "reason": "doc check", "filter": {"status": "held", "process": "doc_check"}}`),
		bulk("a retry of running ones (their waiting retries brought forward)", false, `{"action": "retry", "reason": "doc check", "filter": {"status": "running"}}`),
		bulk("a retry of the running ones whose retry waits at a definition", false, `{"action": "retry", "reason": "doc check", "filter": {"retrying_at": "add_company_to_crm"}}`),
		bulk("an abandon of held ones", false, `{"action": "abandon", "reason": "doc check", "filter": {"status": "held"}}`),
		bulk("a count without reason", false, `{"action": "stop"}`),
		bulk("a count, reason and bulk_id null", false, `{"action": "stop", "reason": null, "bulk_id": null}`),
		bulk("applying without reason", true, `{"action": "stop", "filter": {"status": "held"}, "confirm_count": 5}`),
		bulk("without action", true, `{"reason": "doc check"}`),
		bulk("an unknown action", true, `{"action": "restart", "reason": "doc check"}`),
		bulk("action in capitals", true, `{"action": "STOP", "reason": "doc check"}`),
		bulk("a stop of completed ones", true, `{"action": "stop", "reason": "doc check", "filter": {"status": "completed"}}`),
		bulk("an abandon of the running ones whose retry waits", true, `{"action": "abandon", "reason": "doc check", "filter": {"retrying_at": "add_company_to_crm"}}`),
		bulk("a retry of held ones whose retry waits", true, `{"action": "retry", "reason": "doc check", "filter": {"retrying_at": "add_company_to_crm", "status": "held"}}`),
		bulk("a stop of held ones whose retry waits", true, `{"action": "stop", "reason": "doc check", "filter": {"retrying_at": "add_company_to_crm", "status": "held"}}`),
		bulk("retrying_at with an error code", true, `{"action": "retry", "reason": "doc check", "filter": {"retrying_at": "add_company_to_crm", "error_code": "CRM_DOWN"}}`),
		bulk("a stop of the running ones whose retry waits", false, `{"action": "stop", "reason": "doc check", "filter": {"retrying_at": "add_company_to_crm", "status": "running"}}`),
		bulk("retrying_at blank", true, `{"action": "retry", "reason": "doc check", "filter": {"retrying_at": " "}}`),
		bulk("an abandon of running ones", true, `{"action": "abandon", "reason": "doc check", "filter": {"status": "running"}}`),
		bulk("status null", true, `{"action": "stop", "reason": "doc check", "filter": {"status": null}}`),
		bulk("status blank", true, `{"action": "stop", "reason": "doc check", "filter": {"status": " "}}`),

		start("version null", false, `{"inputs": {}, "version": null}`),
		start("version -1", true, `{"inputs": {}, "version": -1}`),
		start("version 0", true, `{"inputs": {}, "version": 0}`),
		start("a business key", false, `{"inputs": {}, "business_key": "ACME-7"}`),
		start("business key blank", true, `{"inputs": {}, "business_key": " "}`),
		start("business key empty", true, `{"inputs": {}, "business_key": ""}`),
		start("business key padded", true, `{"inputs": {}, "business_key": "ACME "}`),
		start("business key of 201 bytes", true, `{"inputs": {}, "business_key": "`+strings.Repeat("k", 201)+`"}`),

		fetch("one task, no wait", false, `, "max_tasks": 1, "wait": null`),
		fetch("max_tasks null", false, `, "max_tasks": null`),
		fetch("max_tasks 0", true, `, "max_tasks": 0`),
		requestCase{"fetch: no subscriptions", "POST", "/api/v1/pull/fetch-and-lock", consumer, `{"worker_id": "w", "subscriptions": []}`, true, false},
		requestCase{"fetch: no fields", "POST", "/api/v1/pull/fetch-and-lock", consumer, `{"worker_id": "w", "subscriptions": [{"definition": "add_company_to_crm", "fields": []}]}`, true, false},
		requestCase{"fetch: definition empty", "POST", "/api/v1/pull/fetch-and-lock", consumer, `{"worker_id": "w", "subscriptions": [{"definition": ""}]}`, true, false},
		requestCase{"erase: reason blank", "POST", "/api/v1/instances/" + uuid.NewString() + "/erase", env.Admin, `{"reason": "  "}`, true, false},

		fail("message, retryable and attempts_left null", false, `{"worker_id": "w", "error_code": "CRM_DOWN", "message": null, "retryable": null, "attempts_left": null}`),
		fail("attempts_left -1", true, `{"worker_id": "w", "error_code": "CRM_DOWN", "retryable": true, "attempts_left": -1}`),
		deferral("reason null", false, `{"worker_id": "w", "reason": null}`),
		deferral("a reason of 501 bytes", true, `{"worker_id": "w", "reason": "`+strings.Repeat("r", 501)+`"}`),

		release("a name and a revision", false, `{"name": "doc-1", "revision": 1}`),
		release("notes null", false, `{"name": "doc-2", "revision": 1, "notes": null}`),
		release("without name", true, `{"revision": 1}`),
		release("without revision", true, `{"name": "doc-3"}`),
		release("revision 0", true, `{"name": "doc-4", "revision": 0}`),
		release("a name starting with a dash", true, `{"name": "-doc", "revision": 1}`),
		// Published before with other notes: 409, which the document says.
		release("a name published before", false, `{"name": "doc-1", "revision": 1, "notes": "other"}`),
	}
	for _, c := range cases {
		if strings.Contains(c.path, "{reserved}") {
			// Reserved only when asked for: each one starts an instance.
			id := reserve()
			c.path = strings.Replace(c.path, "{reserved}", id, 1)
		}
		res := env.Do(c.method, c.path, c.token, c.body)
		accepted := res.Status < 400
		if c.name == "release: a name published before" {
			if res.Status != http.StatusConflict || res.Code() != "release_exists" {
				t.Errorf("%s: %d %s, want 409 release_exists", c.name, res.Status, res.Body)
			}
			accepted = true // the document cannot know the name was taken
		}
		req := validatorRequest(t, c.method, c.path, c.body)
		docOK, errs := v.ValidateHttpRequestSync(req)
		switch {
		case c.stricter && !accepted:
			t.Errorf("%s: the server refused it: %d %s (the document need no longer be stricter here)", c.name, res.Status, clip(res.Body))
		case c.stricter && docOK:
			t.Errorf("%s: the document takes it, and it was meant to refuse it (see the case's comment)", c.name)
		case c.stricter:
		case c.refused && accepted:
			t.Errorf("%s: the server took it (%d): move the case to the accepted ones", c.name, res.Status)
		case !c.refused && !accepted:
			t.Errorf("%s: the server refused it: %d %s", c.name, res.Status, clip(res.Body))
		case c.refused && docOK:
			t.Errorf("%s: the server refuses it (%d %s), and the document takes it", c.name, res.Status, res.Code())
		case !c.refused && !docOK:
			t.Errorf("%s: the server takes it (%d), and the document refuses it:%s", c.name, res.Status, describe(errs))
		}
		checkResponse(t, v, c.name, req, res)
	}

	// A start: 201 with the instance's Location, and its replay for the
	// same Idempotency-Key 200 without one, both as documented.
	const startPath = "/api/v1/processes/doc_check/instances"
	for i, want := range []int{http.StatusCreated, http.StatusOK} {
		res := env.Do("POST", startPath, env.Operator, `{"inputs": {}}`, "Idempotency-Key", "doc-check-1")
		if res.Status != want {
			t.Fatalf("start %d: %d %s, want %d", i, res.Status, res.Body, want)
		}
		if loc := res.Header.Get("Location"); (loc != "") != (want == http.StatusCreated) {
			t.Errorf("start %d (%d): Location %q", i, res.Status, loc)
		}
		req := validatorRequest(t, "POST", startPath, `{"inputs": {}}`)
		req.Header.Set("Idempotency-Key", "doc-check-1")
		checkResponse(t, v, fmt.Sprintf("start %d", i), req, res)
	}
}

// validatorRequest is a request as the validator reads it.
func validatorRequest(t *testing.T, method, path, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, "http://relais.test"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer redacted")
	return req
}

// checkResponse fails unless the document describes res, the answer to req.
func checkResponse(t *testing.T, v validator.Validator, name string, req *http.Request, res relaistest.Response) {
	t.Helper()
	// The request's body was read validating it: a fresh one.
	body, _ := io.ReadAll(req.Body)
	req = req.Clone(req.Context())
	req.Body = io.NopCloser(bytes.NewReader(body))
	hr := &http.Response{StatusCode: res.Status, Header: res.Header, Body: io.NopCloser(bytes.NewReader(res.Body)), Request: req}
	if ok, errs := v.ValidateHttpResponse(req, hr); !ok {
		t.Errorf("%s: the %d answer breaks the document:%s", name, res.Status, describe(errs))
	}
}
