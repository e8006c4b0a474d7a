package engine

import "context"

// OccurrenceCount is how many occurrences of one definition are in one
// status.
type OccurrenceCount struct {
	Definition string
	Status     string
	Count      int64
}

// CountOccurrencesByDefinitionStatus counts every occurrence per definition
// and status, ordered by definition then status; pairs without occurrences
// are absent. It reads the whole occurrences_by_definition_status index, so
// it is meant to be cached by its caller (the console refreshes it every few
// seconds), never run on every request.
func (e *Engine) CountOccurrencesByDefinitionStatus(ctx context.Context) ([]OccurrenceCount, error) {
	rows, err := e.q.OccurrenceCountByDefinitionStatus(ctx)
	if err != nil {
		return nil, wrap("count occurrences", err)
	}
	out := make([]OccurrenceCount, len(rows))
	for i, r := range rows {
		out[i] = OccurrenceCount{Definition: r.DefinitionKey, Status: r.Status, Count: r.Count}
	}
	return out, nil
}
