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
	db, err := b.pg.freshDatabase(ctx, "bench_backlog_relais")
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
	// Fetches without a wait: the clock measures the claim, never a poll.
	fetch := mustJSON(map[string]any{"worker_id": "w", "subscriptions": []any{map[string]any{"definition": "add_company_to_crm"}},
		"max_tasks": 1, "lock_duration": "PT5M"})
	complete := newPullWorker(r, token, "w", 1, "PT1S", nil).complete
	others := 0
	for c, rows := range []int{smallBacklog, b.opts.BacklogRows} {
		started := &tally{}
		start := func(ctx context.Context, i int) error {
			_, err := r.startInstance(ctx, "crm_only", mustJSON(map[string]any{"inputs": map[string]any{"name": fmt.Sprint("c", i)}}))
			if err == nil {
				started.add(1)
			}
			return err
		}
		if _, err := (load{label: "relais starts", n: b.opts.Fetches, producers: b.opts.Producers, start: start, settled: started}).run(ctx, b.log); err != nil {
			return p50, err
		}
		b.log.printf("relais: adding %d claimable occurrences of another definition (%d in all)", rows-others, rows)
		if err := fillOccurrences(ctx, r.pool, others, rows-others); err != nil {
			return p50, err
		}
		others = rows
		var took []time.Duration
		var ids []string
		for range b.opts.Fetches {
			var out struct{ Occurrences []fetched }
			began := time.Now()
			err := r.api.expect(ctx, http.StatusOK, "POST", "/api/v1/pull/fetch-and-lock", token, fetch, &out)
			took = append(took, time.Since(began))
			if err != nil {
				return p50, err
			}
			if len(out.Occurrences) != 1 {
				return p50, fmt.Errorf("a fetch returned %d occurrences, want 1", len(out.Occurrences))
			}
			ids = append(ids, out.Occurrences[0].ID)
		}
		// Completed, they stay in the table but no longer wait for a
		// worker (their locks would lapse during a long fill).
		for _, id := range ids {
			if err := r.api.expect(ctx, http.StatusOK, "POST", "/api/v1/pull/occurrences/"+id+"/complete", token, complete, nil); err != nil {
				return p50, err
			}
		}
		slices.Sort(took)
		p50[c] = percentile(took, 50)
		b.log.printf("relais: fetch with %d others: p50 %.2f ms, p95 %.2f ms", rows, p50[c], percentile(took, 95))
	}
	return p50, nil
}

// fillOccurrences inserts n claimable pull occurrences of score_company
// revision 1 (another definition than the fetch's), under one instance,
// numbering their nodes from from+1, and analyzes the table.
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
	_, err = pool.Exec(ctx, "analyze occurrences")
	return err
}

func riverBacklog(ctx context.Context, b *bench) ([2]float64, error) {
	var p50 [2]float64
	db, err := b.pg.freshDatabase(ctx, "bench_backlog_river")
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
	exec := riverpgxv5.New(pool).GetExecutor()
	others := 0
	for c, rows := range []int{smallBacklog, b.opts.BacklogRows} {
		var params []river.InsertManyParams
		for i := range b.opts.Fetches {
			params = append(params, river.InsertManyParams{Args: newBenchArgs(i)})
		}
		if _, err := client.InsertMany(ctx, params); err != nil {
			return p50, err
		}
		b.log.printf("river: adding %d available jobs of another queue (%d in all)", rows-others, rows)
		if _, err := pool.Exec(ctx, `
			insert into river_job (args, kind, max_attempts, priority, queue, state, scheduled_at)
			select '{}'::jsonb, 'other_kind', 25, 1, 'other', 'available', now() from generate_series(1, $1)`, rows-others); err != nil {
			return p50, fmt.Errorf("fill river_job: %w", err)
		}
		if _, err := pool.Exec(ctx, "analyze river_job"); err != nil {
			return p50, err
		}
		others = rows
		var took []time.Duration
		for range b.opts.Fetches {
			began := time.Now()
			res, err := exec.JobGetAvailable(ctx, &riverdriver.JobGetAvailableParams{ClientID: "bench", MaxAttemptedBy: 100, MaxToLock: 1, Queue: river.QueueDefault})
			took = append(took, time.Since(began))
			if err != nil {
				return p50, err
			}
			if len(res.Jobs) != 1 {
				return p50, fmt.Errorf("a fetch returned %d jobs, want 1", len(res.Jobs))
			}
		}
		slices.Sort(took)
		p50[c] = percentile(took, 50)
		b.log.printf("river: fetch with %d others: p50 %.3f ms, p95 %.3f ms", rows, p50[c], percentile(took, 95))
	}
	return p50, nil
}
