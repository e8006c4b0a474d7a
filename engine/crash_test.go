package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relais/relais/internal/fault"
)

// TestWorkersThatCrashLoseNoWork runs many occurrences through concurrent
// workers that randomly "crash" (take a task and never settle it). Every
// occurrence must end completed exactly once, and the attempts recorded
// must match what the workers did.
func TestWorkersThatCrashLoseNoWork(t *testing.T) {
	t.Parallel()
	total, workers := 2000, 16
	if testing.Short() {
		total = 300
	}
	e := setup(t)
	ctx := context.Background()
	if _, _, err := e.SaveWorking(ctx, "crm", []byte(crmWorking)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Snapshot(ctx, "crm"); err != nil {
		t.Fatal(err)
	}
	// As many attempts as a policy may give: on a loaded machine a
	// completion slower than the 300 ms lock counts as a crash too, and
	// a task that ran out of attempts would be failed, not lost.
	doc := `{"inputs":{"fields":[{"name":"name","type":"text","required":true}]},"start":"crm","nodes":{
	 "crm":{"kind":"pull","definition":"crm","revision":1,"inputs":{"company_name":{"from":"input.name"}},
	        "policy":{"max_attempts":100},"routes":{"created":"done","existing":"done"}},"done":{"kind":"end"}}}`
	if _, _, err := e.PublishProcess(ctx, "one_step", []byte(doc)); err != nil {
		t.Fatal(err)
	}
	// Start instances in parallel batches.
	var wg sync.WaitGroup
	starts := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range starts {
				if _, _, err := e.StartInstance(ctx, StartRequest{ProcessKey: "one_step", Inputs: json.RawMessage(fmt.Sprintf(`{"name":"c%d"}`, i))}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	for i := range total {
		starts <- i
	}
	close(starts)
	wg.Wait()
	if t.Failed() {
		return
	}
	c := consumer(t, e)

	type record struct {
		claims, crashes, completions int
	}
	var mu sync.Mutex
	seen := map[uuid.UUID]*record{}
	completed := 0
	done := make(chan struct{})
	lock := 300 * time.Millisecond
	for w := range workers {
		wg.Go(func() {
			worker := fmt.Sprintf("w%d", w)
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			for {
				select {
				case <-done:
					return
				default:
				}
				got, err := e.Claim(ctx, ClaimRequest{ConsumerID: c, WorkerID: worker, Pairs: Pairs{Keys: []string{"crm"}, Revisions: []int32{1}}, MaxTasks: 10, LockDuration: lock})
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) == 0 {
					time.Sleep(20 * time.Millisecond)
					continue
				}
				for _, r := range got {
					mu.Lock()
					rec := seen[r.ID]
					if rec == nil {
						rec = &record{}
						seen[r.ID] = rec
					}
					rec.claims++
					crash := rng.IntN(10) == 0
					if crash {
						rec.crashes++
					}
					mu.Unlock()
					if crash {
						continue
					}
					_, err := e.Complete(ctx, WorkerRef{ConsumerID: c, WorkerID: worker, Occurrence: r.ID}, json.RawMessage(`{"result":"created","crm_id":"X"}`))
					if fe, ok := fault.As(err); ok && (fe.Code == "lock_expired" || fe.Code == "locked_by_other_worker" || fe.Code == "already_settled" || fe.Code == "not_reserved") {
						// Slow enough that the lock expired: a legitimate
						// refusal, the task is re-offered (not_reserved:
						// the next holder's lock lapsed too).
						mu.Lock()
						rec.crashes++
						mu.Unlock()
						continue
					}
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					rec.completions++
					completed++
					if completed == total {
						close(done)
					}
					mu.Unlock()
				}
			}
		})
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(5 * time.Minute):
		t.Fatalf("only %d of %d completed after 5 minutes", completed, total)
	}
	if t.Failed() {
		return
	}
	if len(seen) != total {
		t.Fatalf("%d distinct occurrences claimed; want %d", len(seen), total)
	}
	crashed := 0
	for id, rec := range seen {
		if rec.completions != 1 {
			t.Fatalf("occurrence %s completed %d times", id, rec.completions)
		}
		crashed += rec.crashes
		var attempts, expired, completedAttempts int
		err := e.pool.QueryRow(ctx, `select count(*), count(*) filter (where outcome = 'expired'), count(*) filter (where outcome = 'completed')
			from attempts where occurrence_id = $1`, id).Scan(&attempts, &expired, &completedAttempts)
		if err != nil {
			t.Fatal(err)
		}
		if attempts != rec.claims || completedAttempts != 1 || expired != rec.claims-1 {
			t.Fatalf("occurrence %s: %d attempts (%d expired, %d completed); the workers claimed it %d times and crashed %d times",
				id, attempts, expired, completedAttempts, rec.claims, rec.crashes)
		}
	}
	var running int
	if err := e.pool.QueryRow(ctx, "select count(*) from instances where status <> 'completed'").Scan(&running); err != nil || running != 0 {
		t.Fatalf("%d instances not completed (%v)", running, err)
	}
	t.Logf("%d occurrences, %d workers, %d crashes, all completed exactly once", total, workers, crashed)
}
