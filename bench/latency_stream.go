package main

import (
	"context"
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
	w, err := startSDKWorker(ctx, r, token, "bench-stream", b.opts.Workers, func(t *worker.Task) { got <- receipt{t.InstanceID, time.Now()} })
	if err != nil {
		done()
		return nil, err
	}
	p := &pickups{name: sysRelais + " stream", close: func() { w.stop(); done() }}
	p.pickup = func(ctx context.Context, i int, _ bool) (time.Duration, error) {
		// Idle: the previous occurrence's completion answered (its
		// transaction claimed nothing for the slot it freed), the stream
		// back to waiting for a notification.
		if err := awaitSettled(i, w.settled, w.failed); err != nil {
			return 0, err
		}
		committed, rc, err := r.startAndReceive(ctx, i, got, w.failed)
		if err != nil {
			return 0, err
		}
		return rc.at.Sub(committed), nil
	}
	return p, nil
}
