package console_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/relais/relais/internal/relaistest"
)

// benchOccurrences is how many occurrences BenchmarkOperationsView seeds;
// RELAIS_BENCH_OCCURRENCES overrides it for a quick trial run.
func benchOccurrences(b *testing.B) int {
	if v := os.Getenv("RELAIS_BENCH_OCCURRENCES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1000 {
			b.Fatalf("RELAIS_BENCH_OCCURRENCES=%q: want a number, at least 1000", v)
		}
		return n
	}
	return 1_000_000
}

// seedInstances adds a thousand instances of crm_only, and seedOccurrences
// a million occurrences spread over them, each in one statement (fast: no
// round trip per row). Ids grow with the series so "newest first" means
// something; definitions and statuses are spread like a busy installation:
// mostly completed, few failed.
const seedInstances = `
insert into instances (id, process_key, version, status, inputs, created_at)
select ('00000000-0000-7000-8000-' || lpad(to_hex(g), 12, '0'))::uuid, 'crm_only', 1, 'running', '{}'::jsonb, now()
from generate_series(1, 1000) g`

const seedOccurrences = `
insert into occurrences (id, instance_id, node, definition_key, revision, mode, status, priority, max_attempts, retry_delay,
    attempts, available_at, claimable_at, inputs, created_at, settled_at, lock_expires_at)
select ('00000001-0000-7000-8000-' || lpad(to_hex(g), 12, '0'))::uuid,
       ('00000000-0000-7000-8000-' || lpad(to_hex(1 + g % 1000), 12, '0'))::uuid,
       'n' || g,
       case when g % 10 < 7 then 'add_company_to_crm' else 'console_vault' end,
       1, 'pull', s.status, 5, 3, interval '10 seconds',
       case when s.status = 'available' then 0 else 1 end,
       t.at,
       case when s.status = 'available' then t.at end,
       '{}'::jsonb, t.at,
       case when s.status in ('completed', 'failed', 'cancelled') then t.at end,
       -- Every 20th reserved one's lock has lapsed: it shows as available.
       case when s.status = 'reserved' and g % 20 = 0 then t.at
            when s.status = 'reserved' then now() + interval '1 hour' end
from generate_series(1, $1::int) g,
     lateral (select case (g::bigint * 7919) % 100
                  when 0 then 'failed' when 1 then 'failed'
                  when 2 then 'cancelled'
                  when 3 then 'reserved' when 4 then 'reserved'
                  when 5 then 'available' when 6 then 'available' when 7 then 'available'
                  else 'completed' end as status) s,
     lateral (select now() - ($1::int - g) * interval '1 second' as at) t`

// BenchmarkOperationsView measures the operations view over HTTP, server
// time included, with a million occurrences: the first page, and a page
// filtered by definition and a rare status. It only runs with -bench (it
// seeds for a while); run it once with -benchtime=50x or so.
func BenchmarkOperationsView(b *testing.B) {
	if testing.Short() {
		b.Skip("seeds a million occurrences")
	}
	env := relaistest.New(b)
	env.Definition("add_company_to_crm.yaml")
	env.Must(201, "PUT", "/api/v1/definitions/console_vault/working", env.Designer, vaultWorking(100, []string{"ok", "ko"}))
	env.Must(201, "POST", "/api/v1/definitions/console_vault/revisions", env.Designer, nil)
	env.Process("crm_only", relaistest.CRMProcess(nil))

	ctx := context.Background()
	n := benchOccurrences(b)
	start := time.Now()
	for _, stmt := range []struct {
		sql  string
		args []any
	}{
		{seedInstances, nil},
		{seedOccurrences, []any{n}},
		// Autovacuum would get there; the plans and index-only scans of a
		// settled table are what is worth measuring.
		{"vacuum analyze occurrences", nil},
		{"vacuum analyze instances", nil},
	} {
		if _, err := env.Pool.Exec(ctx, stmt.sql, stmt.args...); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("seeded %d occurrences in %v", n, time.Since(start).Round(time.Millisecond))

	countStart := time.Now()
	if _, err := env.Engine.CountOccurrencesByDefinitionStatus(ctx); err != nil {
		b.Fatal(err)
	}
	b.Logf("one count by (definition, status) over the table: %v (cached for 5 s, refreshed in the background)", time.Since(countStart).Round(time.Millisecond))

	br := signedIn(b, env.URL, "en", env.Operator)
	cookies := br.client.Jar
	client := &http.Client{Jar: cookies, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(b *testing.B, path string) {
		res, err := client.Get(env.URL + path)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			b.Fatalf("GET %s: %d", path, res.StatusCode)
		}
	}
	for _, bc := range []struct{ name, path string }{
		{"first-page", "/console/occurrences"},
		{"filtered", "/console/occurrences?definition=console_vault&status=failed"},
		{"filtered-page-2", "/console/occurrences?definition=console_vault&status=failed&before=00000001-0000-7000-8000-0000000f0000"},
		// available also takes reserved occurrences whose lock lapsed.
		{"available", "/console/occurrences?definition=add_company_to_crm&status=available"},
		{"reserved", "/console/occurrences?status=reserved"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			get(b, bc.path) // warms the counts and the menus, as any earlier visit would
			b.ResetTimer()
			for b.Loop() {
				get(b, bc.path)
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/op")
		})
	}
}
