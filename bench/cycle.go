package main

import (
	"context"
	"fmt"
	"runtime/pprof"
	"slices"
	"strings"
	"time"
)

// runCycle measures full-cycle throughput: --n starts by --producers, one
// per request (Relais: POST /processes/crm_only/instances of a one-pull-node
// process) or per transaction (River: InsertTx then COMMIT), settled by
// --workers workers (Relais: fetch-and-lock with a long poll and max_tasks,
// then complete each; River: MaxWorkers). The clock runs from the first
// start to the last settlement, after a warm-up.
func runCycle(ctx context.Context, b *bench) ([]measurement, error) {
	runs, err := alternate(ctx, b, "cycle", []contender{
		{sysRelais, relaisCycle},
		{"relais sdk", relaisCycleSDK},
		{riverTuned.system, func(ctx context.Context, b *bench) (float64, error) { return riverCycle(ctx, b, riverTuned) }},
	})
	if err != nil {
		return nil, err
	}
	raw, sdk, tuned := runs[0], runs[1], runs[2]
	out := []measurement{
		rounds(cycleMeasurement(sysRelais, 0), raw),
		rounds(cycleMeasurement(riverTuned.system, 0), tuned),
		// River's workers are its client in both rows.
		rounds(sdkMeasurement(riverTuned.system, 0), tuned),
		rounds(sdkMeasurement(sysRelais, 0), sdk),
	}
	if b.opts.RiverDefaults {
		rate, err := riverCycle(ctx, b, riverDefaults)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", riverDefaults.system, err)
		}
		out = append(out, cycleMeasurement(riverDefaults.system, rate))
	}
	return out, nil
}

// contender is one system a scenario measures in each round.
type contender struct {
	name string
	run  func(ctx context.Context, b *bench) (float64, error)
}

// alternate runs each contender once per round, in turn, and returns each
// one's rates, in contenders' order. The machine's speed drifts within a
// run: the systems alternate within each round, and each figure is then
// the median of its rounds (see rounds).
func alternate(ctx context.Context, b *bench, scenario string, contenders []contender) ([][]float64, error) {
	runs := make([][]float64, len(contenders))
	for round := range b.opts.Rounds {
		if b.opts.Rounds > 1 {
			b.log.printf("%s round %d of %d", scenario, round+1, b.opts.Rounds)
		}
		for i, c := range contenders {
			rate, err := c.run(ctx, b)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", c.name, err)
			}
			runs[i] = append(runs[i], rate)
		}
	}
	if b.opts.Rounds > 1 {
		parts := make([]string, len(contenders))
		for i, c := range contenders {
			parts[i] = c.name + " " + runsText(runs[i])
		}
		b.log.printf("%s rounds: %s (occurrences/s)", scenario, strings.Join(parts, ", "))
	}
	return runs, nil
}

// rounds makes m the median of runs, which it keeps (more than one).
func rounds(m measurement, runs []float64) measurement {
	sorted := slices.Sorted(slices.Values(runs))
	if n := len(sorted); n%2 == 1 {
		m.Value = sorted[n/2]
	} else {
		m.Value = (sorted[n/2-1] + sorted[n/2]) / 2
	}
	if len(runs) > 1 {
		m.Runs = runs
	}
	return m
}

func runsText(runs []float64) string {
	parts := make([]string, len(runs))
	for i, r := range runs {
		parts[i] = fmt.Sprintf("%.0f", r)
	}
	return strings.Join(parts, ", ")
}

// sdkMeasurement is the cycle's figure with each system's own worker
// library: the Relais Go SDK, the River client.
func sdkMeasurement(system string, rate float64) measurement {
	return measurement{Scenario: "cycle", System: system, Metric: "throughput, Go SDK worker", Value: rate, Unit: "occurrences/s", Better: "higher", Compare: true}
}

func cycleMeasurement(system string, rate float64) measurement {
	return measurement{Scenario: "cycle", System: system, Metric: "throughput", Value: rate, Unit: "occurrences/s", Better: "higher", Compare: true}
}

func relaisCycle(ctx context.Context, b *bench) (float64, error) {
	r, token, done, err := freshPullRelais(ctx, b, "bench_cycle_relais")
	if err != nil {
		return 0, err
	}
	defer done()

	settled := &tally{}
	workers := r.startWorkers(ctx, token, b.opts.Workers, b.opts.MaxTasks, "PT5S", settled, nil)
	defer workers.stop(r)
	if err := r.awaitWaiters(ctx, b.opts.Workers); err != nil {
		return 0, err
	}

	return r.measure(ctx, b, warmup(b.opts.N), b.opts.N, relaisRun{label: "relais", profile: "cycle-relais", start: r.startCRM, settled: settled, failed: workers.failed})
}

// startCRM starts instance i of the one-pull-node process the cycle
// scenarios run.
func (r *relais) startCRM(ctx context.Context, i int) error {
	_, err := r.startInstance(ctx, "crm_only", mustJSON(map[string]any{"inputs": map[string]any{"name": fmt.Sprint("c", i)}}))
	return err
}

func riverCycle(ctx context.Context, b *bench, v riverVariant) (float64, error) {
	db, err := b.pg.freshDatabase(ctx, "bench_cycle_"+v.system)
	if err != nil {
		return 0, err
	}
	defer db.drop()
	warm := warmup(b.opts.N)
	s, err := startRiver(ctx, b, db, v, warm+b.opts.N, nil)
	if err != nil {
		return 0, err
	}
	defer s.stop()
	if _, err := (load{label: v.system + " warm-up", n: warm, producers: b.opts.Producers, start: s.insert, settled: s.settled, failed: s.failed}).run(ctx, b.log); err != nil {
		return 0, err
	}
	prof, err := b.beginProfile(ctx, "cycle-"+v.system, db, s.stats, false)
	if err != nil {
		return 0, err
	}
	elapsed, err := clientLoad(ctx, load{label: v.system, from: warm, n: b.opts.N, producers: b.opts.Producers, start: s.insert, settled: s.settled, failed: s.failed}, b.log)
	prof.end(ctx, b.opts.N, "job")
	if err != nil {
		return 0, err
	}
	rate := float64(b.opts.N) / elapsed.Seconds()
	b.log.printf("%s: %d jobs in %s: %.0f/s", v.system, b.opts.N, elapsed.Round(time.Millisecond), rate)

	var completed int
	if err := s.pool.QueryRow(ctx, "select count(*) from river_job where state = 'completed'").Scan(&completed); err != nil {
		return 0, err
	}
	if completed != warm+b.opts.N {
		return 0, fmt.Errorf("%d jobs completed, want %d", completed, warm+b.opts.N)
	}
	return rate, nil
}

// clientLoad runs l with the producers labelled as the client side of a
// CPU profile.
func clientLoad(ctx context.Context, l load, log *progress) (d time.Duration, err error) {
	pprof.Do(ctx, sideClient, func(ctx context.Context) { d, err = l.run(ctx, log) })
	return d, err
}
