package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
)

// smallBacklog is the other rows of the backlog scenario's small case.
const smallBacklog = 1_000

// runBacklog measures what one fetch costs with 1,000 and with
// --backlog-rows claimable rows of something else in the table: Relais
// occurrences of another definition, River jobs of another queue (inserted
// with one SQL statement each: building a million through the API would
// take the run's whole budget). Relais is timed over HTTP (fetch-and-lock
// of one occurrence, no wait: what a worker sees); River at its fetch
// statement (the driver's JobGetAvailable, what its producer runs), so the
// absolute figures are not comparable, only each system's ratio.
func runBacklog(ctx context.Context, b *bench) ([]measurement, error) {
	var out []measurement
	for _, sys := range []struct {
		name string
		run  func(context.Context, *bench) ([2]float64, error)
	}{{sysRelais, relaisBacklog}, {sysRiverTuned, riverBacklog}} {
		p50, err := sys.run(ctx, b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", sys.name, err)
		}
		out = append(out,
			measurement{Scenario: "backlog", System: sys.name, Metric: "fetch p50, " + thousands(smallBacklog) + " others", Value: p50[0], Unit: "ms", Better: "lower"},
			measurement{Scenario: "backlog", System: sys.name, Metric: "fetch p50, " + thousands(b.opts.BacklogRows) + " others", Value: p50[1], Unit: "ms", Better: "lower"},
			measurement{Scenario: "backlog", System: sys.name, Metric: thousands(b.opts.BacklogRows) + " ÷ " + thousands(smallBacklog) + " others", Value: p50[1] / p50[0], Unit: "×", Better: "lower"})
	}
	return out, nil
}

func relaisBacklog(ctx context.Context, b *bench) ([2]float64, error) {
	var p50 [2]float64
	// Fetches without a wait: the clock measures the claim, never a poll.
	fetch := mustJSON(map[string]any{"worker_id": "w", "subscriptions": []any{map[string]any{"definition": "add_company_to_crm"}},
		"max_tasks": 1, "lock_duration": "PT5M"})
	var cases [2]struct {
		r     *relais
		token string
	}
	for c, rows := range backlogSizes(b) {
		db, err := b.pg.freshDatabase(ctx, fmt.Sprint("bench_backlog_relais_", c))
		if err != nil {
			return p50, err
		}
		defer db.drop()
		r, err := startRelais(ctx, b, db)
		if err != nil {
			return p50, err
		}
		defer r.stop()
		token, err := r.setupPull(ctx, b.opts.Examples)
		if err != nil {
			return p50, err
		}
		if err := r.applyFile(ctx, b.opts.Examples+"/definitions/score_company.yaml"); err != nil {
			return p50, err
		}
		started := &tally{}
		start := func(ctx context.Context, i int) error {
			err := r.startCRM(ctx, i)
			if err == nil {
				started.add(1)
			}
			return err
		}
		if _, err := (load{label: "relais starts", n: b.opts.Fetches, producers: b.opts.Producers, start: start, settled: started}).run(ctx, b.log); err != nil {
			return p50, err
		}
		b.log.printf("relais: adding %d claimable occurrences of another definition", rows)
		if err := fillOccurrences(ctx, r.pool, 0, rows); err != nil {
			return p50, err
		}
		if err := settle(ctx, r.pool, "occurrences", b.log); err != nil {
			return p50, err
		}
		cases[c].r, cases[c].token = r, token
	}
	took, err := alternateFetches(b.opts.Fetches, func(c int) error {
		var out struct{ Occurrences []fetched }
		if err := cases[c].r.api.expect(ctx, http.StatusOK, "POST", "/api/v1/pull/fetch-and-lock", cases[c].token, fetch, &out); err != nil {
			return err
		}
		if len(out.Occurrences) != 1 {
			return fmt.Errorf("a fetch returned %d occurrences, want 1", len(out.Occurrences))
		}
		return nil
	})
	if err != nil {
		return p50, err
	}
	return fetchMedians(b, sysRelais, took), nil
}

// backlogSizes are the other rows of the small and the large case.
func backlogSizes(b *bench) [2]int { return [2]int{smallBacklog, b.opts.BacklogRows} }

// alternateFetches times n fetches of each case, the two cases taking
// turns: the machine's speed drifts within seconds, and timing one case
// after the other measured the drift as much as the table's size (a ratio
// of 0.6× to 1.6× for the same code). It returns each case's durations,
// sorted.
func alternateFetches(n int, fetch func(c int) error) ([2][]time.Duration, error) {
	var took [2][]time.Duration
	for i := range n {
		for k := range 2 {
			c := (i + k) % 2 // each case goes first half of the time
			began := time.Now()
			if err := fetch(c); err != nil {
				return took, err
			}
			took[c] = append(took[c], time.Since(began))
		}
	}
	slices.Sort(took[0])
	slices.Sort(took[1])
	return took, nil
}

// fetchMedians logs and returns each case's median fetch.
func fetchMedians(b *bench, system string, took [2][]time.Duration) [2]float64 {
	var p50 [2]float64
	for c, rows := range backlogSizes(b) {
		p50[c] = percentile(took[c], 50)
		b.log.printf("%s: fetch with %d others: p50 %.2f ms, p95 %.2f ms", system, rows, p50[c], percentile(took[c], 95))
	}
	return p50
}

// settle vacuums and analyzes table after a bulk fill, then asks for a
// checkpoint, so that the fetches timed next do not share the machine with
// the fill's aftermath (autovacuum over a million new rows, their pages
// written out): the measure is of the table's size. The checkpoint needs a
// privileged role; without one, the fetches run after the vacuum alone.
func settle(ctx context.Context, pool *pgxpool.Pool, table string, log *progress) error {
	if _, err := pool.Exec(ctx, "vacuum (analyze) "+table); err != nil {
		return fmt.Errorf("vacuum %s: %w", table, err)
	}
	if _, err := pool.Exec(ctx, "checkpoint"); err != nil {
		log.printf("checkpoint after filling %s: %v (measuring without it)", table, err)
	}
	return nil
}

// fillOccurrences inserts n claimable pull occurrences of score_company
// revision 1 (another definition than the fetch's), under one instance,
// numbering their nodes from from+1.
func fillOccurrences(ctx context.Context, pool *pgxpool.Pool, from, n int) error {
	_, err := pool.Exec(ctx, `
		insert into occurrences (id, instance_id, node, definition_key, revision, mode, status, priority, max_attempts, retry_delay,
		                         available_at, claimable_at, inputs)
		select gen_random_uuid(), (select id from instances limit 1), 'other_' || g, 'score_company', 1, 'pull', 'available', 5, 3,
		       interval '10 seconds', now(), now(), '{}'
		from generate_series($1::int + 1, $1::int + $2::int) g`, from, n)
	if err != nil {
		return fmt.Errorf("fill occurrences: %w", err)
	}
	return nil
}

func riverBacklog(ctx context.Context, b *bench) ([2]float64, error) {
	var p50 [2]float64
	var execs [2]riverdriver.Executor
	for c, rows := range backlogSizes(b) {
		db, err := b.pg.freshDatabase(ctx, fmt.Sprint("bench_backlog_river_", c))
		if err != nil {
			return p50, err
		}
		defer db.drop()
		pool, err := migrateRiver(ctx, db, nil)
		if err != nil {
			return p50, err
		}
		workers := river.NewWorkers()
		river.AddWorker(workers, &benchWorker{})
		// No queues: this client only inserts; the fetches below are timed
		// alone.
		client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Workers: workers})
		if err != nil {
			return p50, err
		}
		var params []river.InsertManyParams
		for i := range b.opts.Fetches {
			params = append(params, river.InsertManyParams{Args: newBenchArgs(i)})
		}
		if _, err := client.InsertMany(ctx, params); err != nil {
			return p50, err
		}
		b.log.printf("river: adding %d available jobs of another queue", rows)
		if _, err := pool.Exec(ctx, `
			insert into river_job (args, kind, max_attempts, priority, queue, state, scheduled_at)
			select '{}'::jsonb, 'other_kind', 25, 1, 'other', 'available', now() from generate_series(1, $1)`, rows); err != nil {
			return p50, fmt.Errorf("fill river_job: %w", err)
		}
		if err := settle(ctx, pool, "river_job", b.log); err != nil {
			return p50, err
		}
		execs[c] = riverpgxv5.New(pool).GetExecutor()
	}
	took, err := alternateFetches(b.opts.Fetches, func(c int) error {
		res, err := execs[c].JobGetAvailable(ctx, &riverdriver.JobGetAvailableParams{ClientID: "bench", MaxAttemptedBy: 100, MaxToLock: 1, Queue: river.QueueDefault})
		if err != nil {
			return err
		}
		if len(res.Jobs) != 1 {
			return fmt.Errorf("a fetch returned %d jobs, want 1", len(res.Jobs))
		}
		return nil
	})
	if err != nil {
		return p50, err
	}
	return fetchMedians(b, sysRiverTuned, took), nil
}
