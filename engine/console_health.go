package engine

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/relais/relais/queries"
)

// Now is the engine's clock: the injected one in tests, else the machine's.
// Observers compare instants with it ("in 5 min", "3 min ago") so that they
// agree with the times the engine stores.
func (e *Engine) Now() time.Time {
	if e.now != nil {
		return e.now().UTC()
	}
	return time.Now().UTC()
}

// NodeCount is how many occurrences of one process version are in one
// status at one node, or, with Status InstanceHeld, how many of its
// instances are held at that node (incidents).
type NodeCount struct {
	Node   string
	Status string
	Count  int64
}

// CountOccurrencesByNode counts the occurrences of a process version per
// node and status, and its held instances per node; reserved occurrences
// whose lock lapsed count as available, as observations show them. It reads every occurrence of the
// version (from one index), so callers cache it.
func (e *Engine) CountOccurrencesByNode(ctx context.Context, key string, version int) ([]NodeCount, error) {
	v := int32(version)
	rows, err := e.q.OccurrenceCountByNode(ctx, queries.OccurrenceCountByNodeParams{ProcessKey: &key, ProcessVersion: &v})
	if err != nil {
		return nil, wrap("count occurrences by node", err)
	}
	lapsed, err := e.q.OccurrenceLapsedLocksByNode(ctx, queries.OccurrenceLapsedLocksByNodeParams{ProcessKey: &key, ProcessVersion: &v, Now: e.at()})
	if err != nil {
		return nil, wrap("count lapsed locks by node", err)
	}
	moved := map[string]int64{}
	for _, l := range lapsed {
		moved[l.Node] = l.Count
	}
	byKey := map[[2]string]int64{}
	var order [][2]string
	add := func(node, status string, n int64) {
		k := [2]string{node, status}
		if _, ok := byKey[k]; !ok {
			order = append(order, k)
		}
		byKey[k] += n
	}
	for _, r := range rows {
		n := r.Count
		if r.Status == StatusReserved {
			n -= moved[r.Node]
		}
		add(r.Node, r.Status, n)
	}
	for node, n := range moved {
		add(node, StatusAvailable, n)
	}
	out := make([]NodeCount, 0, len(order))
	for _, k := range order {
		if n := byKey[k]; n > 0 {
			out = append(out, NodeCount{Node: k[0], Status: k[1], Count: n})
		}
	}
	held, err := e.q.InstanceHeldAt(ctx)
	if err != nil {
		return nil, wrap("count held instances by node", err)
	}
	heldAt := map[string]int64{}
	for _, h := range held {
		if h.ProcessKey == key && h.Version == v {
			heldAt[h.Node] += h.Count
		}
	}
	for _, node := range slices.Sorted(maps.Keys(heldAt)) {
		out = append(out, NodeCount{Node: node, Status: InstanceHeld, Count: heldAt[node]})
	}
	return out, nil
}

// HealthBuckets is how many 5-minute buckets the last hour has.
const HealthBuckets = 12

// HealthBucket is one 5-minute slice of the last hour.
type HealthBucket struct {
	Completed int64
	Failed    int64
}

// DefinitionHealth is what the console's health page shows of one
// definition besides its counts by status.
type DefinitionHealth struct {
	Definition string
	// ClaimableSince is when the oldest occurrence a worker could take now
	// became claimable (available, or its lock lapsed); nil when none
	// waits. Now minus it is the queue lag.
	ClaimableSince *time.Time
	// DeferredSince is when the oldest deferred occurrence (waiting for a
	// person or a system to settle it by id) was deferred; nil when none
	// is.
	DeferredSince *time.Time
	// Held is how many instances are held (incidents) at a node of this
	// definition.
	Held int64
	// Retrying is how many of its occurrences wait out a retry delay (an
	// attempt failed, attempts are left), RetryDue when the soonest is
	// due: failures that neither hold nor fail anything yet, which the
	// last hour's counts do not show (an outage retried with backoff).
	Retrying int64
	RetryDue *time.Time
	// Buckets are the last hour's settlements, oldest first: Buckets[11]
	// ends at Health.BucketsEnd.
	Buckets [HealthBuckets]HealthBucket
}

// Health is a snapshot of every definition's queue and last hour.
type Health struct {
	At time.Time
	// BucketsEnd is At rounded up to the minute: the buckets' bounds are
	// whole minutes, as a chart labels them, and reads within a minute
	// of each other cut the hour alike.
	BucketsEnd  time.Time
	Definitions map[string]*DefinitionHealth
}

// CachedHealth is Health from a snapshot at most OccurrenceCountsTTL old,
// shared by the replica's readers (the console's health page, the held
// instances gauge): one read every few seconds whatever their number. It
// never waits once a read succeeded (for scrapes).
func (e *Engine) CachedHealth(ctx context.Context) (Health, time.Time, error) {
	return e.health.Get(ctx)
}

// FreshHealth is CachedHealth for a page a person opens: after a quiet
// spell it waits a moment for a fresh read (see snapshot.Cache.Fresh).
func (e *Engine) FreshHealth(ctx context.Context) (Health, time.Time, error) {
	return e.health.Fresh(ctx)
}

// Health reads the queue lag, the held instances and the last hour's
// completions and failures of every definition. Each part reads an index
// range bounded by what it reports (one probe per definition or revision,
// the held instances, the hour's settlements), not the whole history.
func (e *Engine) Health(ctx context.Context) (Health, error) {
	at := e.at()
	h := Health{At: e.Now(), Definitions: map[string]*DefinitionHealth{}}
	if at != nil {
		h.At = *at
	}
	of := func(key string) *DefinitionHealth {
		d := h.Definitions[key]
		if d == nil {
			d = &DefinitionHealth{Definition: key}
			h.Definitions[key] = d
		}
		return d
	}
	since := func(key string, t time.Time) {
		d := of(key)
		if d.ClaimableSince == nil || t.Before(*d.ClaimableSince) {
			d.ClaimableSince = &t
		}
	}
	avail, err := e.q.OccurrenceOldestAvailableByDefinition(ctx, at)
	if err != nil {
		return h, wrap("health: oldest available", err)
	}
	for _, r := range avail {
		since(r.DefinitionKey, r.AvailableAt)
	}
	lapsed, err := e.q.OccurrenceOldestLapsedByRevision(ctx, at)
	if err != nil {
		return h, wrap("health: oldest lapsed lock", err)
	}
	for _, r := range lapsed {
		if r.LockExpiresAt != nil {
			since(r.DefinitionKey, *r.LockExpiresAt)
		}
	}
	deferred, err := e.q.OccurrenceOldestDeferredByDefinition(ctx)
	if err != nil {
		return h, wrap("health: oldest deferred", err)
	}
	for _, r := range deferred {
		if r.DeferredAt != nil {
			of(r.DefinitionKey).DeferredSince = r.DeferredAt
		}
	}
	held, err := e.q.InstanceHeldAt(ctx)
	if err != nil {
		return h, wrap("health: held instances", err)
	}
	for _, r := range held {
		of(r.DefinitionKey).Held += r.Count
	}
	retrying, err := e.q.OccurrenceWaitingRetryByDefinition(ctx, at)
	if err != nil {
		return h, wrap("health: waiting retries", err)
	}
	for _, r := range retrying {
		d := of(r.DefinitionKey)
		d.Retrying, d.RetryDue = r.Count, &r.NextAt
	}
	h.BucketsEnd = h.At.Truncate(time.Minute)
	if h.BucketsEnd.Before(h.At) {
		h.BucketsEnd = h.BucketsEnd.Add(time.Minute)
	}
	buckets, err := e.q.OccurrenceSettledBuckets(ctx, &h.BucketsEnd)
	if err != nil {
		return h, wrap("health: settlements", err)
	}
	for _, r := range buckets {
		if r.Bucket < 0 || r.Bucket >= HealthBuckets {
			continue
		}
		b := &of(r.DefinitionKey).Buckets[HealthBuckets-1-int(r.Bucket)]
		switch r.Status {
		case StatusCompleted:
			b.Completed += r.Count
		case StatusFailed:
			b.Failed += r.Count
		}
	}
	return h, nil
}

// WaitingRetry is a running instance's occurrence waiting out a retry
// delay: where, after which failure, and when its next attempt is due.
type WaitingRetry struct {
	Node      string
	ErrorCode *string
	Due       time.Time
}

// WaitingRetries returns, for those of ids whose occurrence waits out a
// retry delay, that occurrence (one per instance: processes do not fork).
func (e *Engine) WaitingRetries(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]WaitingRetry, error) {
	rows, err := e.q.OccurrenceWaitingRetryOf(ctx, queries.OccurrenceWaitingRetryOfParams{InstanceIds: ids, Now: e.at()})
	if err != nil {
		return nil, wrap("waiting retries", err)
	}
	out := make(map[uuid.UUID]WaitingRetry, len(rows))
	for _, r := range rows {
		out[r.InstanceID] = WaitingRetry{Node: r.Node, ErrorCode: r.ErrorCode, Due: r.AvailableAt}
	}
	return out, nil
}
