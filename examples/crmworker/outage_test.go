package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relais/relais/internal/relaistest"
)

// outageProxy forwards to Relais, and drops every request for a while once
// it has delivered a task: the worker then finishes its task while Relais
// is unreachable.
type outageProxy struct {
	next      *httputil.ReverseProxy
	outage    time.Duration
	mu        sync.Mutex
	downUntil time.Time
	dropped   int
}

func (p *outageProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	down := time.Now().Before(p.downUntil)
	if down {
		p.dropped++
	}
	p.mu.Unlock()
	if down {
		panic(http.ErrAbortHandler) // as if the server were gone
	}
	p.next.ServeHTTP(w, r)
}

func (p *outageProxy) deliveredTask(res *http.Response) error {
	if !strings.HasSuffix(res.Request.URL.Path, "/fetch-and-lock") {
		return nil
	}
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	res.Body = io.NopCloser(bytes.NewReader(body))
	if bytes.Contains(body, []byte(`"id"`)) {
		p.mu.Lock()
		p.downUntil = time.Now().Add(p.outage)
		p.mu.Unlock()
	}
	return nil
}

// TestOutcomeReportedAcrossAnOutage runs the example worker against a real
// Relais that becomes unreachable for 5 s as the task is delivered: the
// worker reports the completion once Relais is back, within the lock, so
// the task is done once (one attempt), not again after the lock expires.
func TestOutcomeReportedAcrossAnOutage(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	env.Definition("add_company_to_crm.yaml")
	env.Process("crm_only", relaistest.CRMProcess(nil))
	token := env.Consumer("crm-sync", "add_company_to_crm")
	target, _ := url.Parse(env.URL)
	proxy := &outageProxy{next: httputil.NewSingleHostReverseProxy(target), outage: 5 * time.Second}
	proxy.next.ModifyResponse = proxy.deliveredTask
	proxy.next.ErrorLog = nil
	srv := httptest.NewServer(proxy)
	defer srv.Close()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, func(k string) string {
			// The proxy's outage follows a fetch-and-lock: this is the
			// long-poll path (a stream's server keeps the lock alive).
			return map[string]string{"RELAIS_URL": srv.URL, "RELAIS_TOKEN": token, "RELAIS_WORKER_PROTOCOL": "long_poll"}[k]
		}, slog.New(slog.DiscardHandler))
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
	}()

	inst := env.Must(201, "POST", "/api/v1/processes/crm_only/instances", env.Operator, map[string]any{"inputs": map[string]any{"name": "Acme"}}).JSON(t)
	began := time.Now()
	got := env.WaitEnded(inst["id"].(string), 30*time.Second)
	if got["status"] != "completed" || got["end_node"] != "done" {
		t.Fatalf("instance %v at %v; want completed at done", got["status"], got["end_node"])
	}
	if took := time.Since(began); took < 4*time.Second {
		t.Errorf("completed after %v: the outage did not happen", took)
	}
	occID := got["path"].([]any)[0].(map[string]any)["occurrence_id"].(string)
	occ := env.Must(200, "GET", "/api/v1/occurrences/"+occID, env.Operator, nil).JSON(t)
	if attempts := occ["attempts"].([]any); len(attempts) != 1 {
		t.Errorf("%d attempts; want 1 (the task done once)", len(attempts))
	}
	proxy.mu.Lock()
	defer proxy.mu.Unlock()
	if proxy.dropped == 0 {
		t.Error("no request was dropped during the outage")
	}
}
