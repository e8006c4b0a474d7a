package main

import (
	"context"
	"errors"
	"fmt"
	"runtime/pprof"
	"time"

	"github.com/relais/relais/worker"
)

// relaisCycleSDK is the cycle scenario with the workers written as a Relais
// user would write them: one Go SDK worker (package worker) with
// --workers concurrent handlers, as River's row is one River client with
// MaxWorkers handlers. The SDK takes a worker stream (tasks pushed to it as
// credit allows) and reports outcomes on it; the producers are those of
// the cycle scenario. Settlements are counted by polling the instances
// that ended, on a pool of its own (the SDK does not say when Relais
// committed an outcome), every 2 ms: the figure can only be a little low.
func relaisCycleSDK(ctx context.Context, b *bench) (float64, error) {
	db, err := b.pg.freshDatabase(ctx, "bench_cycle_sdk_relais")
	if err != nil {
		return 0, err
	}
	defer db.drop()
	r, err := startRelais(ctx, b, db)
	if err != nil {
		return 0, err
	}
	defer r.stop()
	token, err := r.setupPull(ctx, b.opts.Examples)
	if err != nil {
		return 0, err
	}

	w, err := worker.New(worker.Config{URL: r.url, Token: token, WorkerID: "bench-sdk", Concurrency: b.opts.Workers, LockDuration: time.Minute})
	if err != nil {
		return 0, err
	}
	outputs := map[string]any{"result": "created", "crm_id": "CRM-0001"}
	w.Handle("add_company_to_crm", nil, func(context.Context, *worker.Task) (any, error) { return outputs, nil })
	failed := make(chan error, 2)
	wctx, stopWorker := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		var err error
		pprof.Do(wctx, sideClient, func(ctx context.Context) { err = w.Run(ctx) })
		if err != nil {
			failed <- err
		}
	}()
	defer func() { stopWorker(); <-ran }()

	monitor, err := db.pool(ctx, nil)
	if err != nil {
		return 0, err
	}
	settled := &tally{}
	pctx, cancel := context.WithCancel(ctx)
	polled := make(chan struct{})
	defer func() { cancel(); <-polled }()
	go func() {
		defer close(polled)
		for pctx.Err() == nil {
			var n int
			if err := monitor.QueryRow(pctx, "select count(*) from instances where status <> 'running'").Scan(&n); err != nil {
				if pctx.Err() == nil && !errors.Is(err, context.Canceled) {
					failed <- err
				}
				return
			}
			settled.set(n)
			time.Sleep(2 * time.Millisecond)
		}
	}()

	start := func(ctx context.Context, i int) error {
		_, err := r.startInstance(ctx, "crm_only", mustJSON(map[string]any{"inputs": map[string]any{"name": fmt.Sprint("c", i)}}))
		return err
	}
	warm := warmup(b.opts.N)
	if _, err := (load{label: "relais sdk warm-up", n: warm, producers: b.opts.Producers, start: start, settled: settled, failed: failed}).run(ctx, b.log); err != nil {
		return 0, err
	}
	prof, err := b.beginProfile(ctx, "cycle-sdk-relais", db, r.stats, true)
	if err != nil {
		return 0, err
	}
	elapsed, err := clientLoad(ctx, load{label: "relais sdk", from: warm, n: b.opts.N, producers: b.opts.Producers, start: start, settled: settled, failed: failed}, b.log)
	prof.end(ctx, b.opts.N, "occurrence")
	if err != nil {
		return 0, err
	}
	rate := float64(b.opts.N) / elapsed.Seconds()
	b.log.printf("relais sdk: %d occurrences in %s: %.0f/s", b.opts.N, elapsed.Round(time.Millisecond), rate)

	var completed int
	if err := r.pool.QueryRow(ctx, "select count(*) from instances where status = 'completed'").Scan(&completed); err != nil {
		return 0, err
	}
	if completed != warm+b.opts.N {
		return 0, fmt.Errorf("%d instances completed, want %d", completed, warm+b.opts.N)
	}
	return rate, nil
}
