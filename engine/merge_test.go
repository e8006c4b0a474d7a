package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/relais/relais/queries"
)

// oneRow is the SQL of the one-row write named name, as queries.Merges
// knows it.
func oneRow(t *testing.T, name string) string {
	t.Helper()
	for sql := range queries.Merges {
		if strings.HasPrefix(sql, "-- name: "+name+" :exec") {
			return sql
		}
	}
	t.Fatalf("%s does not merge", name)
	return ""
}

// params counts the parameters ($1, $2, …) of sql.
func params(sql string) int {
	n := 0
	for i := 1; strings.Contains(sql, fmt.Sprintf("$%d", i)); i++ {
		n = i
	}
	return n
}

// names are the query names of stmts, for messages.
func names(stmts []pendingStmt) string {
	var out []string
	for _, s := range stmts {
		line, _, _ := strings.Cut(s.sql, "\n")
		out = append(out, strings.Fields(strings.TrimPrefix(line, "-- name: "))[0])
	}
	return strings.Join(out, ", ")
}

func TestMergedRunsKeepRowsApartAndInsertsFirst(t *testing.T) {
	insertInstance, insertOccurrence := oneRow(t, "InstanceInsertNew"), oneRow(t, "OccurrenceInsertNew")
	complete, end, notify := oneRow(t, "OccurrenceComplete"), oneRow(t, "InstanceEnd"), oneRow(t, "Notify")
	at := time.Now()
	i1, i2, i3, o1, o2, o3 := uuid.New(), uuid.New(), uuid.New(), uuid.New(), uuid.New(), uuid.New()
	ii := func(id uuid.UUID) pendingStmt {
		return deferred(insertInstance, []any{id, "p", int32(1), (*string)(nil), json.RawMessage(`{}`), []byte(nil), at})
	}
	oi := func(id, inst uuid.UUID, code *string) pendingStmt {
		args := make([]any, 25)
		for i := range args {
			args[i] = fmt.Sprint(i) // the types do not matter here, only that they line up
		}
		args[0], args[1], args[18] = id, inst, code
		return deferred(insertOccurrence, args)
	}
	oc := func(id uuid.UUID) pendingStmt {
		return deferred(complete, []any{at, json.RawMessage(`{}`), []byte(nil), "d", (*string)(nil), id})
	}
	ie := func(id uuid.UUID) pendingStmt {
		return deferred(end, []any{"completed", (*string)(nil), (*string)(nil), &at, id, false})
	}
	n := func(p string) pendingStmt { return deferred(notify, []any{"c", p}) }
	begin, savepoint := pendingStmt{sql: "begin"}, pendingStmt{sql: "savepoint relais_sp_1"}
	code := "boom"

	for _, c := range []struct {
		name      string
		in        []pendingStmt
		want      string
		unchanged bool
	}{
		{name: "two starts: each kind in one statement, instances first",
			in:   []pendingStmt{begin, ii(i1), oi(o1, i1, nil), n("a"), ii(i2), oi(o2, i2, &code), n("b")},
			want: "begin, InstanceInsertNewMany, OccurrenceInsertNewMany, NotifyMany"},
		{name: "an occurrence of an earlier instance waits for the run's instance insert",
			in:   []pendingStmt{oi(o1, i3, nil), ii(i2), oi(o2, i2, nil)},
			want: "InstanceInsertNew, OccurrenceInsertNewMany"},
		{name: "other statements end runs",
			in:   []pendingStmt{oc(o1), ie(i1), oc(o2), ie(i2), savepoint, oc(o3), ie(i3)},
			want: "OccurrenceCompleteMany, InstanceEndMany, savepoint, OccurrenceComplete, InstanceEnd"},
		{name: "an instance ended twice is not merged",
			in: []pendingStmt{oc(o1), ie(i1), oc(o2), ie(i1)}, unchanged: true},
		{name: "a row inserted then ended is not merged",
			in: []pendingStmt{ii(i1), oi(o1, i1, nil), ie(i1), ii(i2)}, unchanged: true},
		{name: "one write of each kind is sent as it came",
			in: []pendingStmt{begin, ii(i1), oi(o1, i1, nil), n("a")}, unchanged: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := merged(c.in)
			if c.unchanged {
				if names(got) != names(c.in) || !reflect.DeepEqual(got, c.in) {
					t.Fatalf("merged to %s, want it unchanged", names(got))
				}
				return
			}
			if names(got) != c.want {
				t.Fatalf("merged to %s, want %s", names(got), c.want)
			}
		})
	}

	got := merged([]pendingStmt{ii(i1), oi(o1, i1, nil), ii(i2), oi(o2, i2, &code)})
	occ := got[1].args
	if ids, ok := occ[0].([]uuid.UUID); !ok || !reflect.DeepEqual(ids, []uuid.UUID{o1, o2}) {
		t.Fatalf("ids column %#v, want [%s %s]", occ[0], o1, o2)
	}
	if codes, ok := occ[18].([]*string); !ok || len(codes) != 2 || codes[0] != nil || codes[1] != &code {
		t.Fatalf("error codes column %#v, want [nil, &code]", occ[18])
	}

	// Parameters that do not line up (a nil, a different type) leave the
	// run as it came.
	odd := oc(o2)
	odd.args[4] = nil
	if in := []pendingStmt{oc(o1), odd}; names(merged(in)) != names(in) {
		t.Fatalf("a nil parameter merged: %s", names(merged(in)))
	}
}

// TestEveryMergeTakesItsOneRowParameters: the nth array of a merged
// statement is the nth parameter of its one-row write, so both have as
// many parameters.
func TestEveryMergeTakesItsOneRowParameters(t *testing.T) {
	ranks := map[int]string{}
	for one, m := range queries.Merges {
		if other, ok := ranks[m.Rank]; ok {
			t.Errorf("%s and %s share rank %d: their order would be the map's", other, m.Many[:40], m.Rank)
		}
		ranks[m.Rank] = m.Many[:40]
		if a, b := params(one), params(m.Many); a != b || a == 0 {
			t.Errorf("%s: %d parameters, its merge %d", strings.SplitN(one, "\n", 2)[0], a, b)
		}
		if m.Key >= params(one) {
			t.Errorf("%s: key %d out of its parameters", strings.SplitN(one, "\n", 2)[0], m.Key)
		}
	}
}

// TestGroupedWritesMergeAndStoreWhatOneRowWritesStore: starts and
// completions grouped in one transaction are written by one statement per
// kind of write, and every column they store is what the same write alone
// stores.
func TestGroupedWritesMergeAndStoreWhatOneRowWritesStore(t *testing.T) {
	t.Parallel()
	e, _, log := tracedEngine(t)
	e.group = newGroupCommit(e, 1)
	e.starts = e.group
	// As on a replica that listens: a consumer's grants are read once, not
	// in the middle of each completion.
	e.SetListening(true)
	ctx := context.Background()
	c := consumer(t, e)

	// grouped runs do for each of n, in one group.
	grouped := func(n int, do func(i int) error) {
		t.Helper()
		release := holdLane(t, e)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { errs[i] = do(i) })
		}
		waitQueued(t, e, n)
		release()
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	const n = 3
	insts := make([]Instance, n+1)
	grouped(n, func(i int) (err error) {
		insts[i], err = start(e, fmt.Sprint("Acme ", i))
		return err
	})
	var err error
	if insts[n], err = start(e, fmt.Sprint("Acme ", n)); err != nil { // alone
		t.Fatal(err)
	}
	for _, name := range []string{"InstanceInsertNewMany", "OccurrenceInsertNewMany", "NotifyMany"} {
		if log.sent("-- name: "+name+" ") == 0 {
			t.Fatalf("the grouped starts never sent %s", name)
		}
	}

	// node's occurrence of each instance, with the fields that tell
	// instances apart made equal, so that rows compare.
	same := func(node string) []queries.Occurrence {
		t.Helper()
		var out []queries.Occurrence
		for _, inst := range insts {
			occs := occurrences(t, e, inst.ID)[node]
			if len(occs) != 1 {
				t.Fatalf("instance %s has %d occurrences of %s, want 1", inst.ID, len(occs), node)
			}
			o := occs[0]
			var in map[string]any
			if err := json.Unmarshal(o.Inputs, &in); err != nil {
				t.Fatal(err)
			}
			if node == "crm" && in["company_name"] != "Acme "+fmt.Sprint(len(out)) {
				t.Fatalf("occurrence inputs %s for instance %d", o.Inputs, len(out))
			}
			o.ID, o.InstanceID, o.Inputs, o.Outputs, o.SealedInputs, o.SealedOutputs = uuid.Nil, uuid.Nil, nil, nil, nil, nil
			for _, t := range []**time.Time{&o.ClaimableAt, &o.ReservedAt, &o.LockExpiresAt, &o.SettledAt, &o.DeadlineAt} {
				if *t != nil {
					*t = &time.Time{}
				}
			}
			o.CreatedAt, o.AvailableAt = time.Time{}, time.Time{}
			out = append(out, o)
		}
		return out
	}
	rows := same("crm")
	for i, o := range rows[:n] {
		if diff := cmpRows(o, rows[n]); diff != "" {
			t.Fatalf("grouped start %d stored another occurrence than a start alone: %s", i, diff)
		}
	}

	// Each crm then each check completed; the check completions end their
	// instances, n of them in one group.
	outputs := json.RawMessage(`{"result":"created","crm_id":"C-1"}`)
	for range n + 1 {
		res := claimOne(t, e, c, "w")
		if _, err := e.Complete(ctx, WorkerRef{ConsumerID: c, WorkerID: "w", Occurrence: res.ID}, outputs); err != nil {
			t.Fatal(err)
		}
	}
	checks := make([]Reservation, n+1)
	for i := range checks {
		checks[i] = claimOne(t, e, c, "w")
	}
	grouped(n, func(i int) error {
		_, err := e.Complete(ctx, WorkerRef{ConsumerID: c, WorkerID: "w", Occurrence: checks[i].ID}, outputs)
		return err
	})
	if _, err := e.Complete(ctx, WorkerRef{ConsumerID: c, WorkerID: "w", Occurrence: checks[n].ID}, outputs); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"OccurrenceCompleteMany", "InstanceEndMany"} {
		if log.sent("-- name: "+name+" ") == 0 {
			t.Fatalf("the grouped completions never sent %s", name)
		}
	}
	rows = same("check")
	for i, o := range rows[:n] {
		if diff := cmpRows(o, rows[n]); diff != "" {
			t.Fatalf("grouped completion %d stored another occurrence than a completion alone: %s", i, diff)
		}
	}
	for _, r := range checks {
		var outcome, status, endNode string
		var ended, settled, instEnded time.Time
		var out json.RawMessage
		if err := e.pool.QueryRow(ctx, `select a.outcome, a.ended_at, o.settled_at, o.outputs, i.status, i.end_node, i.ended_at
			from attempts a join occurrences o on o.id = a.occurrence_id join instances i on i.id = o.instance_id
			where a.occurrence_id = $1 and a.number = o.attempts`, r.ID).Scan(&outcome, &ended, &settled, &out, &status, &endNode, &instEnded); err != nil {
			t.Fatal(err)
		}
		if outcome != "completed" || !ended.Equal(settled) || !jsonEqual(out, outputs) || status != InstanceCompleted || endNode != "done" || !instEnded.Equal(settled) {
			t.Fatalf("occurrence %s: attempt %s at %s, settled at %s with %s, instance %s at %s (%s); want all completed at one time",
				r.ID, outcome, ended, settled, out, status, endNode, instEnded)
		}
	}
}

// TestMergedWritesProbeTheirRowsById: the merged writes run behind
// HotPlans, whose generic plan a connection keeps; made on empty tables
// (the worst time: any scan looks cheap), it must still find each row by
// its primary key, never read a table or an index whole (the merged
// instance end once read every running instance by its status).
func TestMergedWritesProbeTheirRowsById(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, HotPlans); err != nil {
		t.Fatal(err)
	}
	scan := regexp.MustCompile(`(\w[\w ]*Scan)(?: using (\w+))? on (instances|occurrences|attempts)\b`)
	for _, m := range queries.Merges {
		name := strings.Fields(strings.SplitN(m.Many, "\n", 2)[0])[2]
		if _, err := tx.Exec(ctx, "prepare merged as\n"+m.Many); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		rows, err := tx.Query(ctx, "explain execute merged("+strings.TrimSuffix(strings.Repeat("null, ", params(m.Many)), ", ")+")")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var plan []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, line)
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for i, line := range plan {
			s := scan.FindStringSubmatch(line)
			if s == nil {
				continue
			}
			probe := s[1] == "Index Scan" && s[2] == s[3]+"_pkey" && i+1 < len(plan) && strings.Contains(plan[i+1], "Index Cond")
			if !probe {
				t.Errorf("%s reads %s otherwise than by its primary key:\n%s", name, s[3], strings.Join(plan, "\n"))
			}
		}
		if _, err := tx.Exec(ctx, "deallocate merged"); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMergedWritesStoreEveryColumnAsOneRowWritesDo: the same one-row
// writes, merged in one transaction and sent one per transaction, store the
// same rows. Every column gets a value of its own, or NULL, so that two
// columns swapped in a merged statement (or a parameter out of place) show.
func TestMergedWritesStoreEveryColumnAsOneRowWritesDo(t *testing.T) {
	t.Parallel()
	e, _, log := tracedEngine(t)
	ctx := context.Background()
	base := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	at := func(minutes int) *time.Time { v := base.Add(time.Duration(minutes) * time.Minute); return &v }
	str := func(s string) *string { return &s }
	dur := func(d time.Duration) *time.Duration { return &d }
	one := int32(1)

	type write func(q *queries.Queries) error
	// run runs writes in one transaction (merged) or one transaction each.
	run := func(merged bool, writes ...write) {
		t.Helper()
		batches := [][]write{writes}
		if !merged {
			batches = nil
			for _, w := range writes {
				batches = append(batches, []write{w})
			}
		}
		for _, ws := range batches {
			if err := inPipeTx(ctx, e.pool, true, func(tx pgx.Tx) error {
				q := e.q.WithTx(tx)
				for _, w := range ws {
					if err := w(q); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// same fails unless the rows of table whose key is a and b are equal
	// but for the columns left out.
	same := func(table, key string, a, b uuid.UUID, out ...string) {
		t.Helper()
		var x, y json.RawMessage
		read := "select to_jsonb(r) - $2::text[] from " + table + " r where " + key + " = $1"
		if err := e.pool.QueryRow(ctx, read, a, append(out, key)).Scan(&x); err != nil {
			t.Fatal(err)
		}
		if err := e.pool.QueryRow(ctx, read, b, append(out, key)).Scan(&y); err != nil {
			t.Fatal(err)
		}
		if !jsonEqual(x, y) {
			t.Fatalf("%s: merged write stored\n%s\none-row write stored\n%s", table, x, y)
		}
	}

	instance := func(id uuid.UUID, full bool) write {
		p := queries.InstanceInsertNewParams{ID: id, ProcessKey: "two_step", Version: 1, Inputs: json.RawMessage(`{"name":"i"}`), CreatedAt: *at(1)}
		if full {
			p.BusinessKey, p.SealedInputs = str("bk"), []byte{1, 2}
		}
		return func(q *queries.Queries) error { return q.InstanceInsertNew(ctx, p) }
	}
	occurrence := func(id, inst uuid.UUID, full bool) write {
		p := queries.OccurrenceInsertNewParams{ID: id, InstanceID: inst, Node: "node-x", DefinitionKey: "crm", Revision: 1,
			Mode: "pull", Status: "available", Priority: 3, MaxAttempts: 4, RetryDelay: 1500 * time.Millisecond,
			AvailableAt: *at(2), Inputs: json.RawMessage(`{"company_name":"c"}`), CreatedAt: *at(3)}
		if full {
			p.Mode, p.Status, p.Deadline, p.DeadlineAt, p.Destination, p.Timeout = "push", "failed", dur(90*time.Minute), at(4), str("dest"), dur(45*time.Second)
			p.ClaimableAt, p.SealedInputs, p.ErrorCode, p.ErrorMessage, p.SettledAt = at(5), []byte{3, 4}, str("code"), str("message"), at(6)
			p.ProcessKey, p.BusinessKey, p.ProcessVersion = str("two_step"), str("bk2"), &one
		}
		return func(q *queries.Queries) error { return q.OccurrenceInsertNew(ctx, p) }
	}
	ids := func() (i1, i2, o1, o2 uuid.UUID) { return uuid.New(), uuid.New(), uuid.New(), uuid.New() }
	ai1, ai2, ao1, ao2 := ids()
	bi1, bi2, bo1, bo2 := ids()
	run(true, instance(ai1, true), instance(ai2, false), occurrence(ao1, ai1, true), occurrence(ao2, ai2, false))
	run(false, instance(bi1, true), instance(bi2, false), occurrence(bo1, bi1, true), occurrence(bo2, bi2, false))
	for _, name := range []string{"InstanceInsertNewMany", "OccurrenceInsertNewMany"} {
		if log.sent("-- name: "+name+" ") != 1 {
			t.Fatalf("%s sent %d times, want once", name, log.sent("-- name: "+name+" "))
		}
	}
	same("instances", "id", ai1, bi1)
	same("instances", "id", ai2, bi2)
	same("occurrences", "id", ao1, bo1, "instance_id")
	same("occurrences", "id", ao2, bo2, "instance_id")

	// Each occurrence reserved with its attempt open; the second instances
	// held, to be ended from there.
	occs, insts := []uuid.UUID{ao1, ao2, bo1, bo2}, []uuid.UUID{ai2, bi2}
	for _, sql := range []string{
		"update occurrences set status = 'reserved', attempts = 1 where id = any($1)",
		"insert into attempts (occurrence_id, number, reserved_at) select id, 1, now() from occurrences where id = any($1)",
	} {
		if _, err := e.pool.Exec(ctx, sql, occs); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.pool.Exec(ctx, "update instances set status = 'held' where id = any($1)", insts); err != nil {
		t.Fatal(err)
	}
	complete := func(id uuid.UUID, full bool) write {
		p := queries.OccurrenceCompleteParams{Now: *at(10), Outputs: json.RawMessage(`{"result":"created"}`), OutputsDigest: "digest", ID: id}
		if full {
			p.SealedOutputs, p.Route = []byte{5}, str("route")
		}
		return func(q *queries.Queries) error { return q.OccurrenceComplete(ctx, p) }
	}
	end := func(id uuid.UUID, held bool) write {
		p := queries.InstanceEndParams{Status: "completed", EndNode: str("done"), Now: at(11), ID: id}
		if held {
			p.Status, p.EndNode, p.ErrorCode, p.Now, p.FromHeld = "failed", str("failed"), str("boom"), at(12), true
		}
		return func(q *queries.Queries) error { return q.InstanceEnd(ctx, p) }
	}
	run(true, complete(ao1, true), complete(ao2, false), end(ai1, false), end(ai2, true))
	run(false, complete(bo1, true), complete(bo2, false), end(bi1, false), end(bi2, true))
	for _, name := range []string{"OccurrenceCompleteMany", "InstanceEndMany"} {
		if log.sent("-- name: "+name+" ") != 1 {
			t.Fatalf("%s sent %d times, want once", name, log.sent("-- name: "+name+" "))
		}
	}
	same("occurrences", "id", ao1, bo1, "instance_id")
	same("occurrences", "id", ao2, bo2, "instance_id")
	same("attempts", "occurrence_id", ao1, bo1, "reserved_at")
	same("attempts", "occurrence_id", ao2, bo2, "reserved_at")
	same("instances", "id", ai1, bi1)
	same("instances", "id", ai2, bi2)
	var status string
	if err := e.pool.QueryRow(ctx, "select status from instances where id = $1", ai2).Scan(&status); err != nil || status != "failed" {
		t.Fatalf("held instance ended from held: %q (%v), want failed", status, err)
	}
}
