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
// Both systems run side by side and take turns, pickup by pickup (each
// going first half of the time): the machine's stalls (a slow WAL flush
// here takes 10 ms and more at times) then fall on both alike, where timing
// one system's thousand pickups after the other's measured which of them
// met a bad minute.
func runLatency(ctx context.Context, b *bench) ([]measurement, error) {
	relais, err := relaisPickups(ctx, b)
	if err != nil {
		return nil, fmt.Errorf("relais: %w", err)
	}
	defer relais.close()
	stream, err := streamPickups(ctx, b)
	if err != nil {
		return nil, fmt.Errorf("relais stream: %w", err)
	}
	defer stream.close()
	river, err := riverPickups(ctx, b, riverTuned)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", sysRiverTuned, err)
	}
	defer river.close()
	systems := [3]*pickups{relais, stream, river}
	warm := min(20, b.opts.Pickups)
	var lat [3][]time.Duration
	var prof *phaseProfile
	for i := range warm + b.opts.Pickups {
		if i == warm {
			if prof, err = b.beginProfile(ctx, "latency-relais", relais.db, relais.stats, true); err != nil {
				return nil, err
			}
		}
		for k := range len(systems) {
			c := (i + k) % len(systems)
			d, err := systems[c].pickup(ctx, i, i >= warm)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", systems[c].name, err)
			}
			if i >= warm {
				lat[c] = append(lat[c], d)
			}
		}
		if n := len(lat[0]); n > 0 && n%250 == 0 {
			b.log.printf("latency: %d/%d pickups each", n, b.opts.Pickups)
		}
	}
	prof.end(ctx, b.opts.Pickups, "pickup")
	for c, sys := range systems {
		slices.Sort(lat[c])
		b.log.printf("%s: pickup p50 %.2f ms, p95 %.2f ms, p99 %.2f ms", sys.name, percentile(lat[c], 50), percentile(lat[c], 95), percentile(lat[c], 99))
		if sys.report != nil {
			sys.report()
		}
	}
	// The stream's rows sit under their own metric, beside River's same
	// figures, as the cycle's Go SDK row does.
	var out []measurement
	for _, row := range []struct {
		system, suffix string
		lat            []time.Duration
	}{{sysRelais, "", lat[0]}, {sysRiverTuned, "", lat[2]}, {sysRelais, ", worker stream", lat[1]}, {sysRiverTuned, ", worker stream", lat[2]}} {
		for _, p := range []struct {
			name string
			p    float64
		}{{"p50", 50}, {"p95", 95}, {"p99", 99}} {
			out = append(out, measurement{Scenario: "latency", System: row.system, Metric: "pickup " + p.name + row.suffix, Value: percentile(row.lat, p.p), Unit: "ms", Better: "lower", Compare: true})
		}
	}
	return out, nil
}

// pickups is one system ready for the latency scenario.
type pickups struct {
	name string
	// pickup starts one unit of work once the system is idle and returns
	// how long after its commit a worker had it; measured is false during
	// the warm-up.
	pickup func(ctx context.Context, i int, measured bool) (time.Duration, error)
	// report, when set, logs what the system measured besides.
	report func()
	close  func()
	// db and stats are what a profile of the Relais turns reads.
	db    *database
	stats *sqlStats
}

// receipt is a worker's report of a pickup.
type receipt struct {
	id string // Relais: instance id; River: the job's sequence number
	at time.Time
}

func relaisPickups(ctx context.Context, b *bench) (*pickups, error) {
	r, token, done, err := freshPullRelais(ctx, b, "bench_latency_relais")
	if err != nil {
		return nil, err
	}
	got := make(chan receipt, b.opts.Workers)
	settled := &tally{}
	workers := r.startWorkers(ctx, token, b.opts.Workers, b.opts.MaxTasks, "PT30S", settled, func(w *pullWorker) {
		w.received = func(o fetched, at time.Time) { got <- receipt{o.InstanceID, at} }
	})
	// The pickup's parts: commit → the claim statement sent (notification,
	// wake-up), the claim statement (with its commit), its answer → the
	// worker has the response.
	var toClaim, claiming, answering []time.Duration
	p := &pickups{name: sysRelais, db: r.db, stats: r.stats,
		close: func() { workers.stop(r); done() },
		report: func() {
			for _, d := range [][]time.Duration{toClaim, claiming, answering} {
				slices.Sort(d)
			}
			b.log.printf("relais: pickup p50 parts: commit → claim sent %.2f ms, claim statement %.2f ms, claim answered → worker has it %.2f ms",
				percentile(toClaim, 50), percentile(claiming, 50), percentile(answering, 50))
		}}
	p.pickup = func(ctx context.Context, i int, measured bool) (time.Duration, error) {
		// Idle: the previous occurrence completed and every worker back
		// in its long poll.
		if err := awaitSettled(i, settled, workers.failed); err != nil {
			return 0, err
		}
		if err := r.awaitWaiters(ctx, b.opts.Workers); err != nil {
			return 0, err
		}
		committed, rc, err := r.startAndReceive(ctx, i, got, workers.failed)
		if err != nil {
			return 0, err
		}
		if measured {
			claimStart, claimEnd := time.Unix(0, r.claim.start.Load()), time.Unix(0, r.claim.end.Load())
			toClaim = append(toClaim, claimStart.Sub(committed))
			claiming = append(claiming, claimEnd.Sub(claimStart))
			answering = append(answering, rc.at.Sub(claimEnd))
		}
		return rc.at.Sub(committed), nil
	}
	return p, nil
}

// awaitSettled waits until the workers settled the i pickups before pickup
// i.
func awaitSettled(i int, settled *tally, failed <-chan error) error {
	select {
	case <-settled.reached(i):
		return nil
	case err := <-failed:
		return err
	case <-time.After(pickupTimeout):
		return fmt.Errorf("pickup %d: the previous occurrence was not completed after %s", i, pickupTimeout)
	}
}

// startAndReceive starts instance i of crm_only, pickupGap after the
// system was found idle, and waits for a worker to receive it: it returns
// the answer to the start's COMMIT (seen by the replica's pool tracer) and
// the worker's receipt.
func (r *relais) startAndReceive(ctx context.Context, i int, got <-chan receipt, failed <-chan error) (committed time.Time, rc receipt, err error) {
	time.Sleep(pickupGap)
	id, pr := r.newProbe()
	inst, err := r.startInstance(ctx, "crm_only", mustJSON(map[string]any{"inputs": map[string]any{"name": fmt.Sprint("c", i)}}), probeHeader, id)
	if err != nil {
		return committed, rc, err
	}
	committed, ok := pr.committedAt()
	if !ok {
		return committed, rc, fmt.Errorf("pickup %d: the start's commit was not seen", i)
	}
	select {
	case rc = <-got:
	case err := <-failed:
		return committed, rc, err
	case <-time.After(pickupTimeout):
		// The first pickups also wait for the workers to connect.
		return committed, rc, fmt.Errorf("pickup %d: no worker received instance %s after %s", i, inst, pickupTimeout)
	}
	if rc.id != inst {
		return committed, rc, fmt.Errorf("pickup %d: a worker received instance %s, want %s", i, rc.id, inst)
	}
	return committed, rc, nil
}

func riverPickups(ctx context.Context, b *bench, v riverVariant) (*pickups, error) {
	db, err := b.pg.freshDatabase(ctx, "bench_latency_"+v.system)
	if err != nil {
		return nil, err
	}
	got := make(chan receipt, b.opts.Workers)
	warm := min(20, b.opts.Pickups)
	s, err := startRiver(ctx, b, db, v, warm+b.opts.Pickups, func(seq int, at time.Time) { got <- receipt{fmt.Sprint(seq), at} })
	if err != nil {
		db.drop()
		return nil, err
	}
	p := &pickups{name: v.system, close: func() { s.stop(); db.drop() }}
	p.pickup = func(ctx context.Context, i int, _ bool) (time.Duration, error) {
		// Idle: the previous job's Work has returned. Its completion waits
		// in River's batch completer (flushed every 250 ms when idle), as
		// it would in production; waiting for it would make the run long.
		time.Sleep(pickupGap)
		// The same tracer as Relais's pool times the COMMIT's answer.
		pr := &probe{}
		if err := s.insert(withRequestTrace(ctx, &requestTrace{route: "insert", probe: pr}), i); err != nil {
			return 0, err
		}
		committed, ok := pr.committedAt()
		if !ok {
			return 0, fmt.Errorf("pickup %d: the insert's commit was not seen", i)
		}
		var rc receipt
		select {
		case rc = <-got:
		case err := <-s.failed:
			return 0, err
		case <-time.After(pickupTimeout):
			return 0, fmt.Errorf("pickup %d: no worker received job %d after %s", i, i, pickupTimeout)
		}
		if rc.id != fmt.Sprint(i) {
			return 0, fmt.Errorf("pickup %d: a worker received job %s", i, rc.id)
		}
		return rc.at.Sub(committed), nil
	}
	return p, nil
}
