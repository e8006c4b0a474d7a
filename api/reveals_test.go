package api_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/relais/relais/internal/relaistest"
)

const (
	revealCanary       = "CANARY-SENSITIVE-0c9e"
	revealSecretCanary = "CANARY-SECRET-41aa"
	revealNestedCanary = "CANARY-NESTED-SECRET-d2f7"
)

// revealFields are the inputs of the reveal test's definition and
// process: a secret, and a sensitive object holding a secret.
func revealFields() map[string]any {
	return map[string]any{"fields": []any{
		map[string]any{"name": "company", "type": "text", "required": true},
		map[string]any{"name": "api_key", "type": "text", "classification": "secret"},
		map[string]any{"name": "contact", "type": "object", "classification": "sensitive", "fields": []any{
			map[string]any{"name": "email", "type": "text", "required": true},
			map[string]any{"name": "pin", "type": "text", "classification": "secret"}}},
	}}
}

// revealOccurrence starts one instance whose occurrence holds the
// canaries and returns the occurrence id.
func revealOccurrence(t *testing.T, env *relaistest.Env) string {
	t.Helper()
	env.Must(201, "PUT", "/api/v1/definitions/vault/working", env.Designer, map[string]any{"name": "Vault",
		"inputs": revealFields(), "outputs": map[string]any{"fields": []any{map[string]any{"name": "ref", "type": "text"}}}})
	env.Must(201, "POST", "/api/v1/definitions/vault/revisions", env.Designer, nil)
	env.Process("vault_flow", map[string]any{"inputs": revealFields(), "start": "vault", "nodes": map[string]any{
		"vault": map[string]any{"kind": "pull", "definition": "vault", "revision": 1, "next": "done", "inputs": map[string]any{
			"company": map[string]any{"from": "input.company"}, "api_key": map[string]any{"from": "input.api_key"},
			"contact": map[string]any{"from": "input.contact"}}},
		"done": map[string]any{"kind": "end"}}})
	inst := env.Must(201, "POST", "/api/v1/processes/vault_flow/instances", env.Operator, map[string]any{"inputs": map[string]any{
		"company": "Acme", "api_key": revealSecretCanary, "contact": map[string]any{"email": revealCanary, "pin": revealNestedCanary}}}).JSON(t)
	occs := env.Must(200, "GET", "/api/v1/occurrences?instance="+inst["id"].(string), env.Operator, nil).JSON(t)["items"].([]any)
	return occs[0].(map[string]any)["id"].(string)
}

func TestRevealSensitiveValueOverTheAPI(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	occ := revealOccurrence(t, env)
	reveal := "/api/v1/occurrences/" + occ + "/reveal"

	res := env.Must(200, "POST", reveal, env.Admin, map[string]any{"side": "inputs", "field": "/contact/email", "reason": "ticket 42"})
	body := res.JSON(t)
	if body["value"] != revealCanary || body["audit_id"] == nil || body["audit_id"].(float64) < 1 {
		t.Fatalf("reveal answered %s", res.Body)
	}
	if res.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("a revealed value may be cached: Cache-Control %q", res.Header.Get("Cache-Control"))
	}
	whole := env.Must(200, "POST", reveal, env.Admin, map[string]any{"side": "inputs", "field": "/contact", "reason": "ticket 42"}).JSON(t)["value"].(map[string]any)
	if whole["email"] != revealCanary || whole["pin"].(map[string]any)["$masked"] != "secret" {
		t.Fatalf("revealed object %v; want the email and the pin still masked", whole)
	}

	refusals := []struct {
		name, token, path string
		body              any
		status            int
		code              string
	}{
		{"operator", env.Operator, reveal, map[string]any{"side": "inputs", "field": "/contact/email", "reason": "ticket 42"}, 403, "forbidden"},
		{"designer", env.Designer, reveal, map[string]any{"side": "inputs", "field": "/contact/email", "reason": "ticket 42"}, 403, "forbidden"},
		{"no token", "", reveal, map[string]any{"side": "inputs", "field": "/contact/email", "reason": "ticket 42"}, 401, "unauthorized"},
		{"secret", env.Admin, reveal, map[string]any{"side": "inputs", "field": "/api_key", "reason": "ticket 42"}, 403, "not_revealable"},
		{"nested secret", env.Admin, reveal, map[string]any{"side": "inputs", "field": "/contact/pin", "reason": "ticket 42"}, 403, "not_revealable"},
		{"normal", env.Admin, reveal, map[string]any{"side": "inputs", "field": "/company", "reason": "ticket 42"}, 422, "not_protected"},
		{"unknown field", env.Admin, reveal, map[string]any{"side": "inputs", "field": "/nowhere", "reason": "ticket 42"}, 422, "invalid_field"},
		{"no reason", env.Admin, reveal, map[string]any{"side": "inputs", "field": "/contact/email"}, 400, "invalid_request"},
		{"blank reason", env.Admin, reveal, map[string]any{"side": "inputs", "field": "/contact/email", "reason": " "}, 400, "invalid_request"},
		{"bad side", env.Admin, reveal, map[string]any{"side": "both", "field": "/contact", "reason": "ticket 42"}, 400, "invalid_request"},
		{"unknown body member", env.Admin, reveal, map[string]any{"side": "inputs", "field": "/contact", "reason": "ticket 42", "why": "x"}, 400, "unknown_field"},
		{"no outputs yet", env.Admin, reveal, map[string]any{"side": "outputs", "field": "/ref", "reason": "ticket 42"}, 422, "not_protected"},
		{"unknown occurrence", env.Admin, "/api/v1/occurrences/00000000-0000-7000-8000-000000000000/reveal",
			map[string]any{"side": "inputs", "field": "/contact", "reason": "ticket 42"}, 404, "not_found"},
		{"not an id", env.Admin, "/api/v1/occurrences/nope/reveal", map[string]any{"side": "inputs", "field": "/contact", "reason": "ticket 42"}, 404, "not_found"},
	}
	for _, tt := range refusals {
		r := env.Do("POST", tt.path, tt.token, tt.body)
		if r.Status != tt.status || r.Code() != tt.code {
			t.Errorf("%s: %d %s, want %d %s", tt.name, r.Status, r.Body, tt.status, tt.code)
		}
		if strings.Contains(string(r.Body), "CANARY") {
			t.Errorf("%s: the refusal shows a protected value: %s", tt.name, r.Body)
		}
	}

	// Observation stays masked after a reveal.
	obs := env.Must(200, "GET", "/api/v1/occurrences/"+occ, env.Admin, nil)
	if strings.Contains(string(obs.Body), "CANARY") {
		t.Fatalf("the occurrence shows a protected value after a reveal: %s", obs.Body)
	}
	if strings.Contains(env.Logs.String(), "CANARY") {
		t.Fatalf("the logs hold a protected value")
	}
}

func TestRevealAuditLog(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	occ := revealOccurrence(t, env)
	reveal := "/api/v1/occurrences/" + occ + "/reveal"
	var ids []float64
	for _, field := range []string{"/contact/email", "/contact"} {
		ids = append(ids, env.Must(200, "POST", reveal, env.Admin, map[string]any{"side": "inputs", "field": field, "reason": "ticket " + field}).JSON(t)["audit_id"].(float64))
	}
	// Refusals are not reveals: nothing is recorded for them.
	env.Must(403, "POST", reveal, env.Admin, map[string]any{"side": "inputs", "field": "/api_key", "reason": "ticket 42"})
	env.Must(403, "POST", reveal, env.Operator, map[string]any{"side": "inputs", "field": "/contact", "reason": "ticket 42"})

	list := env.Must(200, "GET", "/api/v1/audit/reveals", env.Admin, nil)
	items := list.JSON(t)["items"].([]any)
	if len(items) != 2 {
		t.Fatalf("audit log %s; want two records", list.Body)
	}
	first := items[0].(map[string]any)
	if first["id"] != ids[1] || first["occurrence_id"] != occ || first["side"] != "inputs" || first["field"] != "/contact" ||
		first["principal"] != "admin" || first["revealed_at"] == "" || first["reason"] != "ticket /contact" {
		t.Errorf("newest record %v", first)
	}
	if items[1].(map[string]any)["id"] != ids[0] || items[1].(map[string]any)["field"] != "/contact/email" {
		t.Errorf("older record %v", items[1])
	}
	if strings.Contains(string(list.Body), "CANARY") || strings.Contains(string(list.Body), `"value"`) {
		t.Errorf("the audit log holds a value: %s", list.Body)
	}

	page1 := env.Must(200, "GET", "/api/v1/audit/reveals?limit=1&occurrence="+occ, env.Admin, nil).JSON(t)
	cursor, _ := page1["next_cursor"].(string)
	if len(page1["items"].([]any)) != 1 || cursor == "" {
		t.Fatalf("first page %v", page1)
	}
	page2 := env.Must(200, "GET", "/api/v1/audit/reveals?limit=1&occurrence="+occ+"&cursor="+url.QueryEscape(cursor), env.Admin, nil).JSON(t)
	if items := page2["items"].([]any); len(items) != 1 || items[0].(map[string]any)["id"] != ids[0] || page2["next_cursor"] != nil {
		t.Fatalf("second page %v", page2)
	}
	none := env.Must(200, "GET", "/api/v1/audit/reveals?occurrence=00000000-0000-7000-8000-000000000000", env.Admin, nil).JSON(t)
	if len(none["items"].([]any)) != 0 {
		t.Errorf("another occurrence's log %v", none)
	}
	if r := env.Do("GET", "/api/v1/audit/reveals?occurrence=nope", env.Admin, nil); r.Status != 400 {
		t.Errorf("bad occurrence filter: %d", r.Status)
	}
	// Token names are not unique: the record and the log name the token.
	twin := env.Must(201, "POST", "/api/v1/tokens", env.Admin, map[string]any{"name": "admin", "role": "admin"}).JSON(t)
	env.Must(200, "POST", reveal, twin["token"].(string), map[string]any{"side": "inputs", "field": "/contact", "reason": "ticket 42"})
	items = env.Must(200, "GET", "/api/v1/audit/reveals", env.Admin, nil).JSON(t)["items"].([]any)
	newest, older := items[0].(map[string]any), items[1].(map[string]any)
	if newest["principal"] != "admin" || newest["token_id"] != twin["id"] || older["token_id"] == nil || older["token_id"] == twin["id"] {
		t.Errorf("records %v and %v; want the twin's token id %v on the newest only", newest, older, twin["id"])
	}
	if want := fmt.Sprintf("by=admin by_token_id=%v", twin["id"]); !strings.Contains(env.Logs.String(), want) {
		t.Errorf("no log line with %q", want)
	}

	if r := env.Do("GET", "/api/v1/audit/reveals", env.Operator, nil); r.Status != 403 {
		t.Errorf("operator reads the audit log: %d", r.Status)
	}

	// The records outlive their occurrence, which they then say is gone.
	if items[0].(map[string]any)["occurrence_deleted"] != false {
		t.Errorf("a record of a live occurrence %v", items[0])
	}
	instance := env.Must(200, "GET", "/api/v1/occurrences/"+occ, env.Admin, nil).JSON(t)["instance_id"].(string)
	env.Must(200, "POST", "/api/v1/instances/"+instance+"/stop", env.Operator, map[string]any{"reason": "cleanup"})
	if n, err := env.Engine.DeleteEnded(context.Background(), -time.Minute); err != nil || n != 1 {
		t.Fatalf("retention deleted %d (%v), want the instance", n, err)
	}
	for _, it := range env.Must(200, "GET", "/api/v1/audit/reveals", env.Admin, nil).JSON(t)["items"].([]any) {
		if it.(map[string]any)["occurrence_deleted"] != true {
			t.Errorf("a record of a deleted occurrence %v", it)
		}
	}
}
