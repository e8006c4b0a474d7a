package stream_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/relaistest"
	workerv1 "github.com/relais/relais/proto/relais/worker/v1"
	"github.com/relais/relais/proto/relais/worker/v1/workerv1connect"
	"github.com/relais/relais/worker"
)

// BenchmarkPickupLatency measures, in one run and alternately, the time
// from the COMMIT that makes an occurrence claimable to its delivery: to
// an idle worker stream (the Assignment read by a grpc-go client over h2c)
// and to a long-polling fetch already waiting (its response read). Each
// protocol gets b.N pickups. Occurrences are created parked (not
// claimable) beforehand; each pickup makes one claimable and notifies in a
// transaction of its own, so the clock starts at the commit, as in
// pull's BenchmarkPickupLatency.
func BenchmarkPickupLatency(b *testing.B) {
	// Two definitions with one contract, so that the stream and the long
	// poll never compete for an occurrence: bench_stream for the stream,
	// add_company_to_crm for the long poll.
	env := relaistest.New(b)
	env.Definition("add_company_to_crm.yaml")
	env.Process("crm_only", relaistest.CRMProcess(nil))
	working := env.Must(200, "GET", "/api/v1/definitions/add_company_to_crm", env.Operator, nil).JSON(b)["working"]
	env.Must(201, "PUT", "/api/v1/definitions/bench_stream/working", env.Designer, working)
	env.Must(201, "POST", "/api/v1/definitions/bench_stream/revisions", env.Designer, nil)
	process := relaistest.CRMProcess(nil)
	process["nodes"].(map[string]any)["crm"].(map[string]any)["definition"] = "bench_stream"
	env.Process("crm_stream", process)
	f := &fixture{env: env, consumer: env.Consumer("bench", "add_company_to_crm", "bench_stream")}
	ctx := context.Background()
	pollIDs := park(b, f.env, "crm_only", b.N)
	streamIDs := park(b, f.env, "crm_stream", b.N)

	// The stream: subscribed and idle, its events timestamped on arrival.
	c := newClient(b, "grpc", f.env.URL)
	type arrival struct {
		ev *workerv1.WorkerEvent
		at time.Time
	}
	arrivals := make(chan arrival, 16)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events, err := c.subscribe(sctx, f.consumer, &workerv1.SubscribeRequest{WorkerId: "bench-stream", MaxInFlight: 1,
		Subscriptions: []*workerv1.Subscription{{Definition: "bench_stream"}}})
	if err != nil {
		b.Fatal(err)
	}
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		for {
			ev, err := events.recv()
			if err != nil {
				return
			}
			at := time.Now()
			if hb := ev.GetHeartbeat(); hb != nil {
				hctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+f.consumer)
				_ = c.conn.Invoke(hctx, workerv1connect.WorkerServiceHeartbeatProcedure,
					&workerv1.HeartbeatRequest{StreamId: hb.GetStreamId(), Sequence: hb.GetSequence()}, &workerv1.HeartbeatResponse{})
				continue
			}
			arrivals <- arrival{ev, at}
		}
	}()
	defer func() { cancel(); <-readerDone }()

	fetch := map[string]any{"worker_id": "bench-poll", "subscriptions": []any{map[string]any{"definition": "add_company_to_crm"}},
		"max_tasks": 1, "lock_duration": "PT1M", "wait": "PT10S"}
	// release makes id claimable and notifies in one transaction, and
	// returns when its COMMIT was sent: the clock starts there.
	release := func(key, id string) time.Time {
		tx, err := f.env.Pool.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `update occurrences set available_at = now(), claimable_at = now() where id = $1`, id); err != nil {
			b.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `select pg_notify($1, $2)`, engine.ChannelOccurrence, engine.AvailabilityPayload("pull", key, 1, time.Now())); err != nil {
			b.Fatal(err)
		}
		committed := time.Now()
		if err := tx.Commit(ctx); err != nil {
			b.Fatal(err)
		}
		return committed
	}
	var streamLat, pollLat []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// Long poll: a fetch waits, then one occurrence becomes claimable.
		id := pollIDs[i]
		got := make(chan time.Time, 1)
		go func() {
			res := f.env.Do("POST", "/api/v1/pull/fetch-and-lock", f.consumer, fetch)
			at := time.Now()
			if res.Status != 200 || !strings.Contains(string(res.Body), id) {
				b.Errorf("fetch: %d %s", res.Status, res.Body)
			}
			got <- at
		}()
		waitForWaiters(b, f.env, 1)
		began := release("add_company_to_crm", id)
		pollLat = append(pollLat, (<-got).Sub(began))

		// Stream: the idle stream is pushed the next one.
		id = streamIDs[i]
		began = release("bench_stream", id)
		a := <-arrivals
		if a.ev.GetAssignment().GetOccurrenceId() != id {
			b.Fatalf("stream got %v, want the assignment of %s", a.ev, id)
		}
		streamLat = append(streamLat, a.at.Sub(began))
		// Settled outside the measure, so that the stream is idle again.
		if _, err := complete(c, f.consumer, "bench-stream", id, outputs("created", "C")); err != nil {
			b.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	b.StopTimer()
	sp50, sp99 := percentiles(streamLat)
	lp50, lp99 := percentiles(pollLat)
	b.ReportMetric(ms(sp50), "stream-p50-ms")
	b.ReportMetric(ms(sp99), "stream-p99-ms")
	b.ReportMetric(ms(lp50), "poll-p50-ms")
	b.ReportMetric(ms(lp99), "poll-p99-ms")
	b.ReportMetric(float64(sp99)/float64(lp99), "p99-stream/poll")
}

// BenchmarkCycleThroughput measures whole cycles with the Go SDK, the same
// workers (4 processes of Concurrency 16, a handler that answers at once)
// on a worker stream and by long polling: instance start → the worker is
// given the occurrence → completion → the instance ended. The machine is
// shared and its load drifts, so the protocols alternate over five rounds
// of b.N/5 occurrences each, each round on a fresh replica and database;
// the figures are each protocol's median throughput (occurrences per
// second) and their ratio.
func BenchmarkCycleThroughput(b *testing.B) {
	const rounds = 5
	per := max(b.N/rounds, 1)
	results := map[worker.Protocol][]float64{}
	b.ResetTimer()
	for range rounds {
		for _, protocol := range []worker.Protocol{worker.ProtocolStream, worker.ProtocolLongPoll} {
			results[protocol] = append(results[protocol], cycles(b, protocol, per))
		}
	}
	b.StopTimer()
	median := func(xs []float64) float64 { s := slices.Clone(xs); slices.Sort(s); return s[len(s)/2] }
	stream, poll := median(results[worker.ProtocolStream]), median(results[worker.ProtocolLongPoll])
	b.ReportMetric(stream, "stream-occurrences/s")
	b.ReportMetric(poll, "poll-occurrences/s")
	b.ReportMetric(stream/poll, "throughput-stream/poll")
	b.Logf("stream rounds %.0f, long poll rounds %.0f (occurrences/s)", results[worker.ProtocolStream], results[worker.ProtocolLongPoll])
}

// cycles runs n cycles through SDK workers on protocol and returns the
// throughput in occurrences per second.
func cycles(b *testing.B, protocol worker.Protocol, n int) float64 {
	b.StopTimer()
	f := benchSetup(b)
	ctx, cancel := context.WithCancel(context.Background())
	var runs sync.WaitGroup
	for w := range 4 {
		wk, err := worker.New(worker.Config{URL: f.env.URL, Token: f.consumer, WorkerID: fmt.Sprint("bench-", w), Concurrency: 16,
			Protocol: protocol, Wait: 5 * time.Second, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		wk.Handle("add_company_to_crm", nil, func(context.Context, *worker.Task) (any, error) {
			return map[string]any{"result": "created", "crm_id": "C"}, nil
		})
		runs.Go(func() { _ = wk.Run(ctx) })
	}
	defer func() { cancel(); runs.Wait() }()
	time.Sleep(500 * time.Millisecond) // connected
	b.StartTimer()

	began := time.Now()
	starts := make(chan int)
	var producers sync.WaitGroup
	for range 4 {
		producers.Go(func() {
			for i := range starts {
				f.env.Must(201, "POST", "/api/v1/processes/crm_only/instances", f.env.Operator, map[string]any{"inputs": map[string]any{"name": fmt.Sprint("c", i)}})
			}
		})
	}
	for i := range n {
		starts <- i
	}
	close(starts)
	producers.Wait()
	for {
		var ended int
		if err := f.env.Pool.QueryRow(ctx, "select count(*) from instances where status <> 'running'").Scan(&ended); err != nil {
			b.Fatal(err)
		}
		if ended == n {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	elapsed := time.Since(began)
	var completed int
	_ = f.env.Pool.QueryRow(ctx, "select count(*) from instances where status = 'completed'").Scan(&completed)
	if completed != n {
		b.Fatalf("%s: %d of %d instances completed", protocol, completed, n)
	}
	return float64(n) / elapsed.Seconds()
}

func benchSetup(b *testing.B) *fixture {
	b.Helper()
	env := relaistest.New(b)
	env.Definition("add_company_to_crm.yaml")
	env.Process("crm_only", relaistest.CRMProcess(nil))
	return &fixture{env: env, consumer: env.Consumer("bench", "add_company_to_crm")}
}

// park starts n instances of process and parks their occurrences:
// available only a day from now.
func park(b *testing.B, env *relaistest.Env, process string, n int) []string {
	b.Helper()
	var ids []string
	for i := range n {
		inst := env.Must(201, "POST", "/api/v1/processes/"+process+"/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": fmt.Sprint("c", i)}}).JSON(b)
		ids = append(ids, inst["path"].([]any)[0].(map[string]any)["occurrence_id"].(string))
	}
	if _, err := env.Pool.Exec(context.Background(), "update occurrences set available_at = now() + interval '1 day', claimable_at = now() + interval '1 day' where status = 'available'"); err != nil {
		b.Fatal(err)
	}
	return ids
}

// waitForWaiters polls the long-poll gauge until n fetches wait.
func waitForWaiters(b *testing.B, env *relaistest.Env, n int) {
	b.Helper()
	want := fmt.Sprintf("relais_pull_waiters %d", n)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		families, err := env.Registry.Gather()
		if err == nil {
			for _, f := range families {
				if f.GetName() == "relais_pull_waiters" && len(f.GetMetric()) == 1 && int(f.GetMetric()[0].GetGauge().GetValue()) == n {
					return
				}
			}
		}
		time.Sleep(time.Millisecond)
	}
	b.Fatalf("no %s after 10s", want)
}

func percentiles(d []time.Duration) (p50, p99 time.Duration) {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2], s[len(s)*99/100]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
