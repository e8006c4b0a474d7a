package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/relais/relais/internal/promtext"
	"strings"
	"sync/atomic"
	"time"
)

// relaisRun is the measured part of a Relais throughput scenario: units
// started by the producers (one instance each, or a batch of perUnit),
// settled as settled counts them.
type relaisRun struct {
	label   string // progress lines: "relais", "relais sdk"
	profile string // --profile file prefix: "cycle-relais"
	start   func(ctx context.Context, i int) error
	perUnit int // instances per unit (0 means 1)
	settled *tally
	failed  <-chan error
}

// measure runs a warm-up of units, then the measured phase of units (under
// a profile when --profile asks), and checks that every instance started
// completed. It returns the instances settled per second.
func (r *relais) measure(ctx context.Context, b *bench, warm, units int, run relaisRun) (float64, error) {
	per := max(run.perUnit, 1)
	l := load{label: run.label + " warm-up", n: warm, producers: b.opts.Producers, start: run.start, settled: run.settled, perUnit: run.perUnit, failed: run.failed}
	if _, err := l.run(ctx, b.log); err != nil {
		return 0, err
	}
	prof, err := b.beginProfile(ctx, run.profile, r.db, r.stats, true)
	if err != nil {
		return 0, err
	}
	l.label, l.from, l.n = run.label, warm, units
	groupsBefore, err := r.groupCommits(ctx)
	if err != nil {
		return 0, err
	}
	elapsed, err := clientLoad(ctx, l, b.log)
	prof.end(ctx, units*per, "occurrence")
	if err != nil {
		return 0, err
	}
	rate := float64(units*per) / elapsed.Seconds()
	b.log.printf("%s: %d occurrences in %s: %.0f/s", run.label, units*per, elapsed.Round(time.Millisecond), rate)
	groupsAfter, err := r.groupCommits(ctx)
	if err != nil {
		return 0, err
	}
	b.log.printf("%s: group commit: %s", run.label, groupsAfter.since(groupsBefore))

	var completed int
	if err := r.pool.QueryRow(ctx, "select count(*) from instances where status = 'completed'").Scan(&completed); err != nil {
		return 0, err
	}
	if want := (warm + units) * per; completed != want {
		return 0, fmt.Errorf("%d instances completed, want %d", completed, want)
	}
	return rate, nil
}

// endedPoll counts the instances that ended into a tally every interval,
// for workers that do not say when Relais committed their outcome and
// whose calls the bench cannot see (the push runner): the starts answered (counted by the start
// function it wraps) less the instances still running. Counting the
// running ones reads the few index entries of live instances, where
// counting the ended ones would read every instance at every poll, a
// query growing with the run and taking CPU from the system measured. The
// starts are read before the running ones: a start answered in between
// can only make the figure low, and it is exact once every start was
// answered.
type endedPoll struct {
	started atomic.Int64
	stop    func()
}

// pollEnded starts polling on a pool of its own (which keeps the polls out
// of the replica's SQL profile); stop ends the polling and waits for it.
func pollEnded(ctx context.Context, db *database, settled *tally, failed chan<- error, every time.Duration) (*endedPoll, error) {
	monitor, err := db.pool(ctx, nil)
	if err != nil {
		return nil, err
	}
	p := &endedPoll{}
	pctx, cancel := context.WithCancel(ctx)
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for pctx.Err() == nil {
			started := p.started.Load()
			var running int64
			if err := monitor.QueryRow(pctx, "select count(*) from instances where status = 'running'").Scan(&running); err != nil {
				if pctx.Err() == nil && !errors.Is(err, context.Canceled) {
					failed <- err
				}
				return
			}
			settled.set(int(max(started-running, 0)))
			time.Sleep(every)
		}
	}()
	p.stop = func() { cancel(); <-polled }
	return p, nil
}

// counting wraps start to count the starts answered.
func (p *endedPoll) counting(start func(ctx context.Context, i int) error) func(ctx context.Context, i int) error {
	return func(ctx context.Context, i int) error {
		err := start(ctx, i)
		if err == nil {
			p.started.Add(1)
		}
		return err
	}
}

// groupCommitCounts are a replica's relais_group_commit_writes_total and
// relais_group_commit_groups_total by lane.
type groupCommitCounts map[string]struct{ writes, groups, filled, lapsed float64 }

// groupCommits reads the replica's group commit counters from /metrics.
func (r *relais) groupCommits(ctx context.Context) (groupCommitCounts, error) {
	status, body, err := r.api.do(ctx, "GET", "/metrics", "", nil)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	if status != 200 {
		return nil, fmt.Errorf("metrics: status %d", status)
	}
	m, err := promtext.Parse(string(body))
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	counts := groupCommitCounts{}
	for _, lane := range []string{"starts", "settlements"} {
		writes, ok := m.Get("relais_group_commit_writes_total", "lane", lane)
		if !ok {
			continue
		}
		c := counts[lane]
		c.writes = writes
		c.groups, _ = m.Get("relais_group_commit_groups_total", "lane", lane)
		c.filled, _ = m.Get("relais_group_commit_gathers_total", "lane", lane, "result", "filled")
		c.lapsed, _ = m.Get("relais_group_commit_gathers_total", "lane", lane, "result", "lapsed")
		counts[lane] = c
	}
	if len(counts) == 0 {
		return nil, errors.New("metrics: no relais_group_commit_writes_total")
	}
	return counts, nil
}

// since says how many writes a transaction held, by lane, since before.
func (c groupCommitCounts) since(before groupCommitCounts) string {
	var parts []string
	for _, lane := range []string{"starts", "settlements"} {
		writes, groups := c[lane].writes-before[lane].writes, c[lane].groups-before[lane].groups
		if groups > 0 {
			parts = append(parts, fmt.Sprintf("%s %.2f writes a transaction (%.0f in %.0f; waits %.0f filled, %.0f lapsed)", lane, writes/groups, writes, groups,
				c[lane].filled-before[lane].filled, c[lane].lapsed-before[lane].lapsed))
		}
	}
	return strings.Join(parts, ", ")
}
