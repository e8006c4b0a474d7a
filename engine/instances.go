package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/relais/relais/fault"
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

// requestDigest identifies a start request's body for Idempotency-Key
// replays: equal JSON (whatever its formatting and key order) is equal.
func requestDigest(req StartRequest) string {
	var inputs any
	_ = json.Unmarshal(req.Inputs, &inputs)
	b, _ := json.Marshal(map[string]any{"version": req.Version, "inputs": inputs, "business_key": req.BusinessKey})
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// StartInstance validates the inputs against the pinned version's contract,
// creates the instance and advances it to its first node, in one
// transaction. With an IdempotencyKey, a replay of the same request returns
// the same instance (created false) and a different request with that key
// is refused with idempotency_key_reused.
func (e *Engine) StartInstance(ctx context.Context, req StartRequest) (Instance, bool, error) {
	pv, err := e.GetProcessVersion(ctx, req.ProcessKey, req.Version)
	if err != nil {
		if fault.HasCode(err, "not_found") && req.Version > 0 {
			return Instance{}, false, fault.New(fault.Unprocessable, "unknown_version", "process %q has no version %d", req.ProcessKey, req.Version).
				WithErrors([]fault.FieldError{{Path: "/version", Message: "no such version"}})
		}
		return Instance{}, false, err
	}
	if len(req.Inputs) == 0 {
		req.Inputs = json.RawMessage("{}")
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
	var idem, digest *string
	if req.IdempotencyKey != "" {
		d := requestDigest(req)
		idem, digest = &req.IdempotencyKey, &d
	}
	var inst queries.Instance
	created := false
	err = e.tx(ctx, func(q *queries.Queries, _ pgx.Tx) error {
		rows, err := q.InstanceInsert(ctx, queries.InstanceInsertParams{ID: id, ProcessKey: pv.Key, Version: int32(pv.Version),
			BusinessKey: req.BusinessKey, Inputs: public, SealedInputs: sealed, IdempotencyKey: idem, RequestDigest: digest})
		if isNoRows(err) {
			existing, err := q.InstanceGetByIdempotencyKey(ctx, queries.InstanceGetByIdempotencyKeyParams{ProcessKey: pv.Key, IdempotencyKey: idem})
			if err != nil {
				return err
			}
			if existing.RequestDigest == nil || *existing.RequestDigest != *digest {
				return fault.New(fault.Unprocessable, "idempotency_key_reused", "Idempotency-Key %q was used for a different request", req.IdempotencyKey)
			}
			inst = existing
			return nil
		}
		if err != nil {
			return err
		}
		inst, created = rows, true
		r, err := e.newRun(ctx, q, inst, pv)
		if err != nil {
			return err
		}
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
		inst, err := q.InstanceLock(ctx, id)
		if isNoRows(err) {
			return notFound("instance %s", id)
		}
		if err != nil {
			return err
		}
		switch inst.Status {
		case InstanceCancelled:
			return nil
		case InstanceCompleted, InstanceFailed:
			return fault.New(fault.Conflict, "instance_ended", "instance %s already ended %s", id, inst.Status)
		}
		now, err := e.clock(ctx, q.DBTX())
		if err != nil {
			return err
		}
		cancelled, err := q.OccurrenceCancelOpen(ctx, queries.OccurrenceCancelOpenParams{InstanceID: id, Now: now})
		if err != nil {
			return err
		}
		if err := q.AttemptCancelOpen(ctx, queries.AttemptCancelOpenParams{InstanceID: id, Now: now}); err != nil {
			return err
		}
		if _, err := q.InstanceEnd(ctx, queries.InstanceEndParams{ID: id, Status: InstanceCancelled, Now: &now}); err != nil {
			return err
		}
		for _, c := range cancelled {
			// Wakes the push runner holding an in-flight call so it aborts.
			if err := q.Notify(ctx, queries.NotifyParams{Channel: ChannelCancel, Payload: c.ID.String()}); err != nil {
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
