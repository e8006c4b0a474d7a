package engine

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/relais/relais/contracts"
	"github.com/relais/relais/internal/auth"
	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/queries"
)

// Sides of an occurrence a reveal reads from.
const (
	SideInputs  = "inputs"
	SideOutputs = "outputs"
)

// Reveal is one audit record: an admin was shown one sensitive value of an
// occurrence in clear. It never holds the value.
type Reveal struct {
	ID           int64
	OccurrenceID uuid.UUID
	Side         string // SideInputs or SideOutputs
	Field        string // RFC 6901 JSON pointer into that side's value
	TokenID      *int64 // nil when the principal had no stored token
	Principal    string // the token's name at the time of the reveal
	RevealedAt   time.Time
	// Reason is why, as the admin wrote it; nil for reveals recorded
	// before reasons were asked for.
	Reason *string
	// OccurrenceDeleted is set, in a listed record, once retention deleted
	// the occurrence (the record outlives it).
	OccurrenceDeleted bool
}

// Revealed is a sensitive value shown in clear and the audit record that
// was committed before it was returned.
type Revealed struct {
	Value json.RawMessage
	Audit Reveal
}

// RevealFilter selects audit records; zero fields do not filter.
type RevealFilter struct {
	Occurrence *uuid.UUID
	Before     int64 // keyset cursor: ids below it (newest first)
	Limit      int
}

// RevealSensitive returns one sensitive value of an occurrence in clear,
// for an admin who asked for it explicitly, and records who saw which
// field, when and why. See RevealValue.
func (e *Engine) RevealSensitive(ctx context.Context, p auth.Principal, occurrence uuid.UUID, side, pointer, reason string) (json.RawMessage, error) {
	r, err := e.RevealValue(ctx, p, occurrence, side, pointer, reason)
	if err != nil {
		return nil, err
	}
	return r.Value, nil
}

// RevealValue is RevealSensitive returning the audit record as well.
//
// Only admins may reveal, and only a field whose effective classification
// (by the occurrence's pinned revision) is exactly sensitive: secret values
// can never be revealed (DESIGN §5), and normal values are not masked in
// the first place. Secret values nested in the revealed one stay masked.
// The audit row and the read of the value are one transaction, so no value
// leaves the engine without its record committed. reason (required, at
// most MaxReason characters) is recorded with it.
func (e *Engine) RevealValue(ctx context.Context, p auth.Principal, occurrence uuid.UUID, side, pointer, reason string) (Revealed, error) {
	if p.Role != auth.RoleAdmin {
		return Revealed{}, fault.New(fault.Forbidden, "forbidden", "only an admin may reveal a sensitive value")
	}
	// Why is half of an audit: required, as an operator action's reason.
	if err := checkReason(reason); err != nil {
		return Revealed{}, err
	}
	if side != SideInputs && side != SideOutputs {
		return Revealed{}, fault.New(fault.BadRequest, "invalid_request", "side must be inputs or outputs").
			WithErrors([]fault.FieldError{{Path: "/side", Message: "must be inputs or outputs"}})
	}
	path, ok := pointerPath(pointer)
	if !ok {
		return Revealed{}, invalidField(side, pointer)
	}
	var out Revealed
	err := e.tx(ctx, func(q *queries.Queries, _ pgx.Tx) error {
		row, err := q.OccurrenceGet(ctx, occurrence)
		if isNoRows(err) {
			return notKept("occurrence %s", occurrence)
		}
		if err != nil {
			return wrap("reveal: get occurrence", err)
		}
		rev, err := e.revision(ctx, q, row.DefinitionKey, int(row.Revision))
		if err != nil {
			return wrap("reveal: revision", err)
		}
		contract, public, sealed, aad := rev.Working.Inputs, row.Inputs, row.SealedInputs, aadOccurrenceInputs(row.ID)
		if side == SideOutputs {
			contract, public, sealed, aad = rev.Working.Outputs, row.Outputs, row.SealedOutputs, aadOccurrenceOutputs(row.ID)
		}
		f, class, ok := contract.Lookup(path)
		if !ok {
			return invalidField(side, pointer)
		}
		// A list of protected items is masked whole, as they are.
		class = contracts.WholeClass(f, class)
		switch class {
		case contracts.ClassSensitive:
		case contracts.ClassNormal:
			return fault.New(fault.Unprocessable, "not_protected", "%s %s is not masked: there is nothing to reveal", side, pointer)
		default:
			return fault.New(fault.Forbidden, "not_revealable", "secret values can never be revealed")
		}
		if public == nil {
			return notFound("%s of occurrence %s", side, occurrence)
		}
		full, err := e.unseal(public, sealed, aad)
		if err != nil && keyMissing(err) {
			// The replicas that have the key reveal it (lifecycle QA: a
			// 500 said nothing of why).
			fe := fault.New(fault.Unavailable, "data_key_missing",
				"this replica cannot open the value: it was sealed with a data key this replica lacks (%s); another replica may reveal it", sameKeys)
			fe.RetryAfter = time.Second
			return fe
		}
		if err != nil {
			return wrap("reveal", err)
		}
		value, ok := contract.Reveal(full, pointer)
		if !ok {
			return notFound("a value at %s %s of occurrence %s", side, pointer, occurrence)
		}
		why := strings.TrimSpace(reason)
		params := queries.RevealAuditInsertParams{OccurrenceID: row.ID, Side: side, Field: pointer, Principal: p.Name, Reason: &why}
		if p.TokenID != 0 {
			params.TokenID = &p.TokenID
		}
		if e.now != nil {
			at := e.now().UTC()
			params.RevealedAt = &at
		}
		audit, err := q.RevealAuditInsert(ctx, params)
		if err != nil {
			return wrap("reveal: record", err)
		}
		out = Revealed{Value: value, Audit: revealFromRow(audit)}
		return nil
	})
	if err != nil {
		return Revealed{}, err
	}
	// The record, never the value: logs are an observation surface. The
	// token's id tells apart tokens that share a name.
	var byToken any
	if id := out.Audit.TokenID; id != nil {
		byToken = *id
	}
	e.logger.InfoContext(ctx, "sensitive value revealed", "audit_id", out.Audit.ID, "occurrence", occurrence,
		"side", side, "field", pointer, "by", p.Name, "by_token_id", byToken)
	return out, nil
}

// ListReveals returns reveal audit records newest first.
func (e *Engine) ListReveals(ctx context.Context, f RevealFilter) ([]Reveal, error) {
	var before *int64
	if f.Before > 0 {
		before = &f.Before
	}
	limit := int32(f.Limit)
	if limit <= 0 {
		limit = 50
	}
	var out []Reveal
	if f.Occurrence != nil {
		rows, err := e.q.RevealAuditListByOccurrence(ctx, queries.RevealAuditListByOccurrenceParams{OccurrenceID: *f.Occurrence, Before: before, Max: limit})
		if err != nil {
			return nil, wrap("list reveals", err)
		}
		for _, r := range rows {
			out = append(out, listedReveal(r.RevealAudit, r.OccurrenceExists))
		}
		return out, nil
	}
	rows, err := e.q.RevealAuditList(ctx, queries.RevealAuditListParams{Before: before, Max: limit})
	if err != nil {
		return nil, wrap("list reveals", err)
	}
	for _, r := range rows {
		out = append(out, listedReveal(r.RevealAudit, r.OccurrenceExists))
	}
	return out, nil
}

// listedReveal is a record of the reveal log, its occurrence gone when
// retention deleted it.
func listedReveal(r queries.RevealAudit, exists bool) Reveal {
	v := revealFromRow(r)
	v.OccurrenceDeleted = !exists
	return v
}

func revealFromRow(r queries.RevealAudit) Reveal {
	return Reveal{ID: r.ID, OccurrenceID: r.OccurrenceID, Side: r.Side, Field: r.Field, TokenID: r.TokenID,
		Principal: r.Principal, RevealedAt: r.RevealedAt, Reason: r.Reason}
}

// pointerPath splits a JSON pointer into the field path Lookup takes. It
// accepts only concrete pointers: list items by their canonical index,
// never the "*" wildcard Lookup also understands, so that the audit names
// exactly one value.
func pointerPath(pointer string) ([]string, bool) {
	if !strings.HasPrefix(pointer, "/") {
		return nil, false
	}
	var path []string
	for _, seg := range strings.Split(pointer[1:], "/") {
		if seg == "" || seg == "*" || len(seg) > 1 && seg[0] == '0' && isDigits(seg) {
			return nil, false
		}
		path = append(path, strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~"))
	}
	return path, true
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func invalidField(side, pointer string) *fault.Error {
	if pointer != "" && !strings.HasPrefix(pointer, "/") {
		// A field's name where its pointer belongs: say which pointer.
		return fault.New(fault.Unprocessable, "invalid_field", "%q is not a JSON pointer: a field is named by its pointer, as in %q", pointer, "/"+pointer).
			WithErrors([]fault.FieldError{{Path: "/field", Message: "must be the JSON pointer of a field of the pinned revision's contract, starting with /"}})
	}
	return fault.New(fault.Unprocessable, "invalid_field", "%q is not a field of this occurrence's %s contract", pointer, side).
		WithErrors([]fault.FieldError{{Path: "/field", Message: "must be the JSON pointer of a field of the pinned revision's contract"}})
}
