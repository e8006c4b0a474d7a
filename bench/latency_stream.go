package main

import (
	"context"
	"fmt"
	"net/http"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/relais/relais/worker"
)

// streamPickups is the latency scenario's Relais with its workers on a
// worker stream (DESIGN §10), as the Go SDK runs them by default: one
// worker with --workers concurrent handlers, whose pickup ends when the
// handler is called (as River's ends when Work is). Its replica and
// database are its own, so that the long-polling workers take nothing from
// it.
func streamPickups(ctx context.Context, b *bench) (*pickups, error) {
	r, token, done, err := freshPullRelais(ctx, b, "bench_latency_stream")
	if err != nil {
		return nil, err
	}
	got := make(chan receipt, b.opts.Workers)
	settled := &tally{}
	base := http.DefaultTransport.(*http.Transport).Clone()
	w, err := worker.New(worker.Config{URL: r.url, Token: token, WorkerID: "bench-stream", Concurrency: b.opts.Workers,
		LockDuration: time.Minute, HTTPClient: &http.Client{Transport: completions{base: base, settled: settled}}})
	if err != nil {
		done()
		return nil, err
	}
	outputs := map[string]any{"result": "created", "crm_id": "CRM-0001"}
	w.Handle("add_company_to_crm", nil, func(_ context.Context, t *worker.Task) (any, error) {
		got <- receipt{t.InstanceID, time.Now()}
		return outputs, nil
	})
	failed := make(chan error, 1)
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
	p := &pickups{name: sysRelais + " stream", close: func() { stopWorker(); <-ran; base.CloseIdleConnections(); done() }}
	p.pickup = func(ctx context.Context, i int, _ bool) (time.Duration, error) {
		// Idle: the previous occurrence's completion answered (its
		// transaction claimed nothing for the slot it freed), the stream
		// back to waiting for a notification.
		select {
		case <-settled.reached(i):
		case err := <-failed:
			return 0, err
		case <-time.After(pickupTimeout):
			return 0, fmt.Errorf("pickup %d: the previous occurrence was not completed after %s", i, pickupTimeout)
		}
		time.Sleep(pickupGap)
		id, pr := r.newProbe()
		inst, err := r.startInstance(ctx, "crm_only", mustJSON(map[string]any{"inputs": map[string]any{"name": fmt.Sprint("c", i)}}), probeHeader, id)
		if err != nil {
			return 0, err
		}
		committed, ok := pr.committedAt()
		if !ok {
			return 0, fmt.Errorf("pickup %d: the start's commit was not seen", i)
		}
		var rc receipt
		select {
		case rc = <-got:
		case err := <-failed:
			return 0, err
		case <-time.After(pickupTimeout):
			// The first pickups also wait for the stream to connect.
			return 0, fmt.Errorf("pickup %d: the stream's worker did not receive instance %s after %s", i, inst, pickupTimeout)
		}
		if rc.id != inst {
			return 0, fmt.Errorf("pickup %d: the stream's worker received instance %s, want %s", i, rc.id, inst)
		}
		return rc.at.Sub(committed), nil
	}
	return p, nil
}

// completions counts the worker-protocol completions Relais answered: the
// SDK does not say when an outcome committed, its transport sees it.
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
