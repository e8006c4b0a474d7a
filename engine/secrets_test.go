package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// The digests kept for replay detection cover protected values; they are
// keyed, so a database dump cannot confirm a guess of a value, and replays
// are still recognized.
func TestReplayDigestsAreKeyed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
	prepare(t, e, "")
	req := StartRequest{ProcessKey: "two_step", Inputs: json.RawMessage(`{"name":"1234"}`), IdempotencyKey: "k-1"}
	inst, created, err := e.StartInstance(ctx, req)
	if err != nil || !created {
		t.Fatalf("start: %v %v", created, err)
	}
	if again, created, err := e.StartInstance(ctx, req); err != nil || created || again.ID != inst.ID {
		t.Fatalf("replay: %v %v %v, want the same instance", again.ID, created, err)
	}
	c := consumer(t, e)
	got, err := e.Claim(ctx, ClaimRequest{ConsumerID: c, WorkerID: "w", Pairs: Pairs{Keys: []string{"crm"}, Revisions: []int32{1}}, MaxTasks: 1, LockDuration: time.Minute})
	if err != nil || len(got) != 1 {
		t.Fatalf("claim: %v %v", got, err)
	}
	ref := WorkerRef{ConsumerID: c, WorkerID: "w", Occurrence: got[0].ID}
	outputs := json.RawMessage(`{"result":"created","crm_id":"PIN-4321"}`)
	if _, err := e.Complete(ctx, ref, outputs); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Complete(ctx, ref, json.RawMessage(` {"crm_id":"PIN-4321", "result":"created"}`)); err != nil {
		t.Fatalf("identical completion replayed: %v, want the same answer", err)
	}

	var requestDigest, outputsDigest string
	if err := e.pool.QueryRow(ctx, "select request_digest from instances where id = $1", inst.ID).Scan(&requestDigest); err != nil {
		t.Fatal(err)
	}
	if err := e.pool.QueryRow(ctx, "select outputs_digest from occurrences where id = $1", got[0].ID).Scan(&outputsDigest); err != nil {
		t.Fatal(err)
	}
	plain := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	for name, d := range map[string]struct {
		stored    string
		canonical []byte
	}{"request": {requestDigest, canonicalRequest(req)}, "outputs": {outputsDigest, canonicalOutputs(outputs)}} {
		if !strings.HasPrefix(d.stored, "hmac-sha256:") || strings.Contains(d.stored, plain(d.canonical)) {
			t.Errorf("%s digest %q: want a keyed digest, not a plain hash of the document", name, d.stored)
		}
	}
}

// A completion's replay is recognized by the value of its outputs, not
// their spelling: Relais stores an integer field's 1.0 as 1, and a worker
// resending what it read back, or a client writing 1e2 for 100, resends
// the same completion. Digests made before numbers were compared by value
// still match (legacyCanonicalOutputs) where the literals are the same.
func TestCompletionReplaysCompareNumbersByValue(t *testing.T) {
	t.Parallel()
	same := [][2]string{
		{`{"a":1.0,"b":[1e2, 0.50]}`, `{"b":[100,0.5],"a":1}`},
		{`{"n":-0.0}`, `{"n":0}`},
		{`{"n":9007199254740993}`, `{"n":9007199254740993.0}`},
	}
	for _, p := range same {
		if a, b := canonicalOutputs(json.RawMessage(p[0])), canonicalOutputs(json.RawMessage(p[1])); !bytes.Equal(a, b) {
			t.Errorf("%s and %s: canonical %s and %s, want one form", p[0], p[1], a, b)
		}
	}
	for _, p := range [][2]string{{`{"n":9007199254740993}`, `{"n":9007199254740992}`}, {`{"a":"1"}`, `{"a":1}`}} {
		if bytes.Equal(canonicalOutputs(json.RawMessage(p[0])), canonicalOutputs(json.RawMessage(p[1]))) {
			t.Errorf("%s and %s: one canonical form, want two", p[0], p[1])
		}
	}
	// Outputs whose numbers are written plainly digest as before, so a
	// replica of the previous release recognizes their replays during a
	// rolling upgrade (and after a rollback).
	for _, plain := range []string{`{"a":1,"b":"x"}`, `{"note":"A&B <b> é \u2028 \"q\"","n":[-3,0.5,120.5],"z":{"y":null,"x":true}}`} {
		if c, l := canonicalOutputs(json.RawMessage(plain)), legacyCanonicalOutputs(json.RawMessage(plain)); !bytes.Equal(c, l) {
			t.Errorf("plain outputs %s: canonical %s, legacy %s, want the same digest as before", plain, c, l)
		}
	}
}
