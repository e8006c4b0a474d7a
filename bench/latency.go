package main

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// pickupGap separates pickups so that each finds the system idle: Relais's
// workers back in their long poll, River's producer done with its last
// fetch.
const pickupGap = 5 * time.Millisecond

// pickupTimeout bounds the wait for one pickup.
const pickupTimeout = 10 * time.Second

// runLatency measures idle pickup latency: one start at a time, from the
// moment its transaction has committed (the answer to its COMMIT, seen by
// the pool's tracer: inside the Relais replica, in River's producer) to the
// moment a worker has it (Relais: the fetch-and-lock answer read by a
// long-polling worker; River: Work called). --workers workers wait in both.
func runLatency(ctx context.Context, b *bench) ([]measurement, error) {
	relaisLat, err := relaisLatency(ctx, b)
	if err != nil {
		return nil, fmt.Errorf("relais: %w", err)
	}
	riverLat, err := riverLatency(ctx, b, riverTuned)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", sysRiverTuned, err)
	}
	var out []measurement
	for _, s := range []struct {
		system string
		lat    []time.Duration
	}{{sysRelais, relaisLat}, {sysRiverTuned, riverLat}} {
		for _, p := range []struct {
			name string
			p    float64
		}{{"p50", 50}, {"p95", 95}, {"p99", 99}} {
			out = append(out, measurement{Scenario: "latency", System: s.system, Metric: "pickup " + p.name, Value: percentile(s.lat, p.p), Unit: "ms", Better: "lower", Compare: true})
		}
	}
	return out, nil
}

// receipt is a worker's report of a pickup.
type receipt struct {
	id string // Relais: instance id; River: the job's sequence number
	at time.Time
}

func relaisLatency(ctx context.Context, b *bench) ([]time.Duration, error) {
	r, token, done, err := freshPullRelais(ctx, b, "bench_latency_relais")
	if err != nil {
		return nil, err
	}
	defer done()
	got := make(chan receipt, b.opts.Workers)
	settled := &tally{}
	workers := r.startWorkers(ctx, token, b.opts.Workers, b.opts.MaxTasks, "PT30S", settled, func(w *pullWorker) {
		w.received = func(o fetched, at time.Time) { got <- receipt{o.InstanceID, at} }
	})
	defer workers.stop(r)
	warm := min(20, b.opts.Pickups)
	// The pickup's parts: commit → the claim statement sent (notification,
	// wake-up), the claim statement (with its commit), its answer → the
	// worker has the response.
	var lat, toClaim, claiming, answering []time.Duration
	var prof *phaseProfile
	for i := range warm + b.opts.Pickups {
		if i == warm {
			if prof, err = b.beginProfile(ctx, "latency-relais", r.db, r.stats, true); err != nil {
				return nil, err
			}
		}
		// Idle: the previous occurrence completed and every worker back
		// in its long poll.
		select {
		case <-settled.reached(i):
		case err := <-workers.failed:
			return nil, err
		case <-time.After(pickupTimeout):
			return nil, fmt.Errorf("pickup %d: the previous occurrence was not completed after %s", i, pickupTimeout)
		}
		if err := r.awaitWaiters(ctx, b.opts.Workers); err != nil {
			return nil, err
		}
		time.Sleep(pickupGap)
		id, p := r.newProbe()
		inst, err := r.startInstance(ctx, "crm_only", mustJSON(map[string]any{"inputs": map[string]any{"name": fmt.Sprint("c", i)}}), probeHeader, id)
		if err != nil {
			return nil, err
		}
		committed, ok := p.committedAt()
		if !ok {
			return nil, fmt.Errorf("pickup %d: the start's commit was not seen", i)
		}
		var rc receipt
		select {
		case rc = <-got:
		case err := <-workers.failed:
			return nil, err
		case <-time.After(pickupTimeout):
			return nil, fmt.Errorf("pickup %d: no worker received instance %s after %s", i, inst, pickupTimeout)
		}
		if rc.id != inst {
			return nil, fmt.Errorf("pickup %d: a worker received instance %s, want %s", i, rc.id, inst)
		}
		if i >= warm {
			lat = append(lat, rc.at.Sub(committed))
			claimStart, claimEnd := time.Unix(0, r.claim.start.Load()), time.Unix(0, r.claim.end.Load())
			toClaim = append(toClaim, claimStart.Sub(committed))
			claiming = append(claiming, claimEnd.Sub(claimStart))
			answering = append(answering, rc.at.Sub(claimEnd))
		}
		if n := len(lat); n > 0 && n%250 == 0 {
			b.log.printf("relais: %d/%d pickups", n, b.opts.Pickups)
		}
	}
	prof.end(ctx, b.opts.Pickups, "pickup")
	slices.Sort(lat)
	b.log.printf("relais: pickup p50 %.2f ms, p95 %.2f ms, p99 %.2f ms", percentile(lat, 50), percentile(lat, 95), percentile(lat, 99))
	for _, d := range [][]time.Duration{toClaim, claiming, answering} {
		slices.Sort(d)
	}
	b.log.printf("relais: pickup p50 parts: commit → claim sent %.2f ms, claim statement %.2f ms, claim answered → worker has it %.2f ms",
		percentile(toClaim, 50), percentile(claiming, 50), percentile(answering, 50))
	return lat, nil
}

func riverLatency(ctx context.Context, b *bench, v riverVariant) ([]time.Duration, error) {
	db, err := b.pg.freshDatabase(ctx, "bench_latency_"+v.system)
	if err != nil {
		return nil, err
	}
	defer db.drop()
	got := make(chan receipt, b.opts.Workers)
	warm := min(20, b.opts.Pickups)
	s, err := startRiver(ctx, b, db, v, warm+b.opts.Pickups, func(seq int, at time.Time) { got <- receipt{fmt.Sprint(seq), at} })
	if err != nil {
		return nil, err
	}
	defer s.stop()
	var lat []time.Duration
	for i := range warm + b.opts.Pickups {
		// Idle: the previous job's Work has returned. Its completion waits
		// in River's batch completer (flushed every 250 ms when idle), as
		// it would in production; waiting for it would make the run long.
		time.Sleep(pickupGap)
		// The same tracer as Relais's pool times the COMMIT's answer.
		p := &probe{}
		if err := s.insert(withRequestTrace(ctx, &requestTrace{route: "insert", probe: p}), i); err != nil {
			return nil, err
		}
		committed, ok := p.committedAt()
		if !ok {
			return nil, fmt.Errorf("pickup %d: the insert's commit was not seen", i)
		}
		var rc receipt
		select {
		case rc = <-got:
		case err := <-s.failed:
			return nil, err
		case <-time.After(pickupTimeout):
			return nil, fmt.Errorf("pickup %d: no worker received job %d after %s", i, i, pickupTimeout)
		}
		if rc.id != fmt.Sprint(i) {
			return nil, fmt.Errorf("pickup %d: a worker received job %s", i, rc.id)
		}
		if i >= warm {
			lat = append(lat, rc.at.Sub(committed))
		}
		if n := len(lat); n > 0 && n%250 == 0 {
			b.log.printf("%s: %d/%d pickups", v.system, n, b.opts.Pickups)
		}
	}
	slices.Sort(lat)
	b.log.printf("%s: pickup p50 %.2f ms, p95 %.2f ms, p99 %.2f ms", v.system, percentile(lat, 50), percentile(lat, 95), percentile(lat, 99))
	return lat, nil
}
