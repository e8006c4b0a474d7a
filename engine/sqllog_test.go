package engine

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// sqlLog records what a pool sends: the statements of every batch, in
// order, and those sent alone.
type sqlLog struct {
	mu      sync.Mutex
	batches [][]string
	alone   []string
}

func (l *sqlLog) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.batches = append(l.batches, nil)
	return ctx
}

func (l *sqlLog) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.batches); n > 0 {
		l.batches[n-1] = append(l.batches[n-1], d.SQL)
	}
}

func (l *sqlLog) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (l *sqlLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.alone = append(l.alone, d.SQL)
	return ctx
}

func (l *sqlLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// sent counts the statements sent (in batches or alone) whose text starts
// with prefix.
func (l *sqlLog) sent(prefix string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	count := func(sqls []string) {
		for _, sql := range sqls {
			if strings.HasPrefix(sql, prefix) {
				n++
			}
		}
	}
	for _, b := range l.batches {
		count(b)
	}
	count(l.alone)
	return n
}

// batchCount is the number of batches sent.
func (l *sqlLog) batchCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.batches)
}

// poolLike opens a pool of its own on e's database, its configuration
// changed by tune (a tracer, a bound on connections), closed with the test.
func poolLike(t testing.TB, e *Engine, tune func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	cfg := e.pool.Config()
	tune(cfg)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// tracedEngine is an engine on a prepared database (see prepare) whose
// statements log records, and base, an engine on the same database
// untraced.
func tracedEngine(t testing.TB) (e, base *Engine, log *sqlLog) {
	t.Helper()
	base = setup(t)
	prepare(t, base, "")
	log = &sqlLog{}
	return New(poolLike(t, base, func(c *pgxpool.Config) { c.ConnConfig.Tracer = log }), Options{Keys: base.keys}), base, log
}
