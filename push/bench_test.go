package push_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/relais/relais/internal/relaistest"
)

// BenchmarkPushThroughput measures push occurrences completed per second
// against a local destination that answers at once: instance start → push
// call → settlement → instance completed.
func BenchmarkPushThroughput(b *testing.B) {
	env := relaistest.New(b)
	env.Definition("score_company.yaml")
	d := newDestination(b, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"outputs": {"score": 42, "band": "low"}}`)
	})
	env.Must(201, "PUT", "/api/v1/destinations/local", env.Admin, map[string]any{"url": d.URL, "max_timeout": "PT5S"})
	env.Process("scoring", scoreProcess("local", "PT5S"))
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	starts := make(chan int)
	for range 4 {
		wg.Go(func() {
			for range starts {
				env.Must(201, "POST", "/api/v1/processes/scoring/instances", env.Operator, map[string]any{"inputs": map[string]any{"crm_id": "C"}})
			}
		})
	}
	for i := range b.N {
		starts <- i
	}
	close(starts)
	wg.Wait()
	for {
		var done int
		if err := env.Pool.QueryRow(ctx, "select count(*) from instances where status <> 'running'").Scan(&done); err != nil {
			b.Fatal(err)
		}
		if done == b.N {
			break
		}
		if time.Since(start) > 5*time.Minute {
			b.Fatalf("%d of %d done after 5 minutes", done, b.N)
		}
		time.Sleep(5 * time.Millisecond)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	var failed int
	_ = env.Pool.QueryRow(ctx, "select count(*) from instances where status <> 'completed'").Scan(&failed)
	if failed != 0 {
		b.Fatalf("%d instances did not complete", failed)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "occurrences/s")
}
