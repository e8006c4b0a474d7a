package main

import (
	"context"
	"net/http"
	"runtime/pprof"
	"strings"
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
	w, err := startSDKWorker(ctx, r, token, "bench-sdk", b.opts.Workers, nil)
	if err != nil {
		return 0, err
	}
	defer w.stop()
	return r.measure(ctx, b, warmup(b.opts.N), b.opts.N, relaisRun{label: "relais sdk", profile: "cycle-sdk-relais", start: r.startCRM, settled: w.settled, failed: w.failed})
}

// sdkWorker is one Go SDK worker on its default protocol (a worker
// stream), whose handler answers at once, its goroutines labelled as the
// client side of a CPU profile. settled counts its completions as its
// transport sees them answered: the SDK does not say when Relais committed
// an outcome.
type sdkWorker struct {
	settled *tally
	// failed receives Run's error if it ends with one.
	failed chan error
	// stop ends Run and waits for it.
	stop func()
}

// startSDKWorker runs a worker with concurrency handlers for r's pull
// definition; seen, when set, sees each task as its handler starts.
func startSDKWorker(ctx context.Context, r *relais, token, id string, concurrency int, seen func(*worker.Task)) (*sdkWorker, error) {
	s := &sdkWorker{settled: &tally{}, failed: make(chan error, 1)}
	base := http.DefaultTransport.(*http.Transport).Clone()
	// As the SDK's own client keeps them (one per handler, and the
	// stream's): with net/http's default of 2 idle connections, most
	// settlements would dial a new one.
	base.MaxIdleConnsPerHost = concurrency + 1
	w, err := worker.New(worker.Config{URL: r.url, Token: token, WorkerID: id, Concurrency: concurrency, LockDuration: time.Minute,
		HTTPClient: &http.Client{Transport: completions{base: base, settled: s.settled}}})
	if err != nil {
		return nil, err
	}
	outputs := map[string]any{"result": "created", "crm_id": "CRM-0001"}
	w.Handle("add_company_to_crm", nil, func(_ context.Context, t *worker.Task) (any, error) {
		if seen != nil {
			seen(t)
		}
		return outputs, nil
	})
	wctx, stopWorker := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		var err error
		pprof.Do(wctx, sideClient, func(ctx context.Context) { err = w.Run(ctx) })
		if err != nil {
			s.failed <- err
		}
	}()
	s.stop = func() { stopWorker(); <-ran; base.CloseIdleConnections() }
	return s, nil
}

// completions counts the worker-protocol completions Relais answered.
type completions struct {
	base    http.RoundTripper
	settled *tally
}

func (c completions) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := c.base.RoundTrip(req)
	if err == nil && res.StatusCode == http.StatusOK && strings.HasSuffix(req.URL.Path, ".WorkerService/Complete") {
		c.settled.add(1)
	}
	return res, err
}
