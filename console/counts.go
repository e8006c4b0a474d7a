package console

import (
	"context"
	"time"

	"github.com/relais/relais/engine"
)

// menusTTL is how old the filter form's lists of definitions and consumers
// may be: they change when a designer or an administrator adds one.
const menusTTL = 30 * time.Second

// countSnapshot is definition → status → number of occurrences.
type countSnapshot map[string]map[string]int64

// counts reads the counts of every (definition, status) pair from the
// engine's cache (engine.OccurrenceCounts): counting reads every entry of
// an index, hundreds of milliseconds at a million occurrences, too slow for
// every request and wasteful when several operators watch the same view.
func counts(ctx context.Context, eng *engine.Engine) (countSnapshot, error) {
	rows, _, err := eng.OccurrenceCounts(ctx)
	if err != nil {
		return nil, err
	}
	snap := countSnapshot{}
	for _, r := range rows {
		if snap[r.Definition] == nil {
			snap[r.Definition] = map[string]int64{}
		}
		snap[r.Definition][r.Status] = r.Count
	}
	return snap, nil
}

// forDefinition returns the counts by status of one definition, or of all
// definitions when key is empty.
func (s countSnapshot) forDefinition(key string) map[string]int64 {
	out := map[string]int64{}
	for def, byStatus := range s {
		if key != "" && def != key {
			continue
		}
		for status, n := range byStatus {
			out[status] += n
		}
	}
	return out
}

// filterMenus are the choices the operations view's filter form offers.
type filterMenus struct {
	definitions []string
	consumers   []consumerChoice
}

type consumerChoice struct {
	id   int64
	name string
}

// loadMenus reads the definition keys and consumer names. Listing
// consumers also reads their grants, one query each, which is why the menus
// are cached rather than read per request.
func loadMenus(eng *engine.Engine) func(context.Context) (filterMenus, error) {
	return func(ctx context.Context) (filterMenus, error) {
		var m filterMenus
		defs, err := eng.ListDefinitions(ctx, "", maxOptions)
		if err != nil {
			return m, err
		}
		for _, d := range defs {
			m.definitions = append(m.definitions, d.Key)
		}
		cs, err := eng.ListConsumers(ctx, 0, maxOptions)
		if err != nil {
			return m, err
		}
		for _, c := range cs {
			m.consumers = append(m.consumers, consumerChoice{id: c.ID, name: c.Name})
		}
		return m, nil
	}
}
