package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

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
	// Applied is the retention the pass applied (zero: forever, nothing
	// deleted): this replica's, or a longer one another replica noted.
	Applied time.Duration
}

// Retention is a replica's retention as its last note read it.
type Retention struct {
	// Configured is this replica's RELAIS_RETENTION (zero: forever).
	Configured time.Duration
	// Applied is what its passes apply (zero: forever): the longest of
	// the replicas' settings noted within a day, its own when they agree.
	Applied time.Duration
}

// Retention is the replica's retention as its last note read it; ok is
// false before a first note (at its start) succeeded.
func (e *Engine) Retention() (r Retention, ok bool) {
	if p := e.retention.Load(); p != nil {
		return *p, true
	}
	return Retention{}, false
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
// (when set) of each pass. Each pass first notes this replica's retention
// (zero: forever) beside the other replicas', and deletes only past the
// longest of those still running (see noteRetention); a replica that keeps
// everything deletes nothing, and only notes its setting.
// The first pass comes sooner, within firstRetentionPass: a replica
// restarted more often than every interval would otherwise never delete,
// and replicas started together spread their first passes.
func (e *Engine) RunRetentionLoop(ctx context.Context, retention, interval time.Duration, observe func(RetentionPass), progress func(deleted int64)) {
	// Noted at once, before the first pass's delay: replicas started
	// together then see each other's settings at their first passes.
	if _, err := e.noteRetention(ctx, retention, interval); err != nil && ctx.Err() == nil {
		e.logger.Debug("noting this replica's retention at its start failed; its first pass notes it", "err", err)
	}
	t := time.NewTimer(firstPassDelay(interval))
	defer t.Stop()
	defer func() {
		// A clean stop says so: its note looked live for three passes
		// more, and a single server restarted with a shorter retention
		// was held back by its own previous run for minutes, warned of as
		// another replica (SRE QA). It still weighs for the others.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = e.q.RetentionStopped(sctx, queries.RetentionStoppedParams{Replica: e.replica, LiveSeconds: retentionLiveSeconds(interval) + 1})
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		began := time.Now()
		effective, err := e.noteRetention(ctx, retention, interval)
		var n int64
		if err == nil && effective > 0 { // zero when this replica or another keeps everything
			n, err = e.deleteEnded(ctx, effective, progress)
		}
		if retention <= 0 {
			// Forever: no pass to count, the setting noted for the others.
			if err != nil && ctx.Err() == nil {
				e.logger.Warn("noting this replica's retention failed", "err", err)
			}
			t.Reset(interval)
			continue
		}
		failed := err != nil && ctx.Err() == nil
		switch {
		case failed:
			e.logger.Warn("retention pass failed", "err", err, "deleted", n)
		case n > 0:
			e.logger.Info("retention: ended instances deleted", "count", n, "retention", formatDuration(effective))
		}
		if ctx.Err() != nil {
			return // a pass cut short by the shutdown is neither ok nor failed
		}
		if observe != nil {
			observe(RetentionPass{Deleted: n, Took: time.Since(began), Failed: failed, Applied: effective})
		}
		t.Reset(interval)
	}
}

// retentionLive is how many passes a replica's noted retention says it
// runs for after its last one: the replicas that disagree are warned of
// while they run.
const retentionLive = 3

// retentionLiveSeconds is how long, in seconds, a note stays a running
// replica's at this pass interval.
func retentionLiveSeconds(interval time.Duration) int64 {
	return max(int64(retentionLive*interval/time.Second), 1)
}

// retentionRemembered is how long a replica's noted retention weighs
// after its last note: a replica stopped for an outage, a deployment or a
// crash loop still keeps what it keeps, rather than a shorter replica
// deleting it meanwhile. An intended shortening on every replica takes
// effect that much later.
const retentionRemembered = 24 * time.Hour

// noteRetention notes this replica's retention (zero: forever) and
// returns the one its pass applies: the longest of its own and those the
// other replicas noted within retentionRemembered (zero if any keeps
// everything). Replicas configured apart (one PT1H beside P30D ones: a
// typo, a manifest left behind) thus delete only what every one of them
// would, and while they run, each says so in its log, at most hourly for
// each other replica's setting.
func (e *Engine) noteRetention(ctx context.Context, retention, interval time.Duration) (time.Duration, error) {
	var mine *int64
	if retention > 0 {
		s := max(int64(retention/time.Second), 1)
		mine = &s
	}
	others, err := e.q.RetentionNote(ctx, queries.RetentionNoteParams{Replica: e.replica, RetentionSeconds: mine,
		LiveSeconds: retentionLiveSeconds(interval), RememberSeconds: int64(retentionRemembered / time.Second)})
	if err != nil {
		return 0, wrap("retention: note the replica's setting", err)
	}
	effective := retention
	var holder *queries.RetentionNoteRow // the note effective is, when not this replica's
	host := replicaHost(e.replica)
	for _, o := range others {
		if !o.Live && host != "" && replicaHost(o.Replica) == host {
			// An earlier run on this host, stopped: this replica
			// restarted, its name new (host and pid). A one-server
			// Relais tried once with forever kept everything for a
			// day after it was set back (verifier QA).
			if err := e.q.RetentionForgetReplica(ctx, o.Replica); err != nil {
				return 0, wrap("retention: forget an earlier run's setting", err)
			}
			continue
		}
		var theirs time.Duration // forever
		if o.RetentionSeconds != nil {
			theirs = time.Duration(*o.RetentionSeconds) * time.Second
		}
		if retention > 0 && theirs > 0 && theirs/time.Second == retention/time.Second || retention <= 0 && theirs <= 0 {
			continue
		}
		if effective > 0 && (theirs <= 0 || theirs > effective) {
			effective, holder = theirs, &o
		}
		if o.Live {
			e.warnRetention(o.Replica, retention, theirs)
		}
	}
	e.retention.Store(&Retention{Configured: max(retention, 0), Applied: max(effective, 0)})
	if holder != nil && !holder.Live {
		// A replica that ran a few minutes (a smoke test, a laptop)
		// holds this one's deletions back for a day, long after the
		// warning above stopped: said at each pass's hour, with when it
		// ends (SRE QA: the passes counted ok, deleting nothing).
		e.warnHeldBack(holder.Replica, retention, effective, holder.WeighsUntil)
	}
	return effective, nil
}

// replicaHost is the host a replica's default name (see DefaultReplica)
// names, "" for a name that is not one.
func replicaHost(replica string) string {
	m := replicaNamePattern.FindStringSubmatch(replica)
	if m == nil {
		return ""
	}
	return m[1]
}

// replicaNamePattern is a default replica name: host-pid, or host-1-hhhh
// for a container's first process.
var replicaNamePattern = regexp.MustCompile(`^(.+)-(?:[0-9]+|1-[0-9a-f]{4})$`)

// warnHeldBack says that a stopped replica's longer retention, noted
// within a day, is the one this replica applies, once an hour.
func (e *Engine) warnHeldBack(replica string, mine, theirs time.Duration, until time.Time) {
	if !e.retentionWarnDue("held back " + replica + " " + retentionText(theirs)) {
		return
	}
	e.logger.Warn("retention held back: another replica noted a longer RELAIS_RETENTION within the last day, and ended history is deleted only past the longest noted; that replica has not noted its setting for a few passes (it may have stopped), and its setting stops counting at weighs_until",
		"retention", retentionText(mine), "applied", retentionText(theirs), "other_replica", replica, "weighs_until", until.UTC().Format(time.RFC3339))
}

// retentionWarnDue says whether the warning of key is due: not said
// within the last hour.
func (e *Engine) retentionWarnDue(key string) bool {
	e.retentionWarnMu.Lock()
	defer e.retentionWarnMu.Unlock()
	if last, seen := e.retentionWarned[key]; seen && time.Since(last) < time.Hour {
		return false
	}
	if e.retentionWarned == nil {
		e.retentionWarned = map[string]time.Time{}
	}
	e.retentionWarned[key] = time.Now()
	return true
}

// warnRetention says that replica runs with another retention than this
// one, once an hour for each of its settings.
func (e *Engine) warnRetention(replica string, mine, theirs time.Duration) {
	if !e.retentionWarnDue(replica + " " + retentionText(theirs)) {
		return
	}
	// "Running" is as far as the notes tell: a replica noted within its
	// last few passes, which one stopped (or killed) since still is, and
	// every start is a replica of a new name (SRE QA).
	e.logger.Warn("replicas disagree on RELAIS_RETENTION: ended history is deleted only past the longest of the replicas' settings (those noted within a day); give every replica the same (the other replica noted its setting in the last few minutes: it may have stopped since)",
		"retention", retentionText(mine), "other_replica", replica, "other_retention", retentionText(theirs))
}

// retentionText is a retention as RELAIS_RETENTION writes it.
func retentionText(d time.Duration) string {
	if d <= 0 {
		return "forever"
	}
	return formatDuration(d)
}

// ForgetSourceState forgets, on a restored database at schemaVersion, what
// belongs to the replicas it was taken from rather than to its data: their
// noted retention settings and the console sessions opened on them (see
// forgetRetentionNotes and forgetConsoleSessions).
func ForgetSourceState(ctx context.Context, pool *pgxpool.Pool, schemaVersion int) error {
	if err := forgetRetentionNotes(ctx, pool, schemaVersion); err != nil {
		return err
	}
	return forgetConsoleSessions(ctx, pool, schemaVersion)
}

// forgetRetentionNotes forgets every replica's noted retention setting on
// a database at schemaVersion: a restored backup's are those of the
// replicas it was taken from, which do not run on it (their longer
// settings would hold its deletions back for a day). A schema older than
// the notes (before migration 36) has none.
func forgetRetentionNotes(ctx context.Context, pool *pgxpool.Pool, schemaVersion int) error {
	if schemaVersion < retentionNotesSchema {
		return nil
	}
	if err := queries.New(pool).RetentionForget(ctx); err != nil {
		return fmt.Errorf("forget the retention notes: %w", err)
	}
	return nil
}

// retentionNotesSchema is the migration that made retention_settings.
const retentionNotesSchema = 36
