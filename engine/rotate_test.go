package engine

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/keyring"
)

func TestKeyRotation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	oldSpec, newSpec := keyring.NewKeySpec("old"), keyring.NewKeySpec("new")
	oldRing, _ := keyring.Parse(oldSpec)
	e := setup(t)
	e = New(e.pool, Options{Keys: oldRing})
	if err := CheckKeys(ctx, e.pool, oldRing); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.SaveWorking(ctx, "crm", []byte(crmWorking)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Snapshot(ctx, "crm"); err != nil {
		t.Fatal(err)
	}
	doc := `{"inputs":{"fields":[{"name":"tok","type":"text","required":true,"classification":"secret"}]},
	 "start":"crm","nodes":{"crm":{"kind":"pull","definition":"crm","revision":1,
	 "inputs":{"company_name":{"value":"Acme"},"token":{"from":"input.tok"}},"routes":{"created":"done","existing":"done"}},"done":{"kind":"end"}}}`
	if _, _, err := e.PublishProcess(ctx, "sealed", []byte(doc)); err != nil {
		t.Fatal(err)
	}
	start := func(e *Engine, secret string) {
		if _, _, err := e.StartInstance(ctx, StartRequest{ProcessKey: "sealed", Inputs: json.RawMessage(`{"tok":"` + secret + `"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		start(e, "old-secret-"+string(rune('a'+i)))
	}
	if _, _, err := e.PutDestination(ctx, DestinationSpec{Name: "api", URL: "https://example.com", Headers: map[string]string{"X-Key": "hdr-secret"}, MaxTimeout: time.Second}, false); err != nil {
		t.Fatal(err)
	}
	const signing = "signing-secret-0123456789abcdefghij"
	if _, _, err := e.PutDestination(ctx, DestinationSpec{Name: "signed", URL: "https://example.com", MaxTimeout: time.Second, SigningSecret: signing}, false); err != nil {
		t.Fatal(err)
	}

	// Started without keys, or with the new one alone (a restore given
	// other keys than its backup's), a replica is told which to give.
	if err := CheckKeys(ctx, e.pool, nil); err == nil || !strings.Contains(err.Error(), "(with data key(s) old) but no data key is configured") {
		t.Errorf("no keys: %v, want the refusal naming the key the values were sealed with", err)
	}
	newOnly, _ := keyring.Parse(newSpec)
	if err := CheckKeys(ctx, e.pool, newOnly); err == nil || !strings.Contains(err.Error(), "data key(s) old may still be stored, and the data keys given lack them") {
		t.Errorf("the new key alone: %v, want the missing key named", err)
	}

	// Step 1: the new key goes first, the old one stays to open old values.
	both, _ := keyring.Parse(newSpec + "," + oldSpec)
	if err := CheckKeys(ctx, e.pool, both); err != nil {
		t.Fatal(err)
	}
	r := New(e.pool, Options{Keys: both})
	start(r, "new-secret")
	var batches int
	if _, err := r.RotateKeys(ctx, func(RotationProgress) { batches++ }); err != nil {
		t.Fatal(err)
	}
	var stale int
	err := e.pool.QueryRow(ctx, `select
	    (select count(*) from instances where substring(sealed_inputs from 3 for get_byte(sealed_inputs, 1)) <> 'new'::bytea)
	  + (select count(*) from occurrences where substring(sealed_inputs from 3 for get_byte(sealed_inputs, 1)) <> 'new'::bytea)
	  + (select count(*) from destinations where substring(sealed_headers from 3 for get_byte(sealed_headers, 1)) <> 'new'::bytea)
	  + (select count(*) from destinations where substring(sealed_signing_secret from 3 for get_byte(sealed_signing_secret, 1)) <> 'new'::bytea)`).Scan(&stale)
	if err != nil || stale != 0 || batches == 0 {
		t.Fatalf("%d values still under the old key after rotation (%v, %d batches)", stale, err, batches)
	}
	// Rotating again is a no-op (resumable).
	if retired, err := r.RotateKeys(ctx, func(p RotationProgress) { t.Errorf("second rotation re-encrypted %v", p) }); err != nil || len(retired) != 0 {
		t.Fatal(err)
	}

	// A replica still running with the old key first, once it hears of the
	// rotation (its notification), refuses to seal rather than store values
	// that removing the retired key would make unreadable.
	e.Invalidate("keys")
	for deadline := time.Now().Add(5 * time.Second); !e.PrimaryKeyRetired(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the replica with the retired key first did not notice the rotation")
		}
	}
	if _, _, err := e.StartInstance(ctx, StartRequest{ProcessKey: "sealed", Inputs: json.RawMessage(`{"tok":"late"}`)}); !fault.HasCode(err, "data_key_retired") {
		t.Errorf("sealing with a retired key: %v, want data_key_retired", err)
	} else if fe, _ := fault.As(err); fe.RetryAfter <= 0 {
		t.Error("data_key_retired says no Retry-After: a client should try another replica")
	}
	if err := r.CheckPrimaryKey(ctx); err != nil || r.primaryRetired.Load() {
		t.Errorf("the replica with the new key first: retired %v (%v)", r.primaryRetired.Load(), err)
	}

	// Step 2: the old key is removed; every value still opens.
	onlyNew, _ := keyring.Parse(newSpec)
	if err := CheckKeys(ctx, e.pool, onlyNew); err != nil {
		t.Fatalf("the old key cannot be removed after rotation: %v", err)
	}
	if err := CheckKeys(ctx, e.pool, oldRing); err == nil {
		t.Fatal("booting with the retired key first was accepted")
	}
	n := New(e.pool, Options{Keys: onlyNew})
	c := consumer(t, n)
	got, err := n.Claim(ctx, ClaimRequest{ConsumerID: c, WorkerID: "w", Pairs: Pairs{Keys: []string{"crm"}, Revisions: []int32{1}}, MaxTasks: 10, LockDuration: 60e9})
	if err != nil || len(got) != 4 {
		t.Fatalf("claim after rotation: %d, %v", len(got), err)
	}
	seen := map[string]bool{}
	for _, g := range got {
		var in map[string]string
		_ = json.Unmarshal(g.Inputs, &in)
		seen[in["token"]] = true
	}
	for _, want := range []string{"old-secret-a", "old-secret-b", "old-secret-c", "new-secret"} {
		if !seen[want] {
			t.Errorf("after rotation the consumer did not get %q (got %v)", want, seen)
		}
	}
	if dest, err := n.destinationCall(ctx, n.q, "api"); err != nil || dest.Headers["X-Key"] != "hdr-secret" {
		t.Errorf("destination headers after rotation: %v %v", dest.Headers, err)
	}
	if dest, err := n.destinationCall(ctx, n.q, "signed"); err != nil || dest.SigningSecret != signing {
		t.Errorf("a destination's signing secret after rotation: %v", err)
	}
}

// Rows that running work holds locked are skipped by a batch, not
// forgotten: the rotation waits for them, and retires the old key only
// once no value is left under it.
func TestKeyRotationWaitsForLockedRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	oldSpec, newSpec := keyring.NewKeySpec("old"), keyring.NewKeySpec("new")
	oldRing, _ := keyring.Parse(oldSpec)
	e := setup(t)
	e = New(e.pool, Options{Keys: oldRing})
	if err := CheckKeys(ctx, e.pool, oldRing); err != nil {
		t.Fatal(err)
	}
	doc := `{"inputs":{"fields":[{"name":"tok","type":"text","required":true,"classification":"secret"}]},
	 "start":"done","nodes":{"done":{"kind":"end"}}}`
	if _, _, err := e.PublishProcess(ctx, "sealed", []byte(doc)); err != nil {
		t.Fatal(err)
	}
	var held string
	for i := range 3 {
		inst, _, err := e.StartInstance(ctx, StartRequest{ProcessKey: "sealed", Inputs: json.RawMessage(`{"tok":"secret-` + string(rune('a'+i)) + `"}`)})
		if err != nil {
			t.Fatal(err)
		}
		held = inst.ID.String()
	}

	// Running work holds one instance locked while the rotation runs.
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	if _, err := tx.Exec(ctx, "select 1 from instances where id = $1 for update", held); err != nil {
		t.Fatal(err)
	}
	both, _ := keyring.Parse(newSpec + "," + oldSpec)
	if err := CheckKeys(ctx, e.pool, both); err != nil {
		t.Fatal(err)
	}
	r := New(e.pool, Options{Keys: both})
	done := make(chan error, 1)
	go func() { _, err := r.RotateKeys(ctx, nil); done <- err }()
	select {
	case err := <-done:
		t.Fatalf("the rotation ended (%v) while a row under the old key was still locked", err)
	case <-time.After(500 * time.Millisecond):
	}
	var retired bool
	if err := e.pool.QueryRow(ctx, "select retired_at is not null from data_keys where id = 'old'").Scan(&retired); err != nil || retired {
		t.Fatalf("old key retired = %v (%v) while a value was still under it", retired, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the rotation did not finish once the lock was released")
	}
	var left int
	if err := e.pool.QueryRow(ctx, "select count(*) from instances where substring(sealed_inputs from 3 for get_byte(sealed_inputs, 1)) <> 'new'::bytea").Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d instances still under the old key (%v)", left, err)
	}
	onlyNew, _ := keyring.Parse(newSpec)
	if err := CheckKeys(ctx, e.pool, onlyNew); err != nil {
		t.Fatalf("the old key cannot be removed after rotation: %v", err)
	}
}

// A replica that does not have the key a push occurrence's inputs were
// sealed with (a key rotation half rolled out) makes no call and hands the
// occurrence back, no attempt spent, for a replica that has the key
// (lifecycle QA: failed push_unprepared, 28 payment orders were refused
// for good during a roll-out); that replica then makes the call.
func TestUnopenablePushInputsAreHandedBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	upgraded, lagging := keyRollFixture(t, "pushed", "push")
	if _, _, err := upgraded.StartInstance(ctx, StartRequest{ProcessKey: "pushed", Inputs: json.RawMessage(`{"tok":"sealed-with-new"}`)}); err != nil {
		t.Fatal(err)
	}
	calls, unprepared, err := lagging.ClaimPush(ctx, "replica-lagging", 10)
	if err != nil || len(calls) != 0 || len(unprepared) != 1 || !unprepared[0].KeyMissing {
		t.Fatalf("claim by the replica without the key: %d calls, %v unprepared, %v; want none, one handed back for its key", len(calls), unprepared, err)
	}
	if err := lagging.HandBackPush(ctx, unprepared[0]); err != nil {
		t.Fatal(err)
	}
	var status, code string
	if err := upgraded.pool.QueryRow(ctx, `select status, coalesce(error_code, '') from occurrences where definition_key = 'crm'`).Scan(&status, &code); err != nil {
		t.Fatal(err)
	}
	if status != StatusAvailable || code != "" {
		t.Fatalf("occurrence %s (%s) after the hand-back; want available, no error", status, code)
	}
	calls, _, err = upgraded.ClaimPush(ctx, "replica-upgraded", 10)
	if err != nil || len(calls) != 1 || !strings.Contains(string(calls[0].Inputs), "sealed-with-new") {
		t.Fatalf("claim by a replica with the key: %+v, %v; want the call, its inputs opened", calls, err)
	}
	var credit int
	if err := upgraded.pool.QueryRow(ctx, `select attempt_credit from occurrences where definition_key = 'crm'`).Scan(&credit); err != nil || credit != 1 {
		t.Errorf("attempt credit %d (%v); want the handed-back attempt given back", credit, err)
	}
}

// TestUndeliverableClaimIsHandedBack: a replica that claims pull tasks
// whose values were sealed with a data key it lacks hands them back, no
// attempt spent, and refuses the fetch with 503 data_key_missing; a
// replica with the key then delivers them with their budget whole.
func TestUndeliverableClaimIsHandedBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	upgraded, lagging := keyRollFixture(t, "sealed", "pull")
	for range 2 {
		if _, _, err := upgraded.StartInstance(ctx, StartRequest{ProcessKey: "sealed", Inputs: json.RawMessage(`{"tok":"sealed-with-new"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	c := consumer(t, upgraded)
	req := ClaimRequest{ConsumerID: c, WorkerID: "w", Pairs: Pairs{Keys: []string{"crm"}, Revisions: []int32{1}}, MaxTasks: 10, LockDuration: time.Minute}
	got, err := lagging.Claim(ctx, req)
	if fe, ok := fault.As(err); !ok || fe.Code != "data_key_missing" || fe.Kind != fault.Unavailable || fe.RetryAfter <= 0 || len(got) != 0 {
		t.Fatalf("claim by the replica without the key: %d tasks, %v; want 503 data_key_missing with Retry-After", len(got), err)
	}
	var available int
	if err := upgraded.pool.QueryRow(ctx, `select count(*) from occurrences where definition_key = 'crm' and status = 'available'`).Scan(&available); err != nil {
		t.Fatal(err)
	}
	if available != 2 {
		t.Fatalf("%d of 2 occurrences available after the hand-back", available)
	}
	got, err = upgraded.Claim(ctx, req)
	if err != nil || len(got) != 2 {
		t.Fatalf("claim by a replica with the key: %d tasks, %v; want both", len(got), err)
	}
	for _, r := range got {
		if r.AttemptsLeft != 2 || !strings.Contains(string(r.Inputs), "sealed-with-new") {
			t.Errorf("task %s: %d attempts left, inputs %s; want the whole budget (3, this attempt taking one) and the secret opened", r.ID, r.AttemptsLeft, r.Inputs)
		}
	}

	// A replay of a claim the worker may hold from its first answer is
	// refused by the replica without the key, and hands nothing back.
	if _, _, err := upgraded.StartInstance(ctx, StartRequest{ProcessKey: "sealed", Inputs: json.RawMessage(`{"tok":"third"}`)}); err != nil {
		t.Fatal(err)
	}
	replayed := req
	replayed.WorkerID, replayed.RequestID, replayed.RequestDigest = "w2", "r1", []byte("d1")
	if got, err := upgraded.Claim(ctx, replayed); err != nil || len(got) != 1 {
		t.Fatalf("first claim with a request_id: %d tasks, %v", len(got), err)
	}
	if _, err := lagging.Claim(ctx, replayed); !fault.HasCode(err, "data_key_missing") {
		t.Fatalf("replay on the replica without the key: %v; want data_key_missing", err)
	}
	var reserved int
	if err := upgraded.pool.QueryRow(ctx, `select count(*) from occurrences where definition_key = 'crm' and status = 'reserved'`).Scan(&reserved); err != nil || reserved != 3 {
		t.Fatalf("%d reserved after the refused replay, %v; want all 3 still held", reserved, err)
	}
}

// A claim on a replica without one data key delivers the tasks it can
// open and hands back only the others, no attempt spent (security QA: the
// whole claim went back, so a worker stuck on that replica got nothing).
func TestAClaimDeliversWhatItCanOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	upgraded, lagging := keyRollFixture(t, "sealed", "pull")
	if _, _, err := upgraded.StartInstance(ctx, StartRequest{ProcessKey: "sealed", Inputs: json.RawMessage(`{"tok":"sealed-with-new"}`)}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := lagging.StartInstance(ctx, StartRequest{ProcessKey: "sealed", Inputs: json.RawMessage(`{"tok":"sealed-with-old"}`)}); err != nil {
		t.Fatal(err)
	}
	c := consumer(t, upgraded)
	req := ClaimRequest{ConsumerID: c, WorkerID: "w", Pairs: Pairs{Keys: []string{"crm"}, Revisions: []int32{1}}, MaxTasks: 10, LockDuration: time.Minute}
	// With a request_id, as every worker sends one (verifier QA: it was
	// handed back whole): its replay answers what was delivered.
	withID := req
	withID.RequestID, withID.RequestDigest = "r1", []byte("d1")
	got, err := lagging.Claim(ctx, withID)
	if err != nil || len(got) != 1 || !strings.Contains(string(got[0].Inputs), "sealed-with-old") {
		t.Fatalf("claim by the replica with the old key only: %v, %v; want the task it can open", got, err)
	}
	replayed, err := upgraded.Claim(ctx, withID)
	if err != nil || len(replayed) != 1 || replayed[0].ID != got[0].ID || !replayed[0].Replayed {
		t.Fatalf("replay of the request_id: %v, %v; want the delivered task alone, replayed", replayed, err)
	}
	var available int
	if err := upgraded.pool.QueryRow(ctx, `select count(*) from occurrences where definition_key = 'crm' and status = 'available'`).Scan(&available); err != nil || available != 1 {
		t.Fatalf("%d available after the claim (%v); want the other handed back", available, err)
	}
	got, err = upgraded.Claim(ctx, req)
	if err != nil || len(got) != 1 || !strings.Contains(string(got[0].Inputs), "sealed-with-new") || got[0].AttemptsLeft != 2 {
		t.Fatalf("claim by a replica with the key: %v, %v; want the handed-back task, its budget whole", got, err)
	}
}

// TestARecordedKeyThatSealedNothingIsRetiredByARotation: a replica started
// once with a key (which the database recorded) and then discarded leaves a
// key no other replica has. Serving without it is refused, saying it
// sealed nothing still stored; a rotation without it goes through and
// retires it; then a replica starts without it.
func TestARecordedKeyThatSealedNothingIsRetiredByARotation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mainSpec, strayID := keyring.NewKeySpec("k2"), "k3"
	mainRing, _ := keyring.Parse(mainSpec)
	stray, _ := keyring.Parse(keyring.NewKeySpec(strayID) + "," + mainSpec)
	base := setup(t)
	if err := CheckKeys(ctx, base.pool, mainRing); err != nil {
		t.Fatal(err)
	}
	e := New(base.pool, Options{Keys: mainRing})
	if _, _, err := e.PutDestination(ctx, DestinationSpec{Name: "api", URL: "https://example.com", Headers: map[string]string{"X-Key": "hdr-secret"}, MaxTimeout: time.Second}, false); err != nil {
		t.Fatal(err)
	}
	// The stray replica starts (its key recorded) and seals nothing.
	if err := CheckKeys(ctx, base.pool, stray); err != nil {
		t.Fatal(err)
	}
	var missing *MissingKeysError
	if err := CheckKeys(ctx, base.pool, mainRing); !errors.As(err, &missing) || len(missing.Used) != 0 || !slices.Equal(missing.Unused, []string{strayID}) ||
		!strings.Contains(err.Error(), "no stored value is sealed with them") {
		t.Fatalf("serving without the stray key: %v; want it named as sealing nothing still stored", err)
	}
	if err := CheckKeysForRotation(ctx, base.pool, mainRing); err != nil {
		t.Fatalf("a rotation without the stray key: %v", err)
	}
	if _, err := New(base.pool, Options{Keys: mainRing}).RotateKeys(ctx, func(RotationProgress) {}); err != nil {
		t.Fatal(err)
	}
	if err := CheckKeys(ctx, base.pool, mainRing); err != nil {
		t.Fatalf("serving after the rotation: %v", err)
	}
	// A key that sealed a value still stored is still refused, rotation or not.
	sealing, _ := keyring.Parse(keyring.NewKeySpec("k4") + "," + mainSpec)
	if err := CheckKeys(ctx, base.pool, sealing); err != nil {
		t.Fatal(err)
	}
	if _, _, err := New(base.pool, Options{Keys: sealing}).PutDestination(ctx, DestinationSpec{Name: "api2", URL: "https://example.com", Headers: map[string]string{"X-Key": "k4-secret"}, MaxTimeout: time.Second}, false); err != nil {
		t.Fatal(err)
	}
	if err := CheckKeysForRotation(ctx, base.pool, mainRing); !errors.As(err, &missing) || !slices.Equal(missing.Used, []string{"k4"}) {
		t.Fatalf("a rotation without a key that sealed a stored value: %v; want it refused", err)
	}
}

// keyRollFixture is a database where a key rotation ran ahead of a
// replica's roll: upgraded seals with the new key (the old one kept
// second), lagging has the old one only. It publishes process, whose
// secret input tok feeds node crm, of kind pull or push (to destination
// api).
func keyRollFixture(t *testing.T, process, kind string) (upgraded, lagging *Engine) {
	t.Helper()
	ctx := context.Background()
	oldSpec, newSpec := keyring.NewKeySpec("old"), keyring.NewKeySpec("new")
	oldRing, _ := keyring.Parse(oldSpec)
	both, _ := keyring.Parse(newSpec + "," + oldSpec)
	base := setup(t)
	if err := CheckKeys(ctx, base.pool, both); err != nil {
		t.Fatal(err)
	}
	upgraded = New(base.pool, Options{Keys: both})
	if _, _, err := upgraded.SaveWorking(ctx, "crm", []byte(crmWorking)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := upgraded.Snapshot(ctx, "crm"); err != nil {
		t.Fatal(err)
	}
	destination := ""
	if kind == "push" {
		if _, _, err := upgraded.PutDestination(ctx, DestinationSpec{Name: "api", URL: "https://example.com", MaxTimeout: 5 * time.Second}, false); err != nil {
			t.Fatal(err)
		}
		destination = `"destination":"api",`
	}
	doc := `{"inputs":{"fields":[{"name":"tok","type":"text","required":true,"classification":"secret"}]},
	 "start":"crm","nodes":{"crm":{"kind":"` + kind + `","definition":"crm","revision":1,` + destination + `
	 "inputs":{"company_name":{"value":"Acme"},"token":{"from":"input.tok"}},"routes":{"created":"done","existing":"done"}},"done":{"kind":"end"}}}`
	if _, _, err := upgraded.PublishProcess(ctx, process, []byte(doc)); err != nil {
		t.Fatal(err)
	}
	return upgraded, New(base.pool, Options{Keys: oldRing})
}

// A start replayed after the key that digested its first request was
// removed cannot be told the same or another: it is refused saying so,
// naming the key, not as a different request (lifecycle QA).
func TestAReplayDigestedByARemovedKeySaysSo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	upgraded, _ := keyRollFixture(t, "sealed", "pull")
	req := StartRequest{ProcessKey: "sealed", Inputs: json.RawMessage(`{"tok":"t"}`), IdempotencyKey: "order-9"}
	first, _, err := upgraded.StartInstance(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := keyring.Parse(keyring.NewKeySpec("other"))
	without := New(upgraded.pool, Options{Keys: other})
	_, _, err = without.StartInstance(ctx, req)
	if fe, ok := fault.As(err); !ok || fe.Code != "idempotency_key_reused" || !strings.Contains(fe.Detail, `data key "new"`) || strings.Contains(fe.Detail, "different request") ||
		!strings.Contains(fe.Detail, first.ID.String()) {
		t.Fatalf("the replay without the digest's key: %v; want it said the key that made the digest was removed, naming the instance to read before sending it again", err)
	}
	req.Inputs = json.RawMessage(`{"tok":"u"}`)
	if _, _, err := upgraded.StartInstance(ctx, req); !fault.HasCode(err, "idempotency_key_reused") || !strings.Contains(err.Error(), "different request") {
		t.Fatalf("another request with the key, the digest's key held: %v; want a different request", err)
	}
}
