package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/relais/relais/contracts"
	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/jsontree"
	"github.com/relais/relais/queries"
)

// Instance statuses. Held is not ended: the instance waits at a failed
// node whose on_error holds it (an incident), and nothing advances it.
const (
	InstanceRunning   = "running"
	InstanceHeld      = "held"
	InstanceCompleted = "completed"
	InstanceFailed    = "failed"
	InstanceCancelled = "cancelled"
)

// Instance is one run of a pinned process version. Inputs are masked: it
// is an observation.
type Instance struct {
	ID          uuid.UUID
	ProcessKey  string
	Version     int
	Status      string
	BusinessKey *string
	EndNode     *string
	ErrorCode   *string
	Inputs      json.RawMessage
	CreatedAt   time.Time
	EndedAt     *time.Time
	// Path holds the steps of the occurrences a start created, when
	// StartInstance created the instance (it knows them without reading
	// them again); nil otherwise: ask InstanceOccurrences.
	Path []Step
}

// Step is an occurrence as an instance's path shows it: where the run went
// and how it fared there, without the values it carried (masking those
// for an answer that shows none was 2 % of a full cycle's allocations).
type Step struct {
	Occurrence uuid.UUID
	Node       string
	Definition string
	Revision   int
	Mode       string
	Status     string
	Route      *string
	ErrorCode  *string
	// Problem is, for an occurrence failed from birth (invalid_inputs),
	// what Relais found wrong with the inputs it built, at their pointers
	// and never with their values: whoever started the instance (a
	// designer testing a version) reads why without an operator's access
	// to the occurrence (designer QA).
	Problem   *string
	CreatedAt time.Time
	SettledAt *time.Time
}

// Step is o as an instance's path shows it.
func (o Occurrence) Step() Step {
	return Step{Occurrence: o.ID, Node: o.Node, Definition: o.Definition, Revision: o.Revision, Mode: o.Mode, Status: o.Status,
		Route: o.Route, ErrorCode: stepError(o.Status, o.ErrorCode), Problem: stepProblem(o.ErrorCode, o.ErrorMessage), CreatedAt: o.CreatedAt, SettledAt: o.SettledAt}
}

// HeldStep returns the index in steps of the failed occurrence a held
// instance waits at: its latest settled, as the held_at filter, the
// Health page and relais_instances_held find it (OccurrenceHeldAt's
// order: settled_at, then created_at, latest first). ok is false without
// a failed step.
func HeldStep(steps []Step) (i int, ok bool) {
	later := func(a, b Step) bool {
		switch {
		case a.SettledAt == nil || b.SettledAt == nil:
			// PostgreSQL puts NULLs first in a descending order.
			if (a.SettledAt == nil) != (b.SettledAt == nil) {
				return a.SettledAt == nil
			}
		case !a.SettledAt.Equal(*b.SettledAt):
			return a.SettledAt.After(*b.SettledAt)
		}
		return a.CreatedAt.After(b.CreatedAt)
	}
	for j, s := range steps {
		if s.Status == StatusFailed && (!ok || later(s, steps[i])) {
			i, ok = j, true
		}
	}
	return i, ok
}

// stepOf is the step of an occurrence a start has just created.
func stepOf(o queries.Occurrence) Step {
	return Step{Occurrence: o.ID, Node: o.Node, Definition: o.DefinitionKey, Revision: int(o.Revision), Mode: o.Mode, Status: o.Status,
		Route: o.Route, ErrorCode: stepError(o.Status, o.ErrorCode), Problem: stepProblem(o.ErrorCode, o.ErrorMessage), CreatedAt: o.CreatedAt, SettledAt: o.SettledAt}
}

// stepProblem is the message a path shows for a step: Relais's own, of
// inputs it could not build (invalid_inputs), only.
func stepProblem(code, message *string) *string {
	if deref(code) != CodeInvalidInputs {
		return nil
	}
	return message
}

// stepError is the error code a path shows for a step: the occurrence's
// last error, except once it completed, when an earlier attempt's failure
// would read as the step's outcome (the occurrence itself keeps it, with
// its attempts).
func stepError(status string, code *string) *string {
	if status == StatusCompleted {
		return nil
	}
	return code
}

// StartRequest starts an instance.
type StartRequest struct {
	ProcessKey string
	// Version 0 means the latest version.
	Version        int
	Inputs         json.RawMessage
	BusinessKey    *string
	IdempotencyKey string
}

func (e *Engine) instanceFromRow(ctx context.Context, row queries.Instance) (Instance, error) {
	pv, err := e.GetProcessVersion(ctx, row.ProcessKey, int(row.Version))
	if err != nil {
		return Instance{}, fmt.Errorf("instance %s: process %s version %d: %w", row.ID, row.ProcessKey, row.Version, err)
	}
	return instanceOf(row, pv), nil
}

// instanceOf is row as observers see it, its inputs masked by the contract
// of pv, its process version. It reads nothing, so it cannot fail.
func instanceOf(row queries.Instance, pv *ProcessVersion) Instance {
	return Instance{ID: row.ID, ProcessKey: row.ProcessKey, Version: int(row.Version), Status: row.Status, BusinessKey: row.BusinessKey,
		EndNode: row.EndNode, ErrorCode: row.ErrorCode, CreatedAt: row.CreatedAt, EndedAt: row.EndedAt,
		Inputs: pv.Process.Inputs.Mask(row.Inputs)}
}

// canonicalRequest identifies a start request for Idempotency-Key replays,
// over the request as sent: the process key, the version as given (absent
// and 0 both mean "the latest"), the inputs and the business key. Equal
// JSON is equal whatever its formatting and key order, numbers by their
// exact decimal value (120.5 and 120.50 are one, as a client's decimal
// type may write either on a retry; two large integers a float64 would
// confuse are two). It depends on nothing stored, so a replay is
// recognized before the version is resolved or the inputs validated.
func canonicalRequest(req StartRequest) []byte { return canonicalRequestAs(req, false) }

// legacyCanonicalRequest is canonicalRequest as it was until numbers were
// compared by value: their literals as written. A key used before that
// stored its digest so. The two agree on every number written plainly
// (100, 120.5: CanonicalNumber keeps them), so replicas of both releases
// side by side disagree only on literals such as 120.50 or 1e2. It can go
// once no instance started before the change is kept (RELAIS_RETENTION
// after the upgrade; never under forever).
func legacyCanonicalRequest(req StartRequest) []byte { return canonicalRequestAs(req, true) }

func canonicalRequestAs(req StartRequest, literalNumbers bool) []byte {
	b := append([]byte(nil), `{"business_key":`...)
	if req.BusinessKey != nil {
		b = jsontree.AppendString(b, *req.BusinessKey)
	} else {
		b = append(b, "null"...)
	}
	if n, err := jsontree.Read(req.Inputs, maxInputsDepth); err == nil {
		b = append(b, `,"inputs":`...)
		if literalNumbers {
			b = jsontree.Append(b, n, true)
		} else {
			b = jsontree.AppendCanonical(b, n)
		}
	} else {
		// Not JSON the reader accepts (too deep): the bytes as sent
		// stand for it, under a member no JSON inputs can produce.
		b = append(b, `,"inputs_raw":`...)
		b = jsontree.AppendString(b, string(req.Inputs))
	}
	b = append(b, `,"process":`...)
	b = jsontree.AppendString(b, req.ProcessKey)
	b = append(b, `,"version":`...)
	if req.Version != 0 {
		b = strconv.AppendInt(b, int64(req.Version), 10)
	} else {
		b = append(b, "null"...)
	}
	return append(b, '}')
}

// maxInputsDepth bounds the nesting canonicalRequest reads; inputs deeper than
// any contract allows are digested as raw bytes.
const maxInputsDepth = 160

// replayStart looks up the instance a start request with an
// Idempotency-Key already created: found is false when the key is unused;
// otherwise the request replays that instance, or is refused with
// idempotency_key_reused when its digest differs.
func (e *Engine) replayStart(ctx context.Context, q *queries.Queries, req StartRequest, canonical []byte) (inst queries.Instance, found bool, err error) {
	existing, err := q.InstanceGetByIdempotencyKey(ctx, queries.InstanceGetByIdempotencyKeyParams{ProcessKey: req.ProcessKey, IdempotencyKey: &req.IdempotencyKey})
	if isNoRows(err) {
		return queries.Instance{}, false, nil
	}
	if err != nil {
		return queries.Instance{}, true, err
	}
	if existing.RequestDigest == nil || !e.sameDigest(canonical, *existing.RequestDigest) &&
		!e.sameDigest(legacyCanonicalRequest(req), *existing.RequestDigest) {
		if id, held := e.keys.DigestKey(deref(existing.RequestDigest)); id != "" && !held {
			// Not "a different request": nothing can tell (lifecycle QA:
			// an identical retry was sent hunting a client bug).
			return queries.Instance{}, true, fault.New(fault.Unprocessable, "idempotency_key_reused",
				"the idempotency key %q was used with this process, for instance %s, before data key %q, which made its digest, was removed: whether this is the same request cannot be told; read that instance before sending it with a new idempotency key, or it may run twice", req.IdempotencyKey, existing.ID, id)
		}
		return queries.Instance{}, true, fault.New(fault.Unprocessable, "idempotency_key_reused",
			"the idempotency key %q was used with this process for a different request (another version, business key or inputs; JSON formatting, key order and how a number is written do not count)", req.IdempotencyKey)
	}
	return existing, true, nil
}

// StartInstance validates the inputs against the pinned version's contract,
// creates the instance and advances it to its first node, in one
// transaction. With an IdempotencyKey, a replay of the same request returns
// the same instance (created false) and a different request with that key
// is refused with idempotency_key_reused.
//
// The key is looked up first, before the version is resolved and the
// inputs validated: a replay answers what the first request got even after
// a newer version changed the inputs contract, and another request with
// the key is refused as such, valid or not. A key whose first request was
// refused stays unused. Concurrent first requests with one key all pass
// the lookup; the unique (process_key, idempotency_key) index lets one
// insert, and the others replay or are refused against it.
func (e *Engine) StartInstance(ctx context.Context, req StartRequest) (Instance, bool, error) {
	p, err := e.prepareStart(ctx, req)
	if err != nil {
		return Instance{}, false, err
	}
	if p.replay != nil {
		inst, err := e.instanceFromRow(ctx, *p.replay)
		if err != nil {
			return Instance{}, false, wrap("start instance", err)
		}
		return inst, false, nil
	}
	var inst queries.Instance
	var path []queries.Occurrence
	created := false
	err = e.starts.write(ctx, uuid.Nil, func(ctx context.Context, q *queries.Queries) error {
		var err error
		inst, path, created, err = e.insertStart(ctx, q, p)
		return err
	})
	if err != nil {
		return Instance{}, false, wrap("start instance", err)
	}
	if !created {
		// A concurrent first request with the key won: answer what it did.
		out, err := e.instanceFromRow(ctx, inst)
		if err != nil {
			return Instance{}, false, wrap("start instance", err)
		}
		return out, false, nil
	}
	// The run knows the instance as it left it (advancing may have ended it
	// already) and the occurrences it created: no re-read.
	out := instanceOf(inst, p.pv)
	out.Path = make([]Step, len(path))
	for i, o := range path {
		out.Path[i] = stepOf(o)
	}
	return out, true, nil
}

// preparedStart is a start request checked outside any transaction: its
// replay found, or its version resolved, its inputs validated and sealed.
type preparedStart struct {
	req       StartRequest
	canonical []byte
	idem      *string
	digest    *string
	replay    *queries.Instance // set when an Idempotency-Key replays
	pv        *ProcessVersion
	id        uuid.UUID
	public    json.RawMessage
	sealed    []byte
}

func (e *Engine) prepareStart(ctx context.Context, req StartRequest) (preparedStart, error) {
	// Left out, the inputs are none ({}): for a process that declares
	// none. One that declares some refuses it below.
	absent := len(req.Inputs) == 0
	if absent {
		req.Inputs = json.RawMessage("{}")
	}
	p := preparedStart{req: req}
	if req.IdempotencyKey != "" {
		p.canonical = canonicalRequest(req)
		d := e.digest(p.canonical)
		p.idem, p.digest = &req.IdempotencyKey, &d
		inst, found, err := e.replayStart(ctx, e.q, req, p.canonical)
		if err != nil {
			return p, wrap("start instance", err)
		}
		if found {
			p.replay = &inst
			return p, nil
		}
	}
	if req.Version < 0 {
		// Else read as an unknown process (404), where it is a bad value.
		return p, fault.New(fault.BadRequest, "invalid_request", "version %d is not a version number", req.Version).
			WithErrors([]fault.FieldError{{Path: "/version", Message: "must be a version number (1 or more), or absent for the latest"}})
	}
	pv, err := e.GetProcessVersion(ctx, req.ProcessKey, req.Version)
	if err != nil {
		if fault.HasCode(err, "not_found") && req.Version > 0 {
			// A misspelt process is not found whatever the version asked.
			if _, err := e.GetProcessVersion(ctx, req.ProcessKey, 0); err != nil {
				return p, err
			}
			return p, fault.New(fault.Unprocessable, "unknown_version", "process %q has no version %d", req.ProcessKey, req.Version).
				WithErrors([]fault.FieldError{{Path: "/version", Message: "no such version"}})
		}
		return p, err
	}
	if req.BusinessKey != nil && len(*req.BusinessKey) > MaxBusinessKey {
		return p, fault.New(fault.BadRequest, "invalid_request", "business_key is too long").
			WithErrors([]fault.FieldError{tooLong("/business_key", MaxBusinessKey)})
	}
	if req.BusinessKey != nil {
		// An empty key (a script's unset variable) or one padded with
		// spaces would be stored as sent and never found: filters refuse
		// an empty key, and the console trims what is typed.
		switch k := *req.BusinessKey; {
		case strings.TrimSpace(k) == "":
			return p, fault.New(fault.BadRequest, "invalid_request", "business_key is empty: leave it out for an instance without one").
				WithErrors([]fault.FieldError{{Path: "/business_key", Message: "must not be empty or blank"}})
		case strings.TrimSpace(k) != k:
			return p, fault.New(fault.BadRequest, "invalid_request", "business_key begins or ends with white space, which the console's filter trims: an instance so keyed is found only by an exact API filter").
				WithErrors([]fault.FieldError{{Path: "/business_key", Message: "must not begin or end with white space"}})
		case strings.ContainsFunc(k, Invisible):
			return p, fault.New(fault.BadRequest, "invalid_request", "business_key holds an invisible character (a control or format character, such as a byte order mark from a CSV export): nobody could type it in a filter").
				WithErrors([]fault.FieldError{{Path: "/business_key", Message: "must not hold control or format characters"}})
		}
	}
	if absent && len(pv.Process.Inputs.Fields) > 0 {
		// A client's unset variable (JavaScript drops an undefined
		// member) would otherwise start an instance without its inputs
		// whenever they are all optional, as "inputs": null is refused.
		return p, violations(CodeInvalidInputs, fmt.Sprintf("the start has no inputs, and version %d of process %s declares some: give them, or {} for none", pv.Version, pv.Key),
			[]contracts.Violation{{Path: "/inputs", Message: "is required: the process declares inputs (send {} to start without any)"}})
	}
	v, err := e.schemas.Validator(pv.Digest, "inputs", pv.Process.Inputs)
	if err != nil {
		return p, wrap("compile process inputs", err)
	}
	if vs := v.Validate(req.Inputs); len(vs) > 0 {
		for i := range vs {
			vs[i].Path = "/inputs" + vs[i].Path
		}
		// A start without a version runs the latest: a caller whose
		// inputs a new version refuses learns which one judged them.
		return p, violations(CodeInvalidInputs, fmt.Sprintf("the inputs violate version %d of process %s", pv.Version, pv.Key), vs)
	}
	p.pv = pv
	p.id = uuid.Must(uuid.NewV7())
	p.public, p.sealed, err = e.seal(pv.Process.Inputs, v.Integers(req.Inputs), aadInstanceInputs(p.id))
	return p, err
}

// insertStart creates a prepared instance and advances it to its first
// node inside q's transaction, returning it as the run left it and the
// occurrences it created; created is false when a concurrent request with
// the same Idempotency-Key got there first (its instance is returned).
func (e *Engine) insertStart(ctx context.Context, q *queries.Queries, p preparedStart) (inst queries.Instance, path []queries.Occurrence, created bool, err error) {
	var row queries.Instance
	if st := txStateOf(ctx); st != nil && p.idem == nil {
		// Without a key nothing can conflict: the row is built here at the
		// transaction's clock (fixed once for all its writes, see
		// txState.now) and the insert travels with the next statement.
		var now time.Time
		if now, err = st.now(ctx, e, q); err != nil {
			return queries.Instance{}, nil, false, err
		}
		row = queries.Instance{ID: p.id, ProcessKey: p.pv.Key, Version: int32(p.pv.Version), Status: InstanceRunning,
			BusinessKey: p.req.BusinessKey, Inputs: p.public, SealedInputs: p.sealed, CreatedAt: now}
		err = q.InstanceInsertNew(ctx, queries.InstanceInsertNewParams{ID: row.ID, ProcessKey: row.ProcessKey, Version: row.Version,
			BusinessKey: row.BusinessKey, Inputs: row.Inputs, SealedInputs: row.SealedInputs, CreatedAt: row.CreatedAt})
	} else {
		row, err = q.InstanceInsert(ctx, queries.InstanceInsertParams{ID: p.id, ProcessKey: p.pv.Key, Version: int32(p.pv.Version),
			BusinessKey: p.req.BusinessKey, Inputs: p.public, SealedInputs: p.sealed, IdempotencyKey: p.idem, RequestDigest: p.digest, Now: e.at()})
	}
	if isNoRows(err) && p.digest != nil {
		// A concurrent first request with the key inserted since the
		// lookup; ON CONFLICT waited for it to commit.
		existing, found, err := e.replayStart(ctx, q, p.req, p.canonical)
		if err != nil {
			return queries.Instance{}, nil, false, err
		}
		if !found {
			return queries.Instance{}, nil, false, fmt.Errorf("instance with Idempotency-Key %q conflicted but cannot be found", p.req.IdempotencyKey)
		}
		return existing, nil, false, nil
	}
	if err != nil {
		return queries.Instance{}, nil, false, err
	}
	// The row's created_at was set from the statement's clock.
	r := e.newRun(ctx, q, row, row.CreatedAt, p.pv)
	// A new instance has settled no node: nothing to load; and no other
	// transaction can see it to enter its nodes.
	r.nothingSettled()
	r.newInstance = true
	countInstance(q, p.pv.Key, InstanceStarted)
	if err := r.enter(p.pv.Process.Start); err != nil {
		return queries.Instance{}, nil, false, err
	}
	return r.inst, r.created, true, nil
}

// MaxBatch bounds the items of one batch request (starts or settlements):
// one transaction must stay short.
const MaxBatch = 1000

// StartResult is one item's outcome in a batch start: an instance (created
// or replayed), or the item's refusal.
type StartResult struct {
	Instance Instance
	Created  bool
	Err      error
}

// StartInstances starts a batch of instances of one process in one
// transaction: one commit for them all. Each item is checked and applied
// on its own (a savepoint each): a refused item is reported and changes
// nothing, the others are applied (see applyEach). Each item may carry its own
// Idempotency-Key, with StartInstance's replay rules. Only an unknown
// process or a failure of the database itself fails the whole batch.
func (e *Engine) StartInstances(ctx context.Context, reqs []StartRequest) ([]StartResult, error) {
	if len(reqs) > MaxBatch {
		return nil, BoundExceeded("items", MaxBatch)
	}
	if len(reqs) > 0 {
		// A misspelt process fails the request, as a single start does,
		// rather than every item with the same 404 under a 200.
		if _, err := e.GetProcessVersion(ctx, reqs[0].ProcessKey, 0); err != nil {
			return nil, err
		}
	}
	out := make([]StartResult, len(reqs))
	prepared := make([]preparedStart, len(reqs))
	seen := map[string]int{}
	for i, req := range reqs {
		if k := req.IdempotencyKey; k != "" {
			if j, dup := seen[k]; dup {
				out[i].Err = fault.New(fault.Unprocessable, "duplicate_item", "the idempotency key %q is also the key of item %d", k, j).
					WithErrors([]fault.FieldError{{Path: "/idempotency_key", Message: fmt.Sprintf("is also the key of item %d", j)}})
				continue
			}
			seen[k] = i
		}
		p, err := e.prepareStart(ctx, req)
		if err != nil {
			if _, ok := fault.As(err); !ok {
				return nil, err
			}
			out[i].Err = err
			continue
		}
		prepared[i] = p
		if p.replay != nil {
			if out[i].Instance, err = e.instanceFromRow(ctx, *p.replay); err != nil {
				return nil, wrap("start instances", err)
			}
		}
	}
	rows := make([]queries.Instance, len(reqs))
	answered := make([]bool, len(reqs))
	for i, p := range prepared {
		answered[i] = out[i].Err != nil || p.replay != nil
	}
	refusals, err := e.applyEach(ctx, len(reqs), func(i int) bool { return answered[i] }, nil, func(ctx context.Context, q *queries.Queries, i int) error {
		var err error
		rows[i], _, out[i].Created, err = e.insertStart(ctx, q, prepared[i])
		return err
	}, nil)
	if err != nil {
		return nil, wrap("start instances", err)
	}
	for i, r := range refusals {
		if r != nil {
			out[i].Err, out[i].Created = r, false
		}
	}
	for i, r := range rows {
		// As the run left it: advancing may already have ended it.
		if out[i].Err == nil && prepared[i].replay == nil {
			out[i].Instance = instanceOf(r, prepared[i].pv)
		}
	}
	return out, nil
}

// GetInstance returns one instance (masked).
func (e *Engine) GetInstance(ctx context.Context, id uuid.UUID) (Instance, error) {
	row, err := e.q.InstanceGet(ctx, id)
	if isNoRows(err) {
		return Instance{}, notKept("instance %s", id)
	}
	if err != nil {
		return Instance{}, wrap("get instance", err)
	}
	inst, err := e.instanceFromRow(ctx, row)
	if err != nil {
		return Instance{}, wrap("get instance", err)
	}
	return inst, nil
}

// InstanceFilter selects instances; empty fields do not filter.
type InstanceFilter struct {
	ProcessKey string
	// Version, with ProcessKey, narrows to the instances of one of its
	// versions (0: every version).
	Version     int
	Status      string
	BusinessKey string
	// ErrorCode is the error code a held or failed instance stopped with.
	ErrorCode string
	// HeldAt is a definition key: held instances whose failed occurrence,
	// where they wait, is of that definition (as the health page counts
	// them by definition).
	HeldAt string
	// RetryingAt is a definition key: running instances one of whose
	// occurrences of that definition waits out a retry delay (as the
	// health page counts them by definition). A bulk retry with it brings
	// those retries forward.
	RetryingAt string
	// CreatedAfter and CreatedBefore bound the creation time: [after, before).
	CreatedAfter  *time.Time
	CreatedBefore *time.Time
	// MatchedBefore, for a bulk action, keeps out a held instance held
	// since then (its latest failure later): with CreatedBefore at the
	// same moment (see PinMatched), the instances that matched then.
	MatchedBefore *time.Time
	Before        *uuid.UUID // keyset cursor: ids below it
	// After, when set (and Before is not), asks for the page just above
	// it, still returned newest first (a list's previous page).
	After *uuid.UUID
	Limit int
}

// versionPtr is a version filter for a query: nil for every version.
func versionPtr(v int) *int32 {
	if v == 0 {
		return nil
	}
	n := int32(v)
	return &n
}

// idSlack bounds how far a row's id (a UUIDv7, of this replica's clock)
// is from its created_at (the transaction's clock, following the
// database's): a start's id is minted when its request is read, before its
// transaction, a batch's items over the batch's run, an occurrence's as
// its transaction runs.
const idSlack = time.Minute

// idFrom and idTo widen a creation window [t, …) and [… , t) into an id
// range: ids are UUIDv7, so the range keeps the newest-first index order,
// and the rows' created_at, which the API shows, decides within it.
func idFrom(t *time.Time) *uuid.UUID { return idBound(t, -idSlack) }

func idTo(t *time.Time) *uuid.UUID { return idBound(t, idSlack) }

// idBound is the smallest UUIDv7 of the millisecond t+d.
func idBound(t *time.Time, d time.Duration) *uuid.UUID {
	if t == nil {
		return nil
	}
	var u uuid.UUID
	ms := uint64(max(t.Add(d).UnixMilli(), 0))
	for i := range 6 {
		u[i] = byte(ms >> (40 - 8*i))
	}
	return &u
}

// ListInstances returns instances newest first, without their inputs
// (Inputs is nil): GetInstance has them.
func (e *Engine) ListInstances(ctx context.Context, f InstanceFilter) ([]Instance, error) {
	var rows []queries.InstanceListRow
	var err error
	if f.After != nil && f.Before == nil {
		var after []queries.InstanceListAfterRow
		after, err = e.q.InstanceListAfter(ctx, queries.InstanceListAfterParams{ProcessKey: strPtr(f.ProcessKey), Version: versionPtr(f.Version), Status: strPtr(f.Status),
			BusinessKey: strPtr(f.BusinessKey), ErrorCode: strPtr(f.ErrorCode), HeldAt: strPtr(f.HeldAt), RetryingAt: strPtr(f.RetryingAt), Now: e.at(), CreatedFrom: idFrom(f.CreatedAfter), CreatedTo: idTo(f.CreatedBefore), CreatedAfter: f.CreatedAfter, CreatedBefore: f.CreatedBefore, After: *f.After, Max: int32(f.Limit)})
		rows = make([]queries.InstanceListRow, len(after))
		for i, r := range after {
			rows[len(after)-1-i] = queries.InstanceListRow(r)
		}
	} else {
		rows, err = e.q.InstanceList(ctx, queries.InstanceListParams{ProcessKey: strPtr(f.ProcessKey), Version: versionPtr(f.Version), Status: strPtr(f.Status),
			BusinessKey: strPtr(f.BusinessKey), ErrorCode: strPtr(f.ErrorCode), HeldAt: strPtr(f.HeldAt), RetryingAt: strPtr(f.RetryingAt), Now: e.at(), CreatedFrom: idFrom(f.CreatedAfter), CreatedTo: idTo(f.CreatedBefore), CreatedAfter: f.CreatedAfter, CreatedBefore: f.CreatedBefore, Before: f.Before, Max: int32(f.Limit)})
	}
	if err != nil {
		return nil, wrap("list instances", err)
	}
	out := make([]Instance, len(rows))
	for i, r := range rows {
		out[i] = Instance{ID: r.ID, ProcessKey: r.ProcessKey, Version: int(r.Version), Status: r.Status, BusinessKey: r.BusinessKey,
			EndNode: r.EndNode, ErrorCode: r.ErrorCode, CreatedAt: r.CreatedAt, EndedAt: r.EndedAt}
	}
	return out, nil
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// StopInstance cancels a running or held instance and every open occurrence
// of it in one transaction. Stopping a cancelled instance again is a no-op;
// stopping a finished one is refused with instance_ended.
func (e *Engine) StopInstance(ctx context.Context, id uuid.UUID) (Instance, error) {
	err := e.tx(ctx, func(q *queries.Queries, _ pgx.Tx) error {
		row, err := q.InstanceLock(ctx, queries.InstanceLockParams{ID: id, Now: e.at()})
		if isNoRows(err) {
			return notFound("instance %s", id)
		}
		if err != nil {
			return err
		}
		inst, now := row.Instance, row.Now
		switch inst.Status {
		case InstanceCancelled:
			return nil
		case InstanceCompleted, InstanceFailed:
			return fault.New(fault.Conflict, "instance_ended", "instance %s has already ended (%s): there is nothing to stop", id, inst.Status)
		}
		return e.cancelInstance(ctx, q, inst, now)
	})
	if err != nil {
		return Instance{}, wrap("stop instance", err)
	}
	return e.GetInstance(ctx, id)
}

// Invisible reports a control or format character (a byte order mark, a
// zero-width space): one no filter typed by hand would hold.
func Invisible(r rune) bool {
	// U+2028 and U+2029 (Zl, Zp) break lines as a control character does
	// in browsers, JavaScript and log viewers.
	return unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
}

// PinMatched narrows f to the instances that matched it at at, the moment
// a bulk action's count was read: created before it, and held before it
// when held. During an incident instances keep coming to match (new ones,
// running ones held as a deadline passes), and each would change the
// count the operator confirms, who could then never act; they are left
// for the next action.
func (f *InstanceFilter) PinMatched(at time.Time) {
	if f.CreatedBefore == nil || at.Before(*f.CreatedBefore) {
		f.CreatedBefore = &at
	}
	f.MatchedBefore = &at
}

// InstanceStatuses returns the status of each of ids that exists, for
// the reads that wait for instances to end (internal/endwait).
func (e *Engine) InstanceStatuses(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]string, error) {
	rows, err := e.q.InstanceStatuses(ctx, ids)
	if err != nil {
		return nil, wrap("instance statuses", err)
	}
	out := make(map[uuid.UUID]string, len(rows))
	for _, r := range rows {
		out[r.ID] = r.Status
	}
	return out, nil
}
