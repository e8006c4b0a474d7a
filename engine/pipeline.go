package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/relais/relais/internal/pgfault"
	"github.com/relais/relais/queries"
)

// pipeTx is one transaction whose statements travel in as few round trips
// as the engine's logic allows: a statement whose answer nobody reads (a
// sqlc ":exec" query, and BEGIN, RELEASE SAVEPOINT, COMMIT) is not sent on
// its own but with the next statement that must be answered, in one batch.
// A settlement is then three round trips: BEGIN with the instance lock, the
// occurrence lock, and every write with COMMIT.
//
// Statements run in the order they were issued, so locking and visibility
// are what sequential execution gives. What changes is when a deferred
// write's error surfaces: with the next answered statement, or at COMMIT.
// The transaction fails as a whole then, as it would have; only a write
// that fails is never retried on its own (the engine never does that).
//
// It implements pgx.Tx so that queries.Queries.WithTx and pgx.BeginFunc
// (savepoints) work on it unchanged.
type pipeTx struct {
	conn    *pgx.Conn
	pending []pendingStmt
	// sent is set once BEGIN left: a rollback must then reach the server.
	sent   bool
	closed bool
	// savepoints counts nested savepoints, to name them.
	savepoints int
	// opening counts the statements that open it (BEGIN, and HotPlans
	// for a hot one): a transaction that never issued more has nothing to
	// commit.
	opening int
	// tag ends every statement of a hot transaction (see hotTag).
	tag string
	// committing makes the next Query travel with COMMIT (commitWithNext);
	// committed is then set, and commitErr is the COMMIT's outcome once
	// the query's rows are closed.
	committing, committed bool
	commitErr             error
	last                  *batchRows // the rows sent with COMMIT
	// tally is what the replica counts once the transaction commits (see
	// countInstance); a savepoint rolled back to drops what it added.
	tally []instanceEvent
}

type pendingStmt struct {
	sql  string
	args []any
	// merge is set when the statement is a deferred write that merges
	// with others of its kind (see merged).
	merge *queries.Merge
}

// deferred is a deferred write, told once how it merges.
func deferred(sql string, args []any) pendingStmt {
	return pendingStmt{sql: sql, args: args, merge: queries.Merges[sql]}
}

// errTxClosed is the error of a statement on a finished transaction.
var errTxClosed = errors.New("engine: statement on a finished transaction")

// beginPipeTx starts a transaction on conn, a hot one (HotPlans) if hot;
// BEGIN leaves with the first statement that is answered.
func beginPipeTx(conn *pgx.Conn, hot bool) *pipeTx {
	t := &pipeTx{conn: conn, pending: []pendingStmt{{sql: "begin"}}}
	if hot {
		t.pending = append(t.pending, pendingStmt{sql: HotPlans})
		t.tag = hotTag
	}
	t.opening = len(t.pending)
	return t
}

// deferrable reports whether sql's answer is never read: sqlc marks the
// queries whose result is only an error with ":exec" on their name line
// (":execrows" and ":execresult" read what they changed, so they are sent
// at once).
func deferrable(sql string) bool {
	line, _, _ := strings.Cut(sql, "\n")
	return strings.HasPrefix(line, "-- name: ") && strings.HasSuffix(strings.TrimSpace(line), " :exec")
}

// batch sends the pending statements followed by last in one round trip,
// and checks the pending ones' answers. The caller reads last's answers
// from the returned results and closes them.
func (t *pipeTx) batch(ctx context.Context, last ...pendingStmt) (pgx.BatchResults, error) {
	if t.closed {
		return nil, errTxClosed
	}
	b := &pgx.Batch{}
	pending := merged(t.pending)
	for _, p := range pending {
		b.Queue(p.sql+t.tag, p.args...)
	}
	n := len(pending)
	t.pending = t.pending[:0]
	for _, l := range last {
		b.Queue(l.sql+t.tag, l.args...)
	}
	if b.Len() == 0 {
		return nil, nil
	}
	t.sent = true
	br := t.conn.SendBatch(ctx, b)
	for range n {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return nil, err
		}
	}
	return br, nil
}

// flush sends what is pending.
func (t *pipeTx) flush(ctx context.Context) error {
	br, err := t.batch(ctx)
	if err != nil || br == nil {
		return err
	}
	return br.Close()
}

// Exec defers a statement whose answer is never read; any other is sent at
// once with what is pending.
func (t *pipeTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.closed {
		return pgconn.CommandTag{}, errTxClosed
	}
	if deferrable(sql) {
		t.pending = append(t.pending, deferred(sql, args))
		return pgconn.CommandTag{}, nil
	}
	br, err := t.batch(ctx, pendingStmt{sql: sql, args: args})
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	return lastExec(br)
}

// Query sends sql with what is pending; the rows are read as usual.
func (t *pipeTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if t.committing {
		return t.queryCommitting(ctx, sql, args)
	}
	br, err := t.batch(ctx, pendingStmt{sql: sql, args: args})
	if err != nil {
		return nil, err
	}
	return lastRows(br)
}

// commitWithNext makes the next Query the transaction's last statement,
// sent with what is pending and with COMMIT: one round trip for the three.
// Its rows are read as usual; closing them reads the COMMIT's answer,
// which their Err and the Commit that follows report: the rows count only
// if it succeeded.
func (t *pipeTx) commitWithNext() { t.committing = true }

func (t *pipeTx) queryCommitting(ctx context.Context, sql string, args []any) (pgx.Rows, error) {
	t.committing = false
	br, err := t.batch(ctx, pendingStmt{sql: sql, args: args}, pendingStmt{sql: "commit"})
	t.closed, t.committed = true, true
	if err != nil {
		t.commitErr = err
		t.endFailed(ctx)
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		t.commitErr = err
		t.endFailed(ctx)
		return nil, err
	}
	t.last = &batchRows{Rows: rows, br: br, commit: func(rowsErr error) error {
		if rowsErr == nil {
			return t.readCommit(ctx, br)
		}
		// pgx answers the rows' error for every statement after them:
		// the COMMIT's answer is read (and dropped) by Close.
		_ = br.Close()
		t.endFailed(ctx)
		var pgErr *pgconn.PgError
		if errors.As(rowsErr, &pgErr) || pgfault.Lost(rowsErr) {
			// The server failed the statement (it skipped the COMMIT),
			// or the connection broke.
			t.commitErr = rowsErr
		} else {
			// A row this process could not read: the COMMIT may have
			// succeeded.
			t.commitErr = fmt.Errorf("%w: %w", errCommitUnknown, rowsErr)
		}
		return t.commitErr
	}}
	return t.last, nil
}

// errCommitUnknown is the error of a transaction whose COMMIT was sent but
// whose outcome could not be read: like a lost connection's, its writes
// must not be run again as if they had failed.
var errCommitUnknown = errors.New("engine: the outcome of a COMMIT is unknown")

// readCommit reads the answer of the COMMIT that ends br, and closes it.
func (t *pipeTx) readCommit(ctx context.Context, br pgx.BatchResults) error {
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err == nil && tag.String() == "ROLLBACK" {
		// The server rolled back (an error it had not reported yet).
		err = pgx.ErrTxCommitRollback
	}
	if err != nil {
		t.endFailed(ctx)
	}
	t.commitErr = err
	return err
}

// QueryRow sends sql with what is pending.
func (t *pipeTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return firstRow(t.Query(ctx, sql, args...))
}

// lastExec reads the answer of a batch's last statement, the others' read
// already, and closes the batch.
func lastExec(br pgx.BatchResults) (pgconn.CommandTag, error) {
	tag, err := br.Exec()
	return tag, errors.Join(err, br.Close())
}

// lastRows returns the rows of a batch's last statement, the others' read
// already: closing them closes the batch.
func lastRows(br pgx.BatchResults) (pgx.Rows, error) {
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

// firstRow is QueryRow's answer from Query's.
func firstRow(rows pgx.Rows, err error) pgx.Row {
	if err != nil {
		return errRow{err}
	}
	return batchRow{rows: rows}
}

// batchRows closes its batch when closed, so that the connection is free
// for the next statement.
type batchRows struct {
	pgx.Rows
	br     pgx.BatchResults
	closed bool
	err    error
	// commit, when set, reads the COMMIT sent after the rows, told their
	// error, and closes the batch (see commitWithNext).
	commit func(rowsErr error) error
}

func (r *batchRows) Close() {
	if r.closed {
		return
	}
	r.closed = true
	r.Rows.Close()
	if r.commit != nil {
		r.err = r.commit(r.Rows.Err())
		return
	}
	r.err = r.br.Close()
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

// batchRow reads the first row as pgx.Conn.QueryRow does.
type batchRow struct{ rows pgx.Rows }

func (r batchRow) Scan(dest ...any) error {
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// Commit sends what is pending with COMMIT, in one round trip; after a
// query sent with COMMIT (commitWithNext), it reports that COMMIT.
func (t *pipeTx) Commit(ctx context.Context) error {
	if t.committed {
		t.committed = false
		if t.last != nil {
			t.last.Close() // reads the COMMIT's answer, if not yet
		}
		return t.commitErr
	}
	if t.closed {
		return pgx.ErrTxClosed
	}
	if !t.sent && len(t.pending) == t.opening {
		// Nothing but BEGIN was ever issued: there is nothing to commit.
		t.closed, t.pending = true, nil
		return nil
	}
	br, err := t.batch(ctx, pendingStmt{sql: "commit"})
	t.closed = true
	if err != nil {
		t.endFailed(ctx)
		return err
	}
	return t.readCommit(ctx, br)
}

// endFailed rolls back a transaction whose COMMIT never ran (a deferred
// write sent with it failed, and the server skipped the rest): the pool
// would otherwise close the connection, left inside the failed
// transaction, instead of reusing it.
func (t *pipeTx) endFailed(ctx context.Context) {
	if s := t.conn.PgConn().TxStatus(); s != 'E' && s != 'T' {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, _ = t.conn.Exec(ctx, "rollback")
}

// Rollback drops what is pending and rolls back what reached the server.
func (t *pipeTx) Rollback(ctx context.Context) error {
	if t.closed {
		return pgx.ErrTxClosed
	}
	t.closed, t.pending = true, nil
	if !t.sent {
		return nil
	}
	_, err := t.conn.Exec(ctx, "rollback")
	return err
}

// Begin starts a savepoint; RELEASE travels with the next answered
// statement, ROLLBACK TO is sent at once.
func (t *pipeTx) Begin(ctx context.Context) (pgx.Tx, error) {
	if t.closed {
		return nil, errTxClosed
	}
	t.savepoints++
	name := fmt.Sprintf("relais_sp_%d", t.savepoints)
	t.pending = append(t.pending, pendingStmt{sql: "savepoint " + name})
	return &pipeSavepoint{parent: t, name: name, tallied: len(t.tally)}, nil
}

func (t *pipeTx) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	if err := t.flush(ctx); err != nil {
		return 0, err
	}
	return t.conn.CopyFrom(ctx, table, cols, src)
}

func (t *pipeTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if err := t.flush(ctx); err != nil {
		return errBatch{err}
	}
	return t.conn.SendBatch(ctx, b)
}

func (t *pipeTx) LargeObjects() pgx.LargeObjects { return pgx.LargeObjects{} }

func (t *pipeTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	if err := t.flush(ctx); err != nil {
		return nil, err
	}
	return t.conn.Prepare(ctx, name, sql)
}

func (t *pipeTx) Conn() *pgx.Conn { return t.conn }

// pipeSavepoint is a savepoint of a pipeTx.
type pipeSavepoint struct {
	parent *pipeTx
	name   string
	closed bool
	// tallied is how much of the transaction's tally predates it.
	tallied int
}

func (s *pipeSavepoint) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return s.parent.Exec(ctx, sql, args...)
}

func (s *pipeSavepoint) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return s.parent.Query(ctx, sql, args...)
}

func (s *pipeSavepoint) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return s.parent.QueryRow(ctx, sql, args...)
}

func (s *pipeSavepoint) Begin(ctx context.Context) (pgx.Tx, error) { return s.parent.Begin(ctx) }

func (s *pipeSavepoint) Commit(ctx context.Context) error {
	if s.closed {
		return pgx.ErrTxClosed
	}
	s.closed = true
	s.parent.pending = append(s.parent.pending, pendingStmt{sql: "release savepoint " + s.name})
	return nil
}

// Rollback undoes everything since the savepoint. What is pending is sent
// first (it belongs to the transaction, and may be what failed), then
// ROLLBACK TO on its own: after an error the server ignores the rest of a
// batch.
func (s *pipeSavepoint) Rollback(ctx context.Context) error {
	if s.closed {
		return pgx.ErrTxClosed
	}
	s.closed = true
	s.parent.tally = s.parent.tally[:min(s.tallied, len(s.parent.tally))]
	_ = s.parent.flush(ctx)
	if s.parent.closed {
		return errTxClosed
	}
	_, err := s.parent.conn.Exec(ctx, "rollback to savepoint "+s.name)
	return err
}

func (s *pipeSavepoint) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	return s.parent.CopyFrom(ctx, table, cols, src)
}

func (s *pipeSavepoint) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return s.parent.SendBatch(ctx, b)
}

func (s *pipeSavepoint) LargeObjects() pgx.LargeObjects { return s.parent.LargeObjects() }

func (s *pipeSavepoint) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	return s.parent.Prepare(ctx, name, sql)
}

func (s *pipeSavepoint) Conn() *pgx.Conn { return s.parent.conn }

// errBatch is the results of a batch that could not be sent.
type errBatch struct{ err error }

func (b errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, b.err }
func (b errBatch) Query() (pgx.Rows, error)         { return nil, b.err }
func (b errBatch) QueryRow() pgx.Row                { return errRow(b) }
func (b errBatch) Close() error                     { return b.err }
func (b errBatch) Tx() pgx.Tx                       { return nil }

// inPipeTx runs fn in one pipelined transaction on a connection of pool,
// a hot one if hot (see HotPlans); fn's error rolls it back.
func inPipeTx(ctx context.Context, pool *pgxpool.Pool, hot bool, fn func(tx pgx.Tx) error) (err error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	tx := beginPipeTx(conn.Conn(), hot)
	defer func() {
		if !tx.closed {
			// A rollback that cannot reach the server leaves the
			// connection in a transaction: the pool then closes it
			// instead of reusing it.
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}
