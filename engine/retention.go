package engine

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/relais/relais/queries"
)

// retentionBatch bounds one retention statement, so that deleting a long
// history is many short transactions, never one long one.
var retentionBatch int32 = 1000

// DeleteEnded deletes, in batches, the ended instances (completed, failed,
// cancelled) that ended more than retention ago (those that ended before
// the database first ran a relais with retention count as ended then),
// with their occurrences,
// attempts and settle tokens (DESIGN §13). Audit logs are kept. Any replica
// may run it: batches skip the rows another is deleting. It returns how
// many instances it deleted, stopping early when ctx ends.
func (e *Engine) DeleteEnded(ctx context.Context, retention time.Duration) (int64, error) {
	return e.deleteEnded(ctx, retention, nil)
}

// deleteEnded is DeleteEnded telling progress (when set) of each batch's
// deletions as it commits: a first purge of a long history runs for
// minutes in one pass, and its metric moves as it goes.
func (e *Engine) deleteEnded(ctx context.Context, retention time.Duration, progress func(deleted int64)) (int64, error) {
	cutoff := e.Now().Add(-retention)
	// History that ended before this database ran a relais with retention
	// counts as ended then (see migration 0022): until a retention period
	// has passed since, nothing is old enough.
	since, err := e.q.RetentionSince(ctx)
	if err != nil {
		return 0, wrap("retention", err)
	}
	if !since.Before(cutoff) {
		return 0, nil
	}
	var total int64
	for ctx.Err() == nil {
		n, err := e.q.InstanceDeleteEnded(ctx, queries.InstanceDeleteEndedParams{Cutoff: cutoff, Max: retentionBatch})
		if err != nil {
			return total, wrap("retention", err)
		}
		total += n
		if progress != nil && n > 0 {
			progress(n)
		}
		if n < int64(retentionBatch) {
			break
		}
	}
	return total, nil
}

// RetentionPass is what one retention pass did, for metrics.
type RetentionPass struct {
	Deleted int64 // instances deleted, their occurrences and attempts with them
	Took    time.Duration
	Failed  bool // the pass stopped on an error (logged); the next one goes on
}

// firstRetentionPass bounds the wait for a replica's first retention pass.
const firstRetentionPass = 10 * time.Second

// firstPassDelay is the wait before a replica's first retention pass: half
// the bound, or of interval when shorter, and a random part of the other
// half.
func firstPassDelay(interval time.Duration) time.Duration {
	first := min(interval, firstRetentionPass)
	return first/2 + rand.N(first/2+1)
}

// RunRetentionLoop runs DeleteEnded every interval until ctx ends, telling
// progress (when set) of each batch's deletions as it commits and observe
// (when set) of each pass; a zero retention (forever) runs nothing.
// The first pass comes sooner, within firstRetentionPass: a replica
// restarted more often than every interval would otherwise never delete,
// and replicas started together spread their first passes.
func (e *Engine) RunRetentionLoop(ctx context.Context, retention, interval time.Duration, observe func(RetentionPass), progress func(deleted int64)) {
	if retention <= 0 {
		return
	}
	t := time.NewTimer(firstPassDelay(interval))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		began := time.Now()
		n, err := e.deleteEnded(ctx, retention, progress)
		failed := err != nil && ctx.Err() == nil
		switch {
		case failed:
			e.logger.Warn("retention pass failed", "err", err, "deleted", n)
		case n > 0:
			e.logger.Info("retention: ended instances deleted", "count", n, "retention", formatDuration(retention))
		}
		if ctx.Err() != nil {
			return // a pass cut short by the shutdown is neither ok nor failed
		}
		if observe != nil {
			observe(RetentionPass{Deleted: n, Took: time.Since(began), Failed: failed})
		}
		t.Reset(interval)
	}
}
