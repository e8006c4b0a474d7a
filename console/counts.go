package console

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/relais/relais/engine"
)

// countsTTL is how old the counts by status may be before a refresh starts.
const countsTTL = 5 * time.Second

// menusTTL is how old the filter form's lists of definitions and consumers
// may be: they change when a designer or an administrator adds one.
const menusTTL = 30 * time.Second

// countsWait bounds how long a page waits for the counts when none has
// been read yet (the first page a replica serves, unless a metrics scrape
// came first): counting reads every entry of an index, seconds at ten
// million occurrences, and the page is worth more at once without its
// counts. The count goes on in the background and the next page shows it.
const countsWait = 500 * time.Millisecond

// countSnapshot is definition → status → number of occurrences.
type countSnapshot map[string]map[string]int64

// errCounting says the first count is still running after countsWait.
var errCounting = errors.New("console: the first count is still running")

// counts reads the engine's cached counts by definition and status (one
// counting query per replica every few seconds, shared with the metrics)
// and when they were read. It answers errCounting rather than wait past
// countsWait for the first one.
func (c *Console) counts(ctx context.Context) (countSnapshot, time.Time, error) {
	wctx, cancel := context.WithTimeout(ctx, countsWait)
	defer cancel()
	rows, at, err := c.countsOf(wctx)
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return nil, time.Time{}, errCounting
		}
		return nil, time.Time{}, err
	}
	snap := countSnapshot{}
	for _, r := range rows {
		if snap[r.Definition] == nil {
			snap[r.Definition] = map[string]int64{}
		}
		snap[r.Definition][r.Status] = r.Count
	}
	return snap, at, nil
}

// countsMissing is what a page says in place of the counts it could not
// show: still being read, or unavailable (logged).
func (c *Console) countsMissing(ctx context.Context, err error) string {
	if errors.Is(err, errCounting) {
		return T(ctx, "Counting the occurrences; the counts appear when you reload the page.")
	}
	c.logger.Warn("console: counts unavailable", "err", err)
	return T(ctx, "Counts are unavailable right now.")
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

// filterMenus are the choices the filter forms offer.
type filterMenus struct {
	definitions []string
	// retryable are the definitions whose retries may wait: all but those
	// only push nodes use (never retried).
	retryable []string
	processes []string
	consumers []consumerChoice
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
		pushOnly, err := eng.PushOnlyDefinitions(ctx)
		if err != nil {
			return m, err
		}
		for _, d := range defs {
			m.definitions = append(m.definitions, d.Key)
			if !slices.Contains(pushOnly, d.Key) {
				m.retryable = append(m.retryable, d.Key)
			}
		}
		procs, err := eng.ListProcesses(ctx, "", maxOptions)
		if err != nil {
			return m, err
		}
		for _, p := range procs {
			m.processes = append(m.processes, p.Key)
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
