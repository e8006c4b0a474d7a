package engine

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relais/relais/internal/auth"
	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/keyring"
)

// Canaries stored in protected fields of the reveal fixture.
const (
	revealSensitive = "CANARY-SENSITIVE-2d4e"
	revealSecret    = "CANARY-SECRET-8b1c"
	revealNested    = "CANARY-NESTED-SECRET-63fa"
)

// vaultRevealWorking has a sensitive object holding a secret, a secret
// input, sensitive list items, and a sensitive output.
const vaultRevealWorking = `{"name":"Vault",
 "inputs":{"fields":[
   {"name":"company","type":"text","required":true},
   {"name":"token","type":"text","classification":"secret"},
   {"name":"contact","type":"object","classification":"sensitive","fields":[
     {"name":"email","type":"text","required":true},
     {"name":"pin","type":"text","classification":"secret"}]},
   {"name":"phones","type":"list","items":{"type":"text","classification":"sensitive"}}]},
 "outputs":{"fields":[{"name":"note","type":"text","classification":"sensitive"},{"name":"ref","type":"text"}]}}`

const vaultRevealProcess = `{"inputs":{"fields":[
   {"name":"company","type":"text","required":true},
   {"name":"token","type":"text","classification":"secret"},
   {"name":"contact","type":"object","classification":"sensitive","fields":[
     {"name":"email","type":"text","required":true},
     {"name":"pin","type":"text","classification":"secret"}]},
   {"name":"phones","type":"list","items":{"type":"text","classification":"sensitive"}}]},
 "start":"vault","nodes":{
   "vault":{"kind":"pull","definition":"vault","revision":1,"next":"done","inputs":{
     "company":{"from":"input.company"},"token":{"from":"input.token"},
     "contact":{"from":"input.contact"},"phones":{"from":"input.phones"}}},
   "done":{"kind":"end"}}}`

// revealFixture starts one instance of the vault process and returns its
// occurrence (available, no outputs yet), an admin and an operator.
func revealFixture(t *testing.T) (e *Engine, occ uuid.UUID, admin, operator auth.Principal) {
	t.Helper()
	e = setup(t)
	ctx := context.Background()
	if _, _, err := e.SaveWorking(ctx, "vault", []byte(vaultRevealWorking)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Snapshot(ctx, "vault"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.PublishProcess(ctx, "vault_flow", []byte(vaultRevealProcess)); err != nil {
		t.Fatal(err)
	}
	inputs := `{"company":"Acme","token":"` + revealSecret + `","contact":{"email":"` + revealSensitive + `","pin":"` + revealNested + `"},
	  "phones":["+33 1 00","+33 2 00"]}`
	inst, _, err := e.StartInstance(ctx, StartRequest{ProcessKey: "vault_flow", Inputs: json.RawMessage(inputs)})
	if err != nil {
		t.Fatal(err)
	}
	rows := occurrences(t, e, inst.ID)["vault"]
	if len(rows) != 1 {
		t.Fatalf("occurrences of vault: %v", rows)
	}
	return e, rows[0].ID, principal(t, e, "alice", auth.RoleAdmin), principal(t, e, "olga", auth.RoleOperator)
}

func principal(t *testing.T, e *Engine, name string, role auth.Role) auth.Principal {
	t.Helper()
	ctx := context.Background()
	token, _, err := e.CreateToken(ctx, name, role, Expiry{})
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := e.LookupToken(ctx, auth.Hash(token))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func auditCount(t *testing.T, e *Engine, occ uuid.UUID) int {
	t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), "select count(*) from reveal_audit where occurrence_id = $1", occ).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestRevealSensitiveRecordsWhoSawWhat(t *testing.T) {
	t.Parallel()
	e, occ, admin, _ := revealFixture(t)
	ctx := context.Background()

	got, err := e.RevealValue(ctx, admin, occ, SideInputs, "/contact/email", "support ticket 42")
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Value) != `"`+revealSensitive+`"` {
		t.Fatalf("revealed %s; want the sensitive value", got.Value)
	}
	a := got.Audit
	if a.ID == 0 || a.OccurrenceID != occ || a.Side != "inputs" || a.Field != "/contact/email" || a.Principal != "alice" ||
		a.TokenID == nil || *a.TokenID != admin.TokenID || time.Since(a.RevealedAt) > time.Minute || a.Reason == nil || *a.Reason != "support ticket 42" {
		t.Fatalf("audit record %+v", a)
	}
	// Why is required, as an operator action's reason, and recorded
	// trimmed; nothing is revealed or recorded without it.
	for _, reason := range []string{"", "  \n", strings.Repeat("é", MaxReason+1)} {
		if v, err := e.RevealSensitive(ctx, admin, occ, SideInputs, "/contact/email", reason); !fault.HasCode(err, "invalid_request") || v != nil {
			t.Errorf("reveal with reason %.20q: %s, %v; want invalid_request", reason, v, err)
		}
	}
	if got, err := e.RevealValue(ctx, admin, occ, SideInputs, "/contact/email", "  GDPR request #7 \n"); err != nil || *got.Audit.Reason != "GDPR request #7" {
		t.Errorf("a padded reason: %v, %v; want it recorded trimmed", got.Audit.Reason, err)
	}
	if list, err := e.ListReveals(ctx, RevealFilter{Occurrence: &occ}); err != nil || len(list) != 2 || list[1].Reason == nil || *list[1].Reason != "support ticket 42" {
		t.Errorf("ListReveals: %+v, %v; want the two reveals with their reasons", list, err)
	}
	var principalName, field, side string
	var tokenID int64
	err = e.pool.QueryRow(ctx, "select principal, field, side, token_id from reveal_audit where id = $1", a.ID).Scan(&principalName, &field, &side, &tokenID)
	if err != nil || principalName != "alice" || field != "/contact/email" || side != "inputs" || tokenID != admin.TokenID {
		t.Fatalf("stored audit row: %s %s %s %d (%v)", principalName, field, side, tokenID, err)
	}

	// A list item is addressed by its index.
	v, err := e.RevealSensitive(ctx, admin, occ, SideInputs, "/phones/1", "support ticket 42")
	if err != nil || string(v) != `"+33 2 00"` {
		t.Fatalf("reveal /phones/1 = %s, %v", v, err)
	}
	if n := auditCount(t, e, occ); n != 3 {
		t.Fatalf("%d audit rows after three reveals (the refused ones record nothing); want 3", n)
	}
}

func TestRevealNeverShowsANestedSecret(t *testing.T) {
	t.Parallel()
	e, occ, admin, _ := revealFixture(t)
	v, err := e.RevealSensitive(context.Background(), admin, occ, SideInputs, "/contact", "support ticket 42")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(v), revealNested) || strings.Contains(string(v), revealSecret) {
		t.Fatalf("the revealed object shows a secret: %s", v)
	}
	want := `{"email":"` + revealSensitive + `","pin":{"$masked":"secret"}}`
	if string(v) != want {
		t.Fatalf("revealed %s; want %s", v, want)
	}
}

func TestRevealRefusals(t *testing.T) {
	t.Parallel()
	e, occ, admin, operator := revealFixture(t)
	ctx := context.Background()
	designer := principal(t, e, "dan", auth.RoleDesigner)
	tests := []struct {
		name    string
		p       auth.Principal
		occ     uuid.UUID
		side    string
		pointer string
		kind    fault.Kind
		code    string
	}{
		{"operator", operator, occ, "inputs", "/contact/email", fault.Forbidden, "forbidden"},
		{"designer", designer, occ, "inputs", "/contact/email", fault.Forbidden, "forbidden"},
		{"secret field", admin, occ, "inputs", "/token", fault.Forbidden, "not_revealable"},
		{"secret inside a sensitive object", admin, occ, "inputs", "/contact/pin", fault.Forbidden, "not_revealable"},
		{"normal field", admin, occ, "inputs", "/company", fault.Unprocessable, "not_protected"},
		{"unknown field", admin, occ, "inputs", "/nowhere", fault.Unprocessable, "invalid_field"},
		{"unknown nested field", admin, occ, "inputs", "/contact/phone", fault.Unprocessable, "invalid_field"},
		{"wildcard", admin, occ, "inputs", "/phones/*", fault.Unprocessable, "invalid_field"},
		{"non-canonical index", admin, occ, "inputs", "/phones/01", fault.Unprocessable, "invalid_field"},
		{"not a pointer", admin, occ, "inputs", "contact", fault.Unprocessable, "invalid_field"},
		{"whole document", admin, occ, "inputs", "", fault.Unprocessable, "invalid_field"},
		{"field of the other side", admin, occ, "outputs", "/contact", fault.Unprocessable, "invalid_field"},
		{"bad side", admin, occ, "headers", "/contact", fault.BadRequest, "invalid_request"},
		{"absent item", admin, occ, "inputs", "/phones/7", fault.NotFound, "not_found"},
		{"no outputs yet", admin, occ, "outputs", "/note", fault.NotFound, "not_found"},
		{"unknown occurrence", admin, uuid.Must(uuid.NewV7()), "inputs", "/contact", fault.NotFound, "not_found"},
	}
	for _, tt := range tests {
		v, err := e.RevealSensitive(ctx, tt.p, tt.occ, tt.side, tt.pointer, "support ticket 42")
		fe, ok := fault.As(err)
		if !ok || fe.Kind != tt.kind || fe.Code != tt.code || v != nil {
			t.Errorf("%s: %s, %v; want %s", tt.name, v, err, tt.code)
		}
		if ok && strings.Contains(fe.Error(), "CANARY") {
			t.Errorf("%s: the error shows a protected value: %v", tt.name, err)
		}
	}
	if fe, _ := fault.As(func() error {
		_, err := e.RevealSensitive(ctx, admin, occ, "inputs", "/token", "support ticket 42")
		return err
	}()); fe.Detail != "secret values can never be revealed" {
		t.Errorf("secret refusal detail %q", fe.Detail)
	}
	// A field's name where its pointer belongs is answered with the pointer.
	if fe, _ := fault.As(func() error {
		_, err := e.RevealSensitive(ctx, admin, occ, "inputs", "contact", "support ticket 42")
		return err
	}()); !strings.Contains(fe.Detail, `as in "/contact"`) {
		t.Errorf("a name for a pointer: detail %q, want the pointer it means", fe.Detail)
	}
	if n := auditCount(t, e, occ); n != 0 {
		t.Fatalf("%d audit rows after refused reveals; want none", n)
	}
}

func TestRevealOutputsAndListReveals(t *testing.T) {
	t.Parallel()
	e, occ, admin, _ := revealFixture(t)
	ctx := context.Background()
	c, _, err := e.CreateConsumer(ctx, "vault-worker", []Grant{{Definition: "vault"}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Claim(ctx, ClaimRequest{ConsumerID: c.ID, WorkerID: "w", Pairs: Pairs{Keys: []string{"vault"}, Revisions: []int32{1}},
		MaxTasks: 1, LockDuration: time.Minute})
	if err != nil || len(res) != 1 || res[0].ID != occ {
		t.Fatalf("claim: %v, %v", res, err)
	}
	if _, err := e.Complete(ctx, WorkerRef{ConsumerID: c.ID, WorkerID: "w", Occurrence: occ}, json.RawMessage(`{"note":"`+revealSensitive+`-out","ref":"R-1"}`)); err != nil {
		t.Fatal(err)
	}
	v, err := e.RevealSensitive(ctx, admin, occ, SideOutputs, "/note", "support ticket 42")
	if err != nil || string(v) != `"`+revealSensitive+`-out"` {
		t.Fatalf("reveal an output: %s, %v", v, err)
	}
	if _, err := e.RevealSensitive(ctx, admin, occ, SideInputs, "/contact/email", "support ticket 42"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.RevealSensitive(ctx, admin, occ, SideInputs, "/phones/0", "support ticket 42"); err != nil {
		t.Fatal(err)
	}

	// Another occurrence's reveal is listed globally, not under occ.
	other, _, err := e.StartInstance(ctx, StartRequest{ProcessKey: "vault_flow", Inputs: json.RawMessage(`{"company":"B","contact":{"email":"b@example.com"}}`)})
	if err != nil {
		t.Fatal(err)
	}
	otherOcc := occurrences(t, e, other.ID)["vault"][0].ID
	if _, err := e.RevealSensitive(ctx, admin, otherOcc, SideInputs, "/contact", "support ticket 42"); err != nil {
		t.Fatal(err)
	}

	all, err := e.ListReveals(ctx, RevealFilter{Limit: 10})
	if err != nil || len(all) != 4 {
		t.Fatalf("all reveals: %v, %v", all, err)
	}
	for i := 1; i < len(all); i++ {
		if all[i].ID >= all[i-1].ID {
			t.Fatalf("reveals not newest first: %v", all)
		}
	}
	if all[0].OccurrenceID != otherOcc || all[3].Field != "/note" || all[3].Side != "outputs" {
		t.Fatalf("reveals %+v", all)
	}
	mine, err := e.ListReveals(ctx, RevealFilter{Occurrence: &occ, Limit: 2})
	if err != nil || len(mine) != 2 || mine[0].Field != "/phones/0" || mine[1].Field != "/contact/email" {
		t.Fatalf("first page of occ's reveals: %+v, %v", mine, err)
	}
	rest, err := e.ListReveals(ctx, RevealFilter{Occurrence: &occ, Before: mine[1].ID, Limit: 2})
	if err != nil || len(rest) != 1 || rest[0].Field != "/note" {
		t.Fatalf("second page of occ's reveals: %+v, %v", rest, err)
	}
}

// A replica without the data key a value was sealed with answers a reveal
// 503 data_key_missing, records nothing, and another replica reveals it
// (lifecycle QA: a 500 said nothing of why).
func TestRevealOnAReplicaWithoutTheKey(t *testing.T) {
	t.Parallel()
	e, occ, admin, _ := revealFixture(t)
	other, _ := keyring.Parse(keyring.NewKeySpec("other"))
	lacking := New(e.pool, Options{Keys: other})
	_, err := lacking.RevealValue(context.Background(), admin, occ, SideInputs, "/contact/email", "support ticket 42")
	if fe, ok := fault.As(err); !ok || fe.Code != "data_key_missing" || fe.Kind != fault.Unavailable || fe.RetryAfter <= 0 {
		t.Fatalf("reveal without the key: %v; want 503 data_key_missing with Retry-After", err)
	}
	if n := auditCount(t, e, occ); n != 0 {
		t.Errorf("%d reveals recorded; want none for a value not revealed", n)
	}
	if got, err := e.RevealValue(context.Background(), admin, occ, SideInputs, "/contact/email", "support ticket 42"); err != nil || !strings.Contains(string(got.Value), revealSensitive) {
		t.Errorf("reveal with the key: %v, %v", got.Value, err)
	}
}

// A list whose items are protected is sealed whole: observations show its
// marker with the items' class, and an admin reveals it whole (it was left
// out of every observation, its stored marker saying "normal": security
// QA).
func TestAListOfProtectedItemsIsShownMaskedWhole(t *testing.T) {
	t.Parallel()
	e, occ, admin, _ := revealFixture(t)
	ctx := context.Background()
	o, err := e.GetOccurrence(ctx, occ)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := e.GetInstance(ctx, o.InstanceID)
	if err != nil {
		t.Fatal(err)
	}
	for what, inputs := range map[string]json.RawMessage{"occurrence": o.Inputs, "instance": inst.Inputs} {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(inputs, &m); err != nil {
			t.Fatal(err)
		}
		if got := string(m["phones"]); got != `{"$masked":"sensitive"}` {
			t.Errorf("%s's phones: %q, want the sensitive marker (%s)", what, got, inputs)
		}
	}
	var stored string
	if err := e.pool.QueryRow(ctx, "select inputs->>'phones' from occurrences where id = $1", occ).Scan(&stored); err != nil || stored != `{"$masked": "sensitive"}` {
		t.Errorf("stored marker %q (%v), want the items' class", stored, err)
	}
	v, err := e.RevealSensitive(ctx, admin, occ, SideInputs, "/phones", "support ticket 42")
	if err != nil || string(v) != `["+33 1 00","+33 2 00"]` {
		t.Errorf("reveal /phones: %s, %v; want the list", v, err)
	}
}
