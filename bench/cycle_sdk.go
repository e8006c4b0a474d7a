package main

import (
	"context"
	"net/http"
	"runtime/pprof"
	"time"

	"github.com/relais/relais/worker"
)

// relaisCycleSDK is the cycle scenario with the workers written as a Relais
// user would write them: one Go SDK worker (package worker) with
// --workers concurrent handlers, as River's row is one River client with
// MaxWorkers handlers. The SDK takes a worker stream (tasks pushed to it as
// credit allows) and reports each outcome with a Complete call; the
// producers are those of the cycle scenario. The SDK does not say when
// Relais committed an outcome, its HTTP transport does: settlements are
// counted as each Complete is answered, as the raw row counts its complete
// answers (each one ends its one-node instance in its transaction), and
// measure checks afterwards that as many instances completed, which a
// Complete answered twice (a retried outcome) would fail.
func relaisCycleSDK(ctx context.Context, b *bench) (float64, error) {
	r, token, done, err := freshPullRelais(ctx, b, "bench_cycle_sdk_relais")
	if err != nil {
		return 0, err
	}
	defer done()

	settled := &tally{}
	base := http.DefaultTransport.(*http.Transport).Clone()
	defer base.CloseIdleConnections()
	w, err := worker.New(worker.Config{URL: r.url, Token: token, WorkerID: "bench-sdk", Concurrency: b.opts.Workers, LockDuration: time.Minute,
		HTTPClient: &http.Client{Transport: completions{base: base, settled: settled}}})
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
	return r.measure(ctx, b, warmup(b.opts.N), b.opts.N, relaisRun{label: "relais sdk", profile: "cycle-sdk-relais", start: r.startCRM, settled: settled, failed: failed})
}
