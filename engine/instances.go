package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/jsontree"
	"github.com/relais/relais/queries"
)

// Instance statuses.
const (
	InstanceRunning   = "running"
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

func (e *Engine) instanceFromRow(ctx context.Context, row queries.Instance) Instance {
	inst := Instance{ID: row.ID, ProcessKey: row.ProcessKey, Version: int(row.Version), Status: row.Status, BusinessKey: row.BusinessKey,
		EndNode: row.EndNode, ErrorCode: row.ErrorCode, CreatedAt: row.CreatedAt, EndedAt: row.EndedAt, Inputs: json.RawMessage("{}")}
	if pv, err := e.GetProcessVersion(ctx, row.ProcessKey, int(row.Version)); err == nil {
		inst.Inputs = pv.Process.Inputs.Mask(row.Inputs)
	}
	return inst
}

// canonicalRequest identifies a start request for Idempotency-Key replays,
// over the request as sent: the process key, the version as given (absent
// and 0 both mean "the latest"), the inputs and the business key. Equal
// JSON is equal whatever its formatting and key order; number literals
// are compared as written, so that two large integers a float64 would
// confuse never pass for one request. It depends on nothing stored, so a
// replay is recognized before the version is resolved or the inputs
// validated.
func canonicalRequest(req StartRequest) []byte {
	b := append([]byte(nil), `{"business_key":`...)
	if req.BusinessKey != nil {
		b = jsontree.AppendString(b, *req.BusinessKey)
	} else {
		b = append(b, "null"...)
	}
	if n, err := jsontree.Read(req.Inputs, maxInputsDepth); err == nil {
		b = append(b, `,"inputs":`...)
		b = jsontree.Append(b, n, true)
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
	if existing.RequestDigest == nil || !e.sameDigest(canonical, *existing.RequestDigest) {
		return queries.Instance{}, true, fault.New(fault.Unprocessable, "idempotency_key_reused", "Idempotency-Key %q was used for a different request", req.IdempotencyKey)
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
	if len(req.Inputs) == 0 {
		req.Inputs = json.RawMessage("{}")
	}
	var idem, digest *string
	var canonical []byte
	if req.IdempotencyKey != "" {
		canonical = canonicalRequest(req)
		d := e.digest(canonical)
		idem, digest = &req.IdempotencyKey, &d
		inst, found, err := e.replayStart(ctx, e.q, req, canonical)
		if err != nil {
			return Instance{}, false, wrap("start instance", err)
		}
		if found {
			return e.instanceFromRow(ctx, inst), false, nil
		}
	}
	pv, err := e.GetProcessVersion(ctx, req.ProcessKey, req.Version)
	if err != nil {
		if fault.HasCode(err, "not_found") && req.Version > 0 {
			return Instance{}, false, fault.New(fault.Unprocessable, "unknown_version", "process %q has no version %d", req.ProcessKey, req.Version).
				WithErrors([]fault.FieldError{{Path: "/version", Message: "no such version"}})
		}
		return Instance{}, false, err
	}
	v, err := e.schemas.Validator(pv.Digest+"/inputs", pv.Process.Inputs)
	if err != nil {
		return Instance{}, false, wrap("compile process inputs", err)
	}
	if vs := v.Validate(req.Inputs); len(vs) > 0 {
		for i := range vs {
			vs[i].Path = "/inputs" + vs[i].Path
		}
		return Instance{}, false, violations("invalid_inputs", "the inputs violate the process contract", vs)
	}
	id := uuid.Must(uuid.NewV7())
	public, sealed, err := e.seal(pv.Process.Inputs, req.Inputs, aadInstanceInputs(id))
	if err != nil {
		return Instance{}, false, err
	}
	var inst queries.Instance
	created := false
	err = e.tx(ctx, func(q *queries.Queries, _ pgx.Tx) error {
		rows, err := q.InstanceInsert(ctx, queries.InstanceInsertParams{ID: id, ProcessKey: pv.Key, Version: int32(pv.Version),
			BusinessKey: req.BusinessKey, Inputs: public, SealedInputs: sealed, IdempotencyKey: idem, RequestDigest: digest, Now: e.at()})
		if isNoRows(err) && digest != nil {
			// A concurrent first request with the key inserted since
			// the lookup above; ON CONFLICT waited for it to commit.
			existing, found, err := e.replayStart(ctx, q, req, canonical)
			if err != nil {
				return err
			}
			if !found {
				return fmt.Errorf("instance with Idempotency-Key %q conflicted but cannot be found", req.IdempotencyKey)
			}
			inst = existing
			return nil
		}
		if err != nil {
			return err
		}
		inst, created = rows, true
		// The row's created_at was set from the statement's clock.
		r := e.newRun(ctx, q, inst, inst.CreatedAt, pv)
		// A new instance has completed no node: no outputs to load.
		r.outputs = map[string]json.RawMessage{}
		return r.enter(pv.Process.Start)
	})
	if err != nil {
		return Instance{}, false, wrap("start instance", err)
	}
	if created {
		// Re-read: advancing may already have ended the instance.
		if row, err := e.q.InstanceGet(ctx, inst.ID); err == nil {
			inst = row
		}
	}
	return e.instanceFromRow(ctx, inst), created, nil
}

// GetInstance returns one instance (masked).
func (e *Engine) GetInstance(ctx context.Context, id uuid.UUID) (Instance, error) {
	row, err := e.q.InstanceGet(ctx, id)
	if isNoRows(err) {
		return Instance{}, notFound("instance %s", id)
	}
	if err != nil {
		return Instance{}, wrap("get instance", err)
	}
	return e.instanceFromRow(ctx, row), nil
}

// InstanceFilter selects instances; empty fields do not filter.
type InstanceFilter struct {
	ProcessKey  string
	Status      string
	BusinessKey string
	Before      *uuid.UUID // keyset cursor: ids below it
	Limit       int
}

// ListInstances returns instances newest first.
func (e *Engine) ListInstances(ctx context.Context, f InstanceFilter) ([]Instance, error) {
	rows, err := e.q.InstanceList(ctx, queries.InstanceListParams{ProcessKey: strPtr(f.ProcessKey), Status: strPtr(f.Status),
		BusinessKey: strPtr(f.BusinessKey), Before: f.Before, Max: int32(f.Limit)})
	if err != nil {
		return nil, wrap("list instances", err)
	}
	out := make([]Instance, len(rows))
	for i, r := range rows {
		out[i] = e.instanceFromRow(ctx, r)
	}
	return out, nil
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// StopInstance cancels a running instance and every open occurrence of it in
// one transaction. Stopping a cancelled instance again is a no-op; stopping
// a finished one is refused with instance_ended.
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
		cancelled, err := q.OccurrenceCancelOpen(ctx, queries.OccurrenceCancelOpenParams{InstanceID: id, Now: &now})
		if err != nil {
			return err
		}
		if err := q.AttemptCancelOpen(ctx, queries.AttemptCancelOpenParams{InstanceID: id, Now: &now}); err != nil {
			return err
		}
		if _, err := q.InstanceEnd(ctx, queries.InstanceEndParams{ID: id, Status: InstanceCancelled, Now: &now}); err != nil {
			return err
		}
		for _, c := range cancelled {
			// Wakes the push runner holding an in-flight call so it aborts,
			// and tells the worker stream holding it (any replica).
			if err := q.Notify(ctx, queries.NotifyParams{Channel: ChannelCancel, Payload: CancelPayload(c.ID, CancelInstanceStopped)}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return Instance{}, wrap("stop instance", err)
	}
	return e.GetInstance(ctx, id)
}
