// Command crmworker is an example Relais pull worker for the
// add_company_to_crm definition (examples/definitions): it adds companies
// to a CRM, here an in-memory map, and reports whether each one was
// created or already there.
//
//	RELAIS_URL=http://127.0.0.1:8080 RELAIS_TOKEN=<consumer token> go run ./examples/crmworker
//
// SIGINT or SIGTERM stops fetching and lets tasks in flight finish.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"sync"
	"syscall"

	"github.com/relais/relais/worker"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(ctx, os.Getenv, logger); err != nil {
		logger.Error("crmworker stopped", "err", err)
		os.Exit(1)
	}
}

// run is main without the process: tests drive it with their own
// environment and context.
func run(ctx context.Context, getenv func(string) string, logger *slog.Logger) error {
	url, token := getenv("RELAIS_URL"), getenv("RELAIS_TOKEN")
	if url == "" || token == "" {
		return errors.New("RELAIS_URL and RELAIS_TOKEN (a consumer token granted add_company_to_crm) are required")
	}
	// RELAIS_WORKER_PROTOCOL: stream or long_poll; empty tries the stream
	// and long-polls when the server has none.
	w, err := worker.New(worker.Config{URL: url, Token: token, Logger: logger, Protocol: worker.Protocol(getenv("RELAIS_WORKER_PROTOCOL"))})
	if err != nil {
		return err
	}
	// Revision 1 is the contract this code was written against; a later
	// revision stays with the workers that understand it.
	c := newCRM()
	w.Handle("add_company_to_crm", []int{1}, func(ctx context.Context, t *worker.Task) (any, error) {
		out, err := c.addCompany(ctx, t)
		if r, ok := out.(result); ok && err == nil {
			// The SDK logs a completion at debug level only: a worker says
			// what it did in its own words (never the inputs' values).
			msg := "company added to the CRM"
			if r.Result == "existing" {
				msg = "company already in the CRM"
			}
			logger.Info(msg, "occurrence", t.ID, "result", r.Result, "crm_id", r.CRMID)
		}
		return out, err
	})
	return w.Run(ctx)
}

// company is the part of the inputs this worker needs. The contact
// (classified sensitive) is not read, so it cannot leak from here.
type company struct {
	Name    string `json:"company_name"`
	Country string `json:"country"`
}

// result is the definition's outputs; Relais routes the process on
// result.
type result struct {
	Result    string   `json:"result"`
	CRMID     string   `json:"crm_id"`
	MatchedOn []string `json:"matched_on,omitempty"`
}

var countryCode = regexp.MustCompile(`^[A-Z]{2}$`)

// crm stands in for a real CRM.
type crm struct {
	mu  sync.Mutex
	ids map[string]string // normalised company name → CRM id
}

func newCRM() *crm { return &crm{ids: map[string]string{}} }

// addCompany is the handler. Looking the company up before creating it
// also makes the task safe to run twice: a task redelivered after a crash
// finds the company its first attempt created and reports it existing,
// instead of creating a duplicate.
func (c *crm) addCompany(_ context.Context, t *worker.Task) (any, error) {
	var in company
	if err := t.Decode(&in); err != nil {
		// Inputs that do not fit the contract will not fit on retry.
		return nil, worker.Fail("INVALID_INPUTS", "%v", err)
	}
	// Relais validated the country against the contract's pattern, so
	// this cannot fail; it shows how a business refusal is reported.
	if !countryCode.MatchString(in.Country) {
		return nil, worker.Fail("INVALID_COUNTRY", "country must be an ISO 3166-1 alpha-2 code such as FR")
	}
	// CRMs match names whatever their case and surrounding spaces.
	key := strings.ToLower(strings.TrimSpace(in.Name))
	c.mu.Lock()
	defer c.mu.Unlock()
	if id, ok := c.ids[key]; ok {
		return result{Result: "existing", CRMID: id, MatchedOn: []string{"name"}}, nil
	}
	id := fmt.Sprintf("CRM-%04d", len(c.ids)+1)
	c.ids[key] = id
	return result{Result: "created", CRMID: id}, nil
}
