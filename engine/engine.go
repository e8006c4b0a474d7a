// Package engine is Relais's domain on PostgreSQL: tokens, definitions and
// revisions, processes and instances, occurrences, their settlement and
// timers. Every state change is one SQL transaction. Generated sqlc rows never
// leave this package; callers see domain types.
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/relais/relais/contracts"
	"github.com/relais/relais/fault"
	"github.com/relais/relais/queries"
)

// Engine is the domain service shared by every surface of one replica.
type Engine struct {
	pool   *pgxpool.Pool
	q      *queries.Queries
	logger *slog.Logger

	revisions revisionCache
}

// New returns an engine on pool. A nil logger discards.
func New(pool *pgxpool.Pool, logger *slog.Logger) *Engine {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Engine{pool: pool, q: queries.New(pool), logger: logger,
		revisions: revisionCache{schemas: contracts.NewCache()}}
}

// Pool returns the engine's connection pool.
func (e *Engine) Pool() *pgxpool.Pool { return e.pool }

// tx runs fn in one transaction; fn's error rolls it back.
func (e *Engine) tx(ctx context.Context, fn func(q *queries.Queries, tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		return fn(e.q.WithTx(tx), tx)
	})
}

// isNoRows reports whether err is the driver's "no rows".
func isNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }

// isUniqueViolation reports whether err is a unique violation, optionally of
// the named constraint.
func isUniqueViolation(err error, constraint string) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
		return false
	}
	return constraint == "" || pgErr.ConstraintName == constraint
}

// notFound is the error of an unknown (or invisible) resource.
func notFound(what string, args ...any) *fault.Error {
	return fault.New(fault.NotFound, "not_found", what+" not found", args...)
}

func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := fault.As(err); ok {
		return err
	}
	return fmt.Errorf("engine: %s: %w", op, err)
}

// errCorrupt reports stored data that no longer parses: a bug or a manual
// edit, never user input.
func errCorrupt(what string) error { return fmt.Errorf("stored %s does not parse", what) }
