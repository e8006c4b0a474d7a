package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/relais/relais/internal/auth"
	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/isoduration"
	"github.com/relais/relais/internal/suggest"
	"github.com/relais/relais/queries"
)

// Consumer is an external service allowed to pull occurrences of explicit
// definitions and revisions.
type Consumer struct {
	ID        int64
	Name      string
	Grants    []Grant
	CreatedAt time.Time
	RevokedAt *time.Time
}

// Grant authorizes a consumer for one definition; nil Revisions means every
// revision, present and future.
type Grant struct {
	Definition string
	Revisions  []int
}

func (e *Engine) checkGrants(ctx context.Context, grants []Grant) error {
	errs, err := e.grantProblems(ctx, grants)
	if err != nil {
		return err
	}
	if len(errs) > 0 {
		return fault.New(fault.Unprocessable, "invalid_grants", "the grants are invalid").WithErrors(errs)
	}
	return nil
}

// grantProblems lists what is wrong with grants, each at its pointer.
func (e *Engine) grantProblems(ctx context.Context, grants []Grant) ([]fault.FieldError, error) {
	var errs []fault.FieldError
	seen := map[string]bool{}
	var keys []string // every definition key, read when a grant names an unknown one
	for i, g := range grants {
		at := fmt.Sprintf("/grants/%d", i)
		if seen[g.Definition] {
			errs = append(errs, fault.FieldError{Path: at + "/definition", Message: "definition granted twice"})
			continue
		}
		seen[g.Definition] = true
		if IsKeyPattern(g.Definition) {
			// A pattern covers keys created later: nothing to look up.
			if g.Revisions != nil {
				errs = append(errs, fault.FieldError{Path: at + "/revisions", Message: `a pattern's revisions are all: omit them or say "all"`})
			}
			continue
		}
		if !validDefinitionKey(g.Definition) {
			errs = append(errs, fault.FieldError{Path: at + "/definition", Message: keyError(g.Definition)})
			continue
		}
		if _, err := e.q.DefinitionGet(ctx, g.Definition); isNoRows(err) {
			if keys == nil {
				if keys, err = e.q.DefinitionKeys(ctx); err != nil {
					return nil, wrap("check grants", err)
				}
			}
			errs = append(errs, fault.FieldError{Path: at + "/definition", Message: fmt.Sprintf("unknown definition %q%s", g.Definition, suggest.Hint(g.Definition, keys))})
			continue
		} else if err != nil {
			return nil, wrap("check grants", err)
		}
		if g.Revisions != nil && len(g.Revisions) == 0 {
			errs = append(errs, fault.FieldError{Path: at + "/revisions", Message: `must list revisions or be "all"`})
		}
		var existing []int32
		if len(g.Revisions) > 0 {
			var err error
			if existing, err = e.q.RevisionNumbers(ctx, g.Definition); err != nil {
				return nil, wrap("check grants", err)
			}
		}
		for j, r := range g.Revisions {
			switch {
			case r < 1:
				errs = append(errs, fault.FieldError{Path: fmt.Sprintf("%s/revisions/%d", at, j), Message: "must be a revision number"})
			case slices.Contains(g.Revisions[:j], r):
				errs = append(errs, fault.FieldError{Path: fmt.Sprintf("%s/revisions/%d", at, j), Message: fmt.Sprintf("revision %d is listed twice", r)})
			case !slices.Contains(existing, int32(r)):
				// A grant to a revision that does not exist yet would
				// silently widen when it is snapshotted, to a contract
				// nobody reviewed for this consumer.
				errs = append(errs, fault.FieldError{Path: fmt.Sprintf("%s/revisions/%d", at, j), Message: fmt.Sprintf("definition %q has no revision %d", g.Definition, r)})
			}
		}
	}
	return errs, nil
}

func toInt32s(in []int) []int32 {
	if in == nil {
		return nil
	}
	out := make([]int32, len(in))
	for i, v := range in {
		out[i] = int32(v)
	}
	return out
}

func toInts(in []int32) []int {
	if in == nil {
		return nil
	}
	out := make([]int, len(in))
	for i, v := range in {
		out[i] = int(v)
	}
	return out
}

// CreateConsumer creates a consumer with its grants and returns its token,
// shown this once.
func (e *Engine) CreateConsumer(ctx context.Context, name string, grants []Grant) (Consumer, string, error) {
	var named []fault.FieldError
	if msg := NameProblem(name, MaxConsumerName); msg != "" {
		named = append(named, fault.FieldError{Path: "/name", Message: msg})
	}
	granted, err := e.grantProblems(ctx, grants)
	switch {
	case err != nil:
		return Consumer{}, "", err
	case len(named) > 0:
		// Every problem at once, the malformed request's status first.
		return Consumer{}, "", fault.New(fault.BadRequest, "invalid_request", "the consumer is invalid").WithErrors(append(named, granted...))
	case len(granted) > 0:
		return Consumer{}, "", fault.New(fault.Unprocessable, "invalid_grants", "the grants are invalid").WithErrors(granted)
	}
	token, hash := auth.NewToken()
	var c queries.Consumer
	err = e.tx(ctx, func(q *queries.Queries, _ pgx.Tx) error {
		var err error
		c, err = q.ConsumerInsert(ctx, name)
		if isUniqueViolation(err, "") {
			return errConsumerExists
		}
		if err != nil {
			return err
		}
		if _, err := q.ConsumerTokenInsert(ctx, queries.ConsumerTokenInsertParams{Name: name, Hash: hash, ConsumerID: &c.ID}); err != nil {
			return err
		}
		return e.setGrants(ctx, q, c.ID, grants)
	})
	if errors.Is(err, errConsumerExists) {
		// Automation that runs twice meets this: say which consumer, and
		// how to get a token for it (the first one was shown once).
		fe := fault.New(fault.Conflict, "consumer_exists", "a consumer named %q exists", name)
		if c, err := e.q.ConsumerByName(ctx, name); err == nil && c.RevokedAt != nil {
			fe = fault.New(fault.Conflict, "consumer_exists", "a consumer named %q existed (id %d, revoked): names are not reused, choose another", name, c.ID)
			fe.Extra = map[string]any{"id": c.ID}
		} else if err == nil {
			fe = fault.New(fault.Conflict, "consumer_exists", "a consumer named %q exists (id %d): rotating it gives it a new token (POST /api/v1/consumers/%d/rotate, or relais consumer rotate %d), and its grants can be changed (PUT /api/v1/consumers/%d/grants)", name, c.ID, c.ID, c.ID, c.ID)
			fe.Extra = map[string]any{"id": c.ID}
		}
		return Consumer{}, "", fe
	}
	if err != nil {
		return Consumer{}, "", wrap("create consumer", err)
	}
	e.logAccess(ctx, EventConsumerCreated, "consumer", c.ID, "name", name, "grants", len(grants))
	out, err := e.GetConsumer(ctx, c.ID)
	return out, token, err
}

// errConsumerExists leaves the transaction a consumer's name was taken in,
// to be told with the existing consumer's id.
var errConsumerExists = errors.New("consumer exists")

func (e *Engine) setGrants(ctx context.Context, q *queries.Queries, id int64, grants []Grant) error {
	if err := e.notifyInvalidate(ctx, q, "grants:"+strconv.FormatInt(id, 10)); err != nil {
		return err
	}
	if err := q.GrantDeleteAll(ctx, id); err != nil {
		return err
	}
	for _, g := range grants {
		if err := q.GrantInsert(ctx, queries.GrantInsertParams{ConsumerID: id, DefinitionKey: g.Definition, Revisions: toInt32s(g.Revisions)}); err != nil {
			return err
		}
	}
	return nil
}

// GetConsumer returns a consumer with its grants.
func (e *Engine) GetConsumer(ctx context.Context, id int64) (Consumer, error) {
	row, err := e.q.ConsumerGet(ctx, id)
	if isNoRows(err) {
		return Consumer{}, notFound("consumer %d", id)
	}
	if err != nil {
		return Consumer{}, wrap("get consumer", err)
	}
	return e.consumerFromRow(ctx, row)
}

func (e *Engine) consumerFromRow(ctx context.Context, row queries.Consumer) (Consumer, error) {
	// As recorded, a revoked consumer's too (they authorize nothing).
	rows, err := e.q.GrantList(ctx, row.ID)
	if err != nil {
		return Consumer{}, wrap("list grants", err)
	}
	return Consumer{ID: row.ID, Name: row.Name, Grants: grantsFromRows(rows), CreatedAt: row.CreatedAt, RevokedAt: row.RevokedAt}, nil
}

func (e *Engine) grants(ctx context.Context, id int64) ([]Grant, error) {
	return grantsOf(ctx, e.memo, e.q, id)
}

// grantsOf reads a consumer's grants through q (inside settlement
// transactions: a query on the pool there could wait for a connection held
// by a transaction waiting for this one's locks), or from the memo.
func grantsOf(ctx context.Context, m *memo, q *queries.Queries, id int64) ([]Grant, error) {
	gs, ok, gen := memoGet(m, m.grants, id)
	if ok {
		return gs, nil
	}
	rows, err := q.GrantListLive(ctx, id)
	if err != nil {
		return nil, wrap("list grants", err)
	}
	out := grantsFromRows(rows)
	memoPut(m, m.grants, id, out, gen)
	return out, nil
}

func grantsFromRows(rows []queries.ConsumerGrant) []Grant {
	out := make([]Grant, len(rows))
	for i, g := range rows {
		out[i] = Grant{Definition: g.DefinitionKey, Revisions: toInts(g.Revisions)}
	}
	return out
}

// ListConsumers returns consumers ordered by id after the cursor.
func (e *Engine) ListConsumers(ctx context.Context, after int64, limit int) ([]Consumer, error) {
	rows, err := e.q.ConsumerList(ctx, queries.ConsumerListParams{After: after, Max: int32(limit)})
	if err != nil {
		return nil, wrap("list consumers", err)
	}
	out := make([]Consumer, 0, len(rows))
	for _, r := range rows {
		c, err := e.consumerFromRow(ctx, r)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// SetGrants replaces a consumer's grants.
func (e *Engine) SetGrants(ctx context.Context, id int64, grants []Grant) (Consumer, error) {
	return e.SetGrantsIf(ctx, id, grants, "")
}

// GrantsTag is the entity tag of a consumer's grants as GetConsumer lists
// them: what a client that read them sends back in If-Match to replace
// them only if nobody changed them meanwhile.
func GrantsTag(grants []Grant) string {
	sum := sha256.Sum256([]byte(grantsText(grants)))
	return `"` + hex.EncodeToString(sum[:16]) + `"`
}

// SetGrantsIf is SetGrants when the consumer's grants still have tag
// (GrantsTag), else 412 grants_changed; "" replaces them whatever they
// are. A read, a change and a write from two clients at once would
// otherwise each keep the other's grants out, a withdrawal undone by a
// grant included (verifier QA, relais consumer grant and ungrant).
func (e *Engine) SetGrantsIf(ctx context.Context, id int64, grants []Grant, tag string) (Consumer, error) {
	if err := e.checkGrants(ctx, grants); err != nil {
		return Consumer{}, err
	}
	err := e.tx(ctx, func(q *queries.Queries, _ pgx.Tx) error {
		c, err := q.ConsumerGetForUpdate(ctx, id)
		if isNoRows(err) {
			return notFound("consumer %d", id)
		}
		if err != nil {
			return err
		}
		if c.RevokedAt != nil {
			return fault.New(fault.Conflict, "consumer_revoked", "consumer %d is revoked", id)
		}
		if tag != "" {
			rows, err := q.GrantList(ctx, id)
			if err != nil {
				return err
			}
			if GrantsTag(grantsFromRows(rows)) != tag {
				return fault.New(fault.PreconditionFailed, "grants_changed",
					"consumer %d's grants changed since they were read (If-Match %s): read them again, and apply the change to what they are now", id, tag)
			}
		}
		return e.setGrants(ctx, q, id, grants)
	})
	if err != nil {
		return Consumer{}, wrap("set grants", err)
	}
	e.logAccess(ctx, EventConsumerGrantsSet, "consumer", id, "grants", grantsText(grants))
	return e.GetConsumer(ctx, id)
}

// grantsText is grants as the access log shows them: key@revisions.
func grantsText(grants []Grant) string {
	parts := make([]string, len(grants))
	for i, g := range grants {
		revs := "all"
		if len(g.Revisions) > 0 {
			revs = fmt.Sprint(g.Revisions)
		}
		parts[i] = g.Definition + "@" + revs
	}
	return strings.Join(parts, ",")
}

// RotateConsumerToken revokes a consumer's tokens and issues a new one.
// Without an overlap it also revokes the settle tokens the consumer issued
// (see IssueSettleToken): a rotation at once is how a leak is answered.
//
// With a positive overlap (at most MaxRotationOverlap) the old tokens keep
// working for that long instead of being revoked at once, so that workers
// can be given the new token before the old one stops: expires is then
// when they stop (nil without an overlap).
func (e *Engine) RotateConsumerToken(ctx context.Context, id int64, overlap time.Duration) (token string, expires *time.Time, err error) {
	if overlap < 0 {
		return "", nil, fault.New(fault.BadRequest, "invalid_request", "overlap must be zero or more").
			WithErrors([]fault.FieldError{{Path: "/overlap", Message: "must be between PT0S and " + isoduration.Format(MaxRotationOverlap)}})
	}
	if overlap > MaxRotationOverlap {
		return "", nil, BoundExceeded("overlap", MaxRotationOverlap)
	}
	token, hash := auth.NewToken()
	var settleRevoked int64
	err = e.tx(ctx, func(q *queries.Queries, _ pgx.Tx) error {
		c, err := q.ConsumerGet(ctx, id)
		if isNoRows(err) {
			return notFound("consumer %d", id)
		}
		if err != nil {
			return err
		}
		if c.RevokedAt != nil {
			return fault.New(fault.Conflict, "consumer_revoked", "consumer %d is revoked", id)
		}
		if err := e.notifyInvalidate(ctx, q, "tokens"); err != nil {
			return err
		}
		if overlap > 0 {
			ends, err := q.ConsumerTokenExpireAll(ctx, queries.ConsumerTokenExpireAllParams{OverlapSeconds: overlap.Seconds(), ConsumerID: &id})
			if err != nil {
				return err
			}
			for _, t := range ends {
				if t != nil && (expires == nil || t.After(*expires)) {
					expires = t
				}
			}
		} else {
			if err := q.ConsumerTokenRevokeAll(ctx, &id); err != nil {
				return err
			}
			// A rotation without overlap answers a leak: a settle token
			// the leaked token issued must stop too.
			if settleRevoked, err = q.SettleTokenDeleteByConsumer(ctx, id); err != nil {
				return err
			}
		}
		_, err = q.ConsumerTokenInsert(ctx, queries.ConsumerTokenInsertParams{Name: c.Name, Hash: hash, ConsumerID: &id})
		return err
	})
	if err != nil {
		return "", nil, wrap("rotate consumer token", err)
	}
	attrs := []any{"consumer", id}
	if expires != nil {
		attrs = append(attrs, "previous_tokens_expire_at", expires.UTC().Format(time.RFC3339))
	} else {
		attrs = append(attrs, "settle_tokens_revoked", settleRevoked)
	}
	e.logAccess(ctx, EventConsumerTokenRotated, attrs...)
	return token, expires, nil
}

// MaxRotationOverlap bounds how long a rotated consumer's old tokens may
// keep working.
const MaxRotationOverlap = 7 * 24 * time.Hour

// RevokeConsumer revokes a consumer: its tokens stop working at once.
func (e *Engine) RevokeConsumer(ctx context.Context, id int64) error {
	var settleRevoked int64
	revokedNow := false
	err := e.tx(ctx, func(q *queries.Queries, _ pgx.Tx) error {
		var err error
		if revokedNow, err = q.ConsumerRevoke(ctx, id); isNoRows(err) {
			return notFound("consumer %d", id)
		} else if err != nil {
			return err
		}
		if !revokedNow {
			// Revoked before, its tokens with it: nothing changes, and
			// nothing is said to have.
			return nil
		}
		// Tokens first: a waiting long poll wakes on either, and one woken
		// by the grants must find its token already gone, to answer 401
		// (the consumer is gone) rather than 403 (no longer granted).
		if err := e.notifyInvalidate(ctx, q, "tokens"); err != nil {
			return err
		}
		if err := e.notifyInvalidate(ctx, q, "grants:"+strconv.FormatInt(id, 10)); err != nil {
			return err
		}
		n, err := q.SettleTokenDeleteByConsumer(ctx, id)
		if err != nil {
			return err
		}
		settleRevoked = n
		return q.ConsumerTokenRevokeAll(ctx, &id)
	})
	if err != nil {
		return wrap("revoke consumer", err)
	}
	if revokedNow {
		e.logAccess(ctx, EventConsumerRevoked, "consumer", id, "settle_tokens_revoked", settleRevoked)
	}
	return nil
}

// ConsumerSees reports whether a consumer is granted revision of key; what
// it is not granted it must not see at all.
func (e *Engine) ConsumerSees(ctx context.Context, consumerID int64, key string, revision int) (bool, error) {
	ok, err := granted(ctx, e.memo, e.q, consumerID, key, revision)
	return ok, wrap("consumer grants", err)
}
