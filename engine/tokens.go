package engine

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/relais/relais/internal/auth"
	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/queries"
)

// StaffToken describes an admin, designer or operator token, never its
// secret (which exists only when it is created) nor its hash.
type StaffToken struct {
	ID         int64
	Name       string
	Role       auth.Role
	CreatedAt  time.Time
	LastUsedAt *time.Time // at most a minute behind the last use
	ExpiresAt  *time.Time // nil: never
}

// Expiry says when a new token stops working: at At, or In after it is
// created. The zero Expiry never expires; setting both is refused.
type Expiry struct {
	At *time.Time
	In time.Duration
}

// LookupToken implements auth.Lookup against the tokens table: revoked and
// expired tokens are unknown. It records the use at most once a minute per
// token, so that authenticating costs no write per request.
//
// Usable tokens are kept in memory (every request authenticates): a
// revocation or rotation drops them on every replica through the
// notification it commits, and they are not kept while the replica does
// not listen; an expiry is checked at each use.
func (e *Engine) LookupToken(ctx context.Context, hash []byte) (auth.Principal, []byte, error) {
	now := e.Now()
	m := e.memo
	c, ok, gen := memoGet(m, m.tokens, string(hash))
	if ok {
		if c.expiresAt != nil && !c.expiresAt.After(now) {
			return auth.Principal{}, nil, auth.ErrUnknownToken
		}
		if now.UnixNano()-c.touched.Load() >= int64(time.Minute) {
			c.touched.Store(now.UnixNano())
			e.touchToken(ctx, c.principal.TokenID)
		}
		return c.principal, c.hash, nil
	}
	row, err := e.q.TokenGetByHash(ctx, queries.TokenGetByHashParams{Hash: hash, Now: e.at()})
	if isNoRows(err) {
		return auth.Principal{}, nil, auth.ErrUnknownToken
	}
	if err != nil {
		return auth.Principal{}, nil, wrap("token lookup", err)
	}
	if row.TouchDue {
		e.touchToken(ctx, row.ID)
	}
	p := auth.Principal{TokenID: row.ID, Name: row.Name, Role: auth.Role(row.Role), ExpiresAt: row.ExpiresAt}
	if row.ConsumerID != nil {
		p.ConsumerID = *row.ConsumerID
	}
	c = &cachedToken{principal: p, hash: row.Hash, expiresAt: row.ExpiresAt}
	c.touched.Store(now.UnixNano())
	memoPut(m, m.tokens, string(hash), c, gen)
	return p, row.Hash, nil
}

// touchToken records a token's use. Best effort: a failed bookkeeping write
// must not refuse a valid token.
func (e *Engine) touchToken(ctx context.Context, id int64) {
	if err := e.q.TokenTouch(ctx, queries.TokenTouchParams{ID: id, Now: e.at()}); err != nil && ctx.Err() == nil {
		e.logger.Warn("engine: recording a token's use failed", "token_id", id, "err", err)
	}
}

// TokenNameProblem says what is wrong with a staff token's name, at
// /name, or nil: a surface that checks the rest of a request reports it
// with the other problems.
func TokenNameProblem(name string) *fault.FieldError {
	if msg := NameProblem(name, MaxTokenName); msg != "" {
		return &fault.FieldError{Path: "/name", Message: msg}
	}
	return nil
}

// CreateToken issues a staff token with the role and returns it (the only
// time its value exists outside the caller) and its description.
func (e *Engine) CreateToken(ctx context.Context, name string, role auth.Role, expiry Expiry) (string, StaffToken, error) {
	var errs []fault.FieldError
	if fe := TokenNameProblem(name); fe != nil {
		errs = append(errs, *fe)
	}
	if role == auth.RoleConsumer {
		errs = append(errs, fault.FieldError{Path: "/role", Message: "must be admin, designer or operator (consumer tokens belong to consumers)"})
	}
	now := time.Now()
	if e.now != nil {
		now = e.now()
	}
	expiresAt := expiry.At
	switch {
	case expiry.At != nil && expiry.In != 0:
		errs = append(errs, fault.FieldError{Path: "/expires_in", Message: "give expires_at or expires_in, not both"})
	case expiry.At != nil && !expiry.At.After(now):
		errs = append(errs, fault.FieldError{Path: "/expires_at", Message: "is not in the future"})
	case expiry.In < 0:
		errs = append(errs, fault.FieldError{Path: "/expires_in", Message: "must be a positive duration"})
	case expiry.In > 0:
		t := now.Add(expiry.In)
		expiresAt = &t
	}
	if len(errs) > 0 {
		return "", StaffToken{}, fault.New(fault.BadRequest, "invalid_request", "the token request is invalid").WithErrors(errs)
	}
	token, hash := auth.NewToken()
	row, err := e.q.TokenInsert(ctx, queries.TokenInsertParams{Name: name, Role: string(role), Hash: hash, ExpiresAt: expiresAt})
	if err != nil {
		return "", StaffToken{}, wrap("create token", err)
	}
	e.logAccess(ctx, EventTokenCreated, "token_id", row.ID, "name", row.Name, "role", row.Role)
	return token, staffToken(row), nil
}

func staffToken(row queries.Token) StaffToken {
	return StaffToken{ID: row.ID, Name: row.Name, Role: auth.Role(row.Role), CreatedAt: row.CreatedAt, LastUsedAt: row.LastUsedAt, ExpiresAt: row.ExpiresAt}
}

// ListStaffTokens returns the staff tokens not revoked (expired ones
// included) ordered by id after the cursor. Consumer tokens are managed
// with their consumers.
func (e *Engine) ListStaffTokens(ctx context.Context, after int64, limit int) ([]StaffToken, error) {
	rows, err := e.q.TokenListStaff(ctx, queries.TokenListStaffParams{After: after, Max: int32(limit)})
	if err != nil {
		return nil, wrap("list tokens", err)
	}
	out := make([]StaffToken, len(rows))
	for i, r := range rows {
		out[i] = staffToken(r)
	}
	return out, nil
}

// GetStaffToken returns a staff token that is not revoked.
func (e *Engine) GetStaffToken(ctx context.Context, id int64) (StaffToken, error) {
	row, err := e.q.TokenGetStaff(ctx, id)
	if isNoRows(err) {
		return StaffToken{}, notFound("token %d", id)
	}
	if err != nil {
		return StaffToken{}, wrap("get token", err)
	}
	return staffToken(row), nil
}

// RevokeStaffToken revokes a staff token at once: its next request is 401
// and its console sessions end. A consumer's token or an unknown one is
// not found; revoking one again does nothing, and says so as the first
// time did (a retried DELETE). The last usable admin token cannot be
// revoked (409 last_admin_token): nobody could then manage tokens, nor
// create another, short of the command line on the database.
func (e *Engine) RevokeStaffToken(ctx context.Context, id int64) error {
	already := false
	err := e.tx(ctx, func(q *queries.Queries, _ pgx.Tx) error {
		admins, err := q.TokenLockUsableAdmins(ctx, e.at())
		if err != nil {
			return err
		}
		row, err := q.TokenGetStaffForUpdate(ctx, id)
		if isNoRows(err) {
			return notFound("token %d", id)
		}
		if err != nil {
			return err
		}
		if row.RevokedAt != nil {
			// A retried revocation (its first answer lost) is done.
			already = true
			return nil
		}
		if lastAdmin(admins, row.ID) {
			return fault.New(fault.Conflict, "last_admin_token", "token %d is the last usable admin token; create another admin token before revoking it", id)
		}
		if err := e.notifyInvalidate(ctx, q, "tokens"); err != nil {
			return err
		}
		if _, err = q.TokenRevoke(ctx, queries.TokenRevokeParams{ID: id, Now: e.at()}); err != nil {
			return err
		}
		return q.ConsoleSessionsOfTokenEnd(ctx, id)
	})
	if err != nil {
		return wrap("revoke token", err)
	}
	if !already {
		e.logAccess(ctx, EventTokenRevoked, "token_id", id)
	}
	return nil
}

// lastAdmin reports whether id is the only one of the usable admin tokens
// admins (TokenLockUsableAdmins): revoking it would leave nobody able to
// manage tokens.
func lastAdmin(admins []int64, id int64) bool {
	return len(admins) == 1 && admins[0] == id
}

// IsLastUsableAdmin reports whether RevokeStaffToken would refuse token id
// as the last usable admin token, for a confirmation that says so before
// anyone confirms. The statement's row locks last only as long as it does
// (no transaction is opened): RevokeStaffToken takes them again to decide.
func (e *Engine) IsLastUsableAdmin(ctx context.Context, id int64) (bool, error) {
	admins, err := e.q.TokenLockUsableAdmins(ctx, e.at())
	if err != nil {
		return false, wrap("read admin tokens", err)
	}
	return lastAdmin(admins, id), nil
}

// Bootstrap makes sure an admin can reach a new installation. With a given
// token it ensures that token exists as an admin (idempotent, never printed;
// once revoked it stays revoked); without one it creates and returns a
// fresh admin token only when the database has no active token at all. It
// runs under the migration lock's sibling advisory lock so replicas
// starting together create one token.
//
// A token it creates is logged as any other (token.created). Nothing is
// revoked here, but what an operator may not expect is warned about: a
// given token that is revoked (it will not authenticate), and a new given
// token beside older bootstrap admin tokens still valid (changing the
// variable to replace a leaked token leaves the leaked one working).
func (e *Engine) Bootstrap(ctx context.Context, given string) (created string, err error) {
	var out bootstrapOutcome
	err = e.tx(ctx, func(q *queries.Queries, tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "select pg_advisory_xact_lock($1)", bootstrapLockKey); err != nil {
			return err
		}
		if given != "" {
			out, err = e.ensureBootstrapToken(ctx, q, auth.Hash(given))
			return err
		}
		n, err := q.TokenCountActive(ctx)
		if err != nil || n > 0 {
			return err
		}
		token, hash := auth.NewToken()
		row, err := q.TokenInsert(ctx, queries.TokenInsertParams{Name: bootstrapName, Role: string(auth.RoleAdmin), Hash: hash})
		if err != nil {
			return err
		}
		created, out.created = token, row.ID
		return nil
	})
	if err != nil {
		return "", wrap("bootstrap", err)
	}
	e.logBootstrap(ctx, out)
	return created, nil
}

// bootstrapName names the tokens Bootstrap creates.
const bootstrapName = "bootstrap"

// bootstrapOutcome is what Bootstrap did and found, logged once committed.
type bootstrapOutcome struct {
	// created is the id of the token created, or 0.
	created int64
	// unusable says why the given token, which exists, does not
	// authenticate ("revoked" or "expired"), or is empty.
	unusable string
	// others are the ids of the other usable admin tokens named
	// bootstrap, when the given token was created.
	others []int64
}

// ensureBootstrapToken makes the given token (by its hash) an admin token
// unless a token has that hash already, usable or not.
func (e *Engine) ensureBootstrapToken(ctx context.Context, q *queries.Queries, hash []byte) (bootstrapOutcome, error) {
	var out bootstrapOutcome
	inserted, err := q.TokenInsertIfHashAbsent(ctx, queries.TokenInsertIfHashAbsentParams{Name: bootstrapName, Role: string(auth.RoleAdmin), Hash: hash})
	if err != nil {
		return out, err
	}
	row, err := q.TokenGetByHash(ctx, queries.TokenGetByHashParams{Hash: hash, Now: e.at()})
	switch {
	case inserted == 0 && isNoRows(err):
		out.unusable, err = unusableBecause(ctx, q, hash)
		return out, err
	case err != nil || inserted == 0:
		return out, err
	}
	out.created = row.ID
	out.others, err = e.usableBootstrapAdmins(ctx, q, row.ID)
	return out, err
}

// unusableBecause says why the token of hash, which exists but does not
// authenticate, does not: TokenGetByHash at the beginning of time finds a
// token that is not revoked, which must then have expired.
func unusableBecause(ctx context.Context, q *queries.Queries, hash []byte) (string, error) {
	_, err := q.TokenGetByHash(ctx, queries.TokenGetByHashParams{Hash: hash, Now: &time.Time{}})
	switch {
	case isNoRows(err):
		return "revoked", nil
	case err != nil:
		return "", err
	}
	return "expired", nil
}

// usableBootstrapAdmins returns the ids of the usable admin tokens named
// bootstrap but the one of id.
func (e *Engine) usableBootstrapAdmins(ctx context.Context, q *queries.Queries, id int64) ([]int64, error) {
	now := e.Now()
	var ids []int64
	for after := int64(0); ; {
		page, err := q.TokenListStaff(ctx, queries.TokenListStaffParams{After: after, Max: tokenScanPage})
		if err != nil {
			return nil, err
		}
		for _, t := range page {
			usable := t.ExpiresAt == nil || t.ExpiresAt.After(now)
			if t.ID != id && t.Name == bootstrapName && t.Role == string(auth.RoleAdmin) && usable {
				ids = append(ids, t.ID)
			}
			after = t.ID
		}
		if len(page) < tokenScanPage {
			return ids, nil
		}
	}
}

// tokenScanPage is how many tokens one read of usableBootstrapAdmins takes.
const tokenScanPage = 500

// logBootstrap logs what Bootstrap did and the warnings it found.
func (e *Engine) logBootstrap(ctx context.Context, out bootstrapOutcome) {
	if out.created != 0 {
		e.logAccess(ctx, EventTokenCreated, "token_id", out.created, "name", bootstrapName, "role", string(auth.RoleAdmin))
	}
	if out.unusable != "" {
		e.logger.WarnContext(ctx, fmt.Sprintf("RELAIS_BOOTSTRAP_TOKEN is %s: it will not authenticate, and it is not created again; unset it, or set a new value to create a new admin token", out.unusable))
	}
	if len(out.others) > 0 {
		ids := make([]string, len(out.others))
		for i, id := range out.others {
			ids[i] = strconv.FormatInt(id, 10)
		}
		e.logger.WarnContext(ctx, fmt.Sprintf("RELAIS_BOOTSTRAP_TOKEN is new: it created admin token %d, and the older bootstrap admin token(s) %s still authenticate; if the new value replaces a leaked one, revoke them (relais token revoke ID, or DELETE /api/v1/tokens/ID)", out.created, strings.Join(ids, ", ")),
			"token_id", out.created, "older_token_ids", out.others)
	}
}

const bootstrapLockKey int64 = 0x72656c6169730002
