package engine

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/relais/relais/internal/auth"
	"github.com/relais/relais/queries"
)

// LookupToken implements auth.Lookup against the tokens table.
func (e *Engine) LookupToken(ctx context.Context, hash []byte) (auth.Principal, []byte, error) {
	row, err := e.q.TokenGetByHash(ctx, hash)
	if isNoRows(err) {
		return auth.Principal{}, nil, auth.ErrUnknownToken
	}
	if err != nil {
		return auth.Principal{}, nil, wrap("token lookup", err)
	}
	return principalFromRow(row), row.Hash, nil
}

func principalFromRow(row queries.Token) auth.Principal {
	p := auth.Principal{TokenID: row.ID, Name: row.Name, Role: auth.Role(row.Role)}
	if row.ConsumerID != nil {
		p.ConsumerID = *row.ConsumerID
	}
	return p
}

// CreateToken issues a token with the role and returns it: the only time its
// value exists outside the caller.
func (e *Engine) CreateToken(ctx context.Context, name string, role auth.Role) (string, error) {
	token, hash := auth.NewToken()
	if _, err := e.q.TokenInsert(ctx, queries.TokenInsertParams{Name: name, Role: string(role), Hash: hash}); err != nil {
		return "", wrap("create token", err)
	}
	return token, nil
}

// Bootstrap makes sure an admin can reach a new installation. With a given
// token it ensures that token exists as an admin (idempotent, never printed);
// without one it creates and returns a fresh admin token only when the
// database has no active token at all. It runs under the migration lock's
// sibling advisory lock so replicas starting together create one token.
func (e *Engine) Bootstrap(ctx context.Context, given string) (created string, err error) {
	err = e.tx(ctx, func(q *queries.Queries, tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "select pg_advisory_xact_lock($1)", bootstrapLockKey); err != nil {
			return err
		}
		if given != "" {
			_, err := q.TokenInsertIfHashAbsent(ctx, queries.TokenInsertIfHashAbsentParams{Name: "bootstrap", Role: string(auth.RoleAdmin), Hash: auth.Hash(given)})
			return err
		}
		n, err := q.TokenCountActive(ctx)
		if err != nil || n > 0 {
			return err
		}
		token, hash := auth.NewToken()
		if _, err := q.TokenInsert(ctx, queries.TokenInsertParams{Name: "bootstrap", Role: string(auth.RoleAdmin), Hash: hash}); err != nil {
			return err
		}
		created = token
		return nil
	})
	return created, wrap("bootstrap", err)
}

const bootstrapLockKey int64 = 0x72656c6169730002
