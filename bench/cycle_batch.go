package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/riverqueue/river"
)

// runCycleBatch measures full-cycle throughput with batches on both
// sides: producers start --batch-size units per call (Relais: one POST
// /processes/crm_only/instances/batch, one transaction; River: one
// InsertMany in one transaction), and Relais's workers settle what each
// fetch returned in one POST /pull/settle (River's completer batches on
// its own).
func runCycleBatch(ctx context.Context, b *bench) ([]measurement, error) {
	runs, err := alternate(ctx, b, "cycle-batch", []contender{
		{sysRelais, relaisCycleBatch},
		{riverTuned.system, func(ctx context.Context, b *bench) (float64, error) { return riverCycleBatch(ctx, b, riverTuned) }},
	})
	if err != nil {
		return nil, err
	}
	return []measurement{rounds(batchMeasurement(sysRelais, 0), runs[0]), rounds(batchMeasurement(riverTuned.system, 0), runs[1])}, nil
}

func batchMeasurement(system string, rate float64) measurement {
	return measurement{Scenario: "cycle-batch", System: system, Metric: "throughput", Value: rate, Unit: "occurrences/s", Better: "higher", Compare: true}
}

// batches is how many batch calls cover n units.
func batches(n, size int) int { return (n + size - 1) / size }

func relaisCycleBatch(ctx context.Context, b *bench) (float64, error) {
	r, token, done, err := freshPullRelais(ctx, b, "bench_cycle_batch_relais")
	if err != nil {
		return 0, err
	}
	defer done()
	settled := &tally{}
	workers := &pullWorkers{failed: make(chan error, b.opts.Workers)}
	wctx, cancel := context.WithCancel(ctx)
	workers.cancel = cancel
	for i := range b.opts.Workers {
		w := &batchWorker{r: r, token: token, settled: settled, id: fmt.Sprint("w", i),
			fetch: mustJSON(map[string]any{"worker_id": fmt.Sprint("w", i), "subscriptions": []any{map[string]any{"definition": "add_company_to_crm"}},
				"max_tasks": b.opts.MaxTasks, "lock_duration": "PT1M", "wait": "PT5S"})}
		workers.wg.Go(func() {
			if err := w.run(wctx, &workers.stopping); err != nil {
				workers.failed <- err
			}
		})
	}
	defer workers.stop(r)
	if err := r.awaitWaiters(ctx, b.opts.Workers); err != nil {
		return 0, err
	}
	size := b.opts.BatchSize
	start := func(ctx context.Context, i int) error {
		items := make([]any, size)
		for j := range items {
			items[j] = map[string]any{"inputs": map[string]any{"name": fmt.Sprint("c", i*size+j)}}
		}
		var res struct {
			Items []struct{ Status int }
		}
		if err := r.api.expect(ctx, http.StatusOK, "POST", "/api/v1/processes/crm_only/instances/batch", r.admin, mustJSON(map[string]any{"items": items}), &res); err != nil {
			return err
		}
		for _, it := range res.Items {
			if it.Status != http.StatusCreated {
				return fmt.Errorf("batch item answered %d", it.Status)
			}
		}
		return nil
	}
	warm := max(warmup(b.opts.N)/size, 1)
	return r.measure(ctx, b, warm, batches(b.opts.N, size), relaisRun{label: "relais", profile: "cycle-batch-relais", start: start, perUnit: size, settled: settled, failed: workers.failed})
}

// batchWorker fetches like pullWorker and settles everything a fetch
// returned in one batch request.
type batchWorker struct {
	r       *relais
	token   string
	id      string
	fetch   []byte
	settled *tally
}

func (w *batchWorker) run(ctx context.Context, stopping *atomic.Bool) error {
	outputs := map[string]any{"result": "created", "crm_id": "CRM-0001"}
	for ctx.Err() == nil && !stopping.Load() {
		var out struct{ Occurrences []fetched }
		status, body, err := w.r.api.do(ctx, "POST", "/api/v1/pull/fetch-and-lock", w.token, w.fetch)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if status != http.StatusOK {
			return fmt.Errorf("fetch-and-lock: %d %s", status, body)
		}
		if err := json.Unmarshal(body, &out); err != nil {
			return fmt.Errorf("fetch-and-lock: %w", err)
		}
		if len(out.Occurrences) == 0 {
			continue
		}
		items := make([]any, len(out.Occurrences))
		for i, o := range out.Occurrences {
			items[i] = map[string]any{"id": o.ID, "outputs": outputs}
		}
		var res struct {
			Items []struct{ Status int }
		}
		if err := w.r.api.expect(ctx, http.StatusOK, "POST", "/api/v1/pull/settle", w.token, mustJSON(map[string]any{"worker_id": w.id, "items": items}), &res); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		for _, it := range res.Items {
			if it.Status != http.StatusOK {
				return fmt.Errorf("settle item answered %d", it.Status)
			}
		}
		w.settled.add(len(res.Items))
	}
	return nil
}

func riverCycleBatch(ctx context.Context, b *bench, v riverVariant) (float64, error) {
	db, err := b.pg.freshDatabase(ctx, "bench_cycle_batch_"+v.system)
	if err != nil {
		return 0, err
	}
	defer db.drop()
	size := b.opts.BatchSize
	n := batches(b.opts.N, size)
	warm := max(warmup(b.opts.N)/size, 1)
	s, err := startRiver(ctx, b, db, v, (warm+n)*size, nil)
	if err != nil {
		return 0, err
	}
	defer s.stop()
	insert := func(ctx context.Context, i int) error {
		params := make([]river.InsertManyParams, size)
		for j := range params {
			params[j] = river.InsertManyParams{Args: newBenchArgs(i*size + j)}
		}
		tx, err := s.pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(context.WithoutCancel(ctx))
		if _, err := s.client.InsertManyTx(ctx, tx, params); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}
	if _, err := (load{label: v.system + " warm-up", n: warm, producers: b.opts.Producers, start: insert, settled: s.settled, perUnit: size, failed: s.failed}).run(ctx, b.log); err != nil {
		return 0, err
	}
	prof, err := b.beginProfile(ctx, "cycle-batch-"+v.system, db, s.stats, false)
	if err != nil {
		return 0, err
	}
	elapsed, err := clientLoad(ctx, load{label: v.system, from: warm, n: n, producers: b.opts.Producers, start: insert, settled: s.settled, perUnit: size, failed: s.failed}, b.log)
	prof.end(ctx, n*size, "job")
	if err != nil {
		return 0, err
	}
	rate := float64(n*size) / elapsed.Seconds()
	b.log.printf("%s: %d jobs in batches of %d in %s: %.0f/s", v.system, n*size, size, elapsed.Round(time.Millisecond), rate)
	return rate, nil
}
