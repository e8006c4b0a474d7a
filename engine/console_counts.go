package engine

import (
	"cmp"
	"context"
	"slices"
)

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
// available, as observations show them. It reads the whole occurrences_by_definition_status index, so
// it is meant to be cached by its caller (the console refreshes it every few
// seconds), never run on every request.
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
	out := make([]OccurrenceCount, 0, len(rows)+len(lapsed))
	for _, r := range rows {
		n := r.Count
		switch r.Status {
		case StatusReserved:
			n -= moved[r.DefinitionKey]
		case StatusAvailable:
			n += moved[r.DefinitionKey]
			delete(moved, r.DefinitionKey)
		}
		if n > 0 {
			out = append(out, OccurrenceCount{Definition: r.DefinitionKey, Status: r.Status, Count: n})
		}
	}
	// Definitions with lapsed locks but no stored available occurrence.
	for def, n := range moved {
		if n > 0 {
			out = append(out, OccurrenceCount{Definition: def, Status: StatusAvailable, Count: n})
		}
	}
	slices.SortFunc(out, func(a, b OccurrenceCount) int {
		return cmp.Or(cmp.Compare(a.Definition, b.Definition), cmp.Compare(a.Status, b.Status))
	})
	return out, nil
}
