package engine

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"time"
)

// OccurrenceCountsTTL is how old the counts OccurrenceCounts answers may
// be before it starts a refresh.
const OccurrenceCountsTTL = 5 * time.Second

// OccurrenceCount is how many occurrences of one definition are in one
// status.
type OccurrenceCount struct {
	Definition string
	Status     string
	Count      int64
}

// CountOccurrencesByDefinitionStatus counts every occurrence per definition
// and status, ordered by definition then status; pairs without occurrences
// are absent. Reserved pull occurrences whose lock lapsed count as
// available, as observations show them. It reads the whole
// occurrences_by_definition_status index, so it is never run on every
// request: readers ask OccurrenceCounts, its cache.
func (e *Engine) CountOccurrencesByDefinitionStatus(ctx context.Context) ([]OccurrenceCount, error) {
	rows, err := e.q.OccurrenceCountByDefinitionStatus(ctx)
	if err != nil {
		return nil, wrap("count occurrences", err)
	}
	lapsed, err := e.q.OccurrenceLapsedLocksByDefinition(ctx, e.at())
	if err != nil {
		return nil, wrap("count lapsed locks", err)
	}
	moved := map[string]int64{}
	for _, l := range lapsed {
		moved[l.DefinitionKey] = l.Count
	}
	// unplaced are the lapsed locks not yet added to an available row. It
	// is not moved itself: "available" sorts before "reserved", and the
	// reserved row must still lose what the available row gained.
	unplaced := maps.Clone(moved)
	out := make([]OccurrenceCount, 0, len(rows)+len(lapsed))
	for _, r := range rows {
		n := r.Count
		switch r.Status {
		case StatusReserved:
			n -= moved[r.DefinitionKey]
		case StatusAvailable:
			n += moved[r.DefinitionKey]
			delete(unplaced, r.DefinitionKey)
		}
		if n > 0 {
			out = append(out, OccurrenceCount{Definition: r.DefinitionKey, Status: r.Status, Count: n})
		}
	}
	// Definitions with lapsed locks but no stored available occurrence.
	for def, n := range unplaced {
		if n > 0 {
			out = append(out, OccurrenceCount{Definition: def, Status: StatusAvailable, Count: n})
		}
	}
	slices.SortFunc(out, func(a, b OccurrenceCount) int {
		return cmp.Or(cmp.Compare(a.Definition, b.Definition), cmp.Compare(a.Status, b.Status))
	})
	return out, nil
}

// OccurrenceCounts is CountOccurrencesByDefinitionStatus cached for the
// replica: the console's counts by status and the relais_occurrences gauge
// read it, and together cost one counting query every OccurrenceCountsTTL
// at most. The counts answered may be up to OccurrenceCountsTTL old (plus
// the time a refresh takes); only the first call of an engine, or one made
// while no count has succeeded yet, waits for the query. It also returns
// when the counting began: the counts show the database as of then or
// later.
func (e *Engine) OccurrenceCounts(ctx context.Context) ([]OccurrenceCount, time.Time, error) {
	return e.counts.Get(ctx)
}

// FreshOccurrenceCounts is OccurrenceCounts for a page a person opens:
// after a quiet spell it waits a moment for fresh counts rather than show
// ones from before it (see snapshot.Cache.Fresh). Scrapes use
// OccurrenceCounts, which never waits once a count succeeded.
func (e *Engine) FreshOccurrenceCounts(ctx context.Context) ([]OccurrenceCount, time.Time, error) {
	return e.counts.Fresh(ctx)
}

// DefinitionKeys is every definition's key, cached as OccurrenceCounts is:
// the relais_occurrences gauge gives a definition without occurrences its
// zeros, so that an alert on a status has a series from the start.
func (e *Engine) DefinitionKeys(ctx context.Context) ([]string, error) {
	keys, _, err := e.defined.Get(ctx)
	return keys, err
}
