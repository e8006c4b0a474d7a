package console_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/relaistest"
)

// seedHistory adds n ended instances, each with one completed occurrence and
// its attempt, all older than the live work: the history retention keeps.
const seedHistory = `
with i as (
    insert into instances (id, process_key, version, status, inputs, created_at, ended_at)
    select ('00000002-0000-7000-8000-' || lpad(to_hex(g), 12, '0'))::uuid, 'crm_only', 1, 'completed', '{}'::jsonb,
           now() - interval '20 days' + g * interval '1 millisecond', now() - interval '20 days' + g * interval '1 millisecond'
    from generate_series(1, $1::int) g
    returning id, created_at
),
o as (
    insert into occurrences (id, instance_id, node, definition_key, revision, mode, status, priority, max_attempts, retry_delay,
        attempts, available_at, inputs, created_at, settled_at, process_key, outputs)
    select i.id, i.id, 'crm', 'add_company_to_crm', 1, 'pull', 'completed', 5, 3, interval '10 seconds',
           1, i.created_at, '{}'::jsonb, i.created_at, i.created_at, 'crm_only', '{"result":"created","crm_id":"C"}'::jsonb
    from i
    returning id, created_at
)
insert into attempts (occurrence_id, number, worker_id, reserved_at, lock_expires_at, ended_at, outcome)
select o.id, 1, 'w', o.created_at, o.created_at + interval '1 minute', o.created_at, 'completed' from o`

// BenchmarkHistory compares, with 10,000 and with RELAIS_BENCH_HISTORY
// (default 10,000,000) ended instances in the tables, the cost of a claim,
// of the observation API's first page and of the console's first page
// (DESIGN §13: flat as the ended history grows). It only runs with -bench.
func BenchmarkHistory(b *testing.B) {
	big := 10_000_000
	if v := os.Getenv("RELAIS_BENCH_HISTORY"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 10_000 {
			b.Fatalf("RELAIS_BENCH_HISTORY=%q: want a number, at least 10000", v)
		}
		big = n
	}
	for _, history := range []int{10_000, big} {
		b.Run(fmt.Sprintf("history=%d", history), func(b *testing.B) {
			env := relaistest.New(b)
			env.Definition("add_company_to_crm.yaml")
			env.Process("crm_only", relaistest.CRMProcess(nil))
			ctx := context.Background()
			start := time.Now()
			if _, err := env.Pool.Exec(ctx, seedHistory, history); err != nil {
				b.Fatal(err)
			}
			for _, t := range []string{"instances", "occurrences", "attempts"} {
				if _, err := env.Pool.Exec(ctx, "vacuum analyze "+t); err != nil {
					b.Fatal(err)
				}
			}
			b.Logf("seeded %d ended instances in %v", history, time.Since(start).Round(time.Millisecond))
			// Live work on top: what the claim and the first pages show.
			for range 100 {
				env.Must(201, "POST", "/api/v1/processes/crm_only/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": "x"}})
			}
			c, _, err := env.Engine.CreateConsumer(ctx, "bench", []engine.Grant{{Definition: "add_company_to_crm"}})
			if err != nil {
				b.Fatal(err)
			}
			pairs := engine.Pairs{Keys: []string{"add_company_to_crm"}, Revisions: []int32{1}}
			br := signedIn(b, env.URL, "en", env.Operator)
			client := &http.Client{Jar: br.client.Jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			get := func(b *testing.B, path, token string) {
				req, _ := http.NewRequest("GET", env.URL+path, nil)
				if token != "" {
					req.Header.Set("Authorization", "Bearer "+token)
				}
				res, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusOK {
					b.Fatalf("GET %s: %d", path, res.StatusCode)
				}
			}
			b.Run("claim", func(b *testing.B) {
				for b.Loop() {
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
			})
			b.Run("api-first-page", func(b *testing.B) {
				for b.Loop() {
					get(b, "/api/v1/occurrences?limit=50", env.Operator)
				}
			})
			b.Run("api-completed-page", func(b *testing.B) {
				for b.Loop() {
					get(b, "/api/v1/occurrences?status=completed&limit=50", env.Operator)
				}
			})
			// The counts are a cached snapshot (one counting query per
			// replica every few seconds, whoever asks): the first page after
			// a start shows "Counting…" rather than wait for them. The timed
			// pages are the steady state, with counts; what counting costs
			// is logged beside them.
			begin := time.Now()
			if _, err := env.Engine.CountOccurrencesByDefinitionStatus(ctx); err != nil {
				b.Fatal(err)
			}
			b.Logf("counting by definition and status, uncached: %v", time.Since(begin).Round(time.Millisecond))
			begin = time.Now()
			get(b, "/console/occurrences", "")
			b.Logf("the first console page after the start: %v", time.Since(begin).Round(time.Millisecond))
			if _, _, err := env.Engine.OccurrenceCounts(ctx); err != nil {
				b.Fatal(err)
			}
			b.Run("console-first-page", func(b *testing.B) {
				for b.Loop() {
					get(b, "/console/occurrences", "")
				}
			})
		})
	}
}
