package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/queries"
)

// TestIdempotentReplayAfterANewerVersion: a replay of a start without
// version answers the instance the first request created, even after a
// newer version made those inputs invalid (DESIGN §2: same key, same body,
// same instance).
func TestIdempotentReplayAfterANewerVersion(t *testing.T) {
	t.Parallel()
	e := setup(t)
	prepare(t, e, "")
	ctx := context.Background()
	req := StartRequest{ProcessKey: "two_step", Inputs: json.RawMessage(`{"name":"Acme"}`), IdempotencyKey: "order-1"}
	first, created, err := e.StartInstance(ctx, req)
	if err != nil || !created || first.Version != 1 {
		t.Fatalf("first start: version %d, created %v, %v", first.Version, created, err)
	}

	const nameField = `{"name":"name","type":"text","required":true}`
	v2 := strings.Replace(twoStepProcess(""), nameField, nameField+`,{"name":"country","type":"text","required":true}`, 1)
	if pv, created, err := e.PublishProcess(ctx, "two_step", []byte(v2)); err != nil || !created || pv.Version != 2 {
		t.Fatalf("publish version 2: %v, created %v, %v", pv.Version, created, err)
	}
	_, _, err = e.StartInstance(ctx, StartRequest{ProcessKey: "two_step", Inputs: req.Inputs})
	if !fault.HasCode(err, "invalid_inputs") || !strings.Contains(err.Error(), "version 2 of process two_step") {
		t.Fatalf("the same inputs without a key against version 2: %v; want invalid_inputs naming version 2", err)
	}

	again, created, err := e.StartInstance(ctx, req)
	if err != nil || created || again.ID != first.ID || again.Version != 1 {
		t.Fatalf("replay: id %s (want %s), version %d, created %v, %v; want the first instance, not created", again.ID, first.ID, again.Version, created, err)
	}
}

// TestIdempotencyKeyReusedBeforeValidation: another request with a used
// key is refused as such (idempotency_key_reused), whatever else is wrong
// with it; "as sent" means an explicit version or a business key makes it
// another request. A key whose first request was refused stays usable.
func TestIdempotencyKeyReusedBeforeValidation(t *testing.T) {
	t.Parallel()
	e := setup(t)
	prepare(t, e, "")
	ctx := context.Background()
	if _, _, err := e.StartInstance(ctx, StartRequest{ProcessKey: "two_step", Inputs: json.RawMessage(`{"name":"Acme"}`), IdempotencyKey: "order-1"}); err != nil {
		t.Fatal(err)
	}
	bk := "acme"
	for name, req := range map[string]StartRequest{
		"invalid inputs":     {Inputs: json.RawMessage(`{"nom":1}`)},
		"no inputs":          {},
		"unknown version":    {Version: 9, Inputs: json.RawMessage(`{"name":"Acme"}`)},
		"explicit version":   {Version: 1, Inputs: json.RawMessage(`{"name":"Acme"}`)},
		"with business key":  {Inputs: json.RawMessage(`{"name":"Acme"}`), BusinessKey: &bk},
		"other valid inputs": {Inputs: json.RawMessage(`{"name":"Other"}`)},
	} {
		req.ProcessKey, req.IdempotencyKey = "two_step", "order-1"
		if _, _, err := e.StartInstance(ctx, req); !fault.HasCode(err, "idempotency_key_reused") {
			t.Errorf("%s with a used key: %v; want idempotency_key_reused", name, err)
		}
	}

	bad := StartRequest{ProcessKey: "two_step", Inputs: json.RawMessage(`{"nom":1}`), IdempotencyKey: "order-2"}
	if _, _, err := e.StartInstance(ctx, bad); !fault.HasCode(err, "invalid_inputs") {
		t.Fatalf("first request with a new key and invalid inputs: %v; want invalid_inputs", err)
	}
	good := StartRequest{ProcessKey: "two_step", Inputs: json.RawMessage(`{"name":"Acme"}`), IdempotencyKey: "order-2"}
	if _, created, err := e.StartInstance(ctx, good); err != nil || !created {
		t.Fatalf("valid request with a key only a refused request used: created %v, %v; want a new instance", created, err)
	}
}

// TestConcurrentFirstStartsWithOneKey: first requests racing with one key
// create exactly one instance; every request with the winner's body gets
// it, every other is refused with idempotency_key_reused.
func TestConcurrentFirstStartsWithOneKey(t *testing.T) {
	t.Parallel()
	e := setup(t)
	prepare(t, e, "")
	ctx := context.Background()
	bodies := []string{`{"name":"Acme"}`, `{"name":"Other"}`}
	const perBody = 12
	type result struct {
		body    int
		id      uuid.UUID
		created bool
		err     error
	}
	results := make(chan result, perBody*len(bodies))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for b, body := range bodies {
		for range perBody {
			wg.Go(func() {
				<-start
				inst, created, err := e.StartInstance(ctx, StartRequest{ProcessKey: "two_step", Inputs: json.RawMessage(body), IdempotencyKey: "race"})
				results <- result{b, inst.ID, created, err}
			})
		}
	}
	close(start)
	wg.Wait()
	close(results)

	var winner *result
	var all []result
	for r := range results {
		all = append(all, r)
		if r.created {
			if winner != nil {
				t.Fatalf("two instances created for one key: %s and %s", winner.id, r.id)
			}
			winner = &r
		}
	}
	if winner == nil {
		t.Fatalf("no instance created: %+v", all)
	}
	for _, r := range all {
		switch {
		case r.body == winner.body && (r.err != nil || r.id != winner.id):
			t.Errorf("request with the winning body: id %s, %v; want instance %s", r.id, r.err, winner.id)
		case r.body != winner.body && !fault.HasCode(r.err, "idempotency_key_reused"):
			t.Errorf("request with the other body: id %s, %v; want idempotency_key_reused", r.id, r.err)
		}
	}
	var n int
	if err := e.pool.QueryRow(ctx, `select count(*) from instances where idempotency_key = 'race'`).Scan(&n); err != nil || n != 1 {
		t.Errorf("instances with the key: %d, %v; want 1", n, err)
	}
}

// TestRequestDigest: formatting, key order and how a number is written
// do not make another request; anything the request states does, numbers
// by their exact value (float64 would make these two integers one).
func TestRequestDigest(t *testing.T) {
	t.Parallel()
	bk := "acme"
	base := StartRequest{ProcessKey: "p", Inputs: json.RawMessage(`{"a":1,"b":{"c":12345678901234567890}}`)}
	same := base
	same.Inputs = json.RawMessage(" {\"b\" : {\"c\":1234567890123456789.0e1}, \"a\":1.00}\n")
	same.IdempotencyKey = "keys are not part of the request body"
	if !bytes.Equal(canonicalRequest(same), canonicalRequest(base)) {
		t.Errorf("reformatted inputs digest differently")
	}
	for name, fn := range map[string]func(r *StartRequest){
		"process":      func(r *StartRequest) { r.ProcessKey = "q" },
		"version":      func(r *StartRequest) { r.Version = 1 },
		"business key": func(r *StartRequest) { r.BusinessKey = &bk },
		"large number": func(r *StartRequest) { r.Inputs = json.RawMessage(`{"a":1,"b":{"c":12345678901234567891}}`) },
		"inputs":       func(r *StartRequest) { r.Inputs = json.RawMessage(`{"a":2,"b":{"c":12345678901234567890}}`) },
	} {
		other := base
		fn(&other)
		if bytes.Equal(canonicalRequest(other), canonicalRequest(base)) {
			t.Errorf("another %s digests like the base request", name)
		}
	}
}

// TestReplayOfAKeyDigestedBeforeNumbersWereValues: a key used before
// numbers were compared by value stored the digest of their literals; a
// retry that sends them alike still replays its instance.
func TestReplayOfAKeyDigestedBeforeNumbersWereValues(t *testing.T) {
	t.Parallel()
	e := setup(t)
	prepare(t, e, "")
	ctx := context.Background()
	first, _, err := e.StartInstance(ctx, StartRequest{ProcessKey: "two_step", Inputs: json.RawMessage(`{"name":"Acme"}`), IdempotencyKey: "legacy-1"})
	if err != nil {
		t.Fatal(err)
	}
	retry := StartRequest{ProcessKey: "two_step", Inputs: json.RawMessage(`{"name":"Acme","amount":120.50}`), IdempotencyKey: "legacy-1"}
	if bytes.Equal(legacyCanonicalRequest(retry), canonicalRequest(retry)) {
		t.Fatal("the two digests agree on 120.50: nothing to test")
	}
	if _, err := e.pool.Exec(ctx, "update instances set request_digest = $1 where id = $2", e.digest(legacyCanonicalRequest(retry)), first.ID); err != nil {
		t.Fatal(err)
	}
	if inst, created, err := e.StartInstance(ctx, retry); err != nil || created || inst.ID != first.ID {
		t.Fatalf("retry with the literal as first sent: %v, created %v, %v; want instance %s replayed", inst.ID, created, err, first.ID)
	}
	retry.Inputs = json.RawMessage(`{"name":"Acme","amount":120.51}`)
	if _, _, err := e.StartInstance(ctx, retry); !fault.HasCode(err, "idempotency_key_reused") {
		t.Fatalf("retry with another value: %v; want idempotency_key_reused", err)
	}
}

// TestObservationsReportWhatTheyCannotMask: an instance or occurrence is
// shown masked by its contract; when that contract cannot be read, the
// read fails with the reason instead of answering empty inputs as if the
// instance had none.
func TestObservationsReportWhatTheyCannotMask(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	id := uuid.Must(uuid.NewV7())
	_, err := e.instanceFromRow(ctx, queries.Instance{ID: id, ProcessKey: "vanished", Version: 3, Inputs: []byte(`{"name":"x"}`)})
	if err == nil || !strings.Contains(err.Error(), "process vanished version 3") {
		t.Errorf("an instance whose version cannot be read: %v, want an error naming it", err)
	}
	_, err = e.occurrenceFromRow(ctx, observed{row: queries.Occurrence{ID: id, DefinitionKey: "vanished", Revision: 2, Inputs: []byte(`{}`)}})
	if err == nil || !strings.Contains(err.Error(), "revision vanished/2") {
		t.Errorf("an occurrence whose revision cannot be read: %v, want an error naming it", err)
	}
}

// TestHeldStepIsTheLatestSettledFailure: a held instance waits at its
// failed occurrence settled last, as OccurrenceHeldAt orders them, not at
// the one created last.
func TestHeldStepIsTheLatestSettledFailure(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { v := t0.Add(d); return &v }
	steps := []Step{
		{Node: "a", Status: StatusCompleted, CreatedAt: t0, SettledAt: at(time.Second)},
		{Node: "b", Status: StatusFailed, CreatedAt: t0.Add(time.Second), SettledAt: at(9 * time.Second)},
		{Node: "c", Status: StatusFailed, CreatedAt: t0.Add(2 * time.Second), SettledAt: at(5 * time.Second)},
		{Node: "d", Status: StatusAvailable, CreatedAt: t0.Add(3 * time.Second)},
	}
	if i, ok := HeldStep(steps); !ok || steps[i].Node != "b" {
		t.Errorf("HeldStep = %d, %v; want b, the failure settled last", i, ok)
	}
	steps[2].SettledAt = at(9 * time.Second)
	if i, ok := HeldStep(steps); !ok || steps[i].Node != "c" {
		t.Errorf("HeldStep with a tie = %d, %v; want c, created later", i, ok)
	}
	if _, ok := HeldStep(steps[:1]); ok {
		t.Error("HeldStep found a failure among none")
	}
}
