// Package queries holds Relais's schema migrations, its SQL, and the Go that
// sqlc generates from them (files ending in .gen.go). Only the engine and
// tests import it; its rows never leave the engine.
package queries

// DBTX returns the connection or transaction q runs on, for the few
// statements that are not worth a generated query (such as reading the clock).
func (q *Queries) DBTX() DBTX { return q.db }

// ClaimPullSQL is the text of the pull claim statement, for benchmarks that
// show its plan.
const ClaimPullSQL = occurrenceClaimPull
