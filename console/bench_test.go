package console_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
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

// benchNodes is how many task nodes bench_flow has: each instance has one
// occurrence per node, so the seed makes n/benchNodes instances.
const benchNodes = 4

// benchFlow is bench_flow: benchNodes pull nodes in a row on
// add_company_to_crm, the first holding CRM_LOCKED failures.
func benchFlow() map[string]any {
	nodes := map[string]any{"done": map[string]any{"kind": "end"}, "failed": map[string]any{"kind": "end", "status": "failed"}}
	for i := range benchNodes {
		next := "done"
		if i+1 < benchNodes {
			next = "n" + strconv.Itoa(i+1)
		}
		onError := any("failed")
		if i == 0 {
			onError = map[string]any{"CRM_LOCKED": "hold", "*": "failed"}
		}
		nodes["n"+strconv.Itoa(i)] = map[string]any{"kind": "pull", "definition": "add_company_to_crm", "revision": 1,
			"inputs": map[string]any{"company_name": map[string]any{"from": "input.name"}, "country": map[string]any{"value": "FR"},
				"source": map[string]any{"value": "web"}},
			"routes": map[string]any{"created": next, "existing": next}, "on_error": onError}
	}
	return map[string]any{"inputs": map[string]any{"fields": []any{map[string]any{"name": "name", "type": "text", "required": true}}},
		"start": "n0", "nodes": nodes}
}

// seedInstances adds the instances of bench_flow (a business key each;
// one in fifty held, with one of five error codes), and seedOccurrences the occurrences, benchNodes per
// instance, each in one statement (no round trip per row). Ids are UUIDv7
// of their creation time, as Relais makes them (creation windows are id
// ranges), so "newest first" means something; definitions and statuses are
// spread like a busy installation: mostly completed, few failed, with
// error codes; one occurrence a second over the last n seconds, so the
// last hour has 3,600 settlements.
const seedInstances = `
insert into instances (id, process_key, version, status, business_key, error_code, inputs, created_at)
select relais_bench_uuid(t.at, g), 'bench_flow', 1,
       case when g % 50 = 0 then 'held' else 'running' end, 'bk-' || g,
       case when g % 50 = 0 then 'CODE_' || (g / 50 % 5) end, '{}'::jsonb, t.at
from generate_series(1, $1::int) g,
     lateral (select $2::timestamptz - ($1::int - g) * interval '4 seconds' - interval '4 seconds' as at) t`

// benchUUID makes the UUIDv7 of an instant and a sequence number.
const benchUUID = `
create or replace function relais_bench_uuid(at timestamptz, seq bigint) returns uuid language sql immutable as $$
    select (substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-7000-8' || lpad(to_hex(seq % 4096), 3, '0') || '-' || lpad(to_hex(seq), 12, '0'))::uuid
    from (select lpad(to_hex((extract(epoch from at) * 1000)::bigint), 12, '0') as h) x
$$`

const seedOccurrences = `
insert into occurrences (id, instance_id, node, definition_key, revision, mode, status, priority, max_attempts, retry_delay,
    attempts, available_at, claimable_at, inputs, created_at, settled_at, lock_expires_at,
    process_key, process_version, business_key, error_code, error_message)
select relais_bench_uuid(t.at, g),
       relais_bench_uuid($3::timestamptz - ($2::int - (1 + g / 4)) * interval '4 seconds' - interval '4 seconds', 1 + g / 4),
       'n' || (g % 4),
       case when g % 10 < 7 then 'add_company_to_crm' else 'console_vault' end,
       1, 'pull', s.status, 5, 3, interval '10 seconds',
       case when s.status = 'available' then 0 else 1 end,
       t.at,
       case when s.status = 'available' then t.at end,
       '{}'::jsonb, t.at,
       case when s.status in ('completed', 'failed', 'cancelled') then t.at end,
       -- Every 20th reserved one's lock has lapsed: it shows as available.
       case when s.status = 'reserved' and g % 20 = 0 then t.at
            when s.status = 'reserved' then now() + interval '1 hour' end,
       'bench_flow', 1, 'bk-' || (1 + g / 4),
       case when s.status = 'failed' then (array['CRM_DOWN', 'CRM_LOCKED', 'destination_http_503'])[1 + g % 3] end,
       case when s.status = 'failed' then 'the CRM answered 503' end
from generate_series(0, $1::int - 1) g,
     lateral (select case (g::bigint * 7919) % 100
                  when 0 then 'failed' when 1 then 'failed'
                  when 2 then 'cancelled'
                  when 3 then 'reserved' when 4 then 'reserved'
                  when 5 then 'available' when 6 then 'available' when 7 then 'available'
                  else 'completed' end as status) s,
     lateral (select now() - ($1::int - g) * interval '1 second' as at) t`

// seedAudit adds operator actions, a bulk action every hundredth.
const seedAudit = `
insert into operator_actions (at, actor_name, action, reason, instance_id, bulk_id)
select now() - ($1::int - g) * interval '1 second', 'ops-' || (g % 7),
       (array['retry', 'abandon', 'stop'])[1 + g % 3], 'reason ' || g,
       ('00000000-0000-7000-8000-' || lpad(to_hex(1 + g % 1000), 12, '0'))::uuid,
       case when g % 100 < 10 then ('00000002-0000-7000-8000-' || lpad(to_hex(g / 100), 12, '0'))::uuid end
from generate_series(1, $1::int) g`

// plans are the statements whose plans the benchmark prints: each but the
// last must read an index, not the table. The counts by node read every
// occurrence of the version, which here is the whole table: the page
// caches them.
var plans = []struct{ name, sql string }{
	{"error code filter", `select id from occurrences where error_code = 'CRM_DOWN' order by id desc limit 51`},
	{"business key filter", `select id from occurrences where business_key = 'bk-4242' order by id desc limit 51`},
	{"instances by error code", `select id from instances where error_code = 'CODE_3' order by id desc limit 51`},
	{"settled window", `select id from occurrences where settled_at >= now() - interval '1 day' and settled_at < now() order by id desc limit 51`},
	{"oldest available", `select d.key, o.available_at from definitions d cross join lateral (select x.available_at from occurrences x
		where x.status = 'available' and x.definition_key = d.key and x.available_at <= now() order by x.available_at limit 1) o`},
	{"settlements of the hour", `select definition_key, status, count(*) from occurrences where settled_at > now() - interval '1 hour'
		and settled_at <= now() and status in ('completed', 'failed') group by 1, 2`},
	{"counts by node", `select node, status, count(*) from occurrences where process_key = 'bench_flow' and process_version = 1 group by node, status`},
}

// BenchmarkOperationsView measures every list and filter of the console,
// the health page and a process version page over HTTP, server time
// included, with a million occurrences. It only runs with -bench (it seeds
// for a while); run it once with -benchtime=50x or so.
func BenchmarkOperationsView(b *testing.B) {
	if testing.Short() {
		b.Skip("seeds a million occurrences")
	}
	env := relaistest.New(b)
	env.Definition("add_company_to_crm.yaml")
	env.Must(201, "PUT", "/api/v1/definitions/console_vault/working", env.Designer, vaultWorking(100, []string{"ok", "ko"}))
	env.Must(201, "POST", "/api/v1/definitions/console_vault/revisions", env.Designer, nil)
	env.Process("bench_flow", benchFlow())

	ctx := context.Background()
	n := benchOccurrences(b)
	start := time.Now()
	base := start.Add(-time.Minute) // instances were created before now
	for _, stmt := range []struct {
		sql  string
		args []any
	}{
		{benchUUID, nil},
		{seedInstances, []any{n/benchNodes + 1, base}},
		{seedOccurrences, []any{n, n/benchNodes + 1, base}},
		{seedAudit, []any{100_000}},
		// Autovacuum would get there; the plans and index-only scans of a
		// settled table are what is worth measuring.
		{"vacuum analyze occurrences", nil},
		{"vacuum analyze instances", nil},
		{"vacuum analyze operator_actions", nil},
	} {
		if _, err := env.Pool.Exec(ctx, stmt.sql, stmt.args...); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("seeded %d occurrences, %d instances, 100,000 audit records in %v", n, n/benchNodes+1, time.Since(start).Round(time.Millisecond))

	for _, p := range plans {
		rows, err := env.Pool.Query(ctx, "explain "+p.sql)
		if err != nil {
			b.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				b.Fatal(err)
			}
			plan = append(plan, line)
		}
		rows.Close()
		text := strings.Join(plan, "\n")
		if (strings.Contains(text, "Seq Scan on occurrences") || strings.Contains(text, "Seq Scan on instances")) && p.name != "counts by node" {
			b.Errorf("%s reads the whole table:\n%s", p.name, text)
		}
		b.Logf("plan of %s:\n%s", p.name, text)
	}
	// The reads the pages cache for a few seconds, uncached.
	for _, read := range []struct {
		name string
		fn   func() error
	}{
		{"counts by (definition, status)", func() error { _, err := env.Engine.CountOccurrencesByDefinitionStatus(ctx); return err }},
		{"health (queue lag, held, last hour)", func() error { _, err := env.Engine.Health(ctx); return err }},
		{"counts by node of bench_flow v1", func() error { _, err := env.Engine.CountOccurrencesByNode(ctx, "bench_flow", 1); return err }},
	} {
		t0 := time.Now()
		if err := read.fn(); err != nil {
			b.Fatal(err)
		}
		b.Logf("%s, uncached: %v (cached for 5 s, refreshed in the background)", read.name, time.Since(t0).Round(100*time.Microsecond))
	}

	br := signedIn(b, env.URL, "en", env.Operator)
	client := &http.Client{Jar: br.client.Jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(b *testing.B, path string) {
		res, err := client.Get(env.URL + path)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK && res.StatusCode != http.StatusSeeOther {
			b.Fatalf("GET %s: %d", path, res.StatusCode)
		}
	}
	today := time.Now().UTC().Format(time.DateOnly)
	var mid, midInstance string
	if err := env.Pool.QueryRow(ctx, "select id::text from occurrences order by id offset $1 limit 1", n/2).Scan(&mid); err != nil {
		b.Fatal(err)
	}
	if err := env.Pool.QueryRow(ctx, "select id::text from instances order by id offset $1 limit 1", n/benchNodes/2).Scan(&midInstance); err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name, path string
		budget     time.Duration
	}{
		{"occurrences/first-page", "/console/occurrences", 100 * time.Millisecond},
		{"occurrences/definition+status", "/console/occurrences?definition=console_vault&status=failed", 100 * time.Millisecond},
		{"occurrences/definition+status-page-2", "/console/occurrences?definition=console_vault&status=failed&before=" + mid, 100 * time.Millisecond},
		{"occurrences/previous-page", "/console/occurrences?definition=console_vault&status=failed&after=" + mid + "&from=51", 100 * time.Millisecond},
		// available also takes reserved occurrences whose lock lapsed.
		{"occurrences/available", "/console/occurrences?definition=add_company_to_crm&status=available", 100 * time.Millisecond},
		{"occurrences/reserved", "/console/occurrences?status=reserved", 100 * time.Millisecond},
		{"occurrences/error-code", "/console/occurrences?error_code=CRM_DOWN", 100 * time.Millisecond},
		{"occurrences/error-code+definition", "/console/occurrences?error_code=destination_http_503&definition=console_vault", 100 * time.Millisecond},
		{"occurrences/business-key", "/console/occurrences?business_key=bk-4242", 100 * time.Millisecond},
		{"occurrences/process", "/console/occurrences?process=bench_flow", 100 * time.Millisecond},
		{"occurrences/created-today", "/console/occurrences?created_from=" + today + "&created_to=" + today, 100 * time.Millisecond},
		{"occurrences/settled-today", "/console/occurrences?settled_from=" + today + "&settled_to=" + today, 100 * time.Millisecond},
		{"instances/first-page", "/console/instances", 100 * time.Millisecond},
		{"instances/held", "/console/instances?status=held", 100 * time.Millisecond},
		{"instances/business-key", "/console/instances?business_key=bk-4242", 100 * time.Millisecond},
		{"instances/error-code", "/console/instances?error_code=CODE_3", 100 * time.Millisecond},
		{"instances/held+error-code", "/console/instances?status=held&error_code=CODE_3", 100 * time.Millisecond},
		{"instances/process+created", "/console/instances?process=bench_flow&created_from=" + today, 100 * time.Millisecond},
		{"instances/previous-page", "/console/instances?after=" + midInstance + "&from=51", 100 * time.Millisecond},
		{"audit/first-page", "/console/audit", 100 * time.Millisecond},
		{"audit/action", "/console/audit?action=stop", 100 * time.Millisecond},
		{"audit/bulk", "/console/audit?bulk=00000002-0000-7000-8000-000000000010", 100 * time.Millisecond},
		{"search/business-key", "/console/search?q=bk-4242", 100 * time.Millisecond},
		{"health", "/console/health", 150 * time.Millisecond},
		{"process-version", "/console/processes/bench_flow/versions/1", 150 * time.Millisecond},
	} {
		b.Run(bc.name, func(b *testing.B) {
			get(b, bc.path) // warms the cached counts and menus, as any earlier visit would
			b.ResetTimer()
			for b.Loop() {
				get(b, bc.path)
			}
			per := b.Elapsed() / time.Duration(b.N)
			b.ReportMetric(float64(per.Microseconds())/1000, "ms/op")
			if per > bc.budget {
				b.Errorf("%s: %v per page, over the %v budget", bc.path, per.Round(time.Microsecond), bc.budget)
			}
		})
	}
}
