package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/relais/relais/worker"
)

// A worker for examples/definitions/add_company_to_crm.yaml, stopped
// gracefully by SIGINT or SIGTERM. examples/crmworker is a complete one.
func Example() {
	w, err := worker.New(worker.Config{URL: os.Getenv("RELAIS_URL"), Token: os.Getenv("RELAIS_TOKEN")})
	if err != nil {
		log.Fatal(err)
	}
	// The revision this code was written for: nil takes every revision
	// its consumer is granted, a later breaking one included.
	w.Handle("add_company_to_crm", []int{1}, func(ctx context.Context, t *worker.Task) (any, error) {
		var in struct {
			CompanyName string `json:"company_name"`
			Country     string `json:"country"`
		}
		if err := t.Decode(&in); err != nil {
			return nil, worker.Fail("INVALID_INPUTS", "%v", err)
		}
		// Create the company in the CRM here, or find it; the routing
		// output result picks the process's branch.
		return map[string]any{"result": "created", "crm_id": "CRM-" + in.Country + "-1"}, nil
	})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
}

// A handler that hands its task to a person: it defers the task, gives the
// person a settle token for it, and returns. The person's answer settles
// it later, through any Worker of the same consumer.
func ExampleTask_Defer() {
	w, err := worker.New(worker.Config{URL: os.Getenv("RELAIS_URL"), Token: os.Getenv("RELAIS_TOKEN")})
	if err != nil {
		log.Fatal(err)
	}
	w.Handle("approve_discount", nil, func(ctx context.Context, t *worker.Task) (any, error) {
		if _, err := t.Defer(ctx, "waiting for the sales manager"); err != nil {
			return nil, err
		}
		tok, err := w.IssueSettleToken(ctx, t.ID)
		if err != nil {
			// Still deferred: an operator sees it waiting in the console.
			log.Printf("no settle token for %s: %v", t.ID, err)
			return nil, nil
		}
		log.Printf("ask the manager, with a link holding %d characters of token, valid until %s", len(tok.Token), tok.ExpiresAt)
		return nil, nil
	})
	// Where the manager's answer arrives:
	approved := func(ctx context.Context, occurrenceID string) error {
		return w.CompleteDeferred(ctx, occurrenceID, map[string]any{"approved": true})
	}
	_ = approved
}

// A handler is a plain function: a unit test calls it with a Task built by
// hand, no server needed, and reads its outputs and its error as the
// worker would (a *worker.BusinessError fails the task for good; any other
// error is retried). Task.WithDefer stands in for Relais when the handler
// defers (Example_testingADeferral); settle tokens are for tests against a
// real Relais (see examples/crmworker).
func Example_testingAHandler() {
	addCompany := func(ctx context.Context, t *worker.Task) (any, error) {
		var in struct {
			CompanyName string `json:"company_name"`
			Country     string `json:"country"`
		}
		if err := t.Decode(&in); err != nil {
			return nil, worker.Fail("INVALID_INPUTS", "%v", err)
		}
		if in.Country == "" {
			return nil, worker.Fail("NO_COUNTRY", "%s has no country", in.CompanyName)
		}
		return map[string]any{"result": "created", "crm_id": "CRM-" + in.Country + "-1"}, nil
	}

	out, err := addCompany(context.Background(), &worker.Task{Inputs: json.RawMessage(`{"company_name":"Acme","country":"FR"}`)})
	fmt.Println(out, err)

	_, err = addCompany(context.Background(), &worker.Task{Inputs: json.RawMessage(`{"company_name":"Acme"}`)})
	var be *worker.BusinessError
	fmt.Println(errors.As(err, &be), be.Code)
	// Output:
	// map[crm_id:CRM-FR-1 result:created] <nil>
	// true NO_COUNTRY
}

// A handler that defers its task is tested with WithDefer, which answers
// in Relais's place and sees the reason as Relais would store it; the
// error it returns plays a refusal.
func Example_testingADeferral() {
	askManager := func(ctx context.Context, t *worker.Task) (any, error) {
		if _, err := t.Defer(ctx, "waiting for the manager's approval"); err != nil {
			return nil, fmt.Errorf("deferring: %w", err)
		}
		return nil, nil
	}

	var reasons []string
	task := (&worker.Task{Inputs: json.RawMessage(`{"amount":1200}`)}).WithDefer(func(_ context.Context, reason string) (worker.Deferral, error) {
		reasons = append(reasons, reason)
		return worker.Deferral{DeferredAt: time.Now()}, nil
	})
	_, err := askManager(context.Background(), task)
	fmt.Println(reasons, err)

	refused := (&worker.Task{}).WithDefer(func(context.Context, string) (worker.Deferral, error) {
		return worker.Deferral{}, worker.ErrLockLost
	})
	_, err = askManager(context.Background(), refused)
	fmt.Println(errors.Is(err, worker.ErrLockLost))
	// Output:
	// [waiting for the manager's approval] <nil>
	// true
}
