package main

import (
	"context"
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
// that ended (see endedPoll; the SDK does not say when Relais committed an
// outcome) every 10 ms: the figure can only be a little low (by at most
// one interval in a run of seconds; at 2 ms the polls took about 7 % of
// PostgreSQL's CPU from the run they measured).
func relaisCycleSDK(ctx context.Context, b *bench) (float64, error) {
	r, token, done, err := freshPullRelais(ctx, b, "bench_cycle_sdk_relais")
	if err != nil {
		return 0, err
	}
	defer done()

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

	settled := &tally{}
	ended, err := pollEnded(ctx, r.db, settled, failed, 10*time.Millisecond)
	if err != nil {
		return 0, err
	}
	defer ended.stop()
	return r.measure(ctx, b, warmup(b.opts.N), b.opts.N, relaisRun{label: "relais sdk", profile: "cycle-sdk-relais", start: ended.counting(r.startCRM), settled: settled, failed: failed})
}
