package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/queries"
)

// The instances a replica counts started and ended are those its
// transactions committed: a batch item or a grouped write refused (rolled
// back to its savepoint), a replayed start, or a stop of a stopped
// instance counts nothing. Many concurrent writes make groups of them.
func TestInstanceCountsMatchTheDatabase(t *testing.T) {
	t.Parallel()
	e := setup(t)
	prepare(t, e, "")
	ctx := context.Background()
	c := consumer(t, e)

	var wg sync.WaitGroup
	for i := range 24 {
		wg.Go(func() {
			if _, _, err := e.StartInstance(ctx, StartRequest{ProcessKey: "two_step", Inputs: json.RawMessage(fmt.Sprintf(`{"name":"c%d"}`, i))}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	replayed := StartRequest{ProcessKey: "two_step", Inputs: json.RawMessage(`{"name":"once"}`), IdempotencyKey: "k"}
	for range 2 {
		if _, _, err := e.StartInstance(ctx, replayed); err != nil {
			t.Fatal(err)
		}
	}
	batch, err := e.StartInstances(ctx, []StartRequest{
		{ProcessKey: "two_step", Inputs: json.RawMessage(`{"name":"b1"}`)},
		{ProcessKey: "two_step", Inputs: json.RawMessage(`{}`)}, // refused: name is required
		{ProcessKey: "two_step", Inputs: json.RawMessage(`{"name":"b2"}`)},
	})
	if err != nil || batch[1].Err == nil || batch[0].Err != nil || batch[2].Err != nil {
		t.Fatalf("batch: %+v, %v", batch, err)
	}

	// Each node's tasks settled at once, a refused completion beside each
	// good one, so that groups run again with a savepoint per write. Of
	// the second node's, every fourth fails, ending its instance failed.
	settleAll := func(node string) int {
		got, err := e.Claim(ctx, ClaimRequest{ConsumerID: c, WorkerID: "w", Pairs: Pairs{Keys: []string{"crm"}, Revisions: []int32{1}},
			MaxTasks: 100, LockDuration: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range got {
			ref := WorkerRef{ConsumerID: c, WorkerID: "w", Occurrence: r.ID}
			wg.Go(func() {
				_, err := e.Complete(ctx, ref, json.RawMessage(`{"result":"maybe","crm_id":"C"}`))
				if !fault.HasCode(err, "invalid_outputs") && !fault.HasCode(err, "already_settled") {
					t.Errorf("refused completion: %v", err)
				}
			})
			wg.Go(func() {
				var err error
				if node == "check" && i%4 == 0 {
					_, err = e.Fail(ctx, ref, Failure{ErrorCode: "crm_down", Message: "down"})
				} else {
					_, err = e.Complete(ctx, ref, json.RawMessage(`{"result":"created","crm_id":"C"}`))
				}
				if err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		return len(got)
	}
	if n := settleAll("crm"); n != 27 {
		t.Fatalf("claimed %d crm tasks; want 27", n)
	}
	// Three instances are stopped before their second node settles, one
	// of them twice.
	rows, err := e.pool.Query(ctx, "select instance_id from occurrences where node = 'check' order by instance_id limit 3")
	if err != nil {
		t.Fatal(err)
	}
	var stop []uuid.UUID
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		stop = append(stop, uuid.MustParse(id))
	}
	for i, id := range append(stop, stop[0]) {
		if _, err := e.StopInstance(ctx, id); err != nil {
			t.Fatalf("stop %d: %v", i, err)
		}
	}
	if n := settleAll("check"); n != 24 {
		t.Fatalf("claimed %d check tasks; want 24", n)
	}

	want := map[string]uint64{}
	byStatus, err := e.pool.Query(ctx, "select status, count(*) from instances where process_key = 'two_step' group by status")
	if err != nil {
		t.Fatal(err)
	}
	for byStatus.Next() {
		var status string
		var n uint64
		if err := byStatus.Scan(&status, &n); err != nil {
			t.Fatal(err)
		}
		want[InstanceStarted] += n
		if status != InstanceRunning {
			want[status] = n
		}
	}
	got := map[string]uint64{}
	for _, ic := range e.InstanceCounts() {
		if ic.Process != "two_step" {
			t.Errorf("counted %+v", ic)
		}
		got[ic.Event] = ic.Count
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("counted %v; the database holds %v", got, want)
	}
	if want[InstanceStarted] != 27 || want[InstanceCancelled] != 3 || want[InstanceFailed] != 6 || want[InstanceCompleted] != 18 {
		t.Fatalf("the test did not run as meant: %v", want)
	}
}

// What a savepoint rolled back to noted is not counted, nor what a
// transaction rolled back noted; what its released savepoints noted is.
func TestInstanceCountsFollowSavepoints(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	refused := errors.New("refused")
	err := e.tx(ctx, func(q *queries.Queries, tx pgx.Tx) error {
		countInstance(q, "p", InstanceStarted)
		if err := pgx.BeginFunc(ctx, tx, func(sp pgx.Tx) error {
			countInstance(q.WithTx(sp), "p", InstanceCompleted)
			return nil
		}); err != nil {
			return err
		}
		err := pgx.BeginFunc(ctx, tx, func(sp pgx.Tx) error {
			countInstance(q.WithTx(sp), "p", InstanceFailed)
			return pgx.BeginFunc(ctx, sp, func(inner pgx.Tx) error {
				countInstance(q.WithTx(inner), "p", InstanceCancelled)
				return nil
			})
		})
		if err != nil {
			return err
		}
		return pgx.BeginFunc(ctx, tx, func(sp pgx.Tx) error {
			countInstance(q.WithTx(sp), "p", InstanceCancelled)
			return refused
		})
	})
	if !errors.Is(err, refused) {
		t.Fatal(err)
	}
	if got := e.InstanceCounts(); len(got) != 0 {
		t.Fatalf("a rolled-back transaction counted %v", got)
	}
	err = e.tx(ctx, func(q *queries.Queries, tx pgx.Tx) error {
		countInstance(q, "p", InstanceStarted)
		_ = pgx.BeginFunc(ctx, tx, func(sp pgx.Tx) error {
			countInstance(q.WithTx(sp), "p", InstanceFailed)
			return refused
		})
		return pgx.BeginFunc(ctx, tx, func(sp pgx.Tx) error {
			countInstance(q.WithTx(sp), "p", InstanceCompleted)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(e.InstanceCounts()); got != "[{p completed 1} {p started 1}]" {
		t.Fatalf("counted %s", got)
	}
}
