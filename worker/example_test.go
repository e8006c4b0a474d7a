package worker_test

import (
	"context"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/relais/relais/worker"
)

// A worker for one definition, stopped gracefully by SIGINT or SIGTERM.
// examples/crmworker is a complete one.
func Example() {
	w, err := worker.New(worker.Config{URL: os.Getenv("RELAIS_URL"), Token: os.Getenv("RELAIS_TOKEN")})
	if err != nil {
		log.Fatal(err)
	}
	w.Handle("score_company", nil, func(ctx context.Context, t *worker.Task) (any, error) {
		var in struct {
			Employees int `json:"employees"`
		}
		if err := t.Decode(&in); err != nil {
			return nil, worker.Fail("INVALID_INPUTS", "%v", err)
		}
		return map[string]any{"score": min(in.Employees/10, 100)}, nil
	})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
