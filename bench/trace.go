package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/relais/relais/engine"

	"github.com/jackc/pgx/v5"
)

// requestTrace travels in a request's context down to the SQL tracer.
type requestTrace struct {
	route string
	probe *probe
}

type requestTraceKey struct{}

func withRequestTrace(ctx context.Context, rt *requestTrace) context.Context {
	return context.WithValue(ctx, requestTraceKey{}, rt)
}

func requestTraceFrom(ctx context.Context) *requestTrace {
	rt, _ := ctx.Value(requestTraceKey{}).(*requestTrace)
	return rt
}

// sqlTracer is the pgx tracer of a benchmarked pool. It records when the
// first transaction of a probed request commits and, with stats, counts
// every round trip (statement, BEGIN, COMMIT, prepare) by route and
// statement with its time as the client sees it.
type sqlTracer struct {
	stats *sqlStats
	// claim, when set, keeps the times of the last claim that reserved
	// something (the latency scenario's breakdown).
	claim *claimTimes
}

// claimTimes are the start and end of the last successful claim, in Unix
// nanoseconds.
type claimTimes struct{ start, end atomic.Int64 }

type queryStartKey struct{}

type queryStart struct {
	at  time.Time
	sql string
}

func (t *sqlTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if t.stats == nil && requestTraceFrom(ctx) == nil {
		return ctx
	}
	return context.WithValue(ctx, queryStartKey{}, queryStart{at: time.Now(), sql: data.SQL})
}

func (t *sqlTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	qs, ok := ctx.Value(queryStartKey{}).(queryStart)
	if !ok {
		return
	}
	rt := requestTraceFrom(ctx)
	if rt != nil && rt.probe != nil && statementName(qs.sql) == "commit" && data.Err == nil {
		rt.probe.committed.CompareAndSwap(0, time.Now().UnixNano())
	}
	name := statementName(qs.sql)
	if t.claim != nil && name == "OccurrenceClaimPull" && data.Err == nil && data.CommandTag.RowsAffected() > 0 {
		t.claim.start.Store(qs.at.UnixNano())
		t.claim.end.Store(time.Now().UnixNano())
	}
	if t.stats != nil {
		t.stats.statement(routeIn(rt), name, time.Since(qs.at))
	}
}

// TracePrepareStart and TracePrepareEnd count the round trip pgx makes the
// first time a connection sees a statement (it caches prepared statements
// per connection).
func (t *sqlTracer) TracePrepareStart(ctx context.Context, _ *pgx.Conn, data pgx.TracePrepareStartData) context.Context {
	if t.stats == nil {
		return ctx
	}
	return context.WithValue(ctx, queryStartKey{}, queryStart{at: time.Now(), sql: data.SQL})
}

func (t *sqlTracer) TracePrepareEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareEndData) {
	qs, ok := ctx.Value(queryStartKey{}).(queryStart)
	if !ok || t.stats == nil {
		return
	}
	t.stats.statement(routeIn(requestTraceFrom(ctx)), "prepare "+statementName(qs.sql), time.Since(qs.at))
}

func routeIn(rt *requestTrace) string {
	if rt == nil {
		return routeBackground
	}
	return rt.route
}

// statementName is the sqlc name of a statement ("-- name: X :one"), else
// its first words.
func statementName(sql string) string {
	s := strings.TrimSpace(sql)
	if rest, ok := strings.CutPrefix(s, "-- name: "); ok {
		name, _, _ := strings.Cut(rest, " ")
		return name
	}
	// Comment lines after the statement (the engine's tag of the
	// statements it runs behind HotPlans) do not name it.
	s, _, _ = strings.Cut(s, "\n--")
	if strings.HasPrefix(s, engine.HotPlans) {
		return "HotPlans"
	}
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 48 {
		s = s[:48] + "…"
	}
	return s
}

// sqlStats are round trips and times by route and statement.
type sqlStats struct {
	mu     sync.Mutex
	routes map[string]*routeStats
}

type routeStats struct {
	requests   int
	serverTime time.Duration
	statements map[string]*statementStats
}

type statementStats struct {
	count int
	total time.Duration
}

func newSQLStats() *sqlStats { return &sqlStats{routes: map[string]*routeStats{}} }

func (s *sqlStats) route(name string) *routeStats {
	r := s.routes[name]
	if r == nil {
		r = &routeStats{statements: map[string]*statementStats{}}
		s.routes[name] = r
	}
	return r
}

func (s *sqlStats) request(route string, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.route(route)
	r.requests++
	r.serverTime += d
}

func (s *sqlStats) statement(route, name string, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.route(route).statements[name]
	if st == nil {
		st = &statementStats{}
		s.route(route).statements[name] = st
	}
	st.count++
	st.total += d
}

// roundTrips is every round trip counted.
func (s *sqlStats) roundTrips() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.routes {
		for _, st := range r.statements {
			n += st.count
		}
	}
	return n
}

// reset forgets everything counted so far (the warm-up).
func (s *sqlStats) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.routes = map[string]*routeStats{}
}

// write prints, per route, requests, server time and round trips per
// request, then each route's statements; units (occurrences, jobs) is what
// per-unit figures divide by.
func (s *sqlStats) write(w io.Writer, units int, unit string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.routes))
	for n := range s.routes {
		names = append(names, n)
	}
	slices.Sort(names)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "route\trequests\tserver ms/req\tround trips/req\tSQL ms/req\tcommits/req\tCOMMIT ms/req\tround trips/%s\t\n", unit)
	var trips int
	for _, n := range names {
		r := s.routes[n]
		var count, commits int
		var sqlTime, commitTime time.Duration
		for name, st := range r.statements {
			count += st.count
			sqlTime += st.total
			// A batch ending with COMMIT is a commit too (its time
			// includes the writes pipelined with it).
			if name == "commit" || strings.HasSuffix(name, "+commit") {
				commits += st.count
				commitTime += st.total
			}
		}
		trips += count
		per := float64(max(r.requests, 1))
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", n, r.requests, ms(r.serverTime)/per, float64(count)/per,
			ms(sqlTime)/per, float64(commits)/per, ms(commitTime)/per, float64(count)/float64(units))
	}
	fmt.Fprintf(tw, "all\t\t\t\t\t\t\t%.2f\t\n", float64(trips)/float64(units))
	tw.Flush()
	for _, n := range names {
		r := s.routes[n]
		fmt.Fprintf(w, "\n%s: statements (count per %s, mean ms)\n", n, unit)
		type line struct {
			name string
			st   *statementStats
		}
		var lines []line
		for name, st := range r.statements {
			lines = append(lines, line{name, st})
		}
		slices.SortFunc(lines, func(a, b line) int { return int(b.st.total - a.st.total) })
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, l := range lines {
			fmt.Fprintf(tw, "  %s\t%.2f\t%.3f\t\n", l.name, float64(l.st.count)/float64(units), ms(l.st.total)/float64(l.st.count))
		}
		tw.Flush()
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

type batchStartKey struct{}

// batchState gathers the statements of one batch: the engine pipelines a
// transaction's writes with the next statement that is answered, and
// BEGIN and COMMIT with them, in one round trip.
type batchState struct {
	at    time.Time
	names []string
}

func (t *sqlTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	if t.stats == nil && requestTraceFrom(ctx) == nil {
		return ctx
	}
	return context.WithValue(ctx, batchStartKey{}, &batchState{at: time.Now()})
}

func (t *sqlTracer) TraceBatchQuery(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	bs, ok := ctx.Value(batchStartKey{}).(*batchState)
	if !ok {
		return
	}
	name := statementName(data.SQL)
	bs.names = append(bs.names, name)
	if rt := requestTraceFrom(ctx); rt != nil && rt.probe != nil && name == "commit" && data.Err == nil {
		rt.probe.committed.CompareAndSwap(0, time.Now().UnixNano())
	}
	// Claims travel behind HotPlans, in a batch: the batch's start is the
	// claim's.
	if t.claim != nil && name == "OccurrenceClaimPull" && data.Err == nil && data.CommandTag.RowsAffected() > 0 {
		t.claim.start.Store(bs.at.UnixNano())
		t.claim.end.Store(time.Now().UnixNano())
	}
}

// TraceBatchEnd counts the batch as one round trip, named after its
// statements ("begin+InstanceLockByOccurrence", "OccurrenceComplete+commit").
func (t *sqlTracer) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchEndData) {
	bs, ok := ctx.Value(batchStartKey{}).(*batchState)
	if !ok || t.stats == nil {
		return
	}
	t.stats.statement(routeIn(requestTraceFrom(ctx)), batchName(bs.names), time.Since(bs.at))
}

// batchName names a batch after its statements; a long one (a group
// commit's writes) after the kinds of statement it carried, so that the
// groups of one mix share a line whatever their size and order.
func batchName(names []string) string {
	if len(names) <= 4 {
		return "batch " + strings.Join(names, "+")
	}
	kinds := slices.Clone(names)
	slices.Sort(kinds)
	return "batch group of " + strings.Join(slices.Compact(kinds), ", ")
}
