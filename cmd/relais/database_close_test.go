package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/relais/relais/internal/dbtest"
	"github.com/relais/relais/internal/testlog"
)

// TestCloseDoesNotWaitForAStuckConnection: closing the pool waits for
// every connection in use, and one blocked on a database that stopped
// answering held a stop for over a minute (a frozen PostgreSQL, in a QA
// pass). A connection never given back stands for it here: close returns
// after poolCloseTimeout, saying why.
func TestCloseDoesNotWaitForAStuckConnection(t *testing.T) {
	t.Parallel()
	pool, err := pgxpool.New(context.Background(), dbtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	stuck, err := pool.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stuck.Release) // after close gave up: the pool's Close then ends
	var logs testlog.Buffer
	db := &database{pool: pool, logger: slog.New(slog.NewTextHandler(&logs, nil))}
	began := time.Now()
	db.close()
	if took := time.Since(began); took < poolCloseTimeout || took > poolCloseTimeout+3*time.Second {
		t.Errorf("close took %v; want about %v", took, poolCloseTimeout)
	}
	if !strings.Contains(logs.String(), "database connections not closed within 5s") || !strings.Contains(logs.String(), "in_use=1") {
		t.Errorf("log %q; want the connection left behind said", logs.String())
	}
}
