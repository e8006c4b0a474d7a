package engine

import (
	"cmp"
	"reflect"
	"slices"

	"github.com/google/uuid"

	"github.com/relais/relais/queries"
)

// merged returns the pending statements with each run of writes that
// merge (pendingStmt.merge, from queries.Merges) rewritten as one statement per kind of write: a
// group's completions, say, update their occurrences in one statement and
// end their instances in another, instead of two statements each.
//
// A run is the writes between two other statements (BEGIN, a savepoint,
// anything answered): none of them reads, so the order they run in
// matters only through the rows they touch. A run is merged only when no
// row is written twice in it, and its kinds run in rank order, which puts
// an instance's insert before its occurrences'. Anything else, or a run
// whose parameters do not line up, is sent as it came.
func merged(pending []pendingStmt) []pendingStmt {
	var out []pendingStmt // nil until a run merges
	for i := 0; i < len(pending); {
		j := i
		for j < len(pending) {
			if pending[j].merge == nil {
				break
			}
			j++
		}
		if j == i {
			if out != nil {
				out = append(out, pending[i])
			}
			i++
			continue
		}
		if m, ok := mergeRun(pending[i:j]); ok {
			if out == nil {
				out = append(make([]pendingStmt, 0, len(pending)), pending[:i]...)
			}
			out = append(out, m...)
		} else if out != nil {
			out = append(out, pending[i:j]...)
		}
		i = j
	}
	if out == nil {
		return pending
	}
	return out
}

// mergeRun merges a run of mergeable writes, if it is worth it and safe.
func mergeRun(run []pendingStmt) ([]pendingStmt, bool) {
	if !repeats(run) {
		return nil, false
	}
	type row struct {
		table string
		id    uuid.UUID
	}
	type kind struct {
		merge *queries.Merge
		stmts []pendingStmt
	}
	var kinds []*kind
	seen := make(map[row]bool, len(run))
	for _, s := range run {
		m := s.merge
		if m.Key >= 0 {
			if m.Key >= len(s.args) {
				return nil, false
			}
			// Ids compare as values: a pointer would miss a row written twice.
			id, ok := s.args[m.Key].(uuid.UUID)
			if !ok {
				return nil, false
			}
			r := row{m.Table, id}
			if seen[r] {
				return nil, false
			}
			seen[r] = true
		}
		i := slices.IndexFunc(kinds, func(k *kind) bool { return k.merge == m })
		var k *kind
		if i >= 0 {
			k = kinds[i]
		} else {
			k = &kind{merge: m}
			kinds = append(kinds, k)
		}
		k.stmts = append(k.stmts, s)
	}
	slices.SortStableFunc(kinds, func(a, b *kind) int { return cmp.Compare(a.merge.Rank, b.merge.Rank) })
	out := make([]pendingStmt, 0, len(kinds))
	for _, k := range kinds {
		if len(k.stmts) == 1 {
			out = append(out, k.stmts[0])
			continue
		}
		args, ok := columns(k.stmts)
		if !ok {
			return nil, false
		}
		out = append(out, pendingStmt{sql: k.merge.Many, args: args})
	}
	return out, true
}

// repeats reports whether a write of run has the SQL of an earlier one:
// without, nothing would merge (checked before mergeRun allocates).
func repeats(run []pendingStmt) bool {
	for i := 1; i < len(run); i++ {
		for j := range i {
			if run[j].sql == run[i].sql {
				return true
			}
		}
	}
	return false
}

// columns turns the parameters of one-row statements into the arrays of
// their merged statement: the nth array holds each statement's nth
// parameter, in a slice of its Go type (which pgx encodes as the array the
// statement declares).
func columns(stmts []pendingStmt) ([]any, bool) {
	n := len(stmts[0].args)
	out := make([]any, n)
	for p := range n {
		t := reflect.TypeOf(stmts[0].args[p])
		if t == nil {
			return nil, false
		}
		col := reflect.MakeSlice(reflect.SliceOf(t), len(stmts), len(stmts))
		for i, s := range stmts {
			if len(s.args) != n || reflect.TypeOf(s.args[p]) != t {
				return nil, false
			}
			col.Index(i).Set(reflect.ValueOf(s.args[p]))
		}
		out[p] = col.Interface()
	}
	return out, true
}
