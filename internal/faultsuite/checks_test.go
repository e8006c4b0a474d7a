//go:build linux

package faultsuite

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/relais/relais/internal/relaistest"
)

// row is one scenario's line of the summary, and what went wrong.
type row struct {
	fault       string
	instances   int
	occurrences int
	completed   int
	failed      map[string]int // error code → instances
	lost        int
	twice       int
	lapsed      int // attempts whose lock lapsed (the task was offered again)
	unavailable int // requests answered 503 database_unavailable
	internal    int // requests answered 500
	metrics     string
	took        time.Duration
	note        string
	problems    []string
	ids         []string // the scenario's instances, in order
}

func (r *row) problem(format string, args ...any) {
	// A few examples are enough to diagnose; the counts say how many.
	if len(r.problems) < 20 {
		r.problems = append(r.problems, fmt.Sprintf(format, args...))
	}
}

// run drives one scenario: load, a fault once a quarter of it ended, the
// wait for the rest, then the checks.
func (s *suite) run(sc scenario) row {
	ctx := context.Background()
	r := row{fault: sc.fault, failed: map[string]int{}, metrics: "no"}
	began := time.Now()
	offA, offB := logSize(s.a.logPath), logSize(s.b.logPath)
	// Whatever happens, the next scenario starts with the workers free
	// and no victim left.
	defer func() {
		s.stopVictim()
		s.gate.open()
	}()
	if sc.prepare != nil {
		if err := sc.prepare(s); err != nil {
			r.problem("prepare: %v", err)
			return r
		}
	}
	ids, err := s.startInstances(ctx, sc)
	if err != nil {
		r.problem("start: %v", err)
		return r
	}
	r.instances, r.ids = len(ids), ids
	at := sc.injectAt
	if at == 0 {
		at = 0.25
	}
	if at > 0 {
		s.waitEnded(ctx, ids, int(at*float64(len(ids))), 2*time.Minute)
	}
	if sc.inject != nil {
		note, err := sc.inject(s)
		if err != nil {
			r.problem("inject: %v", err)
		}
		r.note = note
	}
	s.waitEnded(ctx, ids, len(ids), 3*time.Minute)
	r.took = time.Since(began)
	s.check(ctx, s.pool, sc, ids, &r)
	quiet := time.Now()
	if err := s.checkMetrics(ctx, s.pool, quiet); err != nil {
		r.problem("metrics: %v", err)
	} else {
		r.metrics = "yes"
	}
	for _, l := range []string{logSince(s.a.logPath, offA), logSince(s.b.logPath, offB)} {
		sc := bufio.NewScanner(strings.NewReader(l))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if !strings.Contains(line, "msg=request ") {
				continue
			}
			if strings.Contains(line, " code=database_unavailable") {
				r.unavailable++
			}
			if strings.Contains(line, " status=500 ") {
				r.internal++
			}
		}
	}
	if r.internal > 0 {
		r.problem("%d requests answered 500 internal (a lost database must be 503)", r.internal)
	}
	s.t.Logf("%s: %d instances, %d ended as predicted, %v; %s", sc.fault, r.instances, r.completed+sumValues(r.failed), r.took.Round(100*time.Millisecond), r.note)
	return r
}

func sumValues(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// querier is what check reads through: the pool, or a transaction that
// tampered with the data to show that check sees it.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// check reads what the scenario's instances, occurrences and attempts
// became and counts what was lost or settled twice.
func (s *suite) check(ctx context.Context, db querier, sc scenario, ids []string, r *row) {
	predicted := map[string]bool{}
	for _, c := range sc.predicted {
		predicted[c] = true
	}
	stalls := map[string]bool{}
	for i, id := range ids {
		if sc.stallEvery > 0 && i%sc.stallEvery == 0 {
			stalls[id] = true
		}
	}

	rows, err := db.Query(ctx, "select id::text, status, coalesce(error_code, '') from instances where id = any($1::uuid[])", ids)
	if err != nil {
		r.problem("read instances: %v", err)
		return
	}
	ended := map[string]bool{}
	for rows.Next() {
		var id, status, code string
		if err := rows.Scan(&id, &status, &code); err != nil {
			r.problem("read instances: %v", err)
			return
		}
		switch status {
		case "completed":
			r.completed++
			ended[id] = true
		case "failed":
			r.failed[code]++
			ended[id] = true
			if !predicted[code] {
				r.problem("instance %s failed with %s, which this fault does not explain", id, code)
			}
		default:
			r.lost++
			r.problem("instance %s still %s", id, status)
		}
		switch {
		case stalls[id] && (status != "failed" || code != "deadline_exceeded"):
			r.problem("instance %s, whose push call hung, is %s (%s); want failed with deadline_exceeded", id, status, code)
		case sc.stallEvery > 0 && !stalls[id] && status != "completed":
			r.problem("instance %s, whose push call was answered, is %s (%s); want completed", id, status, code)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		r.problem("read instances: %v", err)
		return
	}

	twice := map[string]bool{}
	rows, err = db.Query(ctx, `
		select o.id::text, o.instance_id::text, o.mode, o.status, o.attempts,
		       count(a.number) filter (where a.outcome = 'completed'),
		       count(a.number) filter (where a.ended_at is null),
		       coalesce(max(a.worker_id) filter (where a.outcome = 'completed'), ''),
		       count(a.number) filter (where a.outcome = 'completed' and o.mode = 'pull' and a.ended_at > a.lock_expires_at),
		       count(a.number) filter (where a.outcome = 'expired')
		from occurrences o left join attempts a on a.occurrence_id = o.id
		where o.instance_id = any($1::uuid[])
		group by o.id`, ids)
	if err != nil {
		r.problem("read occurrences: %v", err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var id, instance, mode, status, completedBy string
		var attempts, completed, open, stale, lapsed int
		if err := rows.Scan(&id, &instance, &mode, &status, &attempts, &completed, &open, &completedBy, &stale, &lapsed); err != nil {
			r.problem("read occurrences: %v", err)
			return
		}
		r.occurrences++
		r.lapsed += lapsed
		settled := status == "completed" || status == "failed" || status == "cancelled"
		if ended[instance] && !settled {
			r.lost++
			r.problem("occurrence %s of an ended instance is still %s", id, status)
		}
		if completed > 1 {
			twice[id] = true
			r.problem("occurrence %s has %d completed attempts", id, completed)
		}
		if (status == "completed") != (completed == 1) {
			r.problem("occurrence %s is %s with %d completed attempts", id, status, completed)
		}
		if open > 0 && status != "reserved" {
			r.problem("occurrence %s is %s with %d attempts still open", id, status, open)
		}
		if stale > 0 {
			twice[id] = true
			r.problem("occurrence %s: a completion was accepted after its lock expired", id)
		}
		switch mode {
		case "pull":
			acked := s.acks.workers(id)
			if len(acked) > 1 {
				twice[id] = true
				r.problem("occurrence %s: completions acknowledged to %d workers %v", id, len(acked), acked)
			}
			for _, w := range acked {
				if w != completedBy {
					r.lost++
					r.problem("occurrence %s: the completion acknowledged to %s is not what the database holds (%s by %q)", id, w, status, completedBy)
				}
			}
		case "push":
			if n := s.dest.callsOf(id); n > 1 {
				twice[id] = true
				r.problem("occurrence %s: the destination was called %d times", id, n)
			} else if n > attempts {
				r.problem("occurrence %s: %d calls for %d attempts", id, n, attempts)
			}
		}
	}
	if err := rows.Err(); err != nil {
		r.problem("read occurrences: %v", err)
	}
	r.twice = len(twice)

	// No lock outlives its expiry by more than the timers allow: a push
	// call or a last attempt whose lock expired is settled by the next
	// timer pass of any replica.
	var overdue int
	if err := db.QueryRow(ctx, `select count(*) from occurrences
		where status = 'reserved' and lock_expires_at < now() - $1::interval
		  and (mode = 'push' or attempts >= max_attempts + attempt_credit)`, 2*timerInterval+time.Second).Scan(&overdue); err != nil {
		r.problem("read locks: %v", err)
	} else if overdue > 0 {
		r.problem("%d reserved occurrences kept a lock more than two timer intervals past its expiry with nothing left to retry", overdue)
	}
}

// occurrenceStatuses are the statuses relais_occurrences reports.
var occurrenceStatuses = []string{"available", "reserved", "deferred", "completed", "failed", "cancelled"}

// checkMetrics compares both replicas' relais_occurrences with a count of
// the database, once each replica's counts were taken after quiet (the
// load is over, nothing changes): the gauge must then be exact.
func (s *suite) checkMetrics(ctx context.Context, db querier, quiet time.Time) error {
	want := map[string]map[string]float64{}
	rows, err := db.Query(ctx, "select definition_key, status, count(*) from occurrences group by 1, 2")
	if err != nil {
		return err
	}
	for rows.Next() {
		var def, status string
		var n float64
		if err := rows.Scan(&def, &status, &n); err != nil {
			rows.Close()
			return err
		}
		if want[def] == nil {
			want[def] = map[string]float64{}
		}
		want[def][status] = n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, rep := range []*replica{s.a, s.b} {
		var m relaistest.Metrics
		deadline := time.Now().Add(30 * time.Second)
		for {
			status, body, err := get(ctx, rep.base+"/metrics")
			if err == nil && status == 200 {
				if m, err = relaistest.ParseMetrics(string(body)); err != nil {
					return fmt.Errorf("%s: %v", rep.name, err)
				}
				at, ok := m.Get("relais_occurrences_counted_timestamp_seconds")
				up, _ := m.Get("relais_database_up")
				if ok && at >= float64(quiet.UnixNano())/1e9 && up == 1 {
					break
				}
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s: no counts taken after the load ended with the database up within 30 s", rep.name)
			}
			time.Sleep(250 * time.Millisecond)
		}
		defs := map[string]bool{}
		for _, smp := range m {
			if smp.Name == "relais_occurrences" {
				defs[smp.Labels["definition"]] = true
			}
		}
		for def := range want {
			defs[def] = true
		}
		for _, def := range slices.Sorted(maps.Keys(defs)) {
			for _, status := range occurrenceStatuses {
				got, _ := m.Get("relais_occurrences", "definition", def, "status", status)
				if got != want[def][status] {
					return fmt.Errorf("%s: relais_occurrences{definition=%q,status=%q} = %v, the database counts %v", rep.name, def, status, got, want[def][status])
				}
			}
		}
	}
	return nil
}

// table renders the summary as a Markdown table.
func table(rows []row) string {
	var b strings.Builder
	b.WriteString("| fault | instances | occurrences (load) | completed | failed (code) | lost | settled twice | locks lapsed | 503 answers | 500 answers | /metrics = database | took | what happened |\n")
	b.WriteString("|---|--:|--:|--:|---|--:|--:|--:|--:|--:|---|--:|---|\n")
	total := row{failed: map[string]int{}}
	for _, r := range rows {
		var failed []string
		for _, code := range slices.Sorted(maps.Keys(r.failed)) {
			failed = append(failed, fmt.Sprintf("%d %s", r.failed[code], code))
			total.failed[code] += r.failed[code]
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %s | %d | %d | %d | %d | %d | %s | %.1f s | %s |\n", r.fault, r.instances, r.occurrences, r.completed,
			orDash(strings.Join(failed, ", ")), r.lost, r.twice, r.lapsed, r.unavailable, r.internal, r.metrics, r.took.Seconds(), orDash(r.note))
		total.instances += r.instances
		total.occurrences += r.occurrences
		total.completed += r.completed
		total.lost += r.lost
		total.twice += r.twice
		total.lapsed += r.lapsed
		total.unavailable += r.unavailable
		total.internal += r.internal
		total.took += r.took
	}
	fmt.Fprintf(&b, "| **all** | %d | %d | %d | %d | %d | %d | %d | %d | %d | | %.1f s | |\n", total.instances, total.occurrences, total.completed,
		sumValues(total.failed), total.lost, total.twice, total.lapsed, total.unavailable, total.internal, total.took.Seconds())
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}
