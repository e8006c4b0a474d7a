package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/relais/relais/contracts"
	"github.com/relais/relais/engine/process"
	"github.com/relais/relais/queries"
)

// Notification channels. Payloads are small and carry no value: a channel
// name plus ids, keys and times.
const (
	// ChannelOccurrence announces that an occurrence became (or will
	// become) claimable: "mode|definition|revision|unix-ms".
	ChannelOccurrence = "relais_occurrence"
	// ChannelCancel announces that an occurrence was taken from whoever
	// holds it: "id|reason" (CancelPayload).
	ChannelCancel = "relais_cancel"
)

// Occurrence modes and statuses.
const (
	ModePull = "pull"
	ModePush = "push"

	StatusAvailable = "available"
	StatusReserved  = "reserved"
	StatusDeferred  = "deferred"
	StatusCompleted = "completed"
	StatusFailed    = "failed"
	StatusCancelled = "cancelled"
)

// OccurrenceStatuses are every occurrence status, in lifecycle order: the
// one list the API's filters and the console's views use.
var OccurrenceStatuses = []string{StatusAvailable, StatusReserved, StatusDeferred, StatusCompleted, StatusFailed, StatusCancelled}

// Attempt outcomes.
const (
	OutcomeCompleted = "completed"
	OutcomeFailed    = "failed"
	OutcomeExpired   = "expired"
	OutcomeRejected  = "rejected"
	OutcomeCancelled = "cancelled"
	// OutcomeReleased: the worker handed the reservation back (graceful
	// shutdown); the attempt is given back to the budget.
	OutcomeReleased = "released"
	// OutcomeDisconnected: the stream holding the reservation ended.
	OutcomeDisconnected = "disconnected"
)

// AvailabilityPayload formats a ChannelOccurrence payload.
func AvailabilityPayload(mode, definition string, revision int, at time.Time) string {
	return mode + "|" + definition + "|" + strconv.Itoa(revision) + "|" + strconv.FormatInt(at.UnixMilli(), 10)
}

// ParseAvailabilityPayload reads a ChannelOccurrence payload.
func ParseAvailabilityPayload(p string) (mode, definition string, revision int, at time.Time, ok bool) {
	parts := strings.Split(p, "|")
	if len(parts) != 4 {
		return "", "", 0, time.Time{}, false
	}
	rev, err1 := strconv.Atoi(parts[2])
	ms, err2 := strconv.ParseInt(parts[3], 10, 64)
	if err1 != nil || err2 != nil {
		return "", "", 0, time.Time{}, false
	}
	return parts[0], parts[1], rev, time.UnixMilli(ms), true
}

// run advances one instance inside a transaction that holds its row lock.
type run struct {
	e    *Engine
	ctx  context.Context
	q    *queries.Queries
	now  time.Time
	inst queries.Instance
	pv   *ProcessVersion
	// lockedAt is when a settlement's occurrence was locked, by the
	// database's clock then (never before now), which its lock is judged
	// against: a stream's hand-back that committed while the settlement
	// waited for the row, or after its transaction began, set the expiry
	// to its own clock, later than now.
	lockedAt time.Time

	input json.RawMessage // unsealed process inputs, loaded on first need
	// outputs and errors are the outputs of completed nodes (unsealed)
	// and the errors of failed ones, loaded together on first need; a
	// settlement in this run adds to them once loaded.
	outputs map[string]json.RawMessage
	errors  map[string]process.NodeError
	// failure is the error code that sent the instance down its current
	// failure path; a failed end node records it on the instance.
	failure *string
	// reportDigest and reportAnswer, when set, are recorded on the attempt
	// a worker's failure report ends, so a replay answers the same.
	reportDigest *string
	reportAnswer []byte
	// created are the occurrences this run inserted, in order.
	created []queries.Occurrence
	// newInstance is set when this transaction created the instance: no
	// other can have entered its nodes (see enter).
	newInstance bool
}

// newRun prepares the run of inst, locked by this transaction, acting at now
// (read by the statement that locked it).
func (e *Engine) newRun(ctx context.Context, q *queries.Queries, inst queries.Instance, now time.Time, pv *ProcessVersion) *run {
	return &run{e: e, ctx: ctx, q: q, now: now.UTC(), inst: inst, pv: pv}
}

// runForOccurrence locks the instance of an occurrence (found in the same
// round trip) and prepares its run. Settlements start here: instance
// first, then occurrence, the order stop uses too.
func (e *Engine) runForOccurrence(ctx context.Context, q *queries.Queries, occurrence uuid.UUID) (*run, error) {
	row, err := q.InstanceLockByOccurrence(ctx, queries.InstanceLockByOccurrenceParams{OccurrenceID: occurrence, Now: e.at()})
	if isNoRows(err) {
		// A worker settling late may find it deleted by retention.
		return nil, notKeptForConsumer(occurrence)
	}
	if err != nil {
		return nil, err
	}
	return e.lockedRun(ctx, q, row.Instance, row.Now)
}

// lockedRun prepares the run of inst, locked by this transaction at now.
func (e *Engine) lockedRun(ctx context.Context, q *queries.Queries, inst queries.Instance, now time.Time) (*run, error) {
	pv, err := e.processVersion(ctx, q, inst.ProcessKey, int(inst.Version))
	if err != nil {
		return nil, err
	}
	return e.newRun(ctx, q, inst, now, pv), nil
}

// runFor locks an instance and prepares its run; ok is false when the
// instance is locked by another transaction and skipLocked is set.
func (e *Engine) runFor(ctx context.Context, q *queries.Queries, id uuid.UUID, skipLocked bool) (*run, bool, error) {
	var row queries.InstanceLockRow
	var err error
	if skipLocked {
		var skipped queries.InstanceLockSkipLockedRow
		skipped, err = q.InstanceLockSkipLocked(ctx, queries.InstanceLockSkipLockedParams{ID: id, Now: e.at()})
		if isNoRows(err) {
			return nil, false, nil
		}
		row = queries.InstanceLockRow(skipped)
	} else {
		row, err = q.InstanceLock(ctx, queries.InstanceLockParams{ID: id, Now: e.at()})
	}
	if err != nil {
		return nil, false, err
	}
	r, err := e.lockedRun(ctx, q, row.Instance, row.Now)
	return r, err == nil, err
}

func (r *run) scope() (process.Scope, error) {
	if r.input == nil {
		in, err := r.e.unseal(r.inst.Inputs, r.inst.SealedInputs, aadInstanceInputs(r.inst.ID))
		if err != nil {
			return process.Scope{}, err
		}
		r.input = in
	}
	if r.outputs == nil {
		rows, err := r.q.OccurrenceListSettled(r.ctx, r.inst.ID)
		if err != nil {
			return process.Scope{}, err
		}
		r.outputs = make(map[string]json.RawMessage, len(rows))
		r.errors = map[string]process.NodeError{}
		for _, row := range rows {
			if row.Status == StatusFailed {
				// Messages were scrubbed of protected values when stored.
				r.errors[row.Node] = process.NodeError{Code: deref(row.ErrorCode), Message: deref(row.ErrorMessage)}
				continue
			}
			out, err := r.e.unseal(row.Outputs, row.SealedOutputs, aadOccurrenceOutputs(row.ID))
			if err != nil {
				return process.Scope{}, err
			}
			r.outputs[row.Node] = out
		}
	}
	return process.Scope{InstanceID: r.inst.ID.String(), BusinessKey: r.inst.BusinessKey, Input: r.input, Outputs: r.outputs, Errors: r.errors}, nil
}

// nothingSettled tells the run that its instance has no settled
// occurrence yet (it was just created), so the scope needs no query.
func (r *run) nothingSettled() {
	r.outputs, r.errors = map[string]json.RawMessage{}, map[string]process.NodeError{}
}

// enter makes the instance reach node: an end node ends it; a pull or push
// node materializes its one occurrence. Several calls for one node create
// one occurrence: the (instance, node) unique key decides, not Go.
func (r *run) enter(name string) error {
	if r.inst.Status != InstanceRunning {
		return nil
	}
	node, ok := r.pv.Process.Nodes[name]
	if !ok {
		return fmt.Errorf("process %s v%d has no node %q", r.pv.Key, r.pv.Version, name)
	}
	if node.Kind == process.KindEnd {
		status, _ := r.pv.Process.EndStatus(name)
		var code *string
		if status == InstanceFailed {
			code = r.failure
		}
		if err := r.q.InstanceEnd(r.ctx, queries.InstanceEndParams{ID: r.inst.ID, Status: status, EndNode: &name, ErrorCode: code, Now: &r.now}); err != nil {
			return err
		}
		r.ended(status, name, code)
		return nil
	}
	rev, err := r.e.revision(r.ctx, r.q, node.Definition, node.Revision)
	if err != nil {
		return err
	}
	id := uuid.Must(uuid.NewV7())
	params := queries.OccurrenceInsertParams{
		ID: id, InstanceID: r.inst.ID, Node: name, DefinitionKey: node.Definition, Revision: int32(node.Revision),
		Mode: string(node.Kind), Status: StatusAvailable,
		Priority: int16(node.Policy.Priority), MaxAttempts: int32(node.Policy.MaxAttempts), RetryDelay: node.Policy.RetryDelay,
		RetryBackoff: node.Policy.Backoff(), AvailableAt: r.now, ClaimableAt: &r.now, Inputs: json.RawMessage("{}"),
		ProcessKey: &r.inst.ProcessKey, BusinessKey: r.inst.BusinessKey, ProcessVersion: &r.inst.Version,
	}
	if node.Policy.MaxRetryDelay > 0 {
		params.MaxRetryDelay = &node.Policy.MaxRetryDelay
	}
	if node.Policy.Deadline > 0 {
		d, at := node.Policy.Deadline, r.now.Add(node.Policy.Deadline)
		params.Deadline, params.DeadlineAt = &d, &at
	}
	if node.Kind == process.KindPush {
		t := node.PushTimeout(r.e.processLimits())
		params.Destination, params.Timeout = &node.Destination, &t
	}

	problem, protected, err := r.nodeInputs(name, rev, id, &params)
	if err != nil {
		return err
	}
	if problem != "" {
		// The occurrence exists, failed from birth, so operators see why
		// the instance went down its error path.
		code := CodeInvalidInputs
		params.Status, params.ClaimableAt, params.ErrorCode, params.ErrorMessage, params.SettledAt = StatusFailed, nil, &code, &problem, &r.now
	}
	var row queries.Occurrence
	if r.newInstance {
		// Its instance is this transaction's own: a node entered twice
		// (a join) is one this run created, and the row needs no reading
		// back, so the insert travels with the next statement.
		if slices.ContainsFunc(r.created, func(o queries.Occurrence) bool { return o.Node == name }) {
			return nil
		}
		if row, err = r.insertNew(params); err != nil {
			return err
		}
	} else {
		row, err = r.q.OccurrenceInsert(r.ctx, params)
		if isNoRows(err) {
			return nil // another advancement got there first
		}
		if err != nil {
			return err
		}
	}
	r.created = append(r.created, row)
	if row.Status == StatusFailed {
		if protected {
			// Routed, a protected value's failure would be an oracle: a
			// designer chaining nodes whose revisions constrain it ("^A",
			// "^B", …) would read it off the instance's path. It stops
			// the instance instead: one bit per instance, what validating
			// it at all tells.
			return r.stopOnFailure(name, deref(row.ErrorCode), deref(row.ErrorMessage))
		}
		return r.followFailure(name, deref(row.ErrorCode), deref(row.ErrorMessage))
	}
	return r.q.Notify(r.ctx, queries.NotifyParams{Channel: ChannelOccurrence,
		Payload: AvailabilityPayload(row.Mode, row.DefinitionKey, int(row.Revision), row.AvailableAt)})
}

// insertNew inserts an occurrence of the run's new instance and returns
// the row as the database stores it: what OccurrenceInsert would read back
// (created_at is the run's clock, the statement's own in a transaction
// that reads the database's; times and durations at its microseconds).
func (r *run) insertNew(p queries.OccurrenceInsertParams) (queries.Occurrence, error) {
	us := func(t *time.Time) *time.Time {
		if t == nil {
			return nil
		}
		v := t.Truncate(time.Microsecond)
		return &v
	}
	dus := func(d *time.Duration) *time.Duration {
		if d == nil {
			return nil
		}
		v := d.Truncate(time.Microsecond)
		return &v
	}
	row := queries.Occurrence{ID: p.ID, InstanceID: p.InstanceID, Node: p.Node, DefinitionKey: p.DefinitionKey, Revision: p.Revision,
		Mode: p.Mode, Status: p.Status, Priority: p.Priority, MaxAttempts: p.MaxAttempts, RetryDelay: p.RetryDelay.Truncate(time.Microsecond),
		Deadline: dus(p.Deadline), DeadlineAt: us(p.DeadlineAt), Destination: p.Destination, Timeout: dus(p.Timeout),
		AvailableAt: p.AvailableAt.Truncate(time.Microsecond), ClaimableAt: us(p.ClaimableAt), Inputs: p.Inputs, SealedInputs: p.SealedInputs,
		ErrorCode: p.ErrorCode, ErrorMessage: p.ErrorMessage, CreatedAt: r.now.Truncate(time.Microsecond), SettledAt: us(p.SettledAt),
		ProcessKey: p.ProcessKey, BusinessKey: p.BusinessKey, ProcessVersion: p.ProcessVersion,
		RetryBackoff: p.RetryBackoff, MaxRetryDelay: dus(p.MaxRetryDelay)}
	return row, r.q.OccurrenceInsertNew(r.ctx, queries.OccurrenceInsertNewParams{ID: row.ID, InstanceID: row.InstanceID, Node: row.Node,
		DefinitionKey: row.DefinitionKey, Revision: row.Revision, Mode: row.Mode, Status: row.Status, Priority: row.Priority,
		MaxAttempts: row.MaxAttempts, RetryDelay: row.RetryDelay, Deadline: row.Deadline, DeadlineAt: row.DeadlineAt,
		Destination: row.Destination, Timeout: row.Timeout, AvailableAt: row.AvailableAt, ClaimableAt: row.ClaimableAt,
		Inputs: row.Inputs, SealedInputs: row.SealedInputs, ErrorCode: row.ErrorCode, ErrorMessage: row.ErrorMessage,
		SettledAt: row.SettledAt, ProcessKey: row.ProcessKey, BusinessKey: row.BusinessKey, ProcessVersion: row.ProcessVersion,
		RetryBackoff: row.RetryBackoff, MaxRetryDelay: row.MaxRetryDelay, CreatedAt: row.CreatedAt})
}

// nodeInputs evaluates the node's bindings and validates them against the
// pinned revision, filling the stored (sealed) inputs. When the data make
// the inputs impossible to build or invalid, it returns a problem
// description free of values: the occurrence then fails from birth. Other
// errors (the database, a missing data key) abort the transaction instead,
// so nothing is advanced on their account.
//
// protected says a protected (sensitive or secret) value broke its
// contract: the failure is then not routed (see stopOnFailure).
func (r *run) nodeInputs(name string, rev *Revision, id uuid.UUID, params *queries.OccurrenceInsertParams) (problem string, protected bool, err error) {
	scope, err := r.scope()
	if err != nil {
		return "", false, err
	}
	inputs, err := r.pv.Process.EvaluateInputs(name, scope)
	if err != nil {
		return "inputs could not be built from the bindings", false, nil
	}
	v, _, err := r.e.Validators(rev)
	if err != nil {
		return "", false, err
	}
	if vs := v.Validate(inputs); len(vs) > 0 {
		described := protectedUndescribed(rev.Working.Inputs, vs)
		// Any failure of a node whose contract protects a value: were a
		// normal field's failure routed, a designer could make one fail
		// on purpose and read the protected value's check off the route.
		protected = rev.Working.Inputs.Protects()
		if slices.ContainsFunc(described, func(d contracts.Violation) bool { return d.Message == protectedViolation }) {
			r.e.logger.Warn("protected value refused by its node's contract", "event", EventProtectedValueRefused,
				"process", r.inst.ProcessKey, "version", r.inst.Version, "instance", r.inst.ID, "node", name,
				"definition", rev.Key, "revision", rev.Revision)
		}
		return "inputs violate the pinned revision: " + describeViolations(described), protected, nil
	}
	public, sealed, err := r.e.seal(rev.Working.Inputs, v.Integers(inputs), aadOccurrenceInputs(id))
	if err != nil {
		return "", false, err
	}
	params.Inputs, params.SealedInputs = public, sealed
	return "", false, nil
}

// describeViolations lists pointers and messages; messages come from the
// validator and name constraints, not values.
func describeViolations(vs []contracts.Violation) string {
	parts := make([]string, 0, len(vs))
	for _, v := range vs {
		if v.Path == "" {
			// The document itself (an unknown member, say): no pointer to
			// show, and ": " alone reads as a typo.
			parts = append(parts, v.Message)
			continue
		}
		parts = append(parts, v.Path+": "+v.Message)
	}
	sort.Strings(parts)
	return strings.Join(slices.Compact(parts), "; ")
}

// protectedViolation is what a protected value's violation says.
const protectedViolation = "does not satisfy its contract (a protected value: how is not said)"

// protectedUndescribed hides what vs say of protected values: a value
// bound from a secret that breaks "at most 4 characters" or a pattern
// tells operators its length and shape. The pointer stays, which names
// the field, not the value. A member the contract lacks (a misspelt
// output) keeps its message, which says so and names the field meant:
// called protected, it would send an operator looking for a protected
// field that does not exist.
func protectedUndescribed(c contracts.Contract, vs []contracts.Violation) []contracts.Violation {
	out := slices.Clone(vs)
	for i, v := range out {
		if v.Path != "" && !strings.HasPrefix(v.Message, contracts.NotAField) && classAt(c, v.Path) != contracts.ClassNormal {
			out[i].Message = protectedViolation
		}
	}
	return out
}

// ended records on r.inst what InstanceEnd stored, so the run's caller
// knows the instance without reading it again.
func (r *run) ended(status, node string, code *string) {
	countInstance(r.q, r.inst.ProcessKey, status)
	now := r.now
	r.inst.Status, r.inst.EndNode, r.inst.ErrorCode, r.inst.EndedAt = status, &node, code, &now
}

// followFailure sends the instance where node's on_error leads for code:
// down an error branch, or held at node (the failed occurrence stays as it
// is, failed with its error, for an operator to act on); without a target
// it fails the instance. message is the failure's stored (scrubbed)
// message, which the branch's bindings may read.
func (r *run) followFailure(node, code, message string) error {
	r.failure = &code
	if r.errors != nil {
		r.errors[node] = process.NodeError{Code: code, Message: message}
	}
	next, ok := r.pv.Process.NextOnFailure(node, code)
	switch {
	case ok && next.Hold:
		held, err := r.q.InstanceHold(r.ctx, queries.InstanceHoldParams{ID: r.inst.ID, ErrorCode: &code})
		if err != nil {
			return err
		}
		r.inst.Status, r.inst.ErrorCode = InstanceHeld, &code
		if held == 0 {
			return nil
		}
		return r.noteHeld(node, code)
	case ok:
		return r.enter(next.Node)
	}
	return r.failAt(node, code)
}

// stopOnFailure is followFailure for a failure that must not be routed:
// the instance is held when the node's on_error holds it, and fails at
// the node otherwise, whatever route on_error names.
func (r *run) stopOnFailure(node, code, message string) error {
	if next, ok := r.pv.Process.NextOnFailure(node, code); ok && next.Hold {
		return r.followFailure(node, code, message)
	}
	r.failure = &code
	if r.errors != nil {
		r.errors[node] = process.NodeError{Code: code, Message: message}
	}
	return r.failAt(node, code)
}

// unrouted reports whether o failed from birth at a node whose contract
// protects a value, a failure stopOnFailure did not route.
func (r *run) unrouted(o queries.Occurrence) (bool, error) {
	if deref(o.ErrorCode) != CodeInvalidInputs || o.Attempts > 0 {
		return false, nil
	}
	rev, err := r.e.revision(r.ctx, r.q, o.DefinitionKey, int(o.Revision))
	if err != nil {
		return false, err
	}
	return rev.Working.Inputs.Protects(), nil
}

// failAt ends the instance failed at node with code.
func (r *run) failAt(node, code string) error {
	if err := r.q.InstanceEnd(r.ctx, queries.InstanceEndParams{ID: r.inst.ID, Status: InstanceFailed, EndNode: &node, ErrorCode: &code, Now: &r.now}); err != nil {
		return err
	}
	r.ended(InstanceFailed, node, &code)
	return nil
}

// reconcile makes sure every node an instance has reached has its
// occurrence, walking from start along settled occurrences. It is
// idempotent and safe to run concurrently: it is how a replica recovers an
// instance whose advancement it cannot otherwise prove.
func (e *Engine) reconcile(ctx context.Context, id uuid.UUID) error {
	return wrap("reconcile", e.tx(ctx, func(q *queries.Queries, _ pgx.Tx) error {
		r, _, err := e.runFor(ctx, q, id, false)
		if err != nil {
			if isNoRows(err) {
				return notFound("instance %s", id)
			}
			return err
		}
		occs, err := q.OccurrenceListByInstance(ctx, id)
		if err != nil {
			return err
		}
		byNode := make(map[string]queries.Occurrence, len(occs))
		for _, o := range occs {
			byNode[o.Node] = o
		}
		node := r.pv.Process.Start
		for steps := 0; steps <= len(r.pv.Process.Nodes) && r.inst.Status == InstanceRunning; steps++ {
			o, ok := byNode[node]
			if !ok {
				return r.enter(node)
			}
			switch o.Status {
			case StatusCompleted:
				route := ""
				if o.Route != nil {
					route = *o.Route
				}
				next, err := r.pv.Process.NextOnSuccess(node, route)
				if err != nil {
					return err
				}
				node = next
			case StatusFailed:
				next, ok := r.pv.Process.NextOnFailure(node, deref(o.ErrorCode))
				if !ok || next.Hold {
					return nil
				}
				if stop, err := r.unrouted(o); err != nil || stop {
					return err
				}
				node = next.Node
			default:
				return nil // still open: nothing to advance
			}
			if n := r.pv.Process.Nodes[node]; n != nil && n.Kind == process.KindEnd {
				return r.enter(node)
			}
		}
		return nil
	}))
}
