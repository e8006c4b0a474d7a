// Package queries holds Relais's schema migrations, its SQL, and the Go that
// sqlc generates from them (files ending in .gen.go). Only the engine
// imports it (the migration runner included); its rows never leave the engine.
package queries

import "embed"

// MigrationFiles are the schema migrations, migrations/NNNN_name.sql, applied
// in order by engine.Migrate.
//
//go:embed migrations/*.sql
var MigrationFiles embed.FS

// DB is the pool, transaction or savepoint q runs its statements on: the
// engine notes on its transaction what to count once it commits.
func (q *Queries) DB() DBTX { return q.db }
