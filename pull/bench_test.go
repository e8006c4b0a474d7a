package pull_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/relaistest"
)

// BenchmarkPickupLatency measures the time from the COMMIT that makes an
// occurrence claimable to the response of a worker's long-polling fetch
// that was already waiting. Occurrences are created parked (not claimable)
// beforehand; each iteration makes one claimable and notifies in a
// transaction of its own, so the clock starts at the commit.
func BenchmarkPickupLatency(b *testing.B) {
	env := relaistest.New(b)
	env.Definition("add_company_to_crm.yaml")
	env.Process("crm_only", relaistest.CRMProcess(nil))
	token := env.Consumer("bench", "add_company_to_crm")
	ctx := context.Background()
	ids := park(b, env, b.N)

	fetch := map[string]any{"worker_id": "bench", "subscriptions": []any{map[string]any{"definition": "add_company_to_crm"}},
		"max_tasks": 1, "lock_duration": "PT1M", "wait": "PT10S"}
	latencies := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		got := make(chan time.Time, 1)
		go func() {
			res := env.Do("POST", "/api/v1/pull/fetch-and-lock", token, fetch)
			at := time.Now()
			if res.Status != 200 || !strings.Contains(string(res.Body), ids[i]) {
				b.Errorf("fetch: %d %s", res.Status, res.Body)
			}
			got <- at
		}()
		waitForWaiters(b, env, 1)
		tx, err := env.Pool.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `update occurrences set available_at = now(), claimable_at = now() where id = $1`, ids[i]); err != nil {
			b.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `select pg_notify($1, $2)`, engine.ChannelOccurrence, engine.AvailabilityPayload("pull", "add_company_to_crm", 1, time.Now())); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if err := tx.Commit(ctx); err != nil {
			b.Fatal(err)
		}
		latencies = append(latencies, (<-got).Sub(start))
	}
	b.StopTimer()
	slices.Sort(latencies)
	b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(latencies[len(latencies)*99/100].Microseconds())/1000, "p99-ms")
}

// park starts n instances and parks their occurrences: available only a day
// from now.
func park(b *testing.B, env *relaistest.Env, n int) []string {
	b.Helper()
	var ids []string
	for i := range n {
		inst := env.Must(201, "POST", "/api/v1/processes/crm_only/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": fmt.Sprint("c", i)}}).JSON(b)
		ids = append(ids, inst["path"].([]any)[0].(map[string]any)["occurrence_id"].(string))
	}
	if _, err := env.Pool.Exec(context.Background(), "update occurrences set available_at = now() + interval '1 day', claimable_at = now() + interval '1 day'"); err != nil {
		b.Fatal(err)
	}
	return ids
}

// waitForWaiters polls the waiter gauge until n fetches wait.
func waitForWaiters(b *testing.B, env *relaistest.Env, n int) {
	b.Helper()
	want := fmt.Sprintf("relais_pull_waiters %d", n)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		res, err := http.Get(env.URL + "/metrics")
		if err == nil {
			var sb strings.Builder
			buf := make([]byte, 64<<10)
			for {
				k, err := res.Body.Read(buf)
				sb.Write(buf[:k])
				if err != nil {
					break
				}
			}
			res.Body.Close()
			if strings.Contains(sb.String(), want) {
				return
			}
		}
		time.Sleep(time.Millisecond)
	}
	b.Fatalf("no %d waiters after 10s", n)
}

// BenchmarkFullCycle measures the whole cycle through the HTTP API: instance
// start → fetch-and-lock → complete → instance advanced to its end, with 8
// workers fetching up to 50 tasks each. The figure is occurrences per second.
func BenchmarkFullCycle(b *testing.B) {
	env := relaistest.New(b)
	env.Definition("add_company_to_crm.yaml")
	env.Process("crm_only", relaistest.CRMProcess(nil))
	token := env.Consumer("bench", "add_company_to_crm")
	total := b.N
	var done atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	// Producers start instances while workers drain them.
	starts := make(chan int)
	for range 4 {
		wg.Go(func() {
			for i := range starts {
				env.Must(201, "POST", "/api/v1/processes/crm_only/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": fmt.Sprint("c", i)}})
			}
		})
	}
	for w := range 8 {
		wg.Go(func() {
			worker := fmt.Sprint("w", w)
			for {
				select {
				case <-stop:
					return
				default:
				}
				res := env.Do("POST", "/api/v1/pull/fetch-and-lock", token, map[string]any{"worker_id": worker,
					"subscriptions": []any{map[string]any{"definition": "add_company_to_crm"}}, "max_tasks": 50, "lock_duration": "PT1M", "wait": "PT1S"})
				var out struct {
					Occurrences []struct{ ID string } `json:"occurrences"`
				}
				_ = json.Unmarshal(res.Body, &out)
				for _, o := range out.Occurrences {
					env.Must(200, "POST", "/api/v1/pull/occurrences/"+o.ID+"/complete", token, map[string]any{"worker_id": worker,
						"outputs": map[string]any{"result": "created", "crm_id": "C"}})
					if done.Add(1) == int64(total) {
						close(stop)
					}
				}
			}
		})
	}
	for i := range total {
		starts <- i
	}
	close(starts)
	<-stop
	elapsed := time.Since(start)
	wg.Wait()
	b.StopTimer()
	var running int
	_ = env.Pool.QueryRow(context.Background(), "select count(*) from instances where status = 'running'").Scan(&running)
	if running != 0 {
		b.Fatalf("%d instances still running", running)
	}
	b.ReportMetric(float64(total)/elapsed.Seconds(), "occurrences/s")
}

// BenchmarkFetchCost compares the cost of one fetch (resolving the
// subscription, then claiming one occurrence of the subscribed definition)
// with 1,000 and with 1,000,000 claimable occurrences of other definitions
// and revisions in the table, for a subscription to a key and to a pattern
// (crm.*, granted as a pattern too).
func BenchmarkFetchCost(b *testing.B) {
	for _, sub := range []struct{ name, key, subscription string }{
		{"key", "add_company_to_crm", "add_company_to_crm"},
		{"pattern", "crm.add_company", "crm.*"},
	} {
		for _, others := range []int{1_000, 1_000_000} {
			b.Run(fmt.Sprintf("%s/others=%d", sub.name, others), func(b *testing.B) {
				env := relaistest.New(b)
				env.Definition("add_company_to_crm.yaml")
				env.Definition("score_company.yaml")
				process := relaistest.CRMProcess(nil)
				if sub.key != "add_company_to_crm" {
					// The same contract under a namespaced key.
					working := env.Must(200, "GET", "/api/v1/definitions/add_company_to_crm", env.Operator, nil).JSON(b)["working"]
					env.Must(201, "PUT", "/api/v1/definitions/"+sub.key+"/working", env.Designer, working)
					env.Must(201, "POST", "/api/v1/definitions/"+sub.key+"/revisions", env.Designer, nil)
					process["nodes"].(map[string]any)["crm"].(map[string]any)["definition"] = sub.key
				}
				env.Process("crm_only", process)
				ctx := context.Background()
				for range 100 {
					env.Must(201, "POST", "/api/v1/processes/crm_only/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": "x"}})
				}
				fillOthers(b, env.Pool, others)
				c, _, err := env.Engine.CreateConsumer(ctx, "bench", []engine.Grant{{Definition: sub.subscription}})
				if err != nil {
					b.Fatal(err)
				}
				subs := []engine.Subscription{{Definition: sub.subscription}}
				var pairs engine.Pairs
				b.ResetTimer()
				for b.Loop() {
					pairs, err = env.Engine.ResolveSubscriptions(ctx, c.ID, subs)
					if err != nil {
						b.Fatal(err)
					}
					got, err := env.Engine.Claim(ctx, engine.ClaimRequest{ConsumerID: c.ID, WorkerID: "w", Pairs: pairs, MaxTasks: 1, LockDuration: time.Minute})
					if err != nil || len(got) != 1 {
						b.Fatalf("claim: %v %v", got, err)
					}
					b.StopTimer()
					if _, err := env.Pool.Exec(ctx, `update occurrences set status = 'available', available_at = now() - interval '1 minute', claimable_at = now() - interval '1 minute' where id = $1`, got[0].ID); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				b.StopTimer()
				plan := claimPlan(b, env, engine.ClaimRequest{ConsumerID: c.ID, WorkerID: "w", Pairs: pairs, MaxTasks: 1, LockDuration: time.Minute})
				// Other definitions must cost nothing: the ready index is used
				// whatever the table holds.
				if others >= 100_000 && !strings.Contains(plan, "occurrences_ready") {
					b.Errorf("the claim does not use the occurrences_ready index:\n%s", plan)
				}
				b.Logf("plan with %d others:\n%s", others, plan)
			})
		}
	}
}

// claimPlan returns the plan the engine's claim statement for req runs
// with: the statement and its arguments are recorded by a tracer on a pool
// of its own, then prepared and explained with the same arguments, under
// the settings the engine runs it with (a generic plan, no sequential
// scan, no JIT: engine.HotPlans).
func claimPlan(b *testing.B, env *relaistest.Env, req engine.ClaimRequest) string {
	b.Helper()
	ctx := context.Background()
	cfg := env.Pool.Config()
	rec := &statementRecorder{name: "-- name: OccurrenceClaimPull "}
	cfg.ConnConfig.Tracer = rec
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	if _, err := engine.New(pool, engine.Options{}).Claim(ctx, req); err != nil {
		b.Fatal(err)
	}
	if rec.sql == "" {
		b.Fatal("the claim statement was not seen")
	}
	conn, err := env.Pool.Acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Release()
	tx, err := conn.Begin(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, engine.HotPlans); err != nil {
		b.Fatal(err)
	}
	desc, err := tx.Prepare(ctx, "fetch_cost_claim", rec.sql)
	if err != nil {
		b.Fatal(err)
	}
	// EXPLAIN EXECUTE takes its arguments as literals: each is written in
	// its type's text form, as the driver would send it.
	literals := make([]string, len(rec.args))
	for i, arg := range rec.args {
		text, err := conn.Conn().TypeMap().Encode(desc.ParamOIDs[i], pgtype.TextFormatCode, arg, nil)
		if err != nil {
			b.Fatal(err)
		}
		if text == nil {
			literals[i] = "null"
			continue
		}
		literals[i] = "'" + strings.ReplaceAll(string(text), "'", "''") + "'"
	}
	rows, err := tx.Query(ctx, "explain execute fetch_cost_claim("+strings.Join(literals, ", ")+")")
	if err != nil {
		b.Fatal(err)
	}
	var plan strings.Builder
	for rows.Next() {
		var line string
		_ = rows.Scan(&line)
		plan.WriteString(line + "\n")
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	return plan.String()
}

// statementRecorder keeps the text and arguments of the statement whose
// sqlc name comment starts with name.
type statementRecorder struct {
	name string
	sql  string
	args []any
}

func (r *statementRecorder) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if strings.HasPrefix(data.SQL, r.name) {
		r.sql, r.args = data.SQL, data.Args
	}
	return ctx
}

func (r *statementRecorder) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// The engine sends the claim in a batch, behind its plan settings.
func (r *statementRecorder) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (r *statementRecorder) TraceBatchQuery(_ context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	if strings.HasPrefix(data.SQL, r.name) {
		r.sql, r.args = data.SQL, data.Args
	}
}

func (r *statementRecorder) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// fillOthers inserts n claimable pull occurrences of other definitions and
// revisions (score_company revision 1, under one instance) in one statement.
func fillOthers(b *testing.B, pool *pgxpool.Pool, n int) {
	b.Helper()
	ctx := context.Background()
	_, err := pool.Exec(ctx, `
		insert into occurrences (id, instance_id, node, definition_key, revision, mode, status, priority, max_attempts, retry_delay,
		                         available_at, claimable_at, inputs)
		select gen_random_uuid(), (select id from instances limit 1), 'other_' || g, 'score_company', 1, 'pull', 'available', 5, 3,
		       interval '10 seconds', now(), now(), '{}'
		from generate_series(1, $1) g`, n)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "analyze occurrences"); err != nil {
		b.Fatal(err)
	}
}
