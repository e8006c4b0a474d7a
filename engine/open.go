package engine

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/queries"
)

// Remaining is how many executions o's budget still allows, the one in
// progress included: AttemptsLeft, plus one while o is reserved (its lock
// not lapsed) or deferred. It is what a Camunda worker calls retries.
func (o Occurrence) Remaining() int {
	if o.Status == StatusReserved || o.Status == StatusDeferred {
		return o.AttemptsLeft + 1
	}
	return o.AttemptsLeft
}

// PastDeadline reports whether o's deadline has passed at now: it fails
// there, whether or not the timer has failed it yet.
func (o Occurrence) PastDeadline(now time.Time) bool {
	return o.DeadlineAt != nil && !o.DeadlineAt.After(now)
}

// Sort orders of ListOpen; each ends with the occurrence id.
const (
	OpenByID       = "id"
	OpenByPriority = "priority"
	OpenByLockEnd  = "lock_expires_at"
	OpenByInstance = "instance"
	OpenByProcess  = "process"
)

// MaxOpenList bounds one page of ListOpen.
const MaxOpenList = 10000

// OpenFilter selects among a consumer's open pull occurrences (available,
// reserved or deferred, within its grants). Zero fields do not filter; a
// non-nil empty slice matches nothing.
type OpenFilter struct {
	IDs        []uuid.UUID
	Definition string
	WorkerID   string
	// Locked selects occurrences holding a live lock (true) or not (false).
	Locked *bool
	// HasRemaining selects occurrences whose Remaining is above zero (true)
	// or zero (false).
	HasRemaining      *bool
	LockExpiresAfter  *time.Time
	LockExpiresBefore *time.Time
	Nodes             []string
	Instances         []uuid.UUID
	ProcessKeys       []string
	MinPriority       *int
	MaxPriority       *int

	// SortBy is one of the Open* orders ("" is OpenByID), then id.
	SortBy     string
	Descending bool
	Offset     int
	Limit      int // 1 to 10,000; 0 is refused
}

// grantedPairs resolves everything a consumer is granted to (definition,
// revision) pairs; a consumer without grants has none.
func (e *Engine) grantedPairs(ctx context.Context, consumerID int64) (Pairs, error) {
	p, err := e.ResolveSubscriptions(ctx, consumerID, []Subscription{{Definition: "*"}})
	if fault.HasCode(err, "not_granted") {
		return Pairs{}, nil
	}
	return p, err
}

func (e *Engine) openParams(ctx context.Context, consumerID int64, f OpenFilter) (queries.OccurrenceListOpenPullParams, bool, error) {
	pairs, err := e.grantedPairs(ctx, consumerID)
	if err != nil || len(pairs.Keys) == 0 {
		return queries.OccurrenceListOpenPullParams{}, false, err
	}
	p := queries.OccurrenceListOpenPullParams{DefinitionKeys: pairs.Keys, Revisions: pairs.Revisions, Now: e.at(), ConsumerID: &consumerID,
		Ids: f.IDs, DefinitionKey: strPtr(f.Definition), WorkerID: strPtr(f.WorkerID), Locked: f.Locked, HasRemaining: f.HasRemaining,
		LockExpiresAfter: f.LockExpiresAfter, LockExpiresBefore: f.LockExpiresBefore,
		Nodes: f.Nodes, InstanceIds: f.Instances, ProcessKeys: f.ProcessKeys,
		MinPriority: int32Ptr(f.MinPriority), MaxPriority: int32Ptr(f.MaxPriority),
		SortBy: f.SortBy, Descending: f.Descending, Skip: int32(min(f.Offset, 1<<31-1)), Max: int32(f.Limit)}
	if p.SortBy == "" {
		p.SortBy = OpenByID
	}
	return p, true, nil
}

func int32Ptr(v *int) *int32 {
	if v == nil {
		return nil
	}
	n := int32(max(min(*v, 1<<31-1), -1<<31))
	return &n
}

// ListOpen returns the open pull occurrences a consumer's grants cover
// that f selects, as GetOccurrence observes them but without their inputs
// and outputs (both nil).
func (e *Engine) ListOpen(ctx context.Context, consumerID int64, f OpenFilter) ([]Occurrence, error) {
	if f.Limit < 1 || f.Limit > MaxOpenList || f.Offset < 0 {
		return nil, fault.New(fault.BadRequest, "invalid_request", "the limit must be 1 to %d and the offset 0 or more", MaxOpenList)
	}
	switch f.SortBy {
	case "", OpenByID, OpenByPriority, OpenByLockEnd, OpenByInstance, OpenByProcess:
	default:
		return nil, fault.New(fault.BadRequest, "invalid_request", "unknown sort order %q", f.SortBy)
	}
	p, ok, err := e.openParams(ctx, consumerID, f)
	if err != nil || !ok {
		return nil, wrap("list open occurrences", err)
	}
	rows, err := e.q.OccurrenceListOpenPull(ctx, p)
	if err != nil {
		return nil, wrap("list open occurrences", err)
	}
	xs := make([]observed, len(rows))
	for i, r := range rows {
		xs[i] = observed{queries.Occurrence(r.OccurrenceHead), r.Lapsed}
	}
	return e.observations(ctx, xs)
}

// CountOpen counts what ListOpen would list without paging.
func (e *Engine) CountOpen(ctx context.Context, consumerID int64, f OpenFilter) (int64, error) {
	f.Limit = 1
	p, ok, err := e.openParams(ctx, consumerID, f)
	if err != nil || !ok {
		return 0, wrap("count open occurrences", err)
	}
	n, err := e.q.OccurrenceCountOpenPull(ctx, queries.OccurrenceCountOpenPullParams{DefinitionKeys: p.DefinitionKeys, Revisions: p.Revisions,
		Ids: p.Ids, DefinitionKey: p.DefinitionKey, WorkerID: p.WorkerID, LockExpiresAfter: p.LockExpiresAfter, LockExpiresBefore: p.LockExpiresBefore,
		Nodes: p.Nodes, InstanceIds: p.InstanceIds, ProcessKeys: p.ProcessKeys, MinPriority: p.MinPriority, MaxPriority: p.MaxPriority,
		Locked: p.Locked, Now: p.Now, HasRemaining: p.HasRemaining, ConsumerID: p.ConsumerID})
	return n, wrap("count open occurrences", err)
}

// ConsumerOccurrence returns one pull occurrence a consumer's grants cover
// (masked, without its attempts), whatever its status; anything else is
// not_found, exactly as an unknown id.
func (e *Engine) ConsumerOccurrence(ctx context.Context, consumerID int64, id uuid.UUID) (Occurrence, error) {
	x, err := e.q.OccurrenceObserve(ctx, queries.OccurrenceObserveParams{ID: id, Now: e.at()})
	if isNoRows(err) {
		return Occurrence{}, notKeptForConsumer(id)
	}
	if err != nil {
		return Occurrence{}, wrap("consumer occurrence", err)
	}
	if x.Occurrence.Mode != ModePull {
		return Occurrence{}, notKeptForConsumer(id)
	}
	ok, err := granted(ctx, e.memo, e.q, consumerID, x.Occurrence.DefinitionKey, int(x.Occurrence.Revision))
	if err != nil {
		return Occurrence{}, wrap("consumer occurrence", err)
	}
	if !ok {
		return Occurrence{}, notKeptForConsumer(id)
	}
	o, err := e.occurrenceFromRow(ctx, observed{x.Occurrence, x.Lapsed})
	if err != nil {
		return Occurrence{}, wrap("consumer occurrence", err)
	}
	return o, nil
}

// DeferredFilter selects among a consumer's deferred occurrences. Zero
// fields do not filter.
type DeferredFilter struct {
	Definition string
	WorkerID   string
	// Before pages: occurrences with a smaller id (an older one).
	Before *uuid.UUID
	Limit  int // 1 to MaxOpenList
}

// ListDeferred returns the occurrences consumerID's workers deferred and
// nobody has settled yet, newest first, without their values: what a back
// end that lost track of its approvals needs to find them again (their
// deferral, deadline and instance; settling needs only the id). Its grants
// do not narrow it: a deferral whose grant was withdrawn since is listed,
// though the consumer can no longer settle it.
func (e *Engine) ListDeferred(ctx context.Context, consumerID int64, f DeferredFilter) ([]Occurrence, error) {
	if f.Limit < 1 || f.Limit > MaxOpenList {
		return nil, fault.New(fault.BadRequest, "invalid_request", "the limit must be 1 to %d", MaxOpenList)
	}
	if f.Definition != "" && !validDefinitionKey(f.Definition) {
		return nil, fault.New(fault.BadRequest, "invalid_request", "invalid filter").
			WithErrors([]fault.FieldError{{Path: "definition", Message: keyError(f.Definition)}})
	}
	rows, err := e.q.OccurrenceListDeferredByConsumer(ctx, queries.OccurrenceListDeferredByConsumerParams{ConsumerID: &consumerID,
		DefinitionKey: strPtr(f.Definition), WorkerID: strPtr(f.WorkerID), Before: f.Before, Max: int32(f.Limit)})
	if err != nil {
		return nil, wrap("list deferred occurrences", err)
	}
	if len(rows) == 0 && f.Before == nil && f.Definition != "" {
		// Nothing of a key the consumer is not granted: a misspelling,
		// which an empty answer would pass off as "none left". Judged
		// against its own grants only, so that nothing is learnt of the
		// rest.
		gs, err := e.grants(ctx, consumerID)
		if err != nil {
			return nil, wrap("list deferred occurrences", err)
		}
		granted := grantSet(gs)
		if _, ok := granted.revisions(f.Definition); !ok {
			return nil, fault.New(fault.BadRequest, "invalid_request", "invalid filter").
				WithErrors([]fault.FieldError{{Path: "definition", Message: "not granted to this consumer" + granted.hint(f.Definition)}})
		}
	}
	xs := make([]observed, len(rows))
	for i, r := range rows {
		xs[i] = observed{row: queries.Occurrence(r.OccurrenceHead)}
	}
	return e.observations(ctx, xs)
}
